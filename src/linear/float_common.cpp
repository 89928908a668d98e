#include "linear/float_common.hpp"

#include <cstddef>
#include <cstring>

#include "io/mapped_file.hpp"
#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "util/phase_timer.hpp"

namespace mixq::linear {

std::vector<float> bias_f32(const Layer& layer, int64_t n) {
  const TensorView* bias = layer.find("bias");
  if (!bias) return {};
  if (!is_float(bias->dtype))
    fail("layer '{}': bias '{}' has dtype {}, expected F32, F16, BF16 or F64", layer.prefix, bias->name,
         dtype_name(bias->dtype));
  if (bias->numel() != n)
    fail("layer '{}': bias '{}' has {} elements, expected {} (out_features)", layer.prefix, bias->name,
         bias->numel(), n);
  return to_f32(*bias);
}

float scalar_f32(const Layer& layer, std::string_view role) {
  const TensorView& t = layer.tensor(role);
  if (t.numel() != 1 || !(is_float(t.dtype)))
    fail("layer '{}': '{}' must be one float value, found {} {}", layer.prefix, t.name,
         dtype_name(t.dtype), shape_str(t.shape));
  return to_f32(t).at(0);
}

float optional_scalar_f32(const Layer& layer, std::string_view role, bool& present) {
  present = layer.find(role) != nullptr;
  return present ? scalar_f32(layer, role) : 0.0f;
}

const uint8_t* bytes_at_least(const Layer& layer, std::string_view role, int64_t need) {
  const TensorView& t = layer.tensor(role);
  if (need < 0 || static_cast<int64_t>(t.data.size()) < need)
    fail("layer '{}': '{}' holds {} bytes, the kernel needs {}", layer.prefix, t.name, t.data.size(),
         need);
  return reinterpret_cast<const uint8_t*>(t.data.data());
}

bool full_precision(const Layer& layer) {
  auto it = layer.params.find("full_precision_matrix_mult");
  return it != layer.params.end() && it->is_boolean() && it->get<bool>();
}

FloatGemm::FloatGemm(FastPath path, kernels::x86::PanelType type, const void* w, int64_t row_bytes, int64_t n,
                     int64_t k, bool f32_activations, const uint8_t* block_scales, bool release_rows, bool in_place)
    : path_(path) {
  namespace x86 = kernels::x86;
  if (path == FastPath::none) fail("FloatGemm: no fast path to pack for");
  const bool fp8 = x86::is_fp8(type);
  // AMX machines run FP8 / MXFP8 on bf16 tiles from kAmxRows rows up, and
  // below that the core the FMA / vdpbf16ps probe picks (fma_rows); every
  // core reads the same panels.
  amx_ = path == FastPath::avx512 && fp8 && !f32_activations && kernels::active_isa() >= kernels::Isa::amx;
  fma_ = path == FastPath::avx512 && (!fp8 || f32_activations || kernels::float_dot() == kernels::FloatDot::fma);
  if (in_place) {
    panels_ = x86::float_panels_in_place(type, w, row_bytes, n, k, block_scales);
    return;
  }
  const auto* rows = static_cast<const std::byte*>(w);
  x86::RowsPacked rows_packed;
  if (release_rows)
    rows_packed = [&](int64_t r0, int64_t r1) {
      MappedFile::release_pages({rows + r0 * row_bytes, static_cast<size_t>((r1 - r0) * row_bytes)});
    };
  panels_ = x86::pack_panels(type, w, row_bytes, n, k, block_scales, rows_packed);
}

bool FloatGemm::fma_rows(int64_t m) const {
  return path_ != FastPath::avx512 || fma_ || m <= kFmaRows;
}

void FloatGemm::run(const float* x, int64_t m, int64_t k, kernels::x86::ActPrep prep, float inv_scale,
                    float alpha, const float* bias, float* y) const {
  namespace x86 = kernels::x86;
  const x86::FloatPanels& w = panels_;
  const bool tiles = amx_ && m >= kAmxRows;
  if (tiles || !fma_rows(m)) {
    if (prep == x86::ActPrep::round)
      fail("float gemm: a full-precision layer must be packed with f32_activations (x stays f32)");
    // AMX tiles: rows of a multiple of 16 pairs in the A tile layout,
    // 64-byte aligned, m rounded up to 32 rows (x86::float_gemm_amx_bf16).
    const int64_t lda = tiles ? (w.pair_steps() + 15) / 16 * 16 : w.pair_steps();
    const int64_t rows = tiles ? (m + 31) / 32 * 32 : m;
    thread_local std::vector<uint32_t> a;  // kept between calls, as below
    if (a.size() < static_cast<size_t>(rows * lda + 16)) a.resize(static_cast<size_t>(rows * lda + 16));
    uint32_t* at = a.data() + (16 - reinterpret_cast<uintptr_t>(a.data()) % 64 / 4) % 16;
    {
      util::PhaseScope phase("prepare activations (bf16 pairs)");
      x86::prepare_bf16_avx512(x, m, k, lda, prep, inv_scale, at, tiles);
    }
    util::PhaseScope phase("float GEMM (weights decoded in the kernel)");
    if (tiles) x86::float_gemm_amx_bf16(at, lda, m, w, alpha, bias, y);
    else x86::float_gemm_avx512_bf16(at, m, w, alpha, bias, y);
    return;
  }
  const bool avx512 = path_ == FastPath::avx512;
  // Full precision: x itself, f32 (never its bf16 rounding).
  if (prep == x86::ActPrep::round) prep = x86::ActPrep::none;
  if (prep == x86::ActPrep::none && k == w.k) {  // f32 x already has the panel's K
    util::PhaseScope phase("float GEMM (weights decoded in the kernel)");
    (avx512 ? x86::float_gemm_avx512 : x86::float_gemm_avx2)(x, k, m, w, alpha, bias, y);
    return;
  }
  // Kept by the calling thread between calls, as the integer kernels keep
  // their activation blocks: a fresh vector per call (50 MB at M = 4096,
  // K = 3072) paid its page faults and zero fill every time, ~7 % of the
  // FP8 call (mixq bench A/B, BENCHMARKS.md "Float GEMM at many rows"). It
  // holds the largest activation seen.
  thread_local std::vector<float> a;
  if (a.size() < static_cast<size_t>(m * w.k)) a.resize(static_cast<size_t>(m * w.k));
  {
    util::PhaseScope phase("prepare activations (f32)");
    (avx512 ? x86::prepare_f32_avx512 : x86::prepare_f32_avx2)(x, m, k, w.k, prep, inv_scale, a.data());
  }
  util::PhaseScope phase("float GEMM (weights decoded in the kernel)");
  (avx512 ? x86::float_gemm_avx512 : x86::float_gemm_avx2)(a.data(), w.k, m, w, alpha, bias, y);
}

void FloatLinear::hold_files(std::initializer_list<const TensorView*> tensors) {
  for (const TensorView* t : tensors) {
    if (!t->storage) fail("layer '{}': '{}' is read in place but lies in no mapped file", prefix_, t->name);
    files_.push_back(t->storage);
  }
}

void FloatLinear::check_files() const {
  for (const auto& file : files_) file->check_intact();
}

void FloatLinear::check(const float* x, int64_t m, float* y) const {
  if (m < 0) fail("layer '{}': negative row count {}", prefix_, m);
  if (m > 0 && (x == nullptr || y == nullptr)) fail("layer '{}': null input or output", prefix_);
}

}  // namespace mixq::linear
