// Variations of the AVX2 float GEMM tuning (FloatTile<8> in
// float_gemm_impl.hpp) for bench_float_tunings (float_tunings_variants.hpp).
#include "isa/float_tunings_variants.hpp"
#include "support/float_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = FloatTile<8>;

template <class T>
void run(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  run_tuned<Avx2, T>(a, lda, m, w, alpha, bias, y);
}
// The library's own build (what a layer runs), listed last
// (float_tunings.avx512.cpp says why).
void layer_fma(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias,
               float* y) {
  float_gemm_avx2(static_cast<const float*>(a), lda, m, w, alpha, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<FloatTuning> float_tunings_avx2() {
  using namespace kernels::x86;
  return {{"default (packed; M=1 tile 4 panels, prefetch 2 KiB)", false, run<Base>},
          {"M=1 tile of 2 panels", false, run<OneRowTile<Base, 2>>},
          {"M=1 tile of 3 panels", false, run<OneRowTile<Base, 3>>},
          {"2-row tile of 2 panels", false, run<FewRowsTile<Base, 2, 2>>},
          {"6+ rows: K chunks outermost (before)", false, run<KChunksInside<Base, false>>},
          {"6+ rows: K chunk 256 steps", false, run<StepChunk<Base, 256>>},
          {"6+ rows: K chunk 256 steps, K chunks outermost (before)", false,
           run<KChunksInside<StepChunk<Base, 256>, false>>},
          {"6+ rows: K chunk 512 steps", false, run<StepChunk<Base, 512>>},
          {"6+ rows: K chunk 2048 steps", false, run<StepChunk<Base, 2048>>},
          {"6+ rows: all of K", false, run<StepChunk<Base, kAllSteps>>},
          {"6+ rows: K chunk 4096 steps", false, run<StepChunk<Base, 4096>>},
          {"6+ rows: tile 3 rows x 2 panels", false, run<Tile<Base, 3, 2>>},
          {"6+ rows: row chunk 64", false, run<RowChunk<Base, 64>>},
          {"6+ rows: row chunk 256", false, run<RowChunk<Base, 256>>},
          {"6+ rows: row chunk 512", false, run<RowChunk<Base, 512>>},
          {"6+ rows: row chunk 2048", false, run<RowChunk<Base, 2048>>},
          {"6+ rows: row chunk 256, tile 3 rows x 2 panels", false, run<Tile<RowChunk<Base, 256>, 3, 2>>},
          {"under 6 rows: K chunks of 256 steps, no prefetch (before)", false, run<Before<Base>>},
          {"few rows: FP8 / MXFP8 widened through f16 (before)", false, run<ScaledXRows<Base, 0>>},
          {"few rows: no panel prefetch", false, run<StreamPrefetch<Base, 0>>},
          {"few rows: prefetch panels 1 KiB ahead", false, run<StreamPrefetch<Base, 1024>>},
          {"few rows: prefetch panels 4 KiB ahead", false, run<StreamPrefetch<Base, 4096>>},
          {"decoded to f32 from 16 rows", false, run<DecodedRows<Base, 16>>},
          {"decoded to f32 from 48 rows", false, run<DecodedRows<Base, 48>>},
          {"in place (under 3 rows: rows in registers, 2 groups of 8 rows side by side)", true, run<Base>},
          {"in place, rows packed per K chunk (before)", true, run<InPlaceRegisterRows<Base, 0>>},
          {"in place, rows in registers: 1 group of 8 rows at a time", true, run<InPlaceSideBySide<Base, 1>>},
          {"in place, rows in registers: 3 groups side by side (M=1)", true, run<InPlaceSideBySide<Base, 3>>},
          {"in place, rows in registers: 4 groups side by side (M=1)", true, run<InPlaceSideBySide<Base, 4>>},
          {"in place, rows in registers up to 4 rows (two pairs)", true, run<InPlaceRegisterRows<Base, 4>>},
          {"in place, rows in registers: prefetch rows 256 B ahead", true, run<InPlaceRowPrefetch<Base, 256>>},
          {"in place, rows in registers: prefetch rows 512 B ahead", true, run<InPlaceRowPrefetch<Base, 512>>},
          {"in place, rows in registers: prefetch rows 1 KiB ahead", true, run<InPlaceRowPrefetch<Base, 1024>>},
          {"in place, rows in registers: prefetch rows 512 B ahead into L2", true,
           run<InPlaceRowPrefetchTo<InPlaceRowPrefetch<Base, 512>, RowPrefetch::l2>>},
          {"in place, M=1 tile of 2 panels", true, run<OneRowTile<Base, 2>>},
          {"in place, M=1 tile of 3 panels", true, run<OneRowTile<Base, 3>>},
          {"in place, 2-row tile of 2 panels", true, run<FewRowsTile<Base, 2, 2>>},
          {"in place, K chunks outermost (before)", true, run<KChunksInside<Base, false>>},
          {"in place, K chunk 256 steps", true, run<StepChunk<Base, 256>>},
          {"in place, row chunk 256", true, run<RowChunk<Base, 256>>},
          {"in place, K chunk 2048 steps", true, run<StepChunk<Base, 2048>>},
          {"in place, FP8 / MXFP8 widened through f16 (before)", true, run<ScaledXRows<Base, 0>>},
          {"in place, no pack prefetch", true, run<PackAhead<Base, 0>>},
          {"in place, few rows: pack prefetch 1 chunk ahead (before)", true, run<FewRowsPackAhead<Base, 1>>},
          {"in place, pack prefetch 2 chunks ahead", true, run<PackAhead<Base, 2>>},
          {"in place, pack prefetch 4 chunks ahead", true, run<PackAhead<Base, 4>>},
          {"the layer's kernel (the library's build)", false, layer_fma},
          {"the layer's kernel, in place (the library's build)", true, layer_fma}};
}

}  // namespace mixq::bench
