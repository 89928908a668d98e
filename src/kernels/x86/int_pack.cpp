#include "kernels/x86/int_pack.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/x86/nibble_quads.hpp"
#include "util/parallel.hpp"

namespace mixq::kernels::x86 {
namespace {

void pack_scale_bias(const IntLayerDesc& d, PackedIntWeights& p) {
  p.scale.assign(static_cast<size_t>(p.panels * kPanelCols), 0.0f);
  std::memcpy(p.scale.data(), d.weight_scale, static_cast<size_t>(d.n) * sizeof(float));
  if (d.bias) {
    p.bias.assign(static_cast<size_t>(p.panels * kPanelCols), 0.0f);
    std::memcpy(p.bias.data(), d.bias, static_cast<size_t>(d.n) * sizeof(float));
  }
}

// Copies checkpoint rows into the panels 4 bytes at a time: each word of a
// row holds the 4 k (int8) or 8 k (nibbles, low first) of one panel step.
// `flip` is XORed into every byte (the panel's weight bias: +128 on an int8
// byte, +8 on a nibble flips its top bit), so steps past the row and columns
// past n, weight 0, hold `flip`. `regroup` is false for int8 rows.
void pack_rows(const uint8_t* rows, int64_t row_bytes, int64_t n, bool regroup, uint32_t flip,
               const PackedIntWeights& p, uint8_t* out) {
  const int64_t steps = row_bytes / 4, panel_steps = p.panel_bytes / 64;
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t pn = begin; pn < end; ++pn) {
      uint8_t* dst = out + pn * p.panel_bytes;
      for (int c = 0; c < kPanelCols; ++c) {
        const int64_t row = 16 * pn + c;
        int64_t s = 0;
        if (row < n) {
          const uint8_t* src = rows + row * row_bytes;
          for (; s < steps; ++s) {
            const uint32_t word = load_u32(src + 4 * s);
            store_u32(dst + s * 64 + 4 * c, (regroup ? regroup_nibble_quad<false>(word) : word) ^ flip);
          }
        }
        for (; s < panel_steps; ++s) store_u32(dst + s * 64 + 4 * c, flip);
      }
    }
  });
}

// Any other shape, one weight at a time (int_desc_weight): int8 with K % 4
// != 0, and int4 values given as `weight`.
void pack_elements(const IntLayerDesc& d, const PackedIntWeights& p, uint8_t* out) {
  auto w = [&](int64_t n, int64_t k) -> int {
    return (n < d.n && k < d.k) ? int_desc_weight(d, n, k) : 0;
  };
  for (int64_t pn = 0; pn < p.panels; ++pn) {
    uint8_t* dst = out + pn * p.panel_bytes;
    if (!p.int4) {
      for (int64_t kk = 0; kk < p.kp / 4; ++kk)
        for (int c = 0; c < kPanelCols; ++c)
          for (int t = 0; t < 4; ++t)
            dst[kk * 64 + 4 * c + t] = static_cast<uint8_t>(w(16 * pn + c, 4 * kk + t) + 128);
    } else {
      for (int64_t k8 = 0; k8 < p.kp / 8; ++k8)
        for (int c = 0; c < kPanelCols; ++c)
          for (int t = 0; t < 4; ++t) {
            const int lo = w(16 * pn + c, 8 * k8 + t) + 8;
            const int hi = w(16 * pn + c, 8 * k8 + 4 + t) + 8;
            dst[k8 * 64 + 4 * c + t] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
          }
    }
  }
}

// The "codes in k blocks" layout of int_pack.hpp from checkpoint rows
// (row_bytes = K / 2, low nibble = even k); columns past n hold code 0.
// Per 16 stored bytes (k 32b .. 32b + 31): the low and high nibbles
// interleaved are the codes in k order, the first 16 in the new low
// nibbles, the last 16 in the high ones (values < 16: a 16-bit shift by 4
// keeps each in its byte).
void pack_code_blocks(const uint8_t* rows, int64_t row_bytes, int64_t n, const PackedIntWeights& p, uint8_t* out) {
  const int64_t blocks = p.kp / 32, stream = p.kp * 4;
  const __m128i low4 = _mm_set1_epi8(0x0F);
  util::parallel_for(p.panels, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t pn = begin; pn < end; ++pn)
      for (int c = 0; c < kPanelCols; ++c) {
        const int64_t row = 16 * pn + c;
        const int v = c / 8, j = c % 4, half = (c % 8) / 4;
        uint8_t* dst = out + pn * p.panel_bytes + v * stream + 32 * j + 16 * half;
        const uint8_t* src = row < n ? rows + row * row_bytes : nullptr;
        for (int64_t b = 0; b < blocks; ++b, dst += 128) {
          __m128i packed = _mm_setzero_si128();
          if (src) {
            const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * b));
            const __m128i even = _mm_and_si128(raw, low4), odd = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
            packed = _mm_or_si128(_mm_unpacklo_epi8(even, odd), _mm_slli_epi16(_mm_unpackhi_epi8(even, odd), 4));
          }
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), packed);
        }
      }
  });
}

// The codes layouts of int_pack.hpp (K is a multiple of 8: no K padding).
void pack_codes(const IntLayerDesc& d, PackedIntWeights& p, uint8_t* out) {
  const IntCodes& c = *d.codes;
  p.group_size = c.group_size;
  p.groups = d.k / c.group_size;
  std::memcpy(p.levels, c.levels, sizeof(p.levels));
  if (p.codes_k_blocks) pack_code_blocks(c.codes, d.k / 2, d.n, p, out);
  else pack_rows(c.codes, d.k / 2, d.n, true, 0, p, out);  // raw codes, padding code 0
  const size_t count = static_cast<size_t>(p.panels * p.groups * kPanelCols);
  auto each_s_rel = [&](auto&& put) {
    for (int64_t pn = 0; pn < p.panels; ++pn)
      for (int64_t g = 0; g < p.groups; ++g)
        for (int col = 0; col < kPanelCols; ++col) {
          const int64_t n = 16 * pn + col;
          if (n < d.n) put((pn * p.groups + g) * kPanelCols + col, n * p.groups + g);
        }
  };
  if (c.s_rel_e4m3) {
    p.s_rel_e4m3.assign(count, 0);  // E4M3 byte 0 is +0.0
    // The k-block kernels address a table as code_lut + 8 · (stored byte)
    // when every scale is positive (bytes < 0x80, as quantizers write them).
    const int64_t stored = d.n * p.groups;
    p.s_rel_doubled =
        p.codes_k_blocks && std::all_of(c.s_rel_e4m3, c.s_rel_e4m3 + stored, [](uint8_t b) { return b < 0x80; });
    const int factor = p.s_rel_doubled ? 2 : 1;
    each_s_rel([&](int64_t to, int64_t from) {
      p.s_rel_e4m3[static_cast<size_t>(to)] = static_cast<uint8_t>(factor * c.s_rel_e4m3[from]);
    });
    p.code_lut.assign(256 * 16, static_cast<int8_t>(0x80));  // weight 0
    for (int b = 0; b < 256; ++b) {
      const float s = e4m3_to_f32(static_cast<uint8_t>(b));
      if (!std::isfinite(s)) continue;  // NaN bytes: rejected by the format's validation
      for (int code = 0; code < 16; ++code)
        p.code_lut[static_cast<size_t>(16 * b + code)] = static_cast<int8_t>(c.decode(static_cast<uint8_t>(code), s) ^ 0x80);
    }
  } else {
    p.s_rel_f32.assign(count, 0.0f);
    each_s_rel([&](int64_t to, int64_t from) {
      std::memcpy(&p.s_rel_f32[static_cast<size_t>(to)], static_cast<const char*>(c.s_rel_f32) + 4 * from, 4);
    });
  }
  pack_scale_bias(d, p);
}

}  // namespace

PackedIntWeights pack_int_weights(const IntLayerDesc& d, bool k_blocks) {
  PackedIntWeights p;
  p.n = d.n;
  p.k = d.k;
  p.kp = (d.k + 7) / 8 * 8;
  p.panels = ((d.n + kPanelCols - 1) / kPanelCols + 3) / 4 * 4;
  p.int4 = d.int4_weights;
  p.codes = d.codes != nullptr;
  p.codes_k_blocks = k_blocks && p.codes && d.codes->group_size % 16 == 0 && d.k % 32 == 0;
  p.weight_bias = p.int4 ? 8 : 128;
  p.panel_bytes = p.int4 || p.codes ? p.kp * kPanelCols / 2 : p.kp * kPanelCols;
  const bool int8_rows = !p.int4 && !p.codes && d.weight;
  const bool int4_rows = p.int4 && !d.weight && d.weight_nibbles && d.k % 8 == 0;
  if (d.weight_in_place && (int8_rows || int4_rows)) {
    p.rows = int8_rows ? reinterpret_cast<const uint8_t*>(d.weight) : d.weight_nibbles;
    p.row_bytes = int8_rows ? d.k : d.k / 2;
    pack_scale_bias(d, p);
    return p;
  }
  p.data.assign(static_cast<size_t>(p.panels * p.panel_bytes + 64), 0);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p.data.data());
  p.aligned = p.data.data() + ((64 - addr % 64) % 64);
  uint8_t* out = const_cast<uint8_t*>(p.aligned);
  if (p.codes) {
    pack_codes(d, p, out);
    return p;
  }
  // Rows that are whole words go word by word; other K take the element loop.
  if (!p.int4 && d.weight && d.k % 4 == 0)
    pack_rows(reinterpret_cast<const uint8_t*>(d.weight), d.k, d.n, false, 0x80808080u, p, out);
  else if (p.int4 && !d.weight && d.weight_nibbles && d.k % 8 == 0)
    pack_rows(d.weight_nibbles, d.k / 2, d.n, true, 0x88888888u, p, out);
  else
    pack_elements(d, p, out);
  pack_scale_bias(d, p);
  return p;
}

}  // namespace mixq::kernels::x86
