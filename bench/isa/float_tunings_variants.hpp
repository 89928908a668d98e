#pragma once
// The variations of a float GEMM tuning (FloatTile in float_gemm_impl.hpp)
// that bench/isa/float_tunings.*.cpp compile for their targets: each differs
// from Base, the target's default, in one member (an M = 1 tile of J panels
// changes panels_for and the in-place group together: one tile's panels are
// packed side by side).
#include "kernels/x86/float_gemm_impl.hpp"

namespace mixq::kernels::x86 {
namespace {

template <class Base, int J>
struct OneRowTile : Base {
  static constexpr int panels_for(int mr) { return mr == 1 ? J : Base::panels_for(mr); }
  static constexpr int64_t kInPlaceGroup = J;
};
// Tiles of MR (< kMR) rows × J panels.
template <class Base, int MR, int J>
struct FewRowsTile : Base {
  static constexpr int panels_for(int mr) { return mr == MR ? J : Base::panels_for(mr); }
};
// Full register tiles of MR rows × J panels.
template <class Base, int MR, int J>
struct Tile : Base {
  static constexpr int kMR = MR;
  static constexpr int panels_for(int mr) { return mr == MR ? J : Base::panels_for(mr); }
};
template <class Base>
struct OneStep : Base {
  static constexpr bool kTwoSteps = false;
};
template <class Base, int64_t Steps>
struct StepChunk : Base {
  static constexpr int64_t kStepChunk = Steps;
};
template <class Base, bool Inside>
struct KChunksInside : Base {
  static constexpr bool kKChunksInside = Inside;
};
template <class Base, int64_t Steps>
struct DotStepChunk : Base {
  static constexpr int64_t kDotStepChunk = Steps;
};
template <class Base, int64_t Steps>
struct FewRowsStepChunk : Base {
  static constexpr int64_t kFewRowsStepChunk = Steps;
};
template <class Base, int64_t Bytes>
struct StreamPrefetch : Base {
  static constexpr int64_t kStreamPrefetchBytes = Bytes;
};
template <class Base>
struct StreamPrefetchIntoL2 : Base {
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T1;
};
template <class Base, int64_t Rows>
struct RowChunk : Base {
  static constexpr int64_t kRowChunk = Rows;
};
template <class Base, int64_t Rows>
struct DotRowChunk : Base {
  static constexpr int64_t kDotRowChunk = Rows;
};
template <class Base, int64_t Rows>
struct DecodedRows : Base {
  static constexpr int64_t kDecodedRows = Rows;
};
template <class Base, int64_t Rows>
struct DotDecodedRows : Base {
  static constexpr int64_t kDotDecodedRows = Rows;
};
// Panels decoded in registers at every M (the vdpbf16ps core before it
// decoded K chunks to bf16 pairs).
template <class Base>
struct NeverDecoded : Base {
  static constexpr int64_t kDecodedRows = kAllSteps, kDotDecodedRows = kAllSteps;
};
// E4M3 under Rows rows with the activations scaled by 2^112 and the codes
// widened by integer operations (0: never, the f16 widening).
template <class Base, int64_t Rows>
struct ScaledXRows : Base {
  static constexpr int64_t kScaledXRows = Rows;
};
template <class Base, int64_t Chunks>
struct PackAhead : Base {  // at every row count
  static constexpr int64_t kPackAhead = Chunks, kFewRowsPackAhead = Chunks;
};
template <class Base, int64_t Chunks>
struct FewRowsPackAhead : Base {
  static constexpr int64_t kFewRowsPackAhead = Chunks;
};
template <class Base, int64_t Rows>
struct InPlaceRegisterRows : Base {
  static constexpr int64_t kInPlaceRegisterRows = Rows;
};
template <class Base, int J>
struct InPlaceSideBySide : Base {
  static constexpr int kInPlaceSideBySide(int64_t) { return J; }
};
template <class Base, int64_t Bytes>
struct InPlaceRowPrefetch : Base {
  static constexpr int64_t kInPlaceRowPrefetchBytes = Bytes;
};
template <class Base, bool Stage>
struct InPlaceStageAliasedRows : Base {
  static constexpr bool kInPlaceStageAliasedRows = Stage;
};
template <class Base, RowPrefetch To>
struct InPlaceRowPrefetchTo : Base {
  static constexpr RowPrefetch kInPlaceRowPrefetchTo = To;
};
template <class Base, int64_t Rows>
struct PackedTableRows : Base {
  static constexpr int64_t kPackedTableRows = Rows;
};
template <class Base, int J>
struct PackedTableSideBySide : Base {
  static constexpr int kPackedTableSideBySide = J;
};
template <class Base, int64_t Bytes>
struct PackedTablePrefetch : Base {
  static constexpr int64_t kPackedTablePrefetchBytes = Bytes;
};
// The FMA core's own few-row loop over packed FP8 (the f16 widening), where
// packed_by_tables would otherwise take those rows.
template <class Base>
struct Widened : PackedTableRows<Base, 0> {};
// Under kMR rows as before commit 8a32914: 256-step K chunks, no panel prefetch.
template <class Base>
struct Before : Base {
  static constexpr int64_t kFewRowsStepChunk = 256;
  static constexpr int64_t kStreamPrefetchBytes = 0;
};

// Core C on target V under tuning T (FloatTuning::run).
template <class V, class T, Core C = Core::fma>
void run_tuned(const void* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias,
               float* y) {
  gemm<V, C, T>(a, lda, m, w, alpha, bias, y);
}

}  // namespace
}  // namespace mixq::kernels::x86
