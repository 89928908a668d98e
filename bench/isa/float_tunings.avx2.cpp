// Variations of the AVX2 float GEMM tuning (FloatTile<8> in
// float_gemm_impl.hpp) for bench_float_tunings: each differs from the default
// in one member (an M = 1 tile of J panels changes panels_for and the
// in-place group together).
#include "kernels/x86/float_gemm_impl.hpp"
#include "support/float_tunings.hpp"

namespace mixq::kernels::x86 {
namespace {

using Base = FloatTile<8>;
template <int J>
struct OneRowTile : Base {
  static constexpr int panels_for(int mr) { return mr == 1 ? J : Base::panels_for(mr); }
  static constexpr int64_t kInPlaceGroup = J;
};
template <int64_t Steps>
struct StepChunk : Base {
  static constexpr int64_t kStepChunk = Steps;
};
template <int64_t Bytes>
struct StreamPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = Bytes;
};
template <int64_t Rows>
struct DecodedRows : Base {
  static constexpr int64_t kDecodedRows = Rows;
};

// Under kMR rows as before commit 8a32914: 256-step K chunks, no panel prefetch.
struct Before : Base {
  static constexpr int64_t kFewRowsStepChunk = 256;
  static constexpr int64_t kStreamPrefetchBytes = 0;
};

template <class T>
void run(const float* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias, float* y) {
  gemm<Avx2, Core::fma, T>(a, lda, m, w, alpha, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86

namespace mixq::bench {

std::vector<FloatTuning> float_tunings_avx2() {
  using namespace kernels::x86;
  return {{"default (packed; M=1 tile 4 panels, prefetch 2 KiB)", false, run<Base>},
          {"M=1 tile of 2 panels", false, run<OneRowTile<2>>},
          {"M=1 tile of 3 panels", false, run<OneRowTile<3>>},
          {"6+ rows: K chunk 128 steps", false, run<StepChunk<128>>},
          {"6+ rows: K chunk 512 steps", false, run<StepChunk<512>>},
          {"under 6 rows: K chunks of 256 steps, no prefetch (before)", false, run<Before>},
          {"few rows: no panel prefetch", false, run<StreamPrefetch<0>>},
          {"few rows: prefetch panels 1 KiB ahead", false, run<StreamPrefetch<1024>>},
          {"few rows: prefetch panels 4 KiB ahead", false, run<StreamPrefetch<4096>>},
          {"decoded to f32 from 16 rows", false, run<DecodedRows<16>>},
          {"decoded to f32 from 48 rows", false, run<DecodedRows<48>>},
          {"in place (rows packed per K chunk)", true, run<Base>},
          {"in place, M=1 tile of 2 panels", true, run<OneRowTile<2>>},
          {"in place, M=1 tile of 3 panels", true, run<OneRowTile<3>>},
          {"in place, K chunk 128 steps", true, run<StepChunk<128>>},
          {"in place, K chunk 512 steps", true, run<StepChunk<512>>}};
}

}  // namespace mixq::bench
