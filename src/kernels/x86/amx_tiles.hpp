#pragma once
// AMX tile operations for the integer GEMM (int_gemm_impl.hpp, kAmx) and
// the FP8 / MXFP8 bf16 GEMM (float_gemm_amx.avx512.cpp). Defined in
// amx_tiles.avx512amx.cpp, the one object compiled with -mamx-tile
// -mamx-int8 -mamx-bf16; call only where best_isa() is Isa::amx.
//
// Tile registers (one fixed configuration, rows × bytes per row):
//   tmm0-3  C: 16 tokens × 16 columns of int32 (64 bytes)
//   tmm4-5  A: 16 tokens × 64 k of signed codes, one token row each
//   tmm6-7  B: 16 k-quads × 16 columns × 4 bytes, exactly 16 steps of a
//           weight panel in the int8 layout (int_pack.hpp: step kk, byte
//           4c + t = w[c][4kk + t] + 128): a B tile is 1 KiB of a panel.
// tdpbsud multiplies signed A bytes by unsigned B bytes into exact int32
// sums (wrapping like vpdpbusd), so the result is the VNNI kernels' sum.
// bf16 uses the same shapes: A 16 tokens × 32 bf16 (16 k-pairs), B 16
// k-pairs × 16 columns × [k, k+1], C 16 × 16 f32.
#include <cstdint>

namespace mixq::kernels::x86::amx {

// Loads the configuration above on the calling thread (each task of a pool
// thread calls it first: another library on the thread may have changed it).
void configure();
// Returns the calling thread's tiles to their initial state.
void release();

// Where the A tiles of a 32-token block lie: chunk i (64 k bytes) of tokens
// 0-15 at rows0 + i·chunk_stride, of tokens 16-31 at rows16 + i·chunk_stride,
// one token row every row_stride bytes.
struct ATiles {
  const void* rows0;
  const void* rows16;
  int64_t row_stride;
  int64_t chunk_stride;

  // 32 plain token rows of row_bytes each, from a.
  static ATiles token_rows(const void* a, int64_t row_bytes) {
    return {a, static_cast<const char*>(a) + 16 * row_bytes, row_bytes, 64};
  }
  // The tile layout of the AMX kernels' activations (rows of row_bytes, a
  // multiple of 64): each chunk of 16 tokens is 1 KiB in one piece, so a
  // tile load reads 16 consecutive cache lines, which the prefetchers follow;
  // the 16 tokens from a take 16·row_bytes.
  static ATiles tile_layout(const void* a, int64_t row_bytes) {
    return {a, static_cast<const char*>(a) + 16 * row_bytes, 64, 1024};
  }
};

// Lines another block will read next, asked into L2 while this one runs
// (prefetcht1): lines_per_chunk cache lines per chunk of K, consecutive
// from `next`. Prefetches never fault; {nullptr, 0} asks for nothing.
struct L2Ahead {
  const void* next = nullptr;
  int64_t lines_per_chunk = 0;

  // Call number `call` of `calls` gemm calls of `chunks` chunks each, which
  // between them ask the `bytes` from `next` into L2, spread evenly.
  static L2Ahead share(const void* next, int64_t bytes, int64_t calls, int64_t chunks, int64_t call) {
    const int64_t lines = (bytes + 63) / 64, per_chunk = (lines + calls * chunks - 1) / (calls * chunks);
    const int64_t from = call * chunks * per_chunk;
    if (from >= lines) return {};
    return {static_cast<const char*>(next) + 64 * from, per_chunk};
  }
};

// c[r][j] (int32, row stride ldc elements) = Σ_k a[r][k] · b_j[k] for
// r < 32 (the token rows of `a`) and the 32 columns j of the panels b0
// (columns 0-15) and b1 (16-31), over `chunks` chunks of 64 k.
// a: 32 rows, each readable for 64·chunks bytes; b0, b1: 1 KiB per chunk.
void gemm_32x32(const ATiles& a, const uint8_t* b0, const uint8_t* b1, int64_t chunks, int32_t* c, int64_t ldc,
                L2Ahead ahead = {});

// The same blocking for bf16 (tdpbf16ps): a holds 32 token rows of bf16
// k-pairs (16 pairs = 64 bytes per chunk), b0 / b1 16 k-pair rows of 16
// columns' pairs per chunk (1 KiB), c f32. Products of bf16 values are
// exact; the f32 accumulation order inside a tile is the hardware's.
void gemm_bf16_32x32(const ATiles& a, const void* b0, const void* b1, int64_t chunks, float* c, int64_t ldc,
                     L2Ahead ahead = {});

// The calibration loop: iters / 64 rounds of 12 tdpbsud (2·16·16·64 ops
// each) on tiles that stay in registers (a tdpbsud takes ~16 cycles: 1/64
// keeps the run as long as the vector loops' `iters`); configures and
// releases the tiles.
void peak_loop(long iters);
// The same loop on tdpbf16ps (2·16·16·32 FLOP each).
void peak_loop_bf16(long iters);

}  // namespace mixq::kernels::x86::amx
