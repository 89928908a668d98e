#pragma once
// What the format records' shard rules build on (mixq/shard.hpp): the rank's
// rows and K band, and a builder of the rank's tensors that makes views into
// the source where the bytes are contiguous and packed copies otherwise.
// Tensors keep the source's names.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mixq/layer.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

// A half-open index range [begin, end).
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Which share of a layer one rank takes (the plan decides it: mixq/shard.hpp).
struct ShardCut {
  enum class Side { whole, column, row } side = Side::whole;
  int parts = 1;  // logical parts of a fused layer (column)
  int rank = 0;
  int degree = 1;
};

// A finished share: the rank's Layer (views into the source or into `owned`).
struct ShardedLayer {
  Layer layer;
  std::vector<OwnedTensor> owned;
};

class ShardBuilder {
 public:
  ShardBuilder(const Layer& source, const ShardCut& cut);

  const Layer& source() const { return source_; }
  const ShardCut& cut() const { return cut_; }
  bool column() const { return cut_.side == ShardCut::Side::column; }
  bool row() const { return cut_.side == ShardCut::Side::row; }

  // Column split: this rank's logical output rows, one range per part, in
  // part order. Row split: this rank's band of input features.
  std::vector<IndexRange> out_ranges() const;
  IndexRange in_range() const;

  // The source tensor of `role`, whole.
  void keep(std::string_view role);
  // A view of `bytes` bytes at `offset` within the source tensor of `role`.
  void view(std::string_view role, Shape shape, size_t offset);
  // A tensor held by the shard, named like the source tensor of `role` (or
  // "<prefix>.<role>" when the source has none).
  void put(std::string_view role, DType dtype, Shape shape, std::vector<std::byte> data);
  // The source tensor of `role` restricted to `ranges` along `axis` (each
  // range in units of `unit` along that axis, i.e. index i covers elements
  // [i·unit, (i+1)·unit) of the ranges; the ranges must be whole units),
  // concatenated in order: a view when the result is contiguous, else a copy.
  void slice(std::string_view role, int axis, const std::vector<IndexRange>& ranges, int64_t unit = 1);
  // The bias of a column split follows the rows; a row split keeps it on rank 0.
  void split_bias();

  // Every bound tensor whole (replicated layers, degree 1).
  void keep_all();
  // The finished shard: a Layer with the source's prefix, format and params,
  // validated by its format (Error when it does not).
  ShardedLayer finish();

 private:
  const TensorView& source_tensor(std::string_view role) const;
  std::string name_for(std::string_view role) const;

  const Layer& source_;
  ShardCut cut_;
  std::map<std::string, TensorView, std::less<>> views_;  // role -> view of the source
  std::vector<std::pair<std::string, OwnedTensor>> owned_;  // role -> copy
};

namespace formats {

// How one role's axes map onto the layer's [N, K] (for ShardBuilder::slice):
// index i along out_axis holds output rows [i·out_unit, (i+1)·out_unit), index
// i along in_axis input features [i·in_unit, (i+1)·in_unit). -1: the tensor
// does not follow that side and every rank keeps it whole.
struct ShardAxes {
  std::string_view role;
  int out_axis = -1;
  int64_t out_unit = 1;
  int in_axis = -1;
  int64_t in_unit = 1;
};

// The common shard rule: every bound tensor is sliced by its entry in `axes`
// (kept whole when it has none, or none for this split); the bias follows
// split_bias(). Formats whose layout is only a set of such axes use this alone.
void shard_by_axes(ShardBuilder& b, std::initializer_list<ShardAxes> axes);

// Formats with zero-padded rows and swizzled 128x4 block-scale tiles (nvfp4,
// mxfp8; the tile layout is docs/FORMATS.md §2.3): the weight [rows, K/k_per_byte]
// and the block scales are re-laid for the rank's rows (padded again to
// `row_pad`) or K band. Swizzled scales cannot be sliced as stored: a K band
// does not select whole tiles, nor does a row range that is not whole 128-row
// tiles, so those are un-swizzled for the rank's entries and swizzled again.
// Roles in `per_k` ([K] vectors) follow the K band. A row split whose logical
// N is shorter than the stored rows (N from the bias) gives ranks > 0 a zero
// bias, so that their layer still says N.
struct BlockScaledLayout {
  int64_t block = 16;      // K per block scale
  int64_t k_per_byte = 2;  // weight elements per byte along K
  int64_t row_pad = 16;    // stored rows are a multiple of this
  std::vector<std::string_view> per_k = {};
};
void shard_block_scaled(ShardBuilder& b, const BlockScaledLayout& layout);

}  // namespace formats
}  // namespace mixq
