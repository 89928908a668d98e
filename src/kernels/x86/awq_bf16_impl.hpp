#pragma once
// The vdpbf16ps core of the AWQ W4A16 linear (awq_w4a16.hpp: awq_avx512) with
// its tuning T as a template parameter: awq_w4a16.avx512.cpp compiles it with
// AwqBf16Tile, bench/isa/awq_tunings.avx512.cpp with variations of it. AVX-512
// BF16 only (no AVX2 twin).
//
// A register block is R rows x CB panels of 16 columns: per 64-group CB·R
// vdpbf16ps accumulators (one chain each, k pairs in order), then per group
// out += acc·scale + Σx·zero. Small M (<= kSmallM) splits the panels over the
// threads, kStreamPanels at a time, each streamed once from DRAM with software
// prefetch of its codes kStreamPrefetchBytes ahead and of the group's scale /
// zero rows kParamGroupsAhead groups ahead (rows N·2 or N·4 bytes apart, which
// no hardware prefetcher follows); larger M splits rows in chunks of
// kLargeRows. The tuning changes which sums run side by side, never the
// operations of one output: every T gives the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/stream_prefetch.hpp"
#include "kernels/x86/awq_w4a16_impl.hpp"
#include "mixq/numeric.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// g++ 12's -Wmaybe-uninitialized inside its AVX-512 headers (the pass-through
// operand of unmasked intrinsics), as in awq_w4a16_impl.hpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Chosen on Zen 4 (bench_awq_tunings, BENCHMARKS.md "Zen 4, third session"):
// one or two rows take 4 panels (4 or 8 independent chains); more rows, 4 at
// a time, 2 panels (8 accumulators and 8 outputs in zmm).
struct AwqBf16Tile {
  static constexpr int64_t kSmallM = 16, kStreamPanels = 4, kLargeRows = 32;
  static constexpr int64_t kStreamPrefetchBytes = kernels::kStreamPrefetchBytes, kParamGroupsAhead = 2;
  static constexpr int panels_for(int rows) { return rows <= 2 ? 4 : 2; }
};

struct AwqBf16Acts {
  int64_t k2 = 0, groups = 0;
  std::vector<uint32_t> pairs;  // [M][K/2] bf16 pairs (x[2j] low, x[2j+1] high)
  std::vector<float> sums;      // [M][groups] fp32 Σ x over the group
};

// 16 stored bytes -> 16 lanes of bf16 pairs (q_lo − 8, q_hi − 8). A byte b
// zero-extended to a dword times 0x1001 (vpmaddwd: the high word is 0) is b +
// (b << 12): word 1 holds b >> 4 = q_hi, word 0's low five bits b & 31 =
// q_lo + 16·(q_hi & 1). vpermw reads only those five bits of each word, and
// the table repeats its 16 entries at 16..31. (One instruction fewer than a
// shift and a vpternlogd keeping the low nibble; on Zen 4 both ran at the
// same speed.)
inline __m512i bf16_decode(const uint8_t* p, __m512i table) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_permutexvar_epi16(_mm512_madd_epi16(v, _mm512_set1_epi32(0x1001)), table);
}

template <class T, int R, int CB, bool Stream>
void bf16_block(const AwqPacked& w, const AwqBf16Acts& a, int64_t m0, int64_t p0, __m512i table, float* y) {
  const int64_t half = w.k / 2, np = w.panels * 16, steps = w.group / 2;
  __m512 out[R][CB];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < CB; ++c) out[r][c] = _mm512_setzero_ps();
  const StoredView scale(w.scale), zeros(w.zeros);
  const int64_t elem = static_cast<int64_t>(w.scale.element_bytes());
  for (int64_t g = 0; g < a.groups; ++g) {
    if constexpr (Stream && T::kParamGroupsAhead > 0) {
      if (g + T::kParamGroupsAhead < a.groups) {
        const int64_t at = (g + T::kParamGroupsAhead) * np + p0 * 16;
        prefetch_lines(scale.at(at), CB * 16 * elem);
        prefetch_lines(zeros.at(at), CB * 16 * elem);
      }
    }
    __m512 acc[R][CB];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t j = g * steps; j < (g + 1) * steps; ++j) {
      if constexpr (Stream && T::kStreamPrefetchBytes > 0) {
        if ((j & 3) == 0) {  // one prefetch per 64-byte line of each panel's codes
          const char* at = reinterpret_cast<const char*>(w.codes.data() + (p0 * half + j) * 16);
          for (int c = 0; c < CB; ++c) _mm_prefetch(at + c * half * 16 + T::kStreamPrefetchBytes, _MM_HINT_T0);
        }
      }
      __m512i wv[CB];
      for (int c = 0; c < CB; ++c) wv[c] = bf16_decode(w.codes.data() + ((p0 + c) * half + j) * 16, table);
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_set1_epi32(static_cast<int>(a.pairs[(m0 + r) * a.k2 + j]));
        for (int c = 0; c < CB; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)wv[c], (__m512bh)xv);
      }
    }
    for (int c = 0; c < CB; ++c) {
      const int64_t col = (p0 + c) * 16;
      const __m512 s = scale.load<Avx512>(g * np + col);
      const __m512 z = zeros.load<Avx512>(g * np + col);
      for (int r = 0; r < R; ++r) {
        out[r][c] = _mm512_fmadd_ps(acc[r][c], s, out[r][c]);
        out[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(a.sums[(m0 + r) * a.groups + g]), z, out[r][c]);
      }
    }
  }
  for (int c = 0; c < CB; ++c) {
    const int64_t col = (p0 + c) * 16;
    const __mmask16 mask = Avx512::mask(w.n - col);
    for (int r = 0; r < R; ++r) {
      __m512 v = out[r][c];
      if (!w.bias.empty()) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, w.bias.data() + col));
      _mm512_mask_storeu_ps(y + (m0 + r) * w.n + col, mask, v);
    }
  }
}

template <class T, int R, bool Stream>
void bf16_rows(const AwqPacked& w, const AwqBf16Acts& a, int64_t m0, int64_t p_begin, int64_t p_end, __m512i table,
               float* y) {
  constexpr int CB = T::panels_for(R);
  int64_t p = p_begin;
  for (; p + CB <= p_end; p += CB) bf16_block<T, R, CB, Stream>(w, a, m0, p, table, y);
  for (; p < p_end; ++p) bf16_block<T, R, 1, Stream>(w, a, m0, p, table, y);
}

template <class T, bool Stream>
void bf16_run(const AwqPacked& w, const AwqBf16Acts& a, int64_t m_begin, int64_t m_end, int64_t p_begin,
              int64_t p_end, float* y) {
  alignas(64) uint16_t words[32] = {};
  for (int i = 0; i < 32; ++i) {
    const float v = static_cast<float>(i % 16 - 8);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    words[i] = static_cast<uint16_t>(bits >> 16);  // exact: small integers
  }
  const __m512i table = _mm512_load_si512(words);
  int64_t m = m_begin;
  for (; m + 4 <= m_end; m += 4) bf16_rows<T, 4, Stream>(w, a, m, p_begin, p_end, table, y);
  switch (m_end - m) {
    case 3: bf16_rows<T, 3, Stream>(w, a, m, p_begin, p_end, table, y); break;
    case 2: bf16_rows<T, 2, Stream>(w, a, m, p_begin, p_end, table, y); break;
    case 1: bf16_rows<T, 1, Stream>(w, a, m, p_begin, p_end, table, y); break;
    default: break;
  }
}

// The whole linear; always inlined into its entry point, so each build of it
// (library, bench variants) is one function.
template <class T = AwqBf16Tile>
__attribute__((always_inline)) inline void awq_bf16(const AwqPacked& w, const float* x, int64_t m, float* y) {
  AwqBf16Acts a;
  a.k2 = w.k / 2;
  a.groups = w.k / w.group;
  a.pairs.resize(static_cast<size_t>(m * a.k2));
  a.sums.resize(static_cast<size_t>(m * a.groups));
  util::parallel_for(m, 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * w.k;
      uint16_t* dst = reinterpret_cast<uint16_t*>(a.pairs.data() + r * a.k2);
      int64_t i = 0;
      for (; i + 16 <= w.k; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(xr + i)));
      if (i < w.k) {
        const __mmask16 mask = Avx512::mask(w.k - i);
        _mm256_mask_storeu_epi16(dst + i, mask, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, xr + i)));
      }
      // The zero-point term sums the same bf16-rounded x the dot multiplies,
      // so the layer is exactly a linear over bf16(x) (f32 sums in k order).
      for (int64_t g = 0; g < a.groups; ++g) {
        float s = 0.0f;
        for (int64_t j = g * w.group; j < (g + 1) * w.group; ++j) s += bf16_to_f32(dst[j]);
        a.sums[r * a.groups + g] = s;
      }
    }
  });
  if (m <= T::kSmallM) {
    const int64_t slices = (w.panels + T::kStreamPanels - 1) / T::kStreamPanels;
    util::parallel_for(slices, 1, [&](int64_t begin, int64_t end, int) {
      bf16_run<T, true>(w, a, 0, m, begin * T::kStreamPanels, std::min(end * T::kStreamPanels, w.panels), y);
    });
  } else {
    // Chunks of at most kLargeRows rows, as many per thread (whole chunks
    // left M = 17..32 on one thread: M = 32 took 0.9x the time of M = 64).
    util::parallel_for_row_blocks(m, T::kLargeRows, 4,
                                  [&](int64_t r0, int64_t r1) { bf16_run<T, false>(w, a, r0, r1, 0, w.panels, y); });
  }
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace mixq::kernels::x86
