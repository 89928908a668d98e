// Variations of the AVX-512 float GEMM tuning (FloatTile<16> in
// float_gemm_impl.hpp) for bench_float_tunings (float_tunings_variants.hpp).
#include "isa/float_tunings_variants.hpp"
#include "support/float_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = FloatTile<16>;

template <class T>
void run(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  run_tuned<Avx512, T>(a, lda, m, w, alpha, bias, y);
}
template <class T>
void dot(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  run_tuned<Avx512, T, Core::dot>(a, lda, m, w, alpha, bias, y);
}
// The library's own builds of the two cores (what a layer runs), listed
// last: a variant must beat these rows, not only this file's build of the
// default (BENCHMARKS.md, "Zen 4, second session": a bench build of the
// same source can run several % slower than the library's).
void layer_fma(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias,
               float* y) {
  float_gemm_avx512(static_cast<const float*>(a), lda, m, w, alpha, bias, y);
}
void layer_dot(const void* a, int64_t, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  float_gemm_avx512_bf16(static_cast<const uint32_t*>(a), m, w, alpha, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<FloatTuning> float_tunings_avx512() {
  using namespace kernels::x86;
  return {{"default (packed; FP8 up to 4 rows by table lookups, 3 panels, prefetch 3 KiB)", false, run<Base>},
          {"packed FP8 up to 4 rows widened through f16 (before; M=1 tile 3 panels, 2-step widening)", false,
           run<Widened<Base>>},
          {"packed FP8 by table lookups: 1 panel at a time", false, run<PackedTableSideBySide<Base, 1>>},
          {"packed FP8 by table lookups: 2 panels at a time", false, run<PackedTableSideBySide<Base, 2>>},
          {"packed FP8 by table lookups: 4 panels at a time", false, run<PackedTableSideBySide<Base, 4>>},
          {"packed FP8 by table lookups: prefetch 2 KiB ahead (before)", false, run<PackedTablePrefetch<Base, 2048>>},
          {"packed FP8 by table lookups: prefetch 4 KiB ahead", false, run<PackedTablePrefetch<Base, 4096>>},
          {"widened: M=1 tile of 1 panel", false, run<Widened<OneRowTile<Base, 1>>>},
          {"widened: M=1 tile of 2 panels", false, run<Widened<OneRowTile<Base, 2>>>},
          {"widened: M=1 tile of 4 panels", false, run<Widened<OneRowTile<Base, 4>>>},
          {"widened: one FP8 step per widening", false, run<Widened<OneStep<Base>>>},
          {"8+ rows: K chunk 128 steps", false, run<StepChunk<Base, 128>>},
          {"8+ rows: K chunk 512 steps", false, run<StepChunk<Base, 512>>},
          {"widened: under 8 rows: K chunks of 256 steps, no prefetch (before)", false, run<Widened<Before<Base>>>},
          {"widened: under 8 rows: K chunks of 256 steps (prefetch on)", false,
           run<Widened<FewRowsStepChunk<Base, 256>>>},
          {"widened: under 8 rows: K chunk 1024 steps", false, run<Widened<FewRowsStepChunk<Base, 1024>>>},
          {"few rows: no panel prefetch", false, run<StreamPrefetch<Base, 0>>},
          {"few rows: prefetch panels 1 KiB ahead", false, run<StreamPrefetch<Base, 1024>>},
          {"few rows: prefetch panels 4 KiB ahead", false, run<StreamPrefetch<Base, 4096>>},
          {"few rows: prefetch panels into L2 (T1)", false, run<StreamPrefetchIntoL2<Base>>},
          {"row chunk 64", false, run<RowChunk<Base, 64>>},
          {"row chunk 256", false, run<RowChunk<Base, 256>>},
          {"decoded to f32 from 16 rows", false, run<DecodedRows<Base, 16>>},
          {"decoded to f32 from 48 rows", false, run<DecodedRows<Base, 48>>},
          {"in place (rows packed per K chunk)", true, run<Base>},
          {"in place, M=1 tile of 1 panel", true, run<OneRowTile<Base, 1>>},
          {"in place, M=1 tile of 2 panels", true, run<OneRowTile<Base, 2>>},
          {"in place, M=1 tile of 4 panels", true, run<OneRowTile<Base, 4>>},
          {"in place, one FP8 step per widening", true, run<OneStep<Base>>},
          {"in place, K chunk 128 steps", true, run<StepChunk<Base, 128>>},
          {"in place, K chunk 512 steps", true, run<StepChunk<Base, 512>>},
          {"in place, no pack prefetch", true, run<PackAhead<Base, 0>>},
          {"in place, pack prefetch 2 chunks ahead", true, run<PackAhead<Base, 2>>},
          {"in place, FP8 packed per K chunk at every M (before)", true, run<InPlaceRegisterRows<Base, 0>>},
          {"in place, FP8 in registers up to 2 rows", true, run<InPlaceRegisterRows<Base, 2>>},
          {"in place, FP8 in registers up to 8 rows", true, run<InPlaceRegisterRows<Base, 8>>},
          {"in place, FP8 in registers: one panel at a time, row prefetch 512 B into L1 (first version)", true,
           run<InPlaceRowPrefetchTo<InPlaceRowPrefetch<InPlaceSideBySide<Base, 1>, 512>, RowPrefetch::l1>>},
          {"in place, FP8 in registers: row prefetch into L1 (T0; the default on 48 KiB L1d)", true,
           run<InPlaceRowPrefetchTo<Base, RowPrefetch::l1>>},
          {"in place, FP8 in registers: row prefetch into L2 (T1; the default on 32 KiB L1d)", true,
           run<InPlaceRowPrefetchTo<Base, RowPrefetch::l2>>},
          {"in place, FP8 in registers: rows sharing L1 sets read in place (before)", true,
           run<InPlaceStageAliasedRows<Base, false>>},
          {"in place, FP8 in registers: one panel at a time", true, run<InPlaceSideBySide<Base, 1>>},
          {"in place, FP8 in registers: three panels at a time", true, run<InPlaceSideBySide<Base, 3>>},
          {"in place, FP8 in registers: no row prefetch", true, run<InPlaceRowPrefetch<Base, 0>>},
          {"in place, FP8 in registers: row prefetch 128 B", true, run<InPlaceRowPrefetch<Base, 128>>},
          {"in place, FP8 in registers: row prefetch 512 B", true, run<InPlaceRowPrefetch<Base, 512>>},
          {"in place, FP8 in registers: row prefetch 1 KiB", true, run<InPlaceRowPrefetch<Base, 1024>>},
          {"in place, FP8 in registers: row prefetch 2 KiB", true, run<InPlaceRowPrefetch<Base, 2048>>},
          // The vdpbf16ps core (FP8 kinds; from 5 rows where the float-dot probe
          // picks it, below the AMX tiles' 32 rows on AMX machines).
          {"dot core (vdpbf16ps)", false, dot<Base>, true},
          {"dot core: 128-row chunks, K chunks of 512 pairs (before)", false,
           dot<DotRowChunk<DotStepChunk<Base, 512>, 128>>, true},
          {"dot core: decoded in registers at every M, K chunk 256 (before)", false,
           dot<NeverDecoded<DotStepChunk<Base, 256>>>, true},
          {"dot core: decoded to bf16 from 12 rows", false, dot<DotDecodedRows<Base, 12>>, true},
          {"dot core: decoded to bf16 from 24 rows (before)", false, dot<DotDecodedRows<Base, 24>>, true},
          {"dot core: K chunk 512 steps", false, dot<DotStepChunk<Base, 512>>, true},
          {"dot core: K chunk 1024 steps", false, dot<DotStepChunk<Base, 1024>>, true},
          {"dot core: all of K in one chunk", false, dot<DotStepChunk<Base, kAllSteps>>, true},
          {"dot core: tile 6 rows x 4 panels", false, dot<Tile<Base, 6, 4>>, true},
          {"dot core: tile 12 rows x 2 panels", false, dot<Tile<Base, 12, 2>>, true},
          {"dot core: tile 4 rows x 6 panels", false, dot<Tile<Base, 4, 6>>, true},
          {"dot core: row chunk 128", false, dot<DotRowChunk<Base, 128>>, true},
          {"dot core: row chunk 512", false, dot<DotRowChunk<Base, 512>>, true},
          {"dot core: row chunk 4096", false, dot<DotRowChunk<Base, 4096>>, true},
          {"dot core, in place (rows packed per K chunk)", true, dot<Base>, true},
          {"dot core, in place: decoded to bf16 from 12 rows", true, dot<DotDecodedRows<Base, 12>>, true},
          {"dot core, in place: decoded to bf16 from 24 rows (before)", true, dot<DotDecodedRows<Base, 24>>, true},
          {"dot core, in place: 128-row chunks, K chunks of 512 pairs (before)", true,
           dot<DotRowChunk<DotStepChunk<Base, 512>, 128>>, true},
          {"the layer's kernel (FMA core, the library's build)", false, layer_fma},
          {"the layer's kernel, in place (FMA core, the library's build)", true, layer_fma},
          {"the layer's kernel (dot core, the library's build)", false, layer_dot, true},
          {"the layer's kernel, in place (dot core, the library's build)", true, layer_dot, true}};
}

}  // namespace mixq::bench
