#include "kernels/cpu.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace mixq::kernels {
namespace {

struct Features {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
  bool amx = false;  // AMX-TILE + AMX-INT8 + AMX-BF16, enabled by the OS and granted to this process
};

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Asks Linux for the AMX tile data state for this process (every thread).
bool request_tile_state() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

Features detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xE6) == 0xE6;
  f.fma = (c & (1u << 12)) && ymm_os;
  f.f16c = (c & (1u << 29)) && ymm_os;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b & (1u << 5)) && ymm_os;
  f.bmi2 = b & (1u << 8);
  f.avx512f = (b & (1u << 16)) && zmm_os;
  f.avx512dq = (b & (1u << 17)) && zmm_os;
  f.avx512bw = (b & (1u << 30)) && zmm_os;
  f.avx512vl = (b & (1u << 31)) && zmm_os;
  f.avx512vbmi = (c & (1u << 1)) && zmm_os;
  f.avx512vnni = (c & (1u << 11)) && zmm_os;
  // AMX: CPUID.(7,0):EDX bits 24 (TILE), 25 (INT8) and 22 (BF16); XCR0 bits 17-18
  // (XTILECFG, XTILEDATA) set by the OS; and Linux hands the 8 KiB tile
  // state to a process only after it asks (arch_prctl ARCH_REQ_XCOMP_PERM).
  const bool amx_os = (xcr0 & 0x60000) == 0x60000;
  if ((d & (1u << 24)) && (d & (1u << 25)) && (d & (1u << 22)) && amx_os) f.amx = request_tile_state();
  __cpuid_count(7, 1, a, b, c, d);
  f.avx_vnni = (a & (1u << 4)) && ymm_os;
  f.avx512bf16 = (a & (1u << 5)) && zmm_os;
  return f;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

Isa from_env(Isa best) {
  const char* env = std::getenv("MIXQ_ISA");
  if (!env) return best;
  std::string s(env);
  Isa wanted = s == "ref" || s == "reference" ? Isa::reference
               : s == "avx2"                    ? Isa::avx2
               : s == "avx512"                  ? Isa::avx512
                                                : best;
  return wanted < best ? wanted : best;
}

std::atomic<int>& active() {
  static std::atomic<int> isa{static_cast<int>(from_env(best_isa()))};
  return isa;
}

// Size of the level-1 data cache from a deterministic cache parameters leaf
// (Intel's 4, AMD's 0x8000001D: the same register layout), 0 if none lists
// one. Subleaf i describes one cache until its type (EAX[4:0]) is 0.
int64_t l1d_from_leaf(unsigned leaf) {
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a, b, c, d;
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 0x1F, level = (a >> 5) & 0x7;
    if (type == 0) break;
    if (type == 1 && level == 1) {  // data cache, level 1
      const int64_t ways = ((b >> 22) & 0x3FF) + 1, partitions = ((b >> 12) & 0x3FF) + 1;
      const int64_t line = (b & 0xFFF) + 1, sets = int64_t{c} + 1;
      return ways * partitions * line * sets;
    }
  }
  return 0;
}

int64_t detect_l1d_bytes() {
  unsigned a, b, c, d;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  const unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  int64_t bytes = 0;
  if (max_ext >= 0x8000001Du && __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 22)))  // TOPOEXT
    bytes = l1d_from_leaf(0x8000001Du);
  if (bytes == 0 && max_leaf >= 4) bytes = l1d_from_leaf(4);
  return bytes > 0 ? bytes : int64_t{32} << 10;
}

}  // namespace

int64_t l1d_bytes() {
  static const int64_t bytes = detect_l1d_bytes();
  return bytes;
}

// Each level is exactly the flags its kernel files are compiled with
// (MIXQ_ISA_FLAGS_avx2 / _avx512 in CMakeLists.txt).
Isa best_isa() {
  const Features& f = features();
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.bmi2;
  if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16)
    return f.amx ? Isa::amx : Isa::avx512;
  if (avx2) return Isa::avx2;
  return Isa::reference;
}

Isa active_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

void set_isa(Isa isa) {
  Isa best = best_isa();
  active().store(static_cast<int>(isa < best ? isa : best));
}

bool cpu_has_avx_vnni() { return features().avx_vnni; }
bool cpu_has_avx512_vbmi() { return features().avx512vbmi; }

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::amx: return "amx";
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "ref";
  }
}

}  // namespace mixq::kernels
