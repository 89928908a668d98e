// Panel packing for the float GEMM cores (float_gemm.hpp). Baseline ISA: the
// elements are moved as stored, never converted.
#include <emmintrin.h>  // SSE2: part of the x86-64 baseline

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/x86/fp8_nonfinite.hpp"
#include "kernels/x86/float_gemm.hpp"
#include "mixq/error.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

// Bytes per stored element (nvfp4: 0, half a byte).
int elem_bytes(PanelType type) {
  switch (type) {
    case PanelType::f32: return 4;
    case PanelType::bf16:
    case PanelType::f16: return 2;
    case PanelType::nvfp4: return 0;
    default: return 1;
  }
}

int64_t block_of(PanelType type) {
  return type == PanelType::mxfp8 ? 32 : type == PanelType::nvfp4 ? 16 : 0;
}

// Panels a pool thread packs between two rows_packed calls: 1024 rows, a
// few MiB of a large layer's file pages resident at a time per thread.
constexpr int64_t kReleasePanels = 64;

// `Rounds` rounds of "vectors 2i and 2i+1 = the low and high interleave of
// vectors i and i+8" over 16 vectors. Each round rotates the 4 bits of the
// vector index and the bits of the element index into each other; after
// four rounds of bytes the two indices have traded places, a 16x16 byte
// transpose.
template <int Rounds, class Lo, class Hi>
inline void interleave_rounds(__m128i x[16], Lo lo, Hi hi) {
  for (int round = 0; round < Rounds; ++round) {
    __m128i y[16];
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = lo(x[i], x[i + 8]);
      y[2 * i + 1] = hi(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
}

inline void transpose_bytes_16x16(__m128i x[16]) {
  interleave_rounds<4>(x, [](__m128i a, __m128i b) { return _mm_unpacklo_epi8(a, b); },
                       [](__m128i a, __m128i b) { return _mm_unpackhi_epi8(a, b); });
}

// One full panel (16 rows) of 1-byte elements, 16 k at a time; returns the
// first k not done. With `nonfinite_rows`, bit r is set for a row r whose
// codes here hold a non-finite one (`bits`: fp8_nonfinite.hpp).
int64_t pack_bytes_panel(const uint8_t* src, int64_t row_bytes, int64_t k, int64_t row, uint8_t* dst,
                         uint32_t* nonfinite_rows = nullptr, uint8_t bits = kE4m3NonFinite) {
  const __m128i mask = _mm_set1_epi8(static_cast<char>(bits));
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    __m128i x[16];
    for (int r = 0; r < 16; ++r) {
      x[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + r * row_bytes + c));
      if (nonfinite_rows && _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(x[r], mask), mask)) != 0)
        *nonfinite_rows |= 1u << r;
    }
    transpose_bytes_16x16(x);
    for (int s = 0; s < 16; ++s) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c + s) * row), x[s]);
  }
  return c;
}

}  // namespace

int64_t FloatPanels::row_bytes() const {
  return type == PanelType::nvfp4 ? 8 : 16 * elem_bytes(type);
}

namespace {

// Checks the arguments and fills everything but the data, scales and NaN list.
FloatPanels describe(PanelType type, int64_t row_bytes, int64_t n, int64_t k, const uint8_t* block_scales) {
  const int64_t block = block_of(type);
  if (block && (k % block != 0 || block_scales == nullptr))
    fail("float gemm: block-scaled panels need K % {} == 0 and the block scales (K = {})", block, k);
  const int eb = elem_bytes(type);
  const int64_t need = type == PanelType::nvfp4 ? k / 2 : k * eb;
  if (n < 0 || k < 0 || row_bytes < need)
    fail("float gemm: a weight row of {} bytes cannot hold {} elements", row_bytes, k);
  FloatPanels p;
  p.type = type;
  p.n = n;
  p.k = k;
  p.steps = is_fp8(type) ? k + k % 2 : k;  // FP8: an even count, the vdpbf16ps core reads them in pairs
  p.panels = (n + 15) / 16;
  p.blocks = block ? k / block : 0;
  return p;
}

// MXFP8 / NVFP4: the block scales per panel and block, 16 columns each: the
// layout of a one-byte panel, so the same 16x16 byte transposes (entry by
// entry this took seconds for a FLUX-sized MXFP8 checkpoint).
void pack_block_scales(FloatPanels& p, const uint8_t* block_scales) {
  if (!p.blocks || p.n <= 0) return;
  const auto [lo, hi] = std::minmax_element(block_scales, block_scales + p.n * p.blocks);
  p.scale_min = *lo;
  p.scale_max = *hi;
  p.scales.assign(static_cast<size_t>(p.panels * p.blocks * 16), 0u);
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t panel = begin; panel < end; ++panel) {
      const int64_t rows = std::min<int64_t>(16, p.n - panel * 16);
      const uint8_t* in = block_scales + panel * 16 * p.blocks;
      uint8_t* out = p.scales.data() + panel * p.blocks * 16;
      const int64_t done = rows == 16 ? pack_bytes_panel(in, p.blocks, p.blocks, 16, out) : 0;
      for (int64_t b = done; b < p.blocks; ++b)
        for (int64_t j = 0; j < rows; ++j) out[b * 16 + j] = in[j * p.blocks + b];
    }
  });
}

// The rows marked in `nonfinite` as NaN columns (E4M3 codes) or, for E5M2,
// as the panels that hold them.
void list_nonfinite(FloatPanels& p, const std::vector<char>& nonfinite) {
  for (int64_t r = 0; r < static_cast<int64_t>(nonfinite.size()); ++r) {
    if (!nonfinite[static_cast<size_t>(r)]) continue;
    if (p.type != PanelType::e5m2) p.nan_columns.push_back(r);
    else if (p.nonfinite_panels.empty() || p.nonfinite_panels.back() != r / 16) p.nonfinite_panels.push_back(r / 16);
  }
}

}  // namespace

FloatPanels pack_panels(PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k,
                        const uint8_t* block_scales, const RowsPacked& rows_packed) {
  FloatPanels p = describe(type, row_bytes, n, k, block_scales);
  const int eb = elem_bytes(type);
  const int64_t row = p.row_bytes();
  p.data.assign(static_cast<size_t>(p.panels * p.steps * row), 0u);  // the FP8 pad row stays 0
  const auto* src = static_cast<const uint8_t*>(w);
  // Columns with a non-finite code: an E4M3 NaN in a weight (e4m3, mxfp8)
  // or block scale (nvfp4), an E5M2 inf or NaN (e5m2), found while each
  // panel is packed (its rows are read only then).
  const bool scan = is_fp8(type) || type == PanelType::nvfp4;
  const uint8_t bits = nonfinite_bits(type);
  std::vector<char> nonfinite(scan ? static_cast<size_t>(n) : 0, 0);
  auto pack_panel = [&](int64_t panel) {
    uint8_t* dst = p.data.data() + panel * p.steps * row;
    if (eb == 1 && panel * 16 + 16 <= n) {  // a full panel of 1-byte elements: 16x16 blocks, then the k tail
      const int64_t c0 = pack_bytes_panel(src + panel * 16 * row_bytes, row_bytes, k, row, dst);
      for (int64_t j = 0; j < 16; ++j) {
        const uint8_t* in = src + (panel * 16 + j) * row_bytes;
        for (int64_t c = c0; c < k; ++c) dst[c * row + j] = in[c];
      }
      return;
    }
    for (int64_t j = 0; j < 16; ++j) {
      const int64_t r = panel * 16 + j;
      if (r >= n) break;
      const uint8_t* in = src + r * row_bytes;
      if (type == PanelType::nvfp4) {  // in: high nibble = even k; out: column 2i low, 2i+1 high
        for (int64_t c = 0; c < k; ++c) {
          const uint8_t code = (c % 2 == 0 ? in[c / 2] >> 4 : in[c / 2]) & 0x0F;
          dst[c * row + j / 2] |= static_cast<uint8_t>(code << (4 * (j % 2)));
        }
      } else if (eb == 1) {
        for (int64_t c = 0; c < k; ++c) dst[c * row + j] = in[c];
      } else {  // 2 or 4 bytes, a constant size per copy (a libc call per element otherwise)
        auto copy = [&](auto bytes) {
          for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * row + j * bytes, in + c * bytes, bytes);
        };
        if (eb == 2) copy(std::integral_constant<size_t, 2>{});
        else copy(std::integral_constant<size_t, 4>{});
      }
    }
  };
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    int64_t handed = begin;  // panels [begin, handed) were given to rows_packed
    for (int64_t panel = begin; panel < end; ++panel) {
      if (scan)
        for (int64_t r = panel * 16; r < std::min(n, panel * 16 + 16); ++r)
          nonfinite[static_cast<size_t>(r)] = type == PanelType::nvfp4
                                                  ? has_e4m3_nan(block_scales + r * p.blocks, p.blocks)
                                                  : has_nonfinite(src + r * row_bytes, k, bits);
      pack_panel(panel);
      if (rows_packed && (panel + 1 - handed == kReleasePanels || panel + 1 == end)) {
        rows_packed(handed * 16, std::min(n, (panel + 1) * 16));
        handed = panel + 1;
      }
    }
  });
  pack_block_scales(p, block_scales);
  list_nonfinite(p, nonfinite);
  return p;
}

FloatPanels float_panels_in_place(PanelType type, const void* w, int64_t row_bytes, int64_t n, int64_t k,
                                  const uint8_t* block_scales) {
  if (!is_fp8(type)) fail("float gemm: only FP8 and MXFP8 codes are read in place");
  FloatPanels p = describe(type, row_bytes, n, k, block_scales);
  p.rows = static_cast<const uint8_t*>(w);
  p.rows_stride = row_bytes;
  pack_block_scales(p, block_scales);
  return p;
}

ThreadLists::ThreadLists() = default;
ThreadLists::~ThreadLists() = default;
void ThreadLists::reset(int chunks) { lists.assign(static_cast<size_t>(chunks), {}); }

std::vector<int64_t> ThreadLists::merged(const std::vector<int64_t>& more) const {
  std::vector<int64_t> all = more;
  for (const std::vector<int64_t>& list : lists) all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

uint32_t pack_panel_steps(const FloatPanels& w, int64_t panel, int64_t s0, int64_t s1, uint8_t* dst) {
  s1 = std::min(s1, w.k);  // the pad row of an odd K is the caller's
  if (s1 <= s0) return 0;  // K = 0: nothing to pack (and dst may be null)
  const int64_t stride = w.rows_stride;
  const uint8_t bits = nonfinite_bits(w.type);
  uint32_t nonfinite_rows = 0;
  auto put = [&](int64_t j, int64_t c, uint8_t code) {
    dst[(c - s0) * 16 + j] = code;
    if (nonfinite(code, bits)) nonfinite_rows |= 1u << j;
  };
  if (panel * 16 + 16 <= w.n) {  // a full panel: 16x16 blocks, then the k tail
    const uint8_t* src = w.rows + panel * 16 * stride + s0;
    // The GEMM asks for a panel's K chunks in order: fetch the next one of
    // each row (16 scattered row pieces the hardware prefetchers miss).
    for (int64_t j = 0; j < 16; ++j)
      for (int64_t c = s1 - s0; c < 2 * (s1 - s0) && s0 + c < w.k; c += 64)
        _mm_prefetch(reinterpret_cast<const char*>(src + j * stride + c), _MM_HINT_T0);
    const int64_t done = s0 + pack_bytes_panel(src, stride, s1 - s0, 16, dst, &nonfinite_rows, bits);
    for (int64_t j = 0; j < 16; ++j)
      for (int64_t c = done; c < s1; ++c) put(j, c, w.rows[(panel * 16 + j) * stride + c]);
    return nonfinite_rows;
  }
  std::memset(dst, 0, static_cast<size_t>((s1 - s0) * 16));  // columns past n stay 0
  for (int64_t j = 0; panel * 16 + j < w.n; ++j)
    for (int64_t c = s0; c < s1; ++c) put(j, c, w.rows[(panel * 16 + j) * stride + c]);
  return nonfinite_rows;
}

}  // namespace mixq::kernels::x86
