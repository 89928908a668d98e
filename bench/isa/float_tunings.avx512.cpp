// Variations of the AVX-512 float GEMM tuning (FloatTile<16> in
// float_gemm_impl.hpp) for bench_float_tunings: each differs from the default
// in one member (an M = 1 tile of J panels changes panels_for and the
// in-place group together: one tile's panels are packed side by side).
#include "kernels/x86/float_gemm_impl.hpp"
#include "support/float_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = FloatTile<16>;
template <int J>
struct OneRowTile : Base {
  static constexpr int panels_for(int mr) { return mr == 1 ? J : Base::panels_for(mr); }
  static constexpr int64_t kInPlaceGroup = J;
};
struct OneStep : Base {
  static constexpr bool kTwoSteps = false;
};
template <int64_t Steps>
struct StepChunk : Base {
  static constexpr int64_t kStepChunk = Steps;
};
template <int64_t Rows>
struct RowChunk : Base {
  static constexpr int64_t kRowChunk = Rows;
};
template <int64_t Rows>
struct DecodedRows : Base {
  static constexpr int64_t kDecodedRows = Rows;
};
template <int64_t Steps>
struct FewRowsStepChunk : Base {
  static constexpr int64_t kFewRowsStepChunk = Steps;
};
template <int64_t Bytes>
struct StreamPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = Bytes;
};
template <int64_t Chunks>
struct PackAhead : Base {
  static constexpr int64_t kPackAhead = Chunks;
};

// Under kMR rows as before commit 8a32914: 256-step K chunks, no panel prefetch.
struct Before : Base {
  static constexpr int64_t kFewRowsStepChunk = 256;
  static constexpr int64_t kStreamPrefetchBytes = 0;
};

template <class T>
void run(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  gemm<Avx512, Core::fma, T>(a, lda, m, w, alpha, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<FloatTuning> float_tunings_avx512() {
  using namespace kernels::x86;
  return {{"default (packed; M=1 tile 3 panels, 2-step widening, prefetch 2 KiB)", false, run<Base>},
          {"M=1 tile of 1 panel", false, run<OneRowTile<1>>},
          {"M=1 tile of 2 panels", false, run<OneRowTile<2>>},
          {"M=1 tile of 4 panels", false, run<OneRowTile<4>>},
          {"one FP8 step per widening", false, run<OneStep>},
          {"8+ rows: K chunk 128 steps", false, run<StepChunk<128>>},
          {"8+ rows: K chunk 512 steps", false, run<StepChunk<512>>},
          {"under 8 rows: K chunks of 256 steps, no prefetch (before)", false, run<Before>},
          {"under 8 rows: K chunk 1024 steps", false, run<FewRowsStepChunk<1024>>},
          {"few rows: no panel prefetch", false, run<StreamPrefetch<0>>},
          {"few rows: prefetch panels 1 KiB ahead", false, run<StreamPrefetch<1024>>},
          {"few rows: prefetch panels 4 KiB ahead", false, run<StreamPrefetch<4096>>},
          {"row chunk 64", false, run<RowChunk<64>>},
          {"row chunk 256", false, run<RowChunk<256>>},
          {"decoded to f32 from 16 rows", false, run<DecodedRows<16>>},
          {"decoded to f32 from 48 rows", false, run<DecodedRows<48>>},
          {"in place (rows packed per K chunk)", true, run<Base>},
          {"in place, M=1 tile of 1 panel", true, run<OneRowTile<1>>},
          {"in place, M=1 tile of 2 panels", true, run<OneRowTile<2>>},
          {"in place, M=1 tile of 4 panels", true, run<OneRowTile<4>>},
          {"in place, one FP8 step per widening", true, run<OneStep>},
          {"in place, K chunk 128 steps", true, run<StepChunk<128>>},
          {"in place, K chunk 512 steps", true, run<StepChunk<512>>},
          {"in place, no pack prefetch", true, run<PackAhead<0>>},
          {"in place, pack prefetch 2 chunks ahead", true, run<PackAhead<2>>}};
}

}  // namespace mixq::bench
