#pragma once
// NVFP4 byte layouts (docs/FORMATS.md §2.2a, §2.3, §5.1–5.2). Comfy files use
// high-nibble-first codes and swizzled (cuBLAS 128×4) block scales; ModelOpt /
// compressed-tensors style files put the even element in the low nibble and
// may store scales linearly as [rows, K/16]. Nothing in a file says which, so
// these helpers take the layout from a caller that knows it; no global flags.
#include <cstdint>
#include <vector>

#include "mixq/layer.hpp"

namespace mixq::formats {

struct Nvfp4Layout {
  bool swizzled_scales = true;    // false: linear [rows, K/16] E4M3 bytes
  bool high_nibble_first = true;  // false: element 2j in bits 3..0
};

// Bytes of the block-scale tensor for `rows` stored rows and a padded K.
int64_t nvfp4_scale_bytes(int64_t rows, int64_t k_padded, const Nvfp4Layout& layout);

// Stored and logical sizes of an nvfp4 layer, with every tensor checked
// against `layout` (dtypes, the scale byte count, scalars). N is the bias
// length when a bias is bound (it must fit the 16-padded rows), else the
// stored rows; K is the pre_quant_scale length when bound, else the stored
// padded K. Throws Error naming the layer and tensor.
struct Nvfp4Geometry {
  int64_t rows = 0, k_padded = 0;             // stored weight: [rows, k_padded/2] bytes
  int64_t out_features = 0, in_features = 0;  // logical
  bool n_known = false, k_known = false;      // from bias / pre_quant_scale
};
Nvfp4Geometry nvfp4_geometry(const Layer& layer, const Nvfp4Layout& layout);

// Dequantizes an nvfp4 layer whose bytes follow `layout` into f32
// [geometry.out_features, geometry.in_features] (padding cropped). Checks the
// tensors against `layout` itself (nvfp4_geometry), so it also works on layers
// whose linear scales the comfy validator rejects.
void nvfp4_dequantize(const Layer& layer, const Nvfp4Layout& layout, float* out);

// Rewrites an nvfp4 weight and its block scales from `from` into the comfy
// layout (high nibble first, swizzled scales). `weight` is [rows, k_padded/2]
// bytes; `scales` holds nvfp4_scale_bytes(rows, k_padded, from) bytes.
struct Nvfp4Bytes {
  std::vector<uint8_t> weight;  // [rows, k_padded/2]
  std::vector<uint8_t> scales;  // swizzled, [roundup(rows,128), roundup(k_padded/16,4)]
};
Nvfp4Bytes nvfp4_to_comfy_layout(const uint8_t* weight, const uint8_t* scales, int64_t rows, int64_t k_padded,
                                 const Nvfp4Layout& from);

}  // namespace mixq::formats
