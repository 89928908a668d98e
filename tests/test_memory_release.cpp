// Release of consumed file pages (LinearOptions::release_file_pages,
// MappedFile::release_pages): once a Linear is built, the whole pages under
// its layer's tensors leave the process' resident memory, the partial pages at
// the edges stay, the data stays readable (a later read faults it in again
// from the file, bit for bit), memory that is not a file mapping is never
// touched, and a file truncated under the mapping is still reported.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/mapped_file.hpp"
#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/layer.hpp"
#include "mixq/linear.hpp"
#include "mixq/marker.hpp"
#include "support/kernel_paths.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// Resident bytes of this process in the mapping that contains `address`
// (/proc/self/smaps "Rss:" of that mapping).
uint64_t mapping_rss(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= begin && a < end;
      continue;
    }
    uint64_t kib = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %lu kB", &kib) == 1) return kib * 1024;
  }
  return UINT64_MAX;
}

std::vector<std::byte> file_bytes(const fs::path& path, uint64_t offset, size_t count) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> out(count);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count));
  return out;
}

// Reads one byte of every cache line (into a volatile, so the reads stay).
void touch(std::span<const std::byte> data) {
  uint64_t sum = 0;
  for (size_t i = 0; i < data.size(); i += 64) sum += static_cast<uint8_t>(data[i]);
  volatile uint64_t sink = sum;
  (void)sink;
}

// Four layers of [256, 4096] (1 MiB of weight each for 8-bit formats) and a
// float tensor no layer claims.
fs::path write_checkpoint(const std::string& name, const std::string& format, const nlohmann::json& marker) {
  const fs::path path = testing::temp_dir(name) / "layers.safetensors";
  const FormatTraits* f = find_format(format);
  const nlohmann::json params = apply_defaults(*f, marker);
  testing::CheckpointBuilder b;
  for (int i = 0; i < 4; ++i) {
    const std::string prefix = "blocks." + std::to_string(i) + ".attn";
    const std::vector<float> w = testing::random_floats(256 * 4096, 10 + i, 0.05f);
    QuantizedLayer q = f->quantize(w.data(), 256, 4096, params);
    for (OwnedTensor& t : q.tensors) {
      t.name = prefix + "." + t.name;
      b.add(std::move(t));
    }
    b.add_marker(prefix, q.marker.dump());
    b.add_float(prefix + ".bias", DType::F32, {256}, testing::random_floats(256, 20 + i, 0.1f));
  }
  b.add_float("extra.table", DType::F32, {4096}, testing::random_floats(4096, 99));
  b.write(path);
  return path;
}

// INT8 ConvRot: its fast kernels read the weight in place (no pages released).
fs::path write_int8_checkpoint(const std::string& name) {
  return write_checkpoint(name, "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}});
}

const Layer& layer_of(const LayerSet& set, const std::string& prefix) {
  for (const Layer& l : set.layers)
    if (l.prefix == prefix) return l;
  throw Error("no layer " + prefix);
}

TEST(MemoryRelease, LinearCreateDropsTheLayersFilePagesAndTheDataStaysReadable) {
  // asym_w4a8 copies its codes and scales (decoded per tile in the GEMM), so
  // the file pages can go.
  const fs::path path = write_checkpoint("release", "asym_w4a8_int8", nlohmann::json::object());
  const Checkpoint c = Checkpoint::open(path.string());
  const LayerSet set = group_layers(c, collect_markers(c));
  const Layer& layer = layer_of(set, "blocks.1.attn");
  const TensorView& w = layer.tensor("weight");
  const void* mapping = c.tensors().front().data.data();

  // Everything resident, as after reading the file once.
  for (const TensorView& t : c.tensors()) touch(t.data);
  const uint64_t before = mapping_rss(mapping);
  ASSERT_NE(before, UINT64_MAX);
  ASSERT_GE(before, c.files()[0].bytes / kPage * kPage);

  std::vector<float> x(3 * 4096), y0(3 * 256), y1(3 * 256), y2(3 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  LinearOptions keep;
  keep.release_file_pages = false;
  Linear::create(layer, keep)->forward(x.data(), 3, y0.data());
  EXPECT_EQ(mapping_rss(mapping), before) << "release_file_pages = false keeps the pages";

  const std::unique_ptr<Linear> linear = Linear::create(layer);  // releases by default
  const uint64_t after = mapping_rss(mapping);
  // The layer's bytes (weight, scale, bias, marker) less at most one partial
  // page at each end of each run of touching tensors.
  const uint64_t layer_bytes = layer.bytes();
  EXPECT_LE(after, before - (layer_bytes - 2 * layer.tensors.size() * kPage)) << "before " << before;
  EXPECT_GE(after, before - layer_bytes) << "only this layer's pages go";
  linear->forward(x.data(), 3, y1.data());
  EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * 4), 0);

  // The released bytes read back from the file, bit for bit.
  const std::vector<std::byte> expect = file_bytes(path, w.offset, w.data.size());
  ASSERT_EQ(w.data.size(), expect.size());
  EXPECT_EQ(std::memcmp(w.data.data(), expect.data(), expect.size()), 0);
  std::vector<float> d0(256 * 4096), d1(256 * 4096);
  layer.format->dequantize(layer, Basis::original, d0.data());
  Linear::create(layer)->forward(x.data(), 3, y2.data());  // a second build from the refaulted pages
  EXPECT_EQ(std::memcmp(y0.data(), y2.data(), y0.size() * 4), 0);
  layer.format->dequantize(layer, Basis::original, d1.data());
  EXPECT_EQ(std::memcmp(d0.data(), d1.data(), d0.size() * 4), 0);
  EXPECT_NO_THROW(c.check_intact());

  // The other layers' and the unclaimed tensor's pages are all still there.
  const TensorView* extra = c.find("extra.table");
  ASSERT_NE(extra, nullptr);
  const uint64_t now = mapping_rss(mapping);
  touch(extra->data);
  EXPECT_EQ(mapping_rss(mapping), now);
}

// A layer whose fast kernels read the weight from the mapping (INT8, NVFP4,
// FP8, MXFP8): nothing is released, the Linear holds next to nothing itself,
// gives the packed kernels' results bit for bit (the same layer built from
// views without a file, so packed; M = 1, 5 and 130: every kernel shape),
// keeps the file mapped after the Checkpoint is gone, and reports a file
// truncated under it.
void expect_in_place_linear(const std::string& name, const std::string& format, const nlohmann::json& marker) {
  const fs::path path = write_checkpoint(name, format, marker);
  const int64_t kRows[] = {1, 5, 130};  // 130: past the float GEMM's 128-row chunk
  std::vector<float> x(130 * 4096), want(130 * 256), got(130 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.29f * static_cast<float>(i));
  std::unique_ptr<Linear> linear, packed;
  {
    const Checkpoint c = Checkpoint::open(path.string());
    const LayerSet set = group_layers(c, collect_markers(c));
    const Layer& layer = layer_of(set, "blocks.2.attn");
    const void* mapping = c.tensors().front().data.data();
    for (const TensorView& t : c.tensors()) touch(t.data);
    const uint64_t before = mapping_rss(mapping);
    linear = Linear::create(layer);  // release_file_pages = true
    ASSERT_TRUE(linear->reads_file_in_place()) << linear->kernel_name();
    EXPECT_EQ(mapping_rss(mapping), before) << "the weight's pages are its memory: none released";
    const int64_t weight_bytes = static_cast<int64_t>(layer.tensor("weight").data.size());
    ASSERT_TRUE(linear->packed_bytes().has_value());
    // Scales and bias only, not a copy (MXFP8's block exponents, re-laid per
    // panel, are 1/32 of its codes).
    EXPECT_LE(*linear->packed_bytes(), weight_bytes / 20) << format;
    Layer unmapped = layer;  // the same bytes, as a caller's buffer: packed
    for (auto& [role, t] : unmapped.tensors) t.storage = nullptr;
    LinearOptions keep;
    keep.release_file_pages = false;
    packed = Linear::create(unmapped, keep);
    ASSERT_FALSE(packed->reads_file_in_place());
    ASSERT_EQ(packed->kernel_name(), linear->kernel_name());
  }
  // The Checkpoint and the layer set are gone; the Linear still holds the file.
  for (int64_t m : kRows) {
    packed->forward(x.data(), m, want.data());
    std::fill(got.begin(), got.end(), 0.0f);
    linear->forward(x.data(), m, got.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), static_cast<size_t>(m * 256 * 4)), 0) << format << " M = " << m;
  }
  // Truncated under it: the forward reads zeros (SIGBUS guard) and says so.
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  for (int64_t m : kRows) EXPECT_THROW(linear->forward(x.data(), m, got.data()), Error) << "M = " << m;
}

TEST(MemoryRelease, AnInPlaceInt8LinearKeepsTheFileAndOutlivesTheCheckpoint) {
  MIXQ_KERNEL_PATH_OR_SKIP("int_gemm:in_place_rows", kernels::Isa::avx2, testing::missing_isa(kernels::Isa::avx2));
  expect_in_place_linear("in-place-int8", "int8_tensorwise", {{"convrot", true}, {"convrot_groupsize", 256}});
}

TEST(MemoryRelease, AnInPlaceFp8LinearKeepsTheFileAndOutlivesTheCheckpoint) {
  MIXQ_KERNEL_PATH_OR_SKIP("float_gemm:in_place", kernels::Isa::avx2, testing::missing_isa(kernels::Isa::avx2));
  expect_in_place_linear("in-place-fp8", "float8_e4m3fn", nlohmann::json::object());
  expect_in_place_linear("in-place-mxfp8", "mxfp8", nlohmann::json::object());
}

TEST(MemoryRelease, AnInPlaceNvfp4LinearKeepsTheFileAndOutlivesTheCheckpoint) {
  MIXQ_KERNEL_PATH_OR_SKIP("nvfp4:in_place", kernels::Isa::avx2, testing::missing_isa(kernels::Isa::avx2));
  expect_in_place_linear("in-place-nvfp4", "nvfp4", nlohmann::json::object());
}

TEST(MemoryRelease, OnlyWholePagesInsideTheRangeGo) {
  const fs::path path = testing::temp_dir("release-pages") / "f.safetensors";
  testing::CheckpointBuilder b;
  b.add("a", DType::U8, {static_cast<int64_t>(8 * kPage)}, std::vector<std::byte>(8 * kPage, std::byte{7}));
  b.write(path);
  const Checkpoint c = Checkpoint::open(path.string());
  const TensorView& a = *c.find("a");
  touch(a.data);
  const std::byte* base = a.data.data();
  const uint64_t start = reinterpret_cast<uintptr_t>(base) % kPage;  // the header makes it unaligned
  ASSERT_NE(start, 0u) << "the test wants a tensor that starts inside a page";
  // [base, base + 3 pages) holds two whole pages (the first one is partial).
  EXPECT_EQ(MappedFile::release_pages({base, 3 * kPage}), 2 * kPage);
  EXPECT_EQ(MappedFile::release_pages({base, kPage}), 0u) << "no whole page inside";
  EXPECT_EQ(MappedFile::release_pages({}), 0u);
  for (std::byte v : a.data) ASSERT_EQ(v, std::byte{7});
}

TEST(MemoryRelease, MemoryThatIsNotAFileMappingIsNeverTouched) {
  // A page-aligned heap buffer, an in-memory checkpoint (MappedFile::copy_of)
  // and tensors a quantizer returned: release_pages must leave them alone
  // (MADV_DONTNEED on anonymous memory would zero it).
  std::vector<std::byte> heap(16 * kPage, std::byte{3});
  EXPECT_EQ(MappedFile::release_pages(heap), 0u);
  for (std::byte v : heap) ASSERT_EQ(v, std::byte{3});

  testing::CheckpointBuilder b;
  b.add("a", DType::U8, {static_cast<int64_t>(8 * kPage)}, std::vector<std::byte>(8 * kPage, std::byte{9}));
  const fs::path path = testing::temp_dir("release-memory") / "m.safetensors";
  b.write(path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  const std::string image = all.str();
  const Checkpoint c = Checkpoint::from_bytes(std::as_bytes(std::span(image.data(), image.size())));
  EXPECT_EQ(MappedFile::release_pages(c.find("a")->data), 0u);
  for (std::byte v : c.find("a")->data) ASSERT_EQ(v, std::byte{9});

  const FormatTraits* f = find_format("int8_tensorwise");
  const std::vector<float> w = testing::random_floats(64 * 4096, 5, 0.05f);
  QuantizedLayer q = f->quantize(w.data(), 64, 4096, apply_defaults(*f, nlohmann::json::object()));
  const std::vector<std::byte> copy = q.tensors[0].data;
  EXPECT_EQ(MappedFile::release_pages(q.tensors[0].data), 0u);
  EXPECT_EQ(q.tensors[0].data, copy);
}

TEST(MemoryRelease, AFileTruncatedUnderTheMappingIsStillReported) {
  const fs::path path = write_int8_checkpoint("release-truncate");
  const Checkpoint c = Checkpoint::open(path.string());
  const LayerSet set = group_layers(c, collect_markers(c));
  const Layer& layer = layer_of(set, "blocks.3.attn");
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  // Reading past the new end raises SIGBUS, which the guard turns into zeros;
  // releasing those pages afterwards must neither crash nor hide the fault.
  std::unique_ptr<Linear> linear;
  try {
    linear = Linear::create(layer);
  } catch (const Error&) {
    // A zero weight may be rejected by a format; the file check below matters.
  }
  touch(layer.tensor("weight").data);
  const TensorView& w = layer.tensor("weight");
  MappedFile::release_pages(w.data);
  for (std::byte v : w.data) ASSERT_EQ(v, std::byte{0});
  EXPECT_THROW(c.check_intact(), Error);
}

}  // namespace
}  // namespace mixq
