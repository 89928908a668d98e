// Variations of the AVX2 integer GEMM tuning (IntTile<8> in int_gemm_impl.hpp)
// for bench_int_tunings: each differs from the default in one member. The
// register tile stays 1 panel: 2 panels need 24 accumulators, more than the
// 16 ymm registers.
#include "kernels/cpu.hpp"
#include "kernels/x86/int_gemm_impl.hpp"
#include "support/int_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = IntTile<8>;
struct Block128K : Base {
  static constexpr int64_t kActBlockBytes = 128 * 1024;
};
struct Block512K : Base {
  static constexpr int64_t kActBlockBytes = 512 * 1024;
};
struct Block1M : Base {
  static constexpr int64_t kActBlockBytes = 1024 * 1024;
};
struct NoPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = 0;
};
struct Ahead512 : Base {
  static constexpr int64_t kStreamPrefetchBytes = 512;
};
struct Ahead2K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 2048;
};
struct Ahead4K : Base {
  static constexpr int64_t kStreamPrefetchBytes = 4096;
};

template <class T>
std::unique_ptr<IntKernel> make(const IntLayerDesc& d) {
  check_int_desc(d);
  if (cpu_has_avx_vnni()) return std::make_unique<SimdIntKernel<Avx2Vnni, T>>(d, "avx2_vnni");
  return std::make_unique<SimdIntKernel<Avx2, T>>(d, "avx2");
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<IntTuning> int_tunings_avx2() {
  using namespace kernels::x86;
  return {{"default (activation block 256 KiB, prefetch 1 KiB)", make<Base>},
          {"activation block 128 KiB", make<Block128K>},
          {"activation block 512 KiB", make<Block512K>},
          {"activation block 1 MiB", make<Block1M>},
          {"no small-M prefetch (the default before)", make<NoPrefetch>},
          {"small-M prefetch 512 B ahead", make<Ahead512>},
          {"small-M prefetch 2 KiB ahead", make<Ahead2K>},
          {"small-M prefetch 4 KiB ahead", make<Ahead4K>}};
}

}  // namespace mixq::bench
