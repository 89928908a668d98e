#pragma once
// The integer GEMM's per-target tuning (IntTile), read by int_gemm_impl.hpp
// and by the benches that instantiate the kernel with variations of it
// (bench/isa/int_tunings*). Include only from int_gemm_impl.hpp (the
// per-target translation units' anonymous namespace).
#include <cstdint>
#include <limits>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/int_pack.hpp"

namespace mixq::kernels::x86 {
namespace {

// Per-target tuning.
//  kTilePanels: weight panels per register tile (int_gemm_impl.hpp's
//    opening comment).
//  kActBlockBytes: quantized activation rows per large-M block: the block
//    stays in L2 next to one weight tile while every tile streams over it, so
//    a tile fetched from L3 is reused by as many 6-token panels as possible.
//    AVX-512: 768 KiB measured best among 384 / 768 / 1200 KiB at M = 4096,
//    K = N = 3072 (bench_linear_int); AVX2: 1 MiB (Zen 2, against 256 KiB:
//    INT8 1.01-1.11x, 1.11x at K = 12288 where 256 KiB holds 21 rows;
//    ConvRot W4A4 1.01-1.02x; bench_int_tunings --m 4096, BENCHMARKS.md
//    "Issue 14 on AVX2: AMD EPYC Zen 2, seventh session").
//  kStreamPrefetchBytes: small M (weights from DRAM) prefetches each of the P
//    weight streams this far ahead; 0 = none. On AVX-512 the hardware
//    prefetchers alone left the M = 1 loops well below the read bandwidth (1
//    and 4 KiB were no better). On AVX2 (AMD Zen 3) 1 KiB made M = 1 1.16-1.24x
//    faster than none, for int8 and int4 weights at the FLUX / H3 shapes, and
//    beat 2 and 4 KiB (bench_int_tunings re-measures both). Not used for
//    large M, where weights come from L2 and the extra loads measured slower.
//  kOneStreamPrefetchBytes: the same where the GEMV on in-place rows reads
//    one row stream a thread (AVX-512 at M = 1, kOneRowAtOneToken). What a
//    thread has in flight is its streams times the distance: the packed
//    loop's 4 panel streams 2 KiB ahead hold 8 KiB, one row stream 2 KiB
//    ahead 2 KiB. On Zen 5, whose read swings between ~50 and ~88 GB/s
//    from one minute to the next, 8 KiB made M = 1 in place 1.02-1.38x
//    faster than 2 KiB in the fast phase (int8 and int4 rows, the FLUX / H3
//    shapes; 4 KiB 1.05-1.22x) and 0.97-1.11x in the slow one, where 2 KiB
//    kept up; the packed loop at 4 KiB was 1.02-1.14x slower (BENCHMARKS.md,
//    "Issue 14 on Zen 5, sixth session"). AVX2: kStreamPrefetchBytes.
//  kKChunk: large M runs K in chunks of this many k past it
//    (run_tile_k_chunks), so that a chunk of the P weight panels stays in L2
//    next to the activation block's chunk while every 6-token panel uses it:
//    at K = 12288 a whole 4-panel INT8 tile is 768 KiB, next to a 768 KiB
//    activation block, and Zen 5's L2 is 1 MiB (BENCHMARKS.md, "Issue 14 on
//    Zen 5, second session"). AVX2: 1-panel tiles fit; never.
//  kAmx: large M runs on AMX tiles (forward_large_amx; set only by the
//    tuning of int_gemm_amx.avx512.cpp, whose kernel the dispatch builds on
//    Isa::amx; the tile instructions live in amx_tiles.avx512amx.cpp).
//  kAmxNextTileToL2: on AMX, each tile's blocks ask the next tile's weight
//    bytes into L2 (forward_large_amx); bench_int_tunings measures without.
//  kCodesInRegistersRows: small M with at most this many tokens runs 4-bit
//    codes through codes_micro (codes_micro_impl.hpp: looked up in registers,
//    the P panels side by side); more tokens decode a tile of P panels once
//    and run the micro-kernel over it. kMr on both targets: at M = 8 one more
//    lookup pass made the call 1.3-1.8x slower than the tile (AVX-512,
//    bench_int_tunings --format asym_w4a8_int8 --m 8 --tuning 4-bit); AVX2
//    (Zen 2): 1.04-1.06x slower at M = 8, 1.06-1.22x at M = 7.
//  kCodeBlocksPrefetchBytes: the AVX2 kernel over codes in k blocks
//    (codes_blocks_impl.hpp; one sequential stream per thread) fetches this
//    far ahead: on Zen 2 at M = 1, 2 KiB took 0.90-0.97x the time of 1 KiB,
//    4 KiB 0.97x that of 2 (bench_int_tunings --format asym_w4a8_int8).
//  kCodesVbmi: on a CPU with AVX-512 VBMI, codes_micro looks codes up with
//    `vpermi2b` (codes_vbmi.avx512vbmi.cpp): 1.06-1.16x at M = 1 against
//    ColumnTables' `vpshufb` (bench_int_tunings --tuning vpshufb).
//  kX16: int4 weights with int4 activations use WeightMode::int4_x16 (needs
//    an exact 4-product dot: vpdpbusd; vpmaddubsw would saturate).
//  kRowStreams: weight rows the small-M GEMV on in-place rows reads at once
//    (rows of at least kLongRowBytes; shorter rows one at a time). AVX2
//    (Zen 3): 4 KiB, one stream was 9-14 % faster on 3 KiB rows. AVX-512
//    (Emerald Rapids): 0, four streams were 3-7 % faster than one on 3 KiB
//    int8 rows and even on 1.5 KiB int4 rows in two runs (bench_int_tunings
//    --tuning "in place"; 8 streams would spill at 4 tokens × 8 rows).
//  kOneRowAtOneToken: a call of one token reads the rows one at a time
//    whatever their length: the whole matrix is then one sequential stream
//    per thread. AVX-512: on Zen 5 at M = 1, 1.02-1.24x faster than four
//    streams at the FLUX / H3 shapes (84-99 % of read against 70-81 %); at
//    M = 4 and 16 one stream is 1.4-2.1x slower (the work per byte grows,
//    one accumulator chain per row), so only M = 1 (BENCHMARKS.md, "fifth
//    session"). AVX2: not measured; false.
//  kSmallRows: up to this many tokens forward_small splits the weight panels
//    over the threads (each weight byte read once per call); more tokens
//    split the tokens (forward_large: every thread reads every weight).
//    AVX-512 (Zen 5): 48; splitting the tokens from 25 on ran M = 25 .. 48
//    1.19-1.50x slower read in place (INT8 ConvRot, ConvRot W4A4, W4A8
//    codes; K = N = 3072; 1.11-1.76x at the FLUX / H3 shapes), packed
//    1.05-1.46x slower at 25 .. 40 and even at 48 (bench_int_tunings
//    --tuning "up to 24 tokens"; BENCHMARKS.md, "Zen 5, eighth session").
//    AVX2: not measured; kGemvRows.
//  kInt8InPlaceGemvRows: int8 rows read in place run the GEMV up to this
//    many tokens; from one more up to kSmallRows, forward_small, whose tiles
//    transpose the rows once (run_tile) for the micro-kernel. AVX-512 (Zen
//    5), tiles against the GEMV in the same runs: 0.70-1.03x at 5 tokens,
//    0.87-1.13x at 6, 1.03-1.15x at 7, 1.07-1.31x at 8, 1.37-1.54x at 16,
//    1.8x at 24; kMr.
//    int4 rows keep the GEMV to kGemvRows: their tiles were 1.4-6x slower
//    below 24 tokens, and with the AVX-512 transpose (transpose_panel) still
//    1.0-1.7x slower at 7-16 tokens from DRAM (a build sending them to the
//    tiles, not a switch). AVX2: not measured;
//    kGemvRows (bench_int_tunings --tuning "in place").
// A bench may instantiate the kernel with another tuning T (a struct with
// these members; bench/isa/int_tunings.*.cpp).
constexpr int64_t kGemvRows = 24;  // up to 4 panels of 6 tokens: memory-bound regime

template <int Lanes>
struct IntTile;
template <>
struct IntTile<16> {
  static constexpr int kTilePanels = 4;
  static constexpr int64_t kSmallRows = 48;
  static constexpr int64_t kActBlockBytes = 768 * 1024;
  static constexpr int64_t kStreamPrefetchBytes = 2048;
  static constexpr int64_t kOneStreamPrefetchBytes = 8192;
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T0;
  static constexpr bool kX16 = true;
  static constexpr int kRowStreams = 4;
  static constexpr int64_t kLongRowBytes = 0;  // 4 streams at K = 3072 too (bench_int_tunings)
  static constexpr bool kOneRowAtOneToken = true;
  static constexpr int64_t kInt8InPlaceGemvRows = kMr;
  static constexpr int64_t kKChunk = 3072;
  static constexpr int64_t kCodesInRegistersRows = kMr;
  static constexpr bool kCodesVbmi = true;
  static constexpr bool kAmx = false;
  static constexpr bool kAmxNextTileToL2 = true;
};
template <>
struct IntTile<8> {
  static constexpr int kTilePanels = 1;
  static constexpr int64_t kSmallRows = kGemvRows;
  static constexpr int64_t kActBlockBytes = 1024 * 1024;
  static constexpr int64_t kStreamPrefetchBytes = 1024;
  static constexpr int64_t kOneStreamPrefetchBytes = kStreamPrefetchBytes;
  static constexpr PrefetchHint kStreamPrefetchHint = _MM_HINT_T0;
  static constexpr bool kX16 = false;
  static constexpr int kRowStreams = 4;
  static constexpr int64_t kLongRowBytes = 4096;
  static constexpr bool kOneRowAtOneToken = false;
  static constexpr int64_t kInt8InPlaceGemvRows = kGemvRows;
  static constexpr int64_t kKChunk = std::numeric_limits<int64_t>::max();  // never (see above)
  static constexpr int64_t kCodesInRegistersRows = kMr;
  static constexpr int64_t kCodeBlocksPrefetchBytes = 4096;
  static constexpr bool kCodesVbmi = false;  // AVX-512 only
  static constexpr bool kAmx = false;
  static constexpr bool kAmxNextTileToL2 = true;
};

}  // namespace
}  // namespace mixq::kernels::x86
