// Variations of the AVX2 AWQ tuning (AwqTarget<Avx2> in awq_w4a16_impl.hpp)
// for bench_awq_tunings: each differs from the default in one member.
#include "isa/awq_tunings_variants.hpp"
#include "kernels/x86/awq_w4a16_impl.hpp"
#include "support/awq_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = AwqTarget<Avx2>;
// The kernel before its M = 1 change: 1 row × 1 panel (2 accumulator chains),
// no software prefetch.
struct Before : Base {
  static constexpr int64_t kStreamPanels = 1, kStreamPrefetchBytes = 0, kParamGroupsAhead = 0;
  static constexpr int panels_for(int) { return 1; }
};
struct M1OnePanel : Base {
  static constexpr int panels_for(int) { return 1; }
};
// 6 accumulator chains (the 1 x 2 tile's 4 wait on FMA latency); groups of
// 6 panels so that every tile is whole.
struct M1ThreePanels : Base {
  static constexpr int64_t kStreamPanels = 6;
  static constexpr int panels_for(int rows) { return rows == 1 ? 3 : 1; }
};
struct M1FourPanels : Base {
  static constexpr int panels_for(int rows) { return rows == 1 ? 4 : 1; }
};
// Large M as before awq_decoded: 4 × 1 register tiles decoding in registers,
// rows in chunks of 32 (one chunk per thread at a time).
struct TilesLargeM : Base {
  static constexpr bool kDecodeLargeM = false;
  static constexpr int64_t kChunk = 32, kChunkPanels = 1;
};

template <class T>
void run(const AwqPacked& w, const float* x, int64_t m, float* y) {
  awq_fma<Avx2, T>(w, x, m, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<AwqTuning> awq_tunings_avx2() {
  using namespace kernels::x86;
  return {{"default", run<Base>},
          {"before M=1 change (1x1 tile, no prefetch)", run<Before>},
          {"M=1 tile 1 row x 1 panel", run<M1OnePanel>},
          {"M=1 tile 1 row x 3 panels", run<M1ThreePanels>},
          {"M=1 tile 1 row x 4 panels", run<M1FourPanels>},
          {"no software prefetch", run<NoPrefetch<Base>>},
          {"no code prefetch", run<CodeAhead<Base, 0>>},
          {"no scale/zero prefetch", run<ParamsAhead<Base, 0>>},
          {"code prefetch 1 KiB ahead", run<CodeAhead<Base, 1024>>},
          {"code prefetch 4 KiB ahead", run<CodeAhead<Base, 4096>>},
          {"scale/zero 1 group ahead", run<ParamsAhead<Base, 1>>},
          {"scale/zero 4 groups ahead", run<ParamsAhead<Base, 4>>},
          {"large M: register tiles, 32-row chunks (before)", run<TilesLargeM>},
          {"the layer's kernel (awq_avx2, the library's build)", awq_avx2}};
}

}  // namespace mixq::bench
