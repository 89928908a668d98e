// Every format's linear on small layers whose result is computed by hand from
// the format rules (docs/FORMATS.md; section numbers below): stored bytes
// written out here, activations chosen so that each quantization step is
// exact or hits a documented rounding case (RNE ties, clamps, subnormals), and
// the expected y derived in the comment next to it. The reference kernel must
// give exactly that, and so must the fast kernel (all arithmetic is exact).
// SVDQuant's hand-computed case is in test_linear_svdquant.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"
#include "test_format_helpers.hpp"

namespace mixq {
namespace {

using testing::f32_tensor;

OwnedTensor bytes_tensor(const std::string& role, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  bytes.resize(static_cast<size_t>(shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype))), 0);
  std::vector<std::byte> data(bytes.size());
  std::memcpy(data.data(), bytes.data(), bytes.size());
  return OwnedTensor{role, dtype, shape, std::move(data)};
}

// Runs `x` [m, K] through the layer with the reference and the automatic
// kernel and expects exactly `want` [m, N] from both.
void expect_exact(const std::string& format, std::vector<OwnedTensor> tensors, const nlohmann::json& params,
                  const std::vector<float>& x, int64_t m, const std::vector<float>& want) {
  const FormatTraits* f = format == "unquantized" ? &unquantized_format() : find_format(format);
  ASSERT_NE(f, nullptr) << format;
  auto owned = testing::bind_layer(*f, std::move(tensors), params);
  validate_layer(owned->layer);
  const int64_t n = owned->layer.out_features;
  ASSERT_EQ(static_cast<int64_t>(want.size()), m * n) << format;
  ASSERT_EQ(static_cast<int64_t>(x.size()), m * owned->layer.in_features) << format;
  for (KernelChoice kernel : {KernelChoice::reference, KernelChoice::automatic}) {
    auto linear = Linear::create(owned->layer, {kernel});
    std::vector<float> y(want.size(), -12345.0f);
    linear->forward(x.data(), m, y.data());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(y[i], want[i]) << format << " " << params.dump() << " kernel " << linear->kernel_name()
                               << " row " << i / static_cast<size_t>(n) << " col " << i % static_cast<size_t>(n);
  }
}

// Row 0 of H16·4 is +++-+++-+++----+ and row 1 is ++-+++-+++-+--+- (H4 ⊗ H4,
// §2.4). x = (a·H16[0] + b·H16[1]) / 4 over one 16-group rotates to
// x_rot = [a, b, 0, ..., 0] (H16/4 is symmetric and orthogonal).
std::vector<float> group16(float a, float b) {
  const int h0[16] = {1, 1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, -1, -1, -1, 1};
  const int h1[16] = {1, 1, -1, 1, 1, 1, -1, 1, 1, 1, -1, 1, -1, -1, 1, -1};
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = (a * h0[i] + b * h1[i]) / 4;
  return x;
}

// §3.1: q_x = e4m3(clamp(x / s_x, ±448)); y = Σ q_x·q_w · (s_x·s_w) + b.
TEST(LinearExact, Fp8E4m3) {
  // w row 0 = [1, 2, -0.5, 4], row 1 = [0.25, 1.5, 3, -1]; s_w = 0.5, s_x = 2.
  std::vector<OwnedTensor> t = {
      bytes_tensor("weight", DType::F8_E4M3, {2, 4}, {0x38, 0x40, 0xB0, 0x48, 0x28, 0x3C, 0x44, 0xB8}),
      f32_tensor("weight_scale", {}, {0.5f}), f32_tensor("input_scale", {}, {2.0f}),
      f32_tensor("bias", {2}, {0.25f, -1.0f})};
  // x row 0 / 2 = [1, -2, 3, 0.5]: (1 - 4 - 1.5 + 2)·1 + 0.25 = -2.25;
  //   (0.25 - 3 + 9 - 0.5)·1 - 1 = 4.75.
  // x row 1 / 2 = [450 -> clamped 448, 0.015 -> 2^-6 (nearer than the largest
  //   subnormal 7·2^-9), 0, -0.5]: 448 + 0.03125 - 2 + 0.25 = 446.28125;
  //   112 + 0.0234375 + 0.5 - 1 = 111.5234375.
  expect_exact("float8_e4m3fn", std::move(t), {}, {2, -4, 6, 1, 900, 0.03f, 0, -1}, 2,
               {-2.25f, 4.75f, 446.28125f, 111.5234375f});
}

TEST(LinearExact, Fp8E5m2) {
  // The same weights in E5M2: 1 = 0x3C, 2 = 0x40, -0.5 = 0xB8, 4 = 0x44,
  // 0.25 = 0x34, 1.5 = 0x3E, 3 = 0x42, -1 = 0xBC.
  std::vector<OwnedTensor> t = {
      bytes_tensor("weight", DType::F8_E5M2, {2, 4}, {0x3C, 0x40, 0xB8, 0x44, 0x34, 0x3E, 0x42, 0xBC}),
      f32_tensor("weight_scale", {}, {0.5f}), f32_tensor("input_scale", {}, {2.0f}),
      f32_tensor("bias", {2}, {0.25f, -1.0f})};
  // x / 2 = [1, -2, 3, 0.5] as above; row 1 / 2 = [2.5 (1.25·2), 5 (1.25·4),
  // 0.625 (1.25/2), 3.75: a tie between 3.5 (1.11b·2) and 4 (1.00b·4): RNE -> 4]:
  //   2.5 + 10 - 0.3125 + 16 + 0.25 = 28.4375; 0.625 + 7.5 + 1.875 - 4 - 1 = 5.
  expect_exact("float8_e5m2", std::move(t), {}, {2, -4, 6, 1, 5, 10, 1.25f, 7.5f}, 2,
               {-2.25f, 4.75f, 28.4375f, 5.0f});
}

// §3.2: per 16-block S_x = e4m3((amax/6)/g_x), codes = e2m1(x / (g_x·S_x))
// (RNE, ties to even: 5 -> 4, 1.25 -> 1, -0.25 -> -0); y = g_x·g_w·Σ_b
// S_x·S_w·Σ e2m1·e2m1 + b. Weights: high nibble = even element (§2.2a).
TEST(LinearExact, Nvfp4) {
  // Row 0: element 1 = -4 (code 0xE), the rest 1 (code 2); block scale 2.
  // Row 1: element 0 = 6 (code 7), element 15 = 0.5 (code 1); block scale 0.5.
  std::vector<uint8_t> w(16 * 8, 0);
  w[0] = 0x2E;
  for (int i = 1; i < 8; ++i) w[static_cast<size_t>(i)] = 0x22;
  w[8] = 0x70;
  w[15] = 0x01;
  std::vector<uint8_t> scales(128 * 4, 0);
  scales[0] = 0x40;   // (row 0, block 0) at offset 0: 2.0
  scales[16] = 0x30;  // (row 1, block 0) at offset 16 (§2.3): 0.5
  std::vector<OwnedTensor> t = {
      bytes_tensor("weight", DType::U8, {16, 8}, w), bytes_tensor("weight_scale", DType::F8_E4M3, {128, 4}, scales),
      f32_tensor("weight_scale_2", {}, {0.25f}), f32_tensor("input_scale", {}, {0.5f}),
      f32_tensor("bias", {2}, {0.5f, -0.5f})};
  // amax 6, g_x 0.5: S_x = (6/6)/0.5 = 2, T = 1; codes = [6, 1, 0.5, -2, 3, 0,
  // 4 (5: tie), -0 (-0.25: tie), 0 x 7, 1 (1.25: tie)].
  const std::vector<float> x = {6, 1, 0.5f, -2, 3, 0, 5, -0.25f, 0, 0, 0, 0, 0, 0, 0, 1.25f};
  // Row 0: 6 - 4 + 0.5 - 2 + 3 + 4 + 1 = 8.5; 0.5·0.25·2·2·8.5 + 0.5 = 4.75.
  // Row 1: 6·6 + 1·0.5 = 36.5; 0.5·0.25·2·0.5·36.5 - 0.5 = 4.0625.
  expect_exact("nvfp4", std::move(t), {}, x, 1, {4.75f, 4.0625f});
}

// §3.3: per 32-block e = ceil(log2(amax/448)) + 127, q = e4m3(x / 2^(e-127));
// y = Σ_b 2^(e_x-127)·2^(e_w-127)·Σ e4m3·e4m3 + b.
TEST(LinearExact, Mxfp8) {
  // Row 0: all 1 (0x38) but element 1 = -2 (0xC0), scale byte 127 (1.0).
  // Row 1: element 0 = 0.5 (0x30), element 31 = 448 (0x7E), scale byte 126 (0.5).
  std::vector<uint8_t> w(32 * 32, 0);
  for (int i = 0; i < 32; ++i) w[static_cast<size_t>(i)] = 0x38;
  w[1] = 0xC0;
  w[32] = 0x30;
  w[63] = 0x7E;
  std::vector<uint8_t> scales(128 * 4, 0);
  scales[0] = 127;
  scales[16] = 126;
  std::vector<OwnedTensor> t = {bytes_tensor("weight", DType::F8_E4M3, {32, 32}, w),
                                bytes_tensor("weight_scale", DType::U8, {128, 4}, scales),
                                f32_tensor("bias", {2}, {0.25f, -2.0f})};
  // amax 896: 896/448 = 2, e = 128, scale 2: q = [448, 3, 1, -0.5, 0 ..., 0.375].
  std::vector<float> x(32, 0.0f);
  x[0] = 896;
  x[1] = 6;
  x[2] = 2;
  x[3] = -1;
  x[31] = 0.75f;
  // Row 0: 448 - 6 + 1 - 0.5 + 0.375 = 442.875; 2·1·442.875 + 0.25 = 886.
  // Row 1: 448·0.5 + 0.375·448 = 392; 2·0.5·392 - 2 = 390.
  expect_exact("mxfp8", std::move(t), {}, x, 1, {886.0f, 390.0f});
}

// §3.4: Q8row(x): s = amax/127, q = rint(x / s) (ties to even); y = acc·(s_x·s_w) + b.
TEST(LinearExact, Int8TensorwiseAndRowwise) {
  const std::vector<uint8_t> w = {1, 0xFE, 3, 4, 0xFB, 6, 0, 127};  // [1, -2, 3, 4], [-5, 6, 0, 127]
  // x row 0: amax 127, s = 1, q = x: acc = [127 - 128 - 96 + 4, -635 + 384 + 127] = [-93, -124].
  // x row 1: amax 254, s = 2, x / s = [127, 0.5 -> 0, -1.5 -> -2, 0]: acc = [127 - 6, -635] = [121, -635].
  const std::vector<float> x = {127, 64, -32, 1, 254, 1, -3, 0};
  // Per tensor s_w = 0.5: [-93·0.5 + 1, -124·0.5 - 1, 121·2·0.5 + 1, -635·2·0.5 - 1].
  expect_exact("int8_tensorwise",
               {bytes_tensor("weight", DType::I8, {2, 4}, w), f32_tensor("weight_scale", {}, {0.5f}),
                f32_tensor("bias", {2}, {1.0f, -1.0f})},
               {}, x, 2, {-45.5f, -63.0f, 122.0f, -636.0f});
  // Per row s_w = [0.5, 0.25]: row 1 of the weight gives -124·0.25 - 1 and -635·2·0.25 - 1.
  expect_exact("int8_tensorwise",
               {bytes_tensor("weight", DType::I8, {2, 4}, w), f32_tensor("weight_scale", {2, 1}, {0.5f, 0.25f}),
                f32_tensor("bias", {2}, {1.0f, -1.0f})},
               {}, x, 2, {-45.5f, -32.0f, 122.0f, -318.5f});
}

// §3.5: x_rot = x·H4/2 per 4-group, then Q8row; the stored weight is rotated.
TEST(LinearExact, Int8ConvRot) {
  // x = (127·H4[0] - 64·H4[1] + 32·H4[2]) / 2 = [47.5, 15.5, 111.5, -79.5]
  // rotates to x_rot = [127, -64, 32, 0]: s = 1, q = x_rot.
  // acc = [127 + 128 + 96, -635 - 384] = [351, -1019]; s_w = [0.5, 0.25].
  expect_exact("int8_tensorwise",
               {bytes_tensor("weight", DType::I8, {2, 4}, {1, 0xFE, 3, 4, 0xFB, 6, 0, 127}),
                f32_tensor("weight_scale", {2, 1}, {0.5f, 0.25f}), f32_tensor("bias", {2}, {1.0f, -1.0f})},
               {{"convrot", true}, {"convrot_groupsize", 4}}, {47.5f, 15.5f, 111.5f, -79.5f}, 1,
               {351 * 0.5f + 1, -1019 * 0.25f - 1});
}

// §3.6: x_rot per 16-group, Q4row (s = amax/7, q in [-7, 7]) or, with
// linear_dtype int8, Q8row; weights signed int4, low nibble = even k (§2.2b).
TEST(LinearExact, ConvRotW4a4) {
  // Row 0: w[0] = 3, w[1] = -1, w[16] = 2; row 1: w[0] = -7, w[1] = 7, w[16] = -8.
  std::vector<uint8_t> w(2 * 32, 0);
  w[0] = 0xF3;
  w[8] = 0x02;
  w[32] = 0x79;
  w[40] = 0x08;
  auto tensors = [&] {
    return std::vector<OwnedTensor>{bytes_tensor("weight", DType::I8, {2, 32}, w),
                                    f32_tensor("weight_scale", {2}, {0.5f, 0.25f}),
                                    f32_tensor("bias", {2}, {0.5f, 1.0f})};
  };
  auto activations = [](float a, float b, float c) {
    std::vector<float> x = group16(a, b);
    const std::vector<float> second = group16(c, 0);
    x.insert(x.end(), second.begin(), second.end());
    x.resize(64, 0.0f);
    return x;
  };
  // int4: x_rot = [7, 2, 0.., -3 at 16, 0..]: s = 1, q = x_rot.
  // acc = [21 - 2 - 6, -49 + 14 + 24] = [13, -11]: [13·0.5 + 0.5, -11·0.25 + 1].
  expect_exact("convrot_w4a4", tensors(), {{"convrot_groupsize", 16}}, activations(7, 2, -3), 1, {7.0f, -1.75f});
  // int8: x_rot = [127, 64, 0.., -32 at 16, 0..]: s = 1.
  // acc = [381 - 64 - 64, -889 + 448 + 256] = [253, -185]: [253·0.5 + 0.5, -185·0.25 + 1].
  expect_exact("convrot_w4a4", tensors(), {{"convrot_groupsize", 16}, {"linear_dtype", "int8"}},
               activations(127, 64, -32), 1, {127.0f, -45.25f});
}

// §3.7: w8 = clamp(rint(level·s_rel), ±127) with level = code - 8 or
// codebook[code] (ties to even), then §3.5 with s_channel per row.
TEST(LinearExact, W4a8) {
  // Codes (low nibble = even k): row 0 [11, 5, 8 ...], row 1 [0, 15, 8 ...].
  std::vector<uint8_t> w(2 * 8, 0x88);
  w[0] = 0x5B;
  w[8] = 0xF0;
  const std::vector<float> x = group16(127, 64);  // x_rot = [127, 64, 0 ...], s = 1
  const nlohmann::json params = {{"group_size", 16}, {"convrot_groupsize", 16}};
  // Uniform levels, s_rel = [2, 1.5]: row 0 w8 = [6, -6]; row 1 [-12, 10.5 -> 10].
  // acc = [762 - 384, -1524 + 640] = [378, -884]; s_channel = [0.5, 0.25].
  expect_exact("asym_w4a8_int8",
               {bytes_tensor("weight", DType::I8, {2, 8}, w), bytes_tensor("weight_s_rel", DType::F8_E4M3, {2, 1}, {0x40, 0x3C}),
                f32_tensor("weight_s_channel", {2}, {0.5f, 0.25f})},
               params, x, 1, {189.0f, -221.0f});
  // Codebook (i - 8)·0.375, s_rel = [4, 1.5]: row 0 [4.5 -> 4, -4.5 -> -4];
  // row 1 [-4.5 -> -4, 3.9375 -> 4]: acc = [508 - 256, -508 + 256] = [252, -252].
  std::vector<float> codebook(16);
  for (int i = 0; i < 16; ++i) codebook[static_cast<size_t>(i)] = static_cast<float>(i - 8) * 0.375f;
  expect_exact("asym_w4a8_int8",
               {bytes_tensor("weight", DType::I8, {2, 8}, w), bytes_tensor("weight_s_rel", DType::F8_E4M3, {2, 1}, {0x48, 0x3C}),
                f32_tensor("weight_s_channel", {2}, {0.5f, 0.25f}), f32_tensor("weight_codebook", {16}, codebook)},
               params, x, 1, {126.0f, -63.0f});
}

// §3.9: W[n, k] = (q - 8)·scale[k / G, n] + zeros[k / G, n]; y = x·Wᵀ + b.
TEST(LinearExact, AwqW4a16) {
  // Codes row 0 [10, 8, 0, 15], row 1 [8, 9, 12, 4] (low nibble = even k), G = 2.
  // W = [[1.25, 0.25, -17, 13], [0, 0.25, 4.5, -3.5]].
  std::vector<OwnedTensor> t = {bytes_tensor("weight", DType::I8, {2, 2}, {0x8A, 0xF0, 0x98, 0x4C}),
                                f32_tensor("weight_scale", {2, 2}, {0.5f, 0.25f, 2.0f, 1.0f}),
                                f32_tensor("weight_zeros", {2, 2}, {0.25f, 0.0f, -1.0f, 0.5f}),
                                f32_tensor("bias", {2}, {1.0f, -0.25f})};
  // x = [4, -8, 0.5, 2]: [5 - 2 - 8.5 + 26 + 1, 0 - 2 + 2.25 - 7 - 0.25].
  expect_exact("awq_w4a16", std::move(t), {{"group_size", 2}}, {4, -8, 0.5f, 2}, 1, {21.5f, -7.0f});
}

TEST(LinearExact, Unquantized) {
  std::vector<OwnedTensor> t = {f32_tensor("weight", {2, 3}, {1, -2, 0.5f, 3, 0, -1}),
                                f32_tensor("bias", {2}, {0.5f, 0.0f})};
  expect_exact("unquantized", std::move(t), {}, {2, 1, 4}, 1, {2.5f, 2.0f});
}

}  // namespace
}  // namespace mixq
