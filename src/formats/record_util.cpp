#include "formats/record_util.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "util/parallel.hpp"
#include "mixq/error.hpp"
#include "numeric/hadamard.hpp"

namespace mixq::formats {

void require_matrix(const Layer& layer, const TensorView& t, std::string_view what) {
  if (t.rank() != 2 || t.shape[0] <= 0 || t.shape[1] <= 0)
    fail("layer '{}': tensor '{}' must be a non-empty 2-D {}, found shape {}", layer.prefix, t.name, what,
         shape_str(t.shape));
}

void require_shape_in(const Layer& layer, const TensorView& t, std::initializer_list<Shape> shapes,
                      std::string_view want) {
  for (const Shape& s : shapes)
    if (t.shape == s) return;
  fail("layer '{}': tensor '{}' must have shape {}, found {}", layer.prefix, t.name, want, shape_str(t.shape));
}

void require_scalar(const Layer& layer, std::string_view role) {
  const TensorView& t = layer.tensor(role);
  require_shape_in(layer, t, {Shape{}, Shape{1}}, "[] or [1] (one per-tensor value)");
}

float read_f32(const TensorView& t, int64_t index) {
  float v;
  std::memcpy(&v, t.data.data() + index * 4, 4);
  return v;
}

int64_t logical_rows(Layer& layer, int64_t stored_rows, int64_t pad, std::string_view format) {
  const TensorView* bias = layer.find("bias");
  if (!bias) {
    layer.warnings.push_back(fmt::format(
        "layer '{}': {} stores rows padded to {}; no bias gives the logical out_features, reporting the "
        "stored {}",
        layer.prefix, format, pad, stored_rows));
    return stored_rows;
  }
  if (bias->rank() != 1)
    fail("layer '{}': bias '{}' must be 1-D, found shape {}", layer.prefix, bias->name, shape_str(bias->shape));
  const int64_t n = bias->shape[0];
  if (n > stored_rows || n <= stored_rows - pad || n <= 0)
    fail("layer '{}': bias '{}' has {} values, but the {} weight stores {} rows (padded to {}): expected {} to {}",
         layer.prefix, bias->name, n, format, stored_rows, pad, std::max<int64_t>(1, stored_rows - pad + 1),
         stored_rows);
  return n;
}

std::string method_or_full_precision(const Layer& layer, std::string method, std::string full_name) {
  return layer.param_bool(kFullPrecision) ? full_name : method;
}

int64_t checked_convrot_group(const Layer& layer, int64_t k) {
  const int64_t g = layer.param_int("convrot_groupsize");
  if (!is_power_of_4(g))
    fail("layer '{}': convrot_groupsize must be a power of 4 (16, 64, 256, ...), found {}", layer.prefix, g);
  if (k % g != 0)
    fail("layer '{}': in_features K = {} is not divisible by convrot_groupsize {}", layer.prefix, k, g);
  return g;
}

OwnedTensor owned_bytes(std::string role, DType dtype, Shape shape, const void* data, size_t bytes) {
  OwnedTensor t{std::move(role), dtype, std::move(shape), std::vector<std::byte>(bytes)};
  if (bytes) std::memcpy(t.data.data(), data, bytes);
  return t;
}

OwnedTensor owned_f32(std::string role, Shape shape, const std::vector<float>& values) {
  return owned_bytes(std::move(role), DType::F32, std::move(shape), values.data(), values.size() * 4);
}

OwnedTensor owned_f32_scalar(std::string role, float value) {
  return owned_bytes(std::move(role), DType::F32, Shape{}, &value, 4);
}

nlohmann::json base_marker(std::string_view format, const nlohmann::json& params) {
  nlohmann::json marker = {{"format", std::string(format)}};
  if (param_bool(params, kFullPrecision, false)) marker[std::string(kFullPrecision)] = true;
  return marker;
}

bool param_bool(const nlohmann::json& params, std::string_view key, bool fallback) {
  auto it = params.find(std::string(key));
  if (it == params.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail("parameter \"{}\" must be a boolean, found {}", key, it->dump());
  return it->get<bool>();
}

int64_t param_int(const nlohmann::json& params, std::string_view key, int64_t fallback) {
  auto it = params.find(std::string(key));
  if (it == params.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) fail("parameter \"{}\" must be an integer, found {}", key, it->dump());
  return it->get<int64_t>();
}

std::string param_string(const nlohmann::json& params, std::string_view key, std::string fallback) {
  auto it = params.find(std::string(key));
  if (it == params.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail("parameter \"{}\" must be a string, found {}", key, it->dump());
  return it->get<std::string>();
}

void for_rows(int64_t rows, int64_t row_cost, const std::function<void(int64_t, int64_t)>& body) {
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, row_cost));
  util::parallel_for(rows, grain, [&](int64_t begin, int64_t end, int) { body(begin, end); });
}

}  // namespace mixq::formats
