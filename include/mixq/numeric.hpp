#pragma once
// Scalar number formats (docs/FORMATS.md §2.1). Encoders round to nearest,
// ties to even. Decoders are exact.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);  // RNE; NaN stays NaN
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);   // RNE; overflow -> inf; NaN stays NaN

// FP8 E4M3FN: max 448, 0x7F/0xFF NaN, no inf. Encoding saturates to +-448
// (every comfy-kitchen path clamps first); NaN -> 0x7F.
float e4m3_to_f32(uint8_t code);
uint8_t f32_to_e4m3(float value);
// FP8 E5M2: max 57344, inf and NaN as IEEE. Encoding saturates finite values
// to +-57344; inf and NaN are kept.
float e5m2_to_f32(uint8_t code);
uint8_t f32_to_e5m2(float value);
// FP4 E2M1 (4-bit code, bit 3 = sign): 0, .5, 1, 1.5, 2, 3, 4, 6. Encoding
// saturates to +-6; NaN is unspecified (returns code 0).
float e2m1_to_f32(uint8_t code);
uint8_t f32_to_e2m1(float value);
// E8M0 as comfy-kitchen decodes it: byte 0 -> 0.0, 255 -> +inf, else 2^(e-127).
float e8m0_to_f32(uint8_t code);

// RNE_T(v): rounds an f32 value to the nearest value of float dtype T
// (F32, F16, BF16), returned as f32.
float round_to(DType dtype, float value);

// Decodes any float or integer tensor to f32 (F64, F32, F16, BF16, F8_*, ints).
std::vector<float> to_f32(const TensorView& tensor);
// Encodes f32 values into a float dtype's bytes (F32, F16, BF16, F8_E4M3, F8_E5M2).
std::vector<std::byte> from_f32(DType dtype, std::span<const float> values);

}  // namespace mixq
