#pragma once
// The float GEMM's per-target tuning (FloatTile), read by float_gemm_impl.hpp
// and by bench/bench_float_tunings, which instantiates the kernel with
// variations of it (bench/isa/float_tunings*). Include only from
// float_gemm_impl.hpp (the per-target translation units' anonymous namespace).
#include <cstdint>
#include <limits>

#include "kernels/cpu.hpp"
#include "kernels/stream_prefetch.hpp"

namespace mixq::kernels::x86 {
namespace {

// The tuning per target (a template parameter of gemm, so that
// bench/bench_float_tunings can run variations of it side by side):
//  - kMR rows for full register tiles, panels_for(mr) panels for an mr-row
//    tile (<= 12 ymm / 24 zmm accumulators), tile_ok(mr) whether an mr-row
//    tile is compiled (g++ 12 spilled accumulators of AVX2's 5 × 1 bf16 loop,
//    so 5 rows run as 4 + 1);
//  - kGrain: the threads' panel grain; kStepChunk / kRowChunk: the K and row
//    chunks; kDecodedRows: rows from which a row chunk decodes its panels
//    once (decode_chunk, decode_pair_chunk);
//  - the vdpbf16ps core's own chunks (AVX-512 only): kDotStepChunk k-pair
//    steps and kDotRowChunk rows, and kDotDecodedRows for kDecodedRows. It
//    decodes each K chunk of panels to bf16 once per row chunk, about 9
//    vector operations per 32 weights against one vdpbf16ps per 32 weights
//    and row: 7 % of the core's work with
//    128-row chunks. 1024 rows bring that under 1 %, and the activations,
//    then read from L3 once per 3 panels, are a few bytes per 24 dots. With
//    K chunks of 2048 pairs (the decoded chunk: 3 panels x 2048 x 64 B = 384
//    KiB, in L2) y's partial sums pass through memory less often. Together
//    1.04-1.17x faster than 128 rows x 512 pairs at M = 256 to 4096 on Zen 4,
//    FP8 and MXFP8, packed and in place (bench_float_tunings, the "(before)"
//    variant; BENCHMARKS.md "Issue 14 on Zen 4"); 512 pairs had been 1.06-1.12x
//    faster than 256 on Zen 5;
//  - kKChunksInside: from kMR rows on, each row chunk's tile of panels runs
//    every K chunk before the next tile (row_chunks_k_inside; read in place
//    with more than one row chunk, each group of panels packed for all of K
//    at once), so the tile's partial sums stay in cache between K chunks;
//    false: K chunks outermost, the whole y (50 MB at M = 4096, N = 3072)
//    read back from memory once per chunk. AVX2 (Zen 3, M = 4096, FP8): packed
//    1.03-1.09x faster in 10 of 12 alternating runs at K = 3072 and 12288, in
//    place 0.97-1.11x (bench_float_tunings --tuning "K chunks outermost";
//    BENCHMARKS.md, "Issue 14 on Zen 3, fourteenth session"). AVX-512: not
//    measured; false;
//  - kTwoSteps: the few-row FMA loop widens two FP8 steps at once (AVX-512);
//  - kScaledXRows: up to this many rows (0: never), FP8 (E4M3, E5M2) and
//    MXFP8 layers run with the activations times 2^112 and the codes
//    widened to value·2^-120 (E4M3) or value·2^-112 (E5M2) by three integer
//    operations per 8 codes (FloatIo::fp8_by_exponent; E5M2's inf and NaN
//    panels again on the f16 widening), where every finite |x| < 2^16 and the
//    denormals-are-zero flag is off, MXFP8 with its sums kept divided by
//    the block scales where that is exact (float_scaled_x.hpp); the same
//    products and sums, so the same bits. kScaledX: set by WithScaledX for
//    such a call;
//  - packed panels under kMR rows: K chunks of kFewRowsStepChunk steps (all
//    of K: each panel is then read front to back in one piece instead of
//    4 KiB at a time with every other panel in between; nothing is reused
//    across rows there, so K chunks only cost), and the few-row loop (more
//    panel vectors than rows: M = 1, 2 on AVX-512) prefetches each panel
//    kStreamPrefetchBytes ahead (0: the hardware prefetchers alone, which
//    restart at every 4 KiB page). Together 1.2-1.6x faster at M = 1 than
//    256-step chunks without prefetch (bench_float_tunings, BENCHMARKS.md
//    "Sixth AMX session");
//  - in place: kInPlaceGroup panels packed side by side per K chunk when the
//    rows fit one row chunk (kRowChunk), and the packer fetches the next
//    kPackAhead K chunks of the rows it reads (0: no software prefetch),
//    kFewRowsPackAhead under kMR rows; with more rows, as many panels as
//    kInPlaceGroupBytes holds (below);
//  - FP8 in place with at most kInPlaceRegisterRows rows (0: never) on a
//    CPU with VBMI: no packing, each panel transposed and decoded in
//    registers (fp8_rows_in_place_avx512vbmi), kInPlaceSideBySide(rows)
//    panels at a time (independent FMA chains), each row's codes fetched
//    kInPlaceRowPrefetchBytes ahead into kInPlaceRowPrefetchTo; on AVX2 the
//    same with scaled activations (kScaledX; fp8_rows_in_place_avx2), in
//    groups of 8 rows: kInPlaceSideBySide(rows) groups at a time.
//  - packed FP8 with at most kPackedTableRows rows (0: never) on a CPU with
//    VBMI: the codes decoded by table lookups (fp8_panels_avx512vbmi),
//    kPackedTableSideBySide panels at a time, each prefetched
//    kPackedTablePrefetchBytes ahead.
// Where the FP8 in-place kernel's row prefetches go: L1 (T0), L2 (T1), or
// by the L1 data cache's size (row_prefetch_hint).
enum class RowPrefetch { l1, l2, by_l1_size };
// by_l1_size: into L1 where the L1 data cache holds 48 KiB or more (Zen 5;
// Intel's cores since Golden Cove have as much, not measured there), into L2
// below (Zen 4's 32 KiB). Measured on those two only (FloatTile<16>).
inline PrefetchHint row_prefetch_hint(RowPrefetch to) {
  if (to == RowPrefetch::by_l1_size) return l1d_bytes() >= (int64_t{48} << 10) ? _MM_HINT_T0 : _MM_HINT_T1;
  return to == RowPrefetch::l1 ? _MM_HINT_T0 : _MM_HINT_T1;
}
inline constexpr int64_t kAllSteps = std::numeric_limits<int64_t>::max() / 2;  // one K chunk, whatever K
// Read in place with more rows than kRowChunk, each thread packs one K chunk
// of up to this many bytes of its panels (in whole register tiles of
// panels_for(kMR) panels) at a time and runs every row against
// it: the activations are read once per such group, few bytes against the
// multiply-adds, and the per-thread pack buffer stays bounded (all of a
// thread's panels at N = 21504 and 2048-pair K chunks would be 43 MiB).
inline constexpr int64_t kInPlaceGroupBytes = int64_t{8} << 20;
template <int Lanes>
struct FloatTile;
template <>
struct FloatTile<8> {
  static constexpr int kMR = 6;
  // Two rows: 3 panels. 2 panels (8 sums instead of 12, where the 12 with
  // the rows' broadcasts, two decoded vectors and the decode mask need 17
  // ymm) showed no direction on Zen 3, packed FP8 and MXFP8 at the three
  // H3 / FLUX shapes: 0.72-1.09x the time in three runs, then 0.94-1.10x in
  // two runs with the variants listed the other way round; with the rounds
  // alternating their order, MXFP8 0.84-0.92x, FP8 0.96-1.07x (one run; not
  // settled: bench_float_tunings --m 2 --tuning "2-row tile"; BENCHMARKS.md,
  // "Issue 14 on Zen 3, seventeenth session").
  static constexpr int panels_for(int mr) { return mr == 1 ? 4 : mr == 2 ? 3 : 1; }
  static constexpr bool tile_ok(int mr) { return mr != 5; }
  static constexpr int64_t kGrain = 4;  // whole J = 4 groups for M = 1 on each thread
  // 1.10-1.14x faster than 256 steps at M = 64 to 4096 on Zen 2 (each tile's
  // partial sums in y pass and its setup run 4x less often; the 64 KiB
  // panel chunk is read from L2): BENCHMARKS.md, "Issue 14 on AVX2: AMD EPYC
  // Zen 2, seventh session".
  static constexpr int64_t kStepChunk = 1024;
  static constexpr bool kKChunksInside = true;
  // 256 rows: 0.95-0.97x the time of 128 at M = 192 to 4096, K = 3072 and
  // 12288, packed (in place 0.93-1.00x); 64 and 512 were slower, 2048 much
  // slower (bench_float_tunings --tuning "row chunk"; BENCHMARKS.md, "eighth
  // session").
  static constexpr int64_t kRowChunk = 256;
  static constexpr int64_t kDecodedRows = 24;
  static constexpr int64_t kFewRowsStepChunk = kAllSteps;
  static constexpr int64_t kStreamPrefetchBytes = kernels::kStreamPrefetchBytes;  // 2 KiB
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T0;
  static constexpr bool kTwoSteps = false;
  static constexpr int64_t kScaledXRows = 5;
  static constexpr bool kScaledX = false;
  static constexpr int64_t kInPlaceGroup = 4;  // one M = 1 tile (panels_for(1))
  static constexpr int64_t kPackAhead = 1;
  // Under 6 rows the hardware prefetchers alone: on Zen 3, FP8 read in
  // place 1.09-1.23x faster at M = 1 (three shapes) and 1.01-1.13x at M = 2
  // than a chunk ahead; at 4 to 4096 rows within 8 % either way, in no one
  // direction, hence only few rows (bench_float_tunings --tuning "pack
  // prefetch"; BENCHMARKS.md, "Issue 14 on Zen 3, fifteenth session").
  static constexpr int64_t kFewRowsPackAhead = 0;
  // With scaled activations (kScaledX) only: fp8_rows_in_place_avx2, 2
  // groups of 8 rows (half panels) side by side. On Zen 3 from DRAM, against
  // packing per K chunk: M = 1 1.1-1.5x faster (E4M3, E5M2, MXFP8, three
  // shapes), M = 2 1.1-1.4x; M = 4 0.90-1.0x (8 sums and 8 transposed
  // registers spill), hence 2 rows. 1 group was 1.7x slower (one FMA chain
  // waits on its latency), 3 and 4 1.1-1.5x slower (spills; in cache,
  // bench_float_tunings --tuning "rows in registers"; BENCHMARKS.md, "Issue
  // 14 on Zen 3, nineteenth session").
  static constexpr int64_t kInPlaceRegisterRows = 2;
  static constexpr int kInPlaceSideBySide(int64_t) { return 2; }
  static constexpr int64_t kInPlaceRowPrefetchBytes = 0;
  static constexpr RowPrefetch kInPlaceRowPrefetchTo = RowPrefetch::l1;
  static constexpr bool kInPlaceStageAliasedRows = false;
  static constexpr int64_t kPackedTableRows = 0;  // AVX-512 VBMI only
  static constexpr int kPackedTableSideBySide = 1;
  static constexpr int64_t kPackedTablePrefetchBytes = 0;
};
template <>
struct FloatTile<16> {
  static constexpr int kMR = 8;
  static constexpr int panels_for(int) { return 3; }
  static constexpr bool tile_ok(int) { return true; }
  static constexpr int64_t kGrain = 3;
  static constexpr int64_t kStepChunk = 256;
  static constexpr bool kKChunksInside = false;
  static constexpr int64_t kDotStepChunk = 2048;
  static constexpr int64_t kDotRowChunk = 1024;
  // The dot core decodes its K chunks from 17 rows on: on Zen 5, M = 17 to
  // 23 ran 1.33-1.45x faster than in registers (FP8, K = N = 3072, packed
  // and read in place; bench_float_tunings --tuning "dot core"), where the
  // FMA core's decoding was 1.06-1.08x slower there (kDecodedRows). At 16
  // rows and fewer, read in place 1.15x faster decoded from 12, packed 1.2x
  // slower (weights from DRAM, streamed in registers): left as it was.
  static constexpr int64_t kDotDecodedRows = 17;
  static constexpr int64_t kRowChunk = 128;
  static constexpr int64_t kDecodedRows = 24;
  static constexpr int64_t kFewRowsStepChunk = kAllSteps;
  static constexpr int64_t kStreamPrefetchBytes = kernels::kStreamPrefetchBytes;  // 2 KiB
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T0;
  static constexpr bool kTwoSteps = true;
  static constexpr int64_t kScaledXRows = 0;  // vcvtph2ps on zmm is not the bottleneck there: not measured
  static constexpr bool kScaledX = false;
  static constexpr int64_t kInPlaceGroup = 3;  // one M = 1 tile (panels_for(1))
  static constexpr int64_t kPackAhead = 1;
  static constexpr int64_t kFewRowsPackAhead = 1;
  static constexpr int64_t kInPlaceRegisterRows = 4;
  // Two panels' FMA chains interleaved, each row fetched 256 B ahead (32
  // row streams: the bytes ahead of one panel at 512 B): 1.2-2.3x one panel
  // at 512 B on Zen 5 at M = 1 to 4 (BENCHMARKS.md, "Issue 14 on Zen 5, third
  // session"); where the row stride is a multiple of 4 KiB and the rows
  // are not staged (below: K not a multiple of 256) the second panel runs
  // one 64-byte line behind the first (panels_lag in
  // fp8_rows_in_place.avx512vbmi.cpp; "fifth session"). The row prefetch
  // target depends on the core: on Zen 4 (32 KiB L1d) into L2, since into
  // L1 the 32 row streams' prefetches held L1's miss buffers (T0 1.02-1.11x
  // slower from DRAM at M = 1, K = 3072 and 5376; BENCHMARKS.md, "Issue 14
  // on Zen 4, fourth session"); on Zen 5 (48 KiB L1d) into L1, T1 1.0-1.5x
  // slower at M = 1 to 4, K = 3072 and 5376 ("Issue 14 on Zen 5, sixth
  // session"). The L1 size stands for the core (row_prefetch_hint).
  static constexpr int kInPlaceSideBySide(int64_t) { return 2; }
  static constexpr int64_t kInPlaceRowPrefetchBytes = 256;
  static constexpr RowPrefetch kInPlaceRowPrefetchTo = RowPrefetch::by_l1_size;
  // Where more than 8 of the panels' rows fall in one L1 set (row strides
  // of a multiple of 2 KiB, e.g. K = 12288), they are copied 256 B at a
  // time to a buffer first (stage_rows in fp8_rows_in_place.avx512vbmi.cpp):
  // read in place there, 16 or 32 row lines in one 8-way set ran 2-3x
  // slower than in distinct sets, cache-resident, on Zen 4 (BENCHMARKS.md,
  // "Issue 14 on Zen 4, fourth session").
  static constexpr bool kInPlaceStageAliasedRows = true;
  static constexpr int64_t kPackedTableRows = 4;
  static constexpr int kPackedTableSideBySide = 3;
  // 3 KiB ahead (9 KiB in flight over the three panels' streams), not the
  // FMA core's 2 KiB: on Zen 5, E4M3 at one token 1.09-1.24x faster in the
  // fast read phase (~85 GB/s), 0.95-0.98x in the slow one (~55); MXFP8
  // 1.03-1.33x and 1.00-1.12x (BENCHMARKS.md, "Issue 14 on Zen 5, sixth
  // session").
  static constexpr int64_t kPackedTablePrefetchBytes = 3072;
};

}  // namespace
}  // namespace mixq::kernels::x86
