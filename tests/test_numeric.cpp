// Scalar codecs (docs/FORMATS.md §2.1): every code decodes to its
// formula, encoding a decoded value gives the code back, rounding is
// nearest-even against an independent brute-force search.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

float e4m3_formula(int code) {
  const int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
  const float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return s ? -v : v;
}

float e5m2_formula(int code) {
  const int s = code >> 7, e = (code >> 2) & 0x1F, m = code & 3;
  const float v = e == 0 ? std::ldexp(m / 4.0f, -14) : std::ldexp(1.0f + m / 4.0f, e - 15);
  return s ? -v : v;
}

float f16_formula(int code) {
  const int s = code >> 15, e = (code >> 10) & 0x1F, m = code & 0x3FF;
  const float v = e == 0 ? std::ldexp(m / 1024.0f, -14) : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return s ? -v : v;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// Nearest finite value among `codes` (ties to the even code), after clamping
// to ±max: an independent model of "saturate, then RNE".
template <class Decode>
int brute_nearest(float v, int ncodes, float max, Decode decode) {
  v = std::fmin(std::fmax(v, -max), max);
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < ncodes; ++c) {
    const float d = decode(c);
    if (std::isnan(d) || std::isinf(d)) continue;
    if (std::signbit(d) != std::signbit(v)) continue;  // keep the sign (−0 for tiny negatives)
    const double err = std::fabs(static_cast<double>(d) - v);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

std::vector<float> awkward_values(size_t count, uint64_t seed, float spread) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> exponent(-spread, spread);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = mant(rng) * std::exp2(exponent(rng));
  return v;
}

TEST(E4M3, EveryCodeDecodesToTheFormula) {
  for (int c = 0; c < 256; ++c) {
    const float d = e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(d)) << c;
    } else {
      EXPECT_TRUE(same_bits(d, e4m3_formula(c))) << c;
      EXPECT_EQ(f32_to_e4m3(d), c) << c;
    }
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(E4M3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-1e30f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7E);  // halfway to the (NaN) next code: stays 448
  EXPECT_EQ(f32_to_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(1e-9f), 0x00);   // below half the smallest subnormal
  EXPECT_EQ(f32_to_e4m3(-1e-9f), 0x80);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);         // tie between 0 and 2^-9: even (0)
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);         // tie between 2^-9 and 2^-8: even
}

TEST(E4M3, RoundsNearestEvenLikeBruteForce) {
  for (float v : awkward_values(20000, 1, 12.0f)) {
    const int expect = brute_nearest(v, 256, 448.0f, [](int c) { return e4m3_to_f32(static_cast<uint8_t>(c)); });
    ASSERT_EQ(f32_to_e4m3(v), expect) << v;
  }
  // Exact midpoints between neighbouring codes go to the even code.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = 0.5f * (e4m3_to_f32(static_cast<uint8_t>(c)) + e4m3_to_f32(static_cast<uint8_t>(c + 1)));
    EXPECT_EQ(f32_to_e4m3(mid), (c & 1) ? c + 1 : c) << c;
    EXPECT_EQ(f32_to_e4m3(-mid), 0x80 | ((c & 1) ? c + 1 : c)) << c;
  }
}

TEST(E5M2, EveryCodeDecodesToTheFormula) {
  for (int c = 0; c < 256; ++c) {
    const float d = e5m2_to_f32(static_cast<uint8_t>(c));
    const int e = (c >> 2) & 0x1F, m = c & 3;
    if (e == 31 && m != 0) {
      EXPECT_TRUE(std::isnan(d)) << c;
      continue;
    }
    if (e == 31)
      EXPECT_EQ(d, (c & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity());
    else
      EXPECT_TRUE(same_bits(d, e5m2_formula(c))) << c;
    EXPECT_EQ(f32_to_e5m2(d), c) << c;
  }
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
}

TEST(E5M2, SaturatesFiniteKeepsSpecials) {
  EXPECT_EQ(f32_to_e5m2(1e30f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(-70000.0f), 0xFB);
  EXPECT_EQ(f32_to_e5m2(std::numeric_limits<float>::infinity()), 0x7C);
  EXPECT_EQ(f32_to_e5m2(-std::numeric_limits<float>::infinity()), 0xFC);
  EXPECT_TRUE(std::isnan(e5m2_to_f32(f32_to_e5m2(std::nanf("")))));
  for (float v : awkward_values(20000, 2, 20.0f)) {
    const int expect = brute_nearest(v, 256, 57344.0f, [](int c) { return e5m2_to_f32(static_cast<uint8_t>(c)); });
    ASSERT_EQ(f32_to_e5m2(v), expect) << v;
  }
}

TEST(E2M1, CodesAndTieTable) {
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float d = e2m1_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(d, (c & 8) ? -grid[c & 7] : grid[c & 7]) << c;
    EXPECT_EQ(std::signbit(d), (c & 8) != 0) << c;
    EXPECT_EQ(f32_to_e2m1(d), c) << c;
  }
  // §2.1 tie table.
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.25f)), 0.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(0.75f)), 1.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.25f)), 1.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1.75f)), 2.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(2.5f)), 2.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(3.5f)), 4.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(5.0f)), 4.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(5.0001f)), 6.0f);
  EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(1e9f)), 6.0f);
  EXPECT_EQ(f32_to_e2m1(-0.25f), 8);
  EXPECT_EQ(f32_to_e2m1(-5.0f), 0x8 | 6);
  for (float v : awkward_values(5000, 3, 4.0f)) {
    const int expect = brute_nearest(v, 16, 6.0f, [](int c) { return e2m1_to_f32(static_cast<uint8_t>(c)); });
    ASSERT_EQ(f32_to_e2m1(v), expect) << v;
  }
}

TEST(E8M0, EdgesAndPowers) {
  EXPECT_EQ(e8m0_to_f32(0), 0.0f);
  EXPECT_EQ(e8m0_to_f32(255), std::numeric_limits<float>::infinity());
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(1), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.0f, 127));
  for (int c = 1; c < 255; ++c) EXPECT_EQ(e8m0_to_f32(static_cast<uint8_t>(c)), std::ldexp(1.0f, c - 127)) << c;
}

TEST(BF16, AllCodesRoundTripAndTiesToEven) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float d = bf16_to_f32(static_cast<uint16_t>(c));
    ASSERT_EQ(std::bit_cast<uint32_t>(d), c << 16);
    if (std::isnan(d))
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(d))));
    else
      ASSERT_EQ(f32_to_bf16(d), c) << c;
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);       // tie, even below
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);   // tie, even above
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(round_to(DType::BF16, 1.0f + std::ldexp(1.0f, -8)), 1.0f);
}

TEST(F16, AllCodesRoundTripAndMatchCompiler) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float d = f16_to_f32(static_cast<uint16_t>(c));
    const int e = (c >> 10) & 0x1F;
    if (e == 31) {
      EXPECT_TRUE((c & 0x3FF) ? std::isnan(d) : std::isinf(d)) << c;
      if (c & 0x3FF) continue;
    } else {
      ASSERT_TRUE(same_bits(d, f16_formula(static_cast<int>(c)))) << c;
    }
    ASSERT_EQ(f32_to_f16(d), c) << c;
  }
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // overflow -> inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);       // tie with 0: even
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);       // tie between 1 and 2 ulp: even
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
#if defined(__FLT16_MAX__)
  // The compiler's own conversion is an independent RNE model.
  for (float v : awkward_values(50000, 4, 30.0f)) {
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(f32_to_f16(v), bits) << v;
  }
#endif
}

TEST(RoundTo, FloatDtypesOnly) {
  EXPECT_EQ(round_to(DType::F32, 1.1f), 1.1f);
  EXPECT_EQ(round_to(DType::F16, 1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(round_to(DType::F8_E4M3, 500.0f), 448.0f);
  EXPECT_THROW(round_to(DType::I8, 1.0f), Error);
}

TEST(BulkConvert, UnalignedRoundTripAndSizeCheck) {
  const std::vector<float> values = {1.5f, -2.0f, 448.0f, 0.0f, -0.375f};  // exact in every dtype
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::F64}) {
    const auto bytes = from_f32(dt, values);
    std::vector<std::byte> shifted(bytes.size() + 1);
    std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());  // misaligned start
    TensorView view{"t", dt, {5}, std::span<const std::byte>(shifted.data() + 1, bytes.size())};
    EXPECT_EQ(to_f32(view), values) << dtype_name(dt);
    TensorView wrong{"t", dt, {6}, std::span<const std::byte>(shifted.data() + 1, bytes.size())};
    EXPECT_THROW(to_f32(wrong), Error);
  }
  std::vector<std::byte> ints = {std::byte{0xFF}, std::byte{0x7F}};
  EXPECT_EQ(to_f32(TensorView{"i", DType::I8, {2}, ints}), (std::vector<float>{-1.0f, 127.0f}));
  EXPECT_EQ(to_f32(TensorView{"u", DType::U8, {2}, ints}), (std::vector<float>{255.0f, 127.0f}));
  EXPECT_THROW(from_f32(DType::I32, values), Error);
  // A hostile element count does not overflow the size check.
  EXPECT_THROW(to_f32(TensorView{"h", DType::F64, {int64_t{1} << 62}, ints}), Error);
}

}  // namespace
}  // namespace mixq
