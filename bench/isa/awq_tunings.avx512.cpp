// Variations of the AVX-512 AWQ tunings for bench_awq_tunings: of the
// f32-FMA core (AwqTarget<Avx512> in awq_w4a16_impl.hpp) and of the vdpbf16ps
// core (AwqBf16Tile in awq_bf16_impl.hpp); each differs from its core's
// default in one member.
#include "isa/awq_tunings_variants.hpp"
#include "kernels/x86/awq_bf16_impl.hpp"
#include "kernels/x86/awq_w4a16_impl.hpp"
#include "support/awq_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = AwqTarget<Avx512>;
struct PackAlways : Base {
  static constexpr int64_t kPackMinM = 1;
};
// The kernel before its M = 1 change: x always repacked into 16-row blocks,
// no software prefetch.
using Before = NoPrefetch<PackAlways>;
struct SmallTiles2Panels : Base {
  static constexpr int panels_for(int rows) { return rows >= 8 ? 1 : 2; }
};

using Bf16 = AwqBf16Tile;
struct Bf16TwoPanels : Bf16 {
  static constexpr int64_t kStreamPanels = 2;
  static constexpr int panels_for(int) { return 2; }
};
// The vdpbf16ps core's tiles before its M = 1 change: 2 panels at every row
// count, no software prefetch.
using Bf16Before = NoPrefetch<Bf16TwoPanels>;
struct Bf16SixPanels : Bf16 {
  static constexpr int64_t kStreamPanels = 6;
  static constexpr int panels_for(int rows) { return rows <= 2 ? 6 : 2; }
};
struct Bf16FourPanelsTo4Rows : Bf16 {
  static constexpr int panels_for(int rows) { return rows <= 4 ? 4 : 2; }
};

template <class T>
void run_bf16(const AwqPacked& w, const float* x, int64_t m, float* y) {
  awq_bf16<T>(w, x, m, y);
}

template <class T>
void run(const AwqPacked& w, const float* x, int64_t m, float* y) {
  awq_fma<Avx512, T>(w, x, m, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<AwqTuning> awq_tunings_avx512() {
  using namespace kernels::x86;
  return {{"default", run<Base>},
          {"before M=1 change (x packed, no prefetch)", run<Before>},
          {"x packed at every M", run<PackAlways>},
          {"no software prefetch", run<NoPrefetch<Base>>},
          {"no code prefetch", run<CodeAhead<Base, 0>>},
          {"no scale/zero prefetch", run<ParamsAhead<Base, 0>>},
          {"code prefetch 1 KiB ahead", run<CodeAhead<Base, 1024>>},
          {"code prefetch 4 KiB ahead", run<CodeAhead<Base, 4096>>},
          {"tiles of <= 4 rows x 2 panels", run<SmallTiles2Panels>},
          {"vdpbf16ps kernel (awq_avx512; its own bits)", run_bf16<Bf16>, true},
          {"vdpbf16ps: before M=1 change (2 panels, no prefetch)", run_bf16<Bf16Before>, true},
          {"vdpbf16ps: no software prefetch", run_bf16<NoPrefetch<Bf16>>, true},
          {"vdpbf16ps: no scale/zero prefetch", run_bf16<ParamsAhead<Bf16, 0>>, true},
          {"vdpbf16ps: code prefetch 1 KiB ahead", run_bf16<CodeAhead<Bf16, 1024>>, true},
          {"vdpbf16ps: code prefetch 4 KiB ahead", run_bf16<CodeAhead<Bf16, 4096>>, true},
          {"vdpbf16ps: 2 panels at every M", run_bf16<Bf16TwoPanels>, true},
          {"vdpbf16ps: 1-2 rows x 6 panels", run_bf16<Bf16SixPanels>, true},
          {"vdpbf16ps: up to 4 rows x 4 panels", run_bf16<Bf16FourPanelsTo4Rows>, true},
          {"vdpbf16ps: the library's build (awq_avx512)", awq_avx512, true},
          // The library's build of the default (what a layer runs): a variant
          // must beat it, not only this file's build (BENCHMARKS.md, "Zen 4,
          // second session").
          {"the layer's kernel (awq_avx512_fma, the library's build)", awq_avx512_fma}};
}

}  // namespace mixq::bench
