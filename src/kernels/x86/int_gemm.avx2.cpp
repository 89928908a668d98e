// AVX2 integer linear (layouts and roles: int_pack.hpp). Same structure as the
// AVX-512 kernel with ymm registers: a 6-token x 16-column tile (12 ymm
// accumulators, 2 weight registers, 1 broadcast; 16 registers in all).
// With AVX-VNNI the inner product is `vpdpbusd ymm`. Without it, u8·s8 pairs
// are summed with vpmaddubsw, which saturates at 16 bits: int4 weights (<= 15)
// are safe (15·128·2 < 2^15); int8 weights are split into nibbles, each
// nibble's products summed separately and recombined in int32 as lo + 16·hi,
// which is exact.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu.hpp"
#include "kernels/hadamard_fast.hpp"
#include "util/parallel.hpp"
#include "kernels/x86/int_pack.hpp"
#include "mixq/threads.hpp"

namespace mixq::kernels {
namespace x86 {
namespace {

constexpr int64_t kGemvRows = 24;

struct ActBlock2 {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
  std::vector<float> tmp;
};

// Q8row / Q4row of one row, the same operations as quant::q8row / q4row.
void quantize_row2(const float* x, int64_t k, int64_t kp, ActQuant act, int8_t* panel, int r,
                   float* scale_out, int32_t* sum_out) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 amax = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), amax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  float a = 0.0f;
  for (float v : lanes) a = std::max(a, v);
  for (; i < k; ++i) a = std::max(a, std::fabs(x[i]));
  float s, lo, hi;
  if (act == ActQuant::q8row) {
    s = std::max(a / 127.0f, 1e-30f);
    lo = -128.0f;
    hi = 127.0f;
  } else {
    s = std::max(a, 1e-10f) / 7.0f;
    lo = -7.0f;
    hi = 7.0f;
  }
  *scale_out = s;
  const __m256 vs = _mm256_set1_ps(s), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int32_t sum = 0;
  alignas(32) int32_t q[8];
  alignas(32) float tail[8];
  for (i = 0; i < kp; i += 8) {
    const float* src = x + i;
    if (i + 8 > k) {
      std::fill(tail, tail + 8, 0.0f);
      if (i < k) std::copy(x + i, x + k, tail);
      src = tail;
    }
    __m256 qv = _mm256_div_ps(_mm256_loadu_ps(src), vs);
    const __m256 ordered = _mm256_cmp_ps(qv, qv, _CMP_ORD_Q);
    qv = _mm256_min_ps(_mm256_max_ps(qv, vlo), vhi);
    const __m256i qi = _mm256_and_si256(_mm256_cvtps_epi32(qv), _mm256_castps_si256(ordered));
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), qi);
    for (int j = 0; j < 8; ++j) {
      sum += q[j];
      panel[((i + j) / 4 * kMr + r) * 4 + (i + j) % 4] = static_cast<int8_t>(q[j]);
    }
  }
  *sum_out = sum;
}

// acc += Σ_4 w_u8 · x_s8 per int32 lane.
template <bool Vnni, bool Small>
inline __m256i dp(__m256i acc, __m256i w, __m256i x) {
  if constexpr (Vnni) {
    return _mm256_dpbusd_avx_epi32(acc, w, x);
  } else if constexpr (Small) {  // w <= 15: vpmaddubsw cannot saturate
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
  } else {
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(w, m), x);
    const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), m), x);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_set1_epi16(1)),
                                                  _mm256_madd_epi16(hi, _mm256_set1_epi16(16))));
  }
}

#define MIXQ_ROW2(r)                                      \
  if constexpr (MR > r) {                                 \
    int32_t word;                                         \
    std::memcpy(&word, ak + 4 * r, 4);                    \
    const __m256i x = _mm256_set1_epi32(word);            \
    c##r##0 = dp<Vnni, Int4>(c##r##0, w0, x);             \
    c##r##1 = dp<Vnni, Int4>(c##r##1, w1, x);             \
  }
#define MIXQ_ROWS2 MIXQ_ROW2(0) MIXQ_ROW2(1) MIXQ_ROW2(2) MIXQ_ROW2(3) MIXQ_ROW2(4) MIXQ_ROW2(5)
#define MIXQ_STORE2(r)                                                              \
  if constexpr (MR > r) {                                                           \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16), c##r##0);        \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * 16 + 8), c##r##1);    \
  }

// One 16-column weight panel over MR tokens, full K; out[r][16] int32.
template <int MR, bool Int4, bool Vnni>
void micro2(const int8_t* a, int64_t kp, const uint8_t* b, int32_t* out) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if constexpr (!Int4) {
    for (int64_t kk = 0; kk < kp / 4; ++kk) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + kk * 64));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + kk * 64 + 32));
      const int8_t* ak = a + kk * kMr * 4;
      MIXQ_ROWS2
    }
  } else {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (int64_t k8 = 0; k8 < kp / 8; ++k8) {
      const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + k8 * 64));
      const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + k8 * 64 + 32));
      {
        const __m256i w0 = _mm256_and_si256(v0, mask), w1 = _mm256_and_si256(v1, mask);
        const int8_t* ak = a + 2 * k8 * kMr * 4;
        MIXQ_ROWS2
      }
      {
        const __m256i w0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask);
        const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask);
        const int8_t* ak = a + (2 * k8 + 1) * kMr * 4;
        MIXQ_ROWS2
      }
    }
  }
  MIXQ_STORE2(0) MIXQ_STORE2(1) MIXQ_STORE2(2) MIXQ_STORE2(3) MIXQ_STORE2(4) MIXQ_STORE2(5)
}
#undef MIXQ_ROW2
#undef MIXQ_ROWS2
#undef MIXQ_STORE2

using Micro2 = void (*)(const int8_t*, int64_t, const uint8_t*, int32_t*);

template <bool Int4, bool Vnni>
Micro2 micro2_for(int rows) {
  switch (rows) {
    case 1: return micro2<1, Int4, Vnni>;
    case 2: return micro2<2, Int4, Vnni>;
    case 3: return micro2<3, Int4, Vnni>;
    case 4: return micro2<4, Int4, Vnni>;
    case 5: return micro2<5, Int4, Vnni>;
    default: return micro2<6, Int4, Vnni>;
  }
}

class Avx2IntKernel final : public IntKernel {
 public:
  Avx2IntKernel(const IntLayerDesc& d, bool vnni)
      : group_(d.group), act_(d.act), epilogue_(d.epilogue), vnni_(vnni), w_(pack_int_weights(d)) {}

  std::string_view name() const override { return vnni_ ? "avx2_vnni" : "avx2"; }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    if (m <= kGemvRows) {
      thread_local ActBlock2 blk;
      prepare(x, m, blk);
      const ActBlock2& shared = blk;
      util::parallel_for(w_.panels, 1, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) run_panel(shared, m, 0, p, y);
      });
      return;
    }
    const int64_t by_cache = std::max<int64_t>(kMr, (256 * 1024 / w_.kp) / kMr * kMr);
    const int64_t threads = std::max(1, mixq::num_threads());
    int64_t blocks = (m + by_cache - 1) / by_cache;
    blocks = (blocks + threads - 1) / threads * threads;
    const int64_t mc = ((m + blocks - 1) / blocks + kMr - 1) / kMr * kMr;
    util::parallel_for((m + mc - 1) / mc, 1, [&](int64_t b0, int64_t b1, int) {
      thread_local ActBlock2 blk;
      for (int64_t bi = b0; bi < b1; ++bi) {
        const int64_t row0 = bi * mc, rows = std::min(mc, m - row0);
        prepare(x + row0 * w_.k, rows, blk);
        for (int64_t p = 0; p < w_.panels; ++p) run_panel(blk, rows, row0, p, y);
      }
    });
  }

 private:
  void prepare(const float* x, int64_t rows, ActBlock2& blk) const {
    const int64_t k = w_.k, kp = w_.kp;
    const int64_t panels = (rows + kMr - 1) / kMr;
    blk.q.assign(static_cast<size_t>(panels * kp * kMr), 0);
    blk.scale.resize(static_cast<size_t>(panels * kMr));
    blk.sum.resize(static_cast<size_t>(panels * kMr));
    if (group_ > 0) blk.tmp.resize(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = x + r * k;
      if (group_ > 0) {
        std::memcpy(blk.tmp.data(), src, static_cast<size_t>(k) * sizeof(float));
        hadamard_row_avx2(blk.tmp.data(), k, group_);
        src = blk.tmp.data();
      }
      quantize_row2(src, k, kp, act_, blk.q.data() + (r / kMr) * kp * kMr, static_cast<int>(r % kMr),
                    &blk.scale[static_cast<size_t>(r)], &blk.sum[static_cast<size_t>(r)]);
    }
  }

  void run_panel(const ActBlock2& blk, int64_t rows, int64_t row0, int64_t p, float* y) const {
    const int64_t n = w_.n, col = p * kPanelCols;
    if (col >= n) return;
    const int64_t valid = std::min<int64_t>(kPanelCols, n - col);
    alignas(32) int32_t acc[kMr * 16];
    alignas(32) float vals[16];
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, rows - r0));
      const int8_t* a = blk.q.data() + (r0 / kMr) * w_.kp * kMr;
      Micro2 fn = w_.int4 ? (vnni_ ? micro2_for<true, true>(mr) : micro2_for<true, false>(mr))
                          : (vnni_ ? micro2_for<false, true>(mr) : micro2_for<false, false>(mr));
      fn(a, w_.kp, w_.panel(p), acc);
      for (int r = 0; r < mr; ++r) {
        const int64_t br = r0 + r;
        const uint32_t offset = static_cast<uint32_t>(w_.weight_bias) *
                                static_cast<uint32_t>(blk.sum[static_cast<size_t>(br)]);
        const __m256i voff = _mm256_set1_epi32(static_cast<int32_t>(offset));
        const __m256 sx = _mm256_set1_ps(blk.scale[static_cast<size_t>(br)]);
        for (int h = 0; h < 2; ++h) {
          const __m256i ai = _mm256_sub_epi32(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + r * 16 + 8 * h)), voff);
          const __m256 f = _mm256_cvtepi32_ps(ai);
          const __m256 sw = _mm256_loadu_ps(w_.scale.data() + col + 8 * h);
          __m256 v = epilogue_ == Epilogue::scale_product ? _mm256_mul_ps(f, _mm256_mul_ps(sx, sw))
                                                          : _mm256_mul_ps(_mm256_mul_ps(f, sx), sw);
          if (!w_.bias.empty()) v = _mm256_add_ps(v, _mm256_loadu_ps(w_.bias.data() + col + 8 * h));
          _mm256_store_ps(vals + 8 * h, v);
        }
        std::memcpy(y + (row0 + br) * n + col, vals, static_cast<size_t>(valid) * sizeof(float));
      }
    }
  }

  int64_t group_;
  ActQuant act_;
  Epilogue epilogue_;
  bool vnni_;
  PackedIntWeights w_;
};

}  // namespace
}  // namespace x86

std::unique_ptr<IntKernel> make_int_kernel_avx2(const IntLayerDesc& desc) {
  return std::make_unique<x86::Avx2IntKernel>(desc, cpu_has_avx_vnni());
}

// Test hook: the plain-AVX2 (no VNNI) variant, to cover it on VNNI machines.
std::unique_ptr<IntKernel> make_int_kernel_avx2_novnni(const IntLayerDesc& desc) {
  return std::make_unique<x86::Avx2IntKernel>(desc, false);
}

}  // namespace mixq::kernels
