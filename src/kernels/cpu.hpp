#pragma once
// Which instruction set the kernels use, chosen once per process from CPUID.
// MIXQ_ISA=ref|avx2|avx512|amx forces a path (never above what the CPU has);
// set_isa() does the same from code (tests use it to cover every path).
#include <cstdint>
#include <string_view>

namespace mixq::kernels {

// amx: avx512 plus AMX-INT8 and AMX-BF16 tiles (Sapphire Rapids and later),
// used by the large-M GEMMs of the integer family and of FP8 / MXFP8; every
// other kernel runs its avx512 path.
enum class Isa { reference = 0, avx2 = 1, avx512 = 2, amx = 3 };

// The best path this CPU supports: avx512 needs AVX-512 F/BW/VL/DQ + VNNI + BF16,
// amx also AMX-TILE + AMX-INT8 + AMX-BF16 with the OS's permission;
// avx2 needs AVX2 + FMA + F16C (AVX-VNNI used when present).
Isa best_isa();
// The path in use: best_isa() unless limited by MIXQ_ISA or set_isa().
Isa active_isa();
// Limits the active path (clamped to best_isa()). Not thread-safe against
// concurrent forward calls; meant for tests and benchmarks.
void set_isa(Isa isa);
bool cpu_has_avx_vnni();
// AVX-512 VBMI (vpermb, vpermi2b), which some kernels need on top of the
// avx512 level (their *.avx512vbmi.cpp files); CPUs without it exist.
bool cpu_has_avx512_vbmi();
std::string_view isa_name(Isa isa);
// The first core's L1 data cache in bytes, from CPUID's cache descriptors
// (leaf 4 on Intel, 0x8000001D on AMD); 32 KiB where CPUID does not say.
// Kernels whose best prefetch target was measured to differ between L1
// sizes read it (float_tile.hpp).
int64_t l1d_bytes();

}  // namespace mixq::kernels
