// asym_w4a8_int8 weight quantization (docs/FORMATS.md §3.7 "Weight
// quantization"), T = f32. Modes (quantize parameter "mode"):
//   "codebook" (default): the fixed 16-level Lloyd-Max table, nearest level
//       with ties to the lower index, two ALS refinements of the group scale,
//       final codes re-chosen against the decoded int8 grid. The kurtosis-driven
//       fitted codebook of comfy-kitchen is NOT built: the fixed table is always
//       used (docs/FORMATS.md §3.7 leaves the sample size of that test unspecified).
//   "uniform": symmetric levels code - 8, scale amax/7, no codebook stored.
//   "asymmetric": min/max levels, writes weight_correction [K/gs, N] (F32).
// Parameter "scale_dtype": "e4m3" (default) or "f32" for weight_s_rel.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/record_util.hpp"
#include "formats/w4_common.hpp"
#include "formats/w4a8.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"
#include "mixq/numeric.hpp"

namespace mixq::formats {
namespace {

enum class Mode { codebook, uniform, asymmetric };

Mode parse_mode(const nlohmann::json& params) {
  const std::string mode = param_string(params, "mode", "codebook");
  if (mode == "codebook") return Mode::codebook;
  if (mode == "uniform") return Mode::uniform;
  if (mode == "asymmetric") return Mode::asymmetric;
  fail("asym_w4a8_int8: unknown quantization mode \"{}\" (valid: codebook, uniform, asymmetric)", mode);
}

// Nearest entry of `levels` (16 ascending values) to v; ties go to the lower index.
uint8_t nearest(const float* levels, float v) {
  uint8_t best = 0;
  float best_d = std::fabs(v - levels[0]);
  for (uint8_t i = 1; i < 16; ++i) {
    const float d = std::fabs(v - levels[i]);
    if (d < best_d) best = i, best_d = d;
  }
  return best;
}

OwnedTensor make_tensor(const char* role, DType dtype, Shape shape, const std::vector<float>& values) {
  return OwnedTensor{role, dtype, std::move(shape), from_f32(dtype, values)};
}

}  // namespace

QuantizedLayer w4a8_quantize(const float* weight, int64_t n, int64_t k, const nlohmann::json& params) {
  const int64_t gs = param_int(params, "group_size", 16);
  const int64_t g = param_int(params, "convrot_groupsize", 256);
  const Mode mode = parse_mode(params);
  const std::string scale_dtype = param_string(params, "scale_dtype", "e4m3");
  if (scale_dtype != "e4m3" && scale_dtype != "f32")
    fail("asym_w4a8_int8: scale_dtype must be \"e4m3\" or \"f32\", found \"{}\"", scale_dtype);
  if (n <= 0 || k <= 0) fail("asym_w4a8_int8: cannot quantize an empty weight [{}, {}]", n, k);
  if (gs < 4 || !(16 % gs == 0 || gs % 16 == 0))
    fail("asym_w4a8_int8: group_size must be >= 4 and divide or be a multiple of 16, found {}", gs);
  if (!is_power_of_4(g)) fail("asym_w4a8_int8: convrot_groupsize must be a power of 4, found {}", g);
  if (k % 16 != 0 || k % gs != 0 || k % g != 0)
    fail("asym_w4a8_int8: in_features {} must be divisible by 16, group_size {} and convrot_groupsize {}", k, gs,
         g);

  // Rotate into the ConvRot basis (W·H per group), fp32.
  std::vector<float> w(weight, weight + n * k);
  hadamard_rotate(w.data(), n, k, g);

  const int64_t groups = k / gs;
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::vector<float> group_scale(static_cast<size_t>(n * groups));
  std::vector<float> correction(mode == Mode::asymmetric ? static_cast<size_t>(groups * n) : 0);
  std::vector<float> s_channel(static_cast<size_t>(n));
  const float* book = kW4a8LloydMax;

  for (int64_t r = 0; r < n; ++r) {
    float row_max = 0;  // max |shifted| over the row
    for (int64_t grp = 0; grp < groups; ++grp) {
      const float* v = &w[r * k + grp * gs];
      uint8_t* c = &codes[r * k + grp * gs];
      float amax = 0, lo = v[0], hi = v[0];
      for (int64_t i = 0; i < gs; ++i) {
        amax = std::max(amax, std::fabs(v[i]));
        lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
      }
      float scale = 0;
      if (mode == Mode::codebook) {
        scale = std::max(amax, 1e-8f);
        for (int64_t i = 0; i < gs; ++i) c[i] = nearest(book, v[i] / scale);
        for (int iter = 0; iter < 2; ++iter) {  // two ALS refinements
          float num = 0, den = 0;
          for (int64_t i = 0; i < gs; ++i) {
            num += v[i] * book[c[i]];
            den += book[c[i]] * book[c[i]];
          }
          scale = std::max(num / std::max(den, 1e-8f), 1e-8f);
          for (int64_t i = 0; i < gs; ++i) c[i] = nearest(book, v[i] / scale);
        }
        for (int64_t i = 0; i < gs; ++i) row_max = std::max(row_max, std::fabs(book[c[i]] * scale));
      } else if (mode == Mode::uniform) {
        scale = std::max(amax / 7.0f, 1e-8f);
        for (int64_t i = 0; i < gs; ++i) {
          const int q = w4::clamped_code(std::nearbyint(v[i] / scale), -8.0f, 7.0f);
          c[i] = static_cast<uint8_t>(q + 8);
          row_max = std::max(row_max, std::fabs(static_cast<float>(q) * scale));
        }
      } else {
        scale = std::max((hi - lo) / 15.0f, 1e-8f);
        for (int64_t i = 0; i < gs; ++i) {
          const int q = w4::clamped_code(std::nearbyint((v[i] - lo) / scale), 0.0f, 15.0f);
          c[i] = static_cast<uint8_t>(q);
          row_max = std::max(row_max, std::fabs((static_cast<float>(q) - 8.0f) * scale));
        }
        correction[grp * n + r] = 8.0f * scale + lo;
      }
      group_scale[r * groups + grp] = scale;
    }
    s_channel[r] = std::max(row_max / 127.0f, 1e-8f);  // clamp after the division
  }

  // s_rel = group_scale / s_channel, stored as e4m3 (RNE) or f32.
  const DType rel_dtype = scale_dtype == "e4m3" ? DType::F8_E4M3 : DType::F32;
  std::vector<float> s_rel(group_scale.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t grp = 0; grp < groups; ++grp) {
      const float rel = group_scale[r * groups + grp] / s_channel[r];
      s_rel[r * groups + grp] = rel_dtype == DType::F8_E4M3 ? e4m3_to_f32(f32_to_e4m3(rel)) : rel;
    }

  // Codebook mode: re-choose codes against the int8 grid the decoder produces.
  if (mode == Mode::codebook) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t grp = 0; grp < groups; ++grp) {
        float grid[16];
        for (uint8_t i = 0; i < 16; ++i)
          grid[i] = static_cast<float>(w4a8_decode_code(i, s_rel[r * groups + grp], book));
        for (int64_t i = 0; i < gs; ++i) {
          const int64_t idx = r * k + grp * gs + i;
          codes[idx] = nearest(grid, w[idx] / s_channel[r]);
        }
      }
  }

  QuantizedLayer out;
  OwnedTensor packed{"weight", DType::I8, {n, k / 2}, std::vector<std::byte>(static_cast<size_t>(n * k / 2))};
  for (int64_t i = 0; i < n * k / 2; ++i) packed.data[i] = w4::pack_pair(codes[2 * i], codes[2 * i + 1]);
  out.tensors.push_back(std::move(packed));
  out.tensors.push_back(make_tensor("weight_s_rel", rel_dtype, {n, groups}, s_rel));
  out.tensors.push_back(make_tensor("weight_s_channel", DType::F32, {n}, s_channel));
  if (mode == Mode::codebook)
    out.tensors.push_back(make_tensor("weight_codebook", DType::F32, {16}, std::vector<float>(book, book + 16)));
  if (mode == Mode::asymmetric)
    out.tensors.push_back(make_tensor("weight_correction", DType::F32, {groups, n}, correction));
  // ComfyUI saves group_size and convrot_groupsize; "convrot": true is added so
  // that SGLang's KitchenW4A8Config (which requires it) accepts the file too.
  out.marker = base_marker("asym_w4a8_int8", params);
  out.marker["group_size"] = gs;
  out.marker["convrot_groupsize"] = g;
  out.marker["convrot"] = true;
  return out;
}

}  // namespace mixq::formats
