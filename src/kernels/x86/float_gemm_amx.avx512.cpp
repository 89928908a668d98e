// The FP8 / MXFP8 GEMM on AMX-BF16 tiles (float_gemm.hpp, float_gemm_amx_bf16).
//
// Threads take blocks of token rows (their bf16 activations, in the A tile
// layout, stay in L2, as the integer kernels' blocks do). Per block and pair
// of weight panels, both panels are decoded over the full K into a thread
// buffer of bf16 k-pair rows, exactly as the vdpbf16ps core widens them in
// registers (FloatIo<Avx512>::fp8_pair_codes, MXFP8 block scales multiplied
// in: exact; one-k panels are paired on the way), which is the B tile
// layout: 16 k-pair rows of 16 columns = 1 KiB per tile. Every 32 rows of
// the block then run the whole K (amx::gemm_bf16_32x32) and the epilogue
// y = alpha·acc (+ bias), mul then add. So the weight stays 1 byte per
// element in memory; it is decoded once per block of rows.
#include <algorithm>

#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/float_gemm_impl.hpp"
#include "mixq/threads.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// Panel p of a packed or in-place weight as `tile_pairs` bf16 k-pair rows at
// out (the activation's lda: >= its pair_steps(), zero past them): rows 2t
// and 2t + 1 interleaved byte by byte (a missing last odd row reads as
// zeros), the 16 columns' [k, k+1] pairs. `codes` is a
// scratch of w.steps · w.row_bytes() bytes for in-place weights; returns the
// rows whose E4M3 codes hold a NaN there (in place only; packed weights list
// them).
template <PanelType T>
uint32_t decode_panel(const FloatPanels& w, int64_t p, int64_t tile_pairs, uint8_t* codes, uint16_t* out) {
  constexpr bool kE4m3 = T != PanelType::e5m2;
  const int64_t row = w.row_bytes(), pairs = w.pair_steps();
  uint32_t nan_rows = 0;
  if (w.in_place()) {
    nan_rows = pack_panel_steps_zmm(w, p, 0, w.k, codes);
    if constexpr (!kE4m3) nan_rows = 0;  // E5M2's inf and NaN codes widen to themselves
  }
  const uint8_t* src = w.in_place() ? codes : w.data.data() + p * w.steps * row;
  auto load16 = [&](int64_t s) {
    return s < w.k ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + s * 16)) : _mm_setzero_si128();
  };
  alignas(64) float sc[32];
  for (int64_t t = 0; t < pairs; ++t) {
    const float* scale = nullptr;
    if constexpr (T == PanelType::mxfp8) {
      if (t % 16 == 0) {  // a 32-block of k is 16 k-pairs
        const uint8_t* e = w.scales.data() + (p * w.blocks + t / 16) * 16;
        for (int c = 0; c < 16; ++c) sc[2 * c] = sc[2 * c + 1] = std::bit_cast<float>(static_cast<uint32_t>(e[c]) << 23);
      }
      scale = sc;
    }
    const __m128i even = load16(2 * t), odd = load16(2 * t + 1);
    const __m256i pair_row = _mm256_set_m128i(_mm_unpackhi_epi8(even, odd), _mm_unpacklo_epi8(even, odd));
    _mm512_store_si512(out + 32 * t, FloatIo<Avx512>::fp8_pair_codes<kE4m3>(pair_row, scale));
  }
  std::memset(out + 32 * pairs, 0, static_cast<size_t>((tile_pairs - pairs) * 64));
  return nan_rows;
}

template <PanelType T>
void run_amx(const uint32_t* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha, const float* bias,
             float* y, int64_t block_bytes, ThreadLists& found) {
  // Activation rows per block: about block_bytes of bf16 pairs, a multiple of 32.
  const int64_t n = w.n, chunks = lda / 16, row_bytes = lda * 4;
  const int64_t mc = util::balanced_block_rows(m, std::max<int64_t>(1, block_bytes / row_bytes), 32, mixq::num_threads());
  const int64_t nblocks = (m + mc - 1) / mc;
  util::parallel_for(
      nblocks, 1, [&](int chunks_of_work) { found.reset(chunks_of_work); },
      [&](int64_t b0, int64_t b1, int thread) {
        thread_local std::vector<uint16_t> panels;  // two decoded panels, 64-byte aligned
        thread_local std::vector<uint8_t> codes;    // in place: one panel's packed codes
        const size_t panel_elems = static_cast<size_t>(chunks * 16 * 32);
        if (panels.size() < 2 * panel_elems + 32) panels.resize(2 * panel_elems + 32);
        const size_t code_bytes = static_cast<size_t>(w.steps * w.row_bytes());
        if (w.in_place() && codes.size() < code_bytes) codes.resize(code_bytes);
        uint16_t* base = panels.data() + (32 - reinterpret_cast<uintptr_t>(panels.data()) % 64 / 2) % 32;
        uint16_t* bp[2] = {base, base + panel_elems};
        alignas(64) float acc[32 * 32];
        std::vector<int64_t>& nan_columns = found.of(thread);
        amx::configure();
        for (int64_t bi = b0; bi < b1; ++bi) {
          const int64_t row0 = bi * mc, rows = std::min(mc, m - row0);
          for (int64_t p = 0; p < w.panels; p += 2) {
            for (int j = 0; j < 2; ++j) {
              if (p + j >= w.panels) {
                std::memset(bp[j], 0, panel_elems * 2);
                continue;
              }
              const uint32_t nan_rows = decode_panel<T>(w, p + j, lda, codes.data(), bp[j]);
              if (bi == b0)
                for (int c = 0; c < 16; ++c)
                  if (nan_rows >> c & 1u) nan_columns.push_back((p + j) * 16 + c);
            }
            const int64_t cols = std::min<int64_t>(32, n - p * 16);
            for (int64_t r0 = 0; r0 < rows; r0 += 32) {
              amx::gemm_bf16_32x32(amx::ATiles::tile_layout(a + (row0 + r0) * lda, row_bytes), bp[0], bp[1], chunks,
                                   acc, 32);
              const int mr = static_cast<int>(std::min<int64_t>(32, rows - r0));
              const __m512 va = _mm512_set1_ps(alpha);
              for (int r = 0; r < mr; ++r) {
                float* yr = y + (row0 + r0 + r) * n + p * 16;
                for (int h = 0; h < 2 && 16 * h < cols; ++h) {
                  __m512 v = _mm512_mul_ps(_mm512_load_ps(acc + 32 * r + 16 * h), va);
                  const __mmask16 mask = Avx512::mask(cols - 16 * h);
                  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias + p * 16 + 16 * h));
                  _mm512_mask_storeu_ps(yr + 16 * h, mask, v);
                }
              }
            }
          }
        }
        amx::release();
      });
}

}  // namespace

void float_gemm_amx_bf16(const uint32_t* a, int64_t lda, int64_t m, const FloatPanels& w, float alpha,
                         const float* bias, float* y, int64_t block_bytes) {
  if (m <= 0 || w.n <= 0) return;
  if (lda % 16 != 0 || lda < w.pair_steps() || reinterpret_cast<uintptr_t>(a) % 64 != 0)
    fail("float gemm: AMX activation rows must be 64-byte aligned multiples of 16 pairs >= {}", w.pair_steps());
  const bool scaled = w.type == PanelType::e4m3 || w.type == PanelType::mxfp8;  // value·2^-8 (float_gemm.hpp)
  const float al = scaled ? alpha * 256.0f : alpha;
  ThreadLists found;
  switch (w.type) {
    case PanelType::e4m3: run_amx<PanelType::e4m3>(a, lda, m, w, al, bias, y, block_bytes, found); break;
    case PanelType::e5m2: run_amx<PanelType::e5m2>(a, lda, m, w, al, bias, y, block_bytes, found); break;
    case PanelType::mxfp8: run_amx<PanelType::mxfp8>(a, lda, m, w, al, bias, y, block_bytes, found); break;
    default: fail("float gemm: the AMX bf16 core takes FP8 / MXFP8 panels");
  }
  for (const int64_t c : found.merged(w.nan_columns))
    for (int64_t r = 0; r < m; ++r) y[r * w.n + c] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace mixq::kernels::x86
