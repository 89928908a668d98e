#include "formats/shard_util.hpp"

#include <cstring>

#include "formats/record_util.hpp"
#include "mixq/error.hpp"
#include "numeric/swizzle.hpp"

namespace mixq {
namespace {

// Adjacent ranges joined (a fused layer at degree 1, or parts that meet).
std::vector<IndexRange> merged(const std::vector<IndexRange>& ranges) {
  std::vector<IndexRange> out;
  for (const IndexRange& r : ranges) {
    if (!out.empty() && out.back().end == r.begin)
      out.back().end = r.end;
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

ShardBuilder::ShardBuilder(const Layer& source, const ShardCut& cut) : source_(source), cut_(cut) {}

std::vector<IndexRange> ShardBuilder::out_ranges() const {
  const int64_t part = source_.out_features / cut_.parts;
  const int64_t rows = part / cut_.degree;
  std::vector<IndexRange> ranges;
  for (int p = 0; p < cut_.parts; ++p) {
    const int64_t begin = p * part + cut_.rank * rows;
    ranges.push_back({begin, begin + rows});
  }
  return ranges;
}

IndexRange ShardBuilder::in_range() const {
  const int64_t band = source_.in_features / cut_.degree;
  return {cut_.rank * band, (cut_.rank + 1) * band};
}

const TensorView& ShardBuilder::source_tensor(std::string_view role) const { return source_.tensor(role); }

std::string ShardBuilder::name_for(std::string_view role) const {
  const TensorView* t = source_.find(role);
  return t ? t->name : source_.prefix + "." + std::string(role);
}

void ShardBuilder::keep(std::string_view role) { views_[std::string(role)] = source_tensor(role); }

void ShardBuilder::view(std::string_view role, Shape shape, size_t offset) {
  const TensorView& t = source_tensor(role);
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(t.dtype);
  if (offset > t.data.size() || bytes > t.data.size() - offset)
    fail("layer '{}': shard of '{}' reads {} bytes at {} past its {} bytes", source_.prefix, t.name, bytes, offset,
         t.data.size());
  TensorView v = t;
  v.shape = std::move(shape);
  v.data = t.data.subspan(offset, bytes);
  v.offset = t.offset + offset;
  views_[std::string(role)] = std::move(v);
}

void ShardBuilder::put(std::string_view role, DType dtype, Shape shape, std::vector<std::byte> data) {
  if (static_cast<int64_t>(data.size()) != shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype)))
    fail("layer '{}': shard of '{}' holds {} bytes for {} {}", source_.prefix, role, data.size(), dtype_name(dtype),
         shape_str(shape));
  views_.erase(std::string(role));
  owned_.emplace_back(std::string(role), OwnedTensor{name_for(role), dtype, std::move(shape), std::move(data)});
}

void ShardBuilder::slice(std::string_view role, int axis, const std::vector<IndexRange>& ranges, int64_t unit) {
  const TensorView& t = source_tensor(role);
  if (axis < 0 || axis >= static_cast<int>(t.rank()))
    fail("layer '{}': cannot shard '{}' {} along axis {}", source_.prefix, t.name, shape_str(t.shape), axis);
  std::vector<IndexRange> index;
  int64_t count = 0;
  for (const IndexRange& r : ranges) {
    if (r.begin % unit != 0 || r.end % unit != 0 || r.end / unit > t.shape[axis] || r.begin > r.end)
      fail("layer '{}': the shard [{}, {}) of '{}' {} is not whole units of {} along axis {}", source_.prefix,
           r.begin, r.end, t.name, shape_str(t.shape), unit, axis);
    index.push_back({r.begin / unit, r.end / unit});
    count += r.size() / unit;
  }
  index = merged(index);
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype));
  for (int d = 0; d < axis; ++d) outer *= t.shape[d];
  for (size_t d = axis + 1; d < t.rank(); ++d) inner *= t.shape[d];
  Shape shape = t.shape;
  shape[axis] = count;
  if (index.size() == 1 && index[0].size() == t.shape[axis]) {
    keep(role);
    return;
  }
  if (index.size() == 1 && outer == 1) {
    view(role, std::move(shape), static_cast<size_t>(index[0].begin * inner));
    return;
  }
  std::vector<std::byte> data(static_cast<size_t>(outer * count * inner));
  std::byte* out = data.data();
  const int64_t stride = t.shape[axis] * inner;
  for (int64_t o = 0; o < outer; ++o)
    for (const IndexRange& r : index) {
      std::memcpy(out, t.data.data() + o * stride + r.begin * inner, static_cast<size_t>(r.size() * inner));
      out += r.size() * inner;
    }
  put(role, t.dtype, std::move(shape), std::move(data));
}

void ShardBuilder::split_bias() {
  if (!source_.find("bias")) return;
  if (column())
    slice("bias", 0, out_ranges());
  else if (!row() || cut_.rank == 0)
    keep("bias");
}

void ShardBuilder::keep_all() {
  for (const auto& [role, view] : source_.tensors) keep(role);
}

ShardedLayer ShardBuilder::finish() {
  Layer layer;
  layer.prefix = source_.prefix;
  layer.format = source_.format;
  layer.declared_format = source_.declared_format;
  layer.params = source_.params;
  layer.marker_source = source_.marker_source;
  layer.k_pad_unit = source_.k_pad_unit;
  for (const auto& [role, view] : views_) layer.tensors[role] = view;
  std::vector<OwnedTensor> owned;
  owned.reserve(owned_.size());
  for (auto& [role, tensor] : owned_) owned.push_back(std::move(tensor));
  // The views into the copies are taken after the move: a moved vector keeps its buffer.
  for (size_t i = 0; i < owned.size(); ++i) layer.tensors[owned_[i].first] = owned[i].view();
  owned_.clear();
  validate_layer(layer);
  return {std::move(layer), std::move(owned)};
}

namespace formats {

void shard_by_axes(ShardBuilder& b, std::initializer_list<ShardAxes> axes) {
  for (const auto& [role, view] : b.source().tensors) {
    if (role == "bias") continue;
    const ShardAxes* entry = nullptr;
    for (const ShardAxes& a : axes)
      if (a.role == role) entry = &a;
    if (entry && b.column() && entry->out_axis >= 0)
      b.slice(role, entry->out_axis, b.out_ranges(), entry->out_unit);
    else if (entry && b.row() && entry->in_axis >= 0)
      b.slice(role, entry->in_axis, {b.in_range()}, entry->in_unit);
    else
      b.keep(role);
  }
  b.split_bias();
}

void shard_block_scaled(ShardBuilder& b, const BlockScaledLayout& layout) {
  const Layer& source = b.source();
  const TensorView& weight = source.tensor("weight");
  const TensorView& scales = source.tensor("weight_scale");
  const int64_t rows = weight.shape[0], row_bytes = weight.shape[1];
  const int64_t blocks = row_bytes * layout.k_per_byte / layout.block;
  if (static_cast<int64_t>(scales.data.size()) < swizzled_rows(rows) * swizzled_cols(blocks))
    fail("layer '{}': '{}' holds {} bytes, {} x {} swizzled block scales need {}", source.prefix, scales.name,
         scales.data.size(), rows, blocks, swizzled_rows(rows) * swizzled_cols(blocks));
  const auto* stored = reinterpret_cast<const uint8_t*>(scales.data.data());
  // The shard's scales are picked from the layer's, unswizzled once, a tile
  // run at a time (numeric/swizzle.cpp), not entry by entry.
  auto all_scales = [&] { return unswizzle_scales(stored, rows, blocks); };
  // The swizzled shape, 2-D unless the source stored it 1-D.
  auto scale_shape = [&](int64_t r, int64_t c) {
    const int64_t rp = swizzled_rows(r), cp = swizzled_cols(c);
    return scales.rank() == 1 ? Shape{rp * cp} : Shape{rp, cp};
  };
  auto put_scales = [&](const std::vector<uint8_t>& swizzled, int64_t r, int64_t c) {
    std::vector<std::byte> data(swizzled.size());
    std::memcpy(data.data(), swizzled.data(), swizzled.size());
    b.put("weight_scale", scales.dtype, scale_shape(r, c), std::move(data));
  };

  for (const auto& [role, view] : source.tensors)
    if (role != "weight" && role != "weight_scale" && role != "bias") b.keep(role);

  if (b.column()) {
    const std::vector<IndexRange> ranges = b.out_ranges();
    int64_t n = 0;
    for (const IndexRange& r : ranges) n += r.size();
    const bool contiguous = ranges.size() == 1 && ranges[0].begin % 128 == 0 && n % 128 == 0;
    if (contiguous) {  // whole 128-row tiles: views of both
      b.view("weight", {n, row_bytes}, static_cast<size_t>(ranges[0].begin * row_bytes));
      b.view("weight_scale", scale_shape(n, blocks),
             static_cast<size_t>(ranges[0].begin * swizzled_cols(blocks)));
    } else {
      const int64_t shard_rows = formats::roundup(n, layout.row_pad);
      std::vector<std::byte> codes(static_cast<size_t>(shard_rows * row_bytes));  // pad rows stay 0
      std::vector<uint8_t> linear(static_cast<size_t>(shard_rows * blocks));
      const std::vector<uint8_t> all = all_scales();
      int64_t i = 0;
      for (const IndexRange& range : ranges) {
        std::memcpy(codes.data() + i * row_bytes, weight.data.data() + range.begin * row_bytes,
                    static_cast<size_t>(range.size() * row_bytes));
        std::memcpy(linear.data() + i * blocks, all.data() + range.begin * blocks,
                    static_cast<size_t>(range.size() * blocks));
        i += range.size();
      }
      b.put("weight", weight.dtype, {shard_rows, row_bytes}, std::move(codes));
      put_scales(swizzle_scales(linear.data(), shard_rows, blocks), shard_rows, blocks);
    }
    b.split_bias();
    return;
  }

  const IndexRange band = b.in_range();
  if (band.begin % layout.block != 0 || band.size() % layout.block != 0)
    fail("layer '{}': K band [{}, {}) is not whole blocks of {}", source.prefix, band.begin, band.end, layout.block);
  b.slice("weight", 1, {band}, layout.k_per_byte);
  const int64_t first = band.begin / layout.block, count = band.size() / layout.block;
  std::vector<uint8_t> linear(static_cast<size_t>(rows * count));
  const std::vector<uint8_t> all = all_scales();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(linear.data() + r * count, all.data() + r * blocks + first, static_cast<size_t>(count));
  put_scales(swizzle_scales(linear.data(), rows, count), rows, count);
  for (std::string_view role : layout.per_k)
    if (source.find(role)) b.slice(role, 0, {band});
  b.split_bias();
  const TensorView* bias = source.find("bias");
  if (bias && b.cut().rank > 0 && bias->numel() != rows)
    b.put("bias", bias->dtype, bias->shape, std::vector<std::byte>(bias->data.size()));  // +0.0 in every float dtype
}

}  // namespace formats
}  // namespace mixq
