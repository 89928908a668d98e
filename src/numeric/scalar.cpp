// Scalar codecs of docs/FORMATS.md §2.1. Every encoder goes through one exact
// minifloat rounding routine (encode_minifloat) so that f16, E4M3, E5M2 and
// E2M1 share the same round-to-nearest-even and subnormal handling.
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

// A sign/exponent/mantissa minifloat without infinities or NaNs in the way:
// `mant_bits` mantissa bits, exponent bias `bias`, largest exponent field for
// finite values `max_exp_field`.
struct Minifloat {
  int mant_bits;
  int bias;
  int max_exp_field;
  int sign_shift;  // position of the sign bit
};

// Rounds |value| (finite, already clamped to the format's range or allowed to
// overflow into exponent field > max_exp_field) to the nearest representable
// value, ties to even, and returns the code without the sign bit; returns -1 on
// overflow past the largest exponent field.
//
// Normal range (f32 exponent >= emin): drop the low 23 - mant_bits mantissa
// bits of the f32 pattern with round-half-even; a carry moves into the
// exponent, which is the correct result. Rebiasing the exponent gives the code.
// Below emin the spacing is fixed at 2^(emin - mant_bits): n = rint(|v| /
// spacing) is exact (power-of-two scaling) and n == 2^mant_bits is the
// smallest normal, whose code is also n.
int encode_magnitude(float magnitude, const Minifloat& f) {
  const int emin = 1 - f.bias;
  const auto bits = std::bit_cast<uint32_t>(magnitude);
  const int f32_exp = static_cast<int>(bits >> 23) - 127;
  if (f32_exp < emin) {
    const float n = std::nearbyint(std::ldexp(magnitude, f.mant_bits - emin));  // ties to even
    return static_cast<int>(n);
  }
  const int shift = 23 - f.mant_bits;
  const uint32_t half = (1u << (shift - 1)) - 1u + ((bits >> shift) & 1u);
  const int64_t rounded = static_cast<int64_t>((bits + half) >> shift);
  const int64_t code = rounded - (static_cast<int64_t>(127 - f.bias) << f.mant_bits);
  if ((code >> f.mant_bits) > f.max_exp_field) return -1;
  return static_cast<int>(code);
}

float decode_minifloat(uint32_t code, const Minifloat& f) {
  const bool negative = (code >> f.sign_shift) & 1u;
  const uint32_t exp_field = (code >> f.mant_bits) & ((1u << (f.sign_shift - f.mant_bits)) - 1u);
  const uint32_t mant = code & ((1u << f.mant_bits) - 1u);
  float magnitude;
  if (exp_field == 0)
    magnitude = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mant_bits);
  else
    magnitude = std::ldexp(static_cast<float>(mant + (1u << f.mant_bits)),
                           static_cast<int>(exp_field) - f.bias - f.mant_bits);
  return negative ? -magnitude : magnitude;
}

constexpr Minifloat kF16{10, 15, 30, 15};
constexpr Minifloat kE4M3{3, 7, 15, 7};  // exponent 15 is finite except mantissa 7 (NaN)
constexpr Minifloat kE5M2{2, 15, 30, 7};
constexpr Minifloat kE2M1{1, 1, 3, 3};

constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;

template <int Bits>
std::array<float, (1 << Bits)> decode_table(const Minifloat& f) {
  std::array<float, (1 << Bits)> table{};
  for (uint32_t c = 0; c < table.size(); ++c) table[c] = decode_minifloat(c, f);
  return table;
}

const std::array<float, 256>& e4m3_table() {
  static const auto table = [] {
    auto t = decode_table<8>(kE4M3);
    t[0x7F] = std::numeric_limits<float>::quiet_NaN();
    t[0xFF] = -std::numeric_limits<float>::quiet_NaN();
    return t;
  }();
  return table;
}

const std::array<float, 256>& e5m2_table() {
  static const auto table = [] {
    auto t = decode_table<8>(kE5M2);
    for (uint32_t c = 0; c < 256; ++c) {
      if (((c >> 2) & 0x1F) != 0x1F) continue;
      const bool negative = c & 0x80;
      if ((c & 3) == 0)
        t[c] = negative ? -std::numeric_limits<float>::infinity()
                        : std::numeric_limits<float>::infinity();
      else
        t[c] = negative ? -std::numeric_limits<float>::quiet_NaN()
                        : std::numeric_limits<float>::quiet_NaN();
    }
    return t;
  }();
  return table;
}

const std::array<float, 16>& e2m1_table() {
  static const auto table = decode_table<4>(kE2M1);
  return table;
}

}  // namespace

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t f32_to_bf16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // keep it quiet NaN
  // Round to nearest even on the 16 dropped bits; a carry into the exponent is
  // the correct result (up to inf on overflow).
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t exp_field = (bits >> 10) & 0x1F;
  if (exp_field == 0x1F) {
    const bool negative = bits & 0x8000;
    if (bits & 0x3FF) return negative ? -std::numeric_limits<float>::quiet_NaN()
                                      : std::numeric_limits<float>::quiet_NaN();
    return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return decode_minifloat(bits, kF16);
}

uint16_t f32_to_f16(float value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7E00;
  if (std::isinf(value)) return sign | 0x7C00;
  const int code = encode_magnitude(std::fabs(value), kF16);
  if (code < 0) return sign | 0x7C00;  // overflow -> inf
  return sign | static_cast<uint16_t>(code);
}

float e4m3_to_f32(uint8_t code) { return e4m3_table()[code]; }

uint8_t f32_to_e4m3(float value) {
  if (std::isnan(value)) return 0x7F;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float magnitude = std::fmin(std::fabs(value), kE4M3Max);  // saturate (inf too)
  return sign | static_cast<uint8_t>(encode_magnitude(magnitude, kE4M3));
}

float e5m2_to_f32(uint8_t code) { return e5m2_table()[code]; }

uint8_t f32_to_e5m2(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return 0x7F;
  if (std::isinf(value)) return sign | 0x7C;
  const float magnitude = std::fmin(std::fabs(value), kE5M2Max);
  return sign | static_cast<uint8_t>(encode_magnitude(magnitude, kE5M2));
}

float e2m1_to_f32(uint8_t code) { return e2m1_table()[code & 0xF]; }

uint8_t f32_to_e2m1(float value) {
  if (std::isnan(value)) return 0;
  const uint8_t sign = std::signbit(value) ? 0x8 : 0;
  // Hot in NVFP4 quantization: compare against the midpoints of the grid
  // 0, .5, 1, 1.5, 2, 3, 4, 6; a midpoint goes to the even code (<= or <).
  // Equal to encode_magnitude(min(|v|, 6), kE2M1), as the tests check.
  const float m = std::fabs(value);
  const uint8_t code = m <= 0.25f ? 0 : m < 0.75f ? 1 : m <= 1.25f ? 2 : m < 1.75f ? 3
                     : m <= 2.5f  ? 4 : m < 3.5f  ? 5 : m <= 5.0f  ? 6 : 7;
  return sign | code;
}

float e8m0_to_f32(uint8_t code) {
  // comfy-kitchen's e8m0_to_f32: the byte becomes the f32 exponent field, so
  // 255 is +inf; byte 0 is special-cased to 0.0 (OCP would say 2^-127).
  if (code == 0) return 0.0f;
  return std::bit_cast<float>(static_cast<uint32_t>(code) << 23);
}

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::F32: return value;
    case DType::F16: return f16_to_f32(f32_to_f16(value));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(value));
    case DType::F8_E4M3: return e4m3_to_f32(f32_to_e4m3(value));
    case DType::F8_E5M2: return e5m2_to_f32(f32_to_e5m2(value));
    default: fail("round_to: {} is not a float dtype mixq rounds to", dtype_name(dtype));
  }
}

}  // namespace mixq
