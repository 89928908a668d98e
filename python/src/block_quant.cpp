// mixq._mixq._nvfp4_quantize / _nvfp4_dequantize: NVFP4 activations in
// comfy-kitchen's layout (mixq/block_quant.hpp), for the comfy-kitchen
// backend's quantize_nvfp4 and scaled_mm_nvfp4 (python/mixq/comfy_kitchen).
// The caller allocates every array (CPU, C-contiguous); shapes are checked
// here, the work runs with the GIL released.
#include <cstring>

#include <nanobind/ndarray.h>

#include "bindings.hpp"
#include "mixq/block_quant.hpp"
#include "mixq/error.hpp"

namespace mixq::py {
namespace {

using F32Matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutF32Matrix = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Bytes = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
using OutBytes = nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu>;

int64_t scale_bytes(int64_t rows, int64_t k) {
  return (rows + 127) / 128 * 128 * ((k / 16 + 3) / 4 * 4);
}

void nvfp4_quantize(F32Matrix x, float global_scale, bool pad16, OutBytes data, OutBytes scales) {
  const int64_t m = static_cast<int64_t>(x.shape(0)), k = static_cast<int64_t>(x.shape(1));
  if (k % 16 != 0) fail("_nvfp4_quantize: {} columns is not a multiple of 16", k);
  const int64_t rows = pad16 ? (m + 15) / 16 * 16 : m;
  if (static_cast<int64_t>(data.size()) != rows * k / 2 || static_cast<int64_t>(scales.size()) != scale_bytes(rows, k))
    fail("_nvfp4_quantize: output sizes {} and {} bytes; expected {} and {}", data.size(), scales.size(),
         rows * k / 2, scale_bytes(rows, k));
  const float* xp = x.data();
  uint8_t *dp = data.data(), *sp = scales.data();
  nb::gil_scoped_release release;
  const Nvfp4Packed q = quantize_nvfp4_packed(xp, m, k, global_scale, pad16);
  std::memcpy(dp, q.data.data(), q.data.size());
  std::memcpy(sp, q.scales.data(), q.scales.size());
}

void nvfp4_dequantize(Bytes data, Bytes scales, OutF32Matrix out) {
  const int64_t m = static_cast<int64_t>(out.shape(0)), k = static_cast<int64_t>(out.shape(1));
  if (k % 16 != 0) fail("_nvfp4_dequantize: {} columns is not a multiple of 16", k);
  if (static_cast<int64_t>(data.size()) != m * k / 2 || static_cast<int64_t>(scales.size()) < scale_bytes(m, k))
    fail("_nvfp4_dequantize: {} data and {} scale bytes for [{}, {}]; expected {} and at least {}", data.size(),
         scales.size(), m, k, m * k / 2, scale_bytes(m, k));
  const uint8_t *dp = data.data(), *sp = scales.data();
  float* y = out.data();
  nb::gil_scoped_release release;
  dequantize_nvfp4_packed(dp, sp, m, k, y);
}

}  // namespace

void bind_block_quant(nb::module_& m) {
  m.def("_nvfp4_quantize", &nvfp4_quantize, nb::arg("x"), nb::arg("global_scale"), nb::arg("pad16"),
        nb::arg("data"), nb::arg("scales"),
        "NVFP4 codes (even column high) and tiled E4M3 block scales of f32 x [m, k], written into data "
        "[rows, k/2] and scales (uint8), rows = m or m padded to 16 (pad16): comfy-kitchen's quantize_nvfp4.");
  m.def("_nvfp4_dequantize", &nvfp4_dequantize, nb::arg("data"), nb::arg("scales"), nb::arg("out"),
        "out [m, k] = e2m1(code) · block scale (no global scale) for comfy-kitchen's NVFP4 data and scales.");
}

}  // namespace mixq::py
