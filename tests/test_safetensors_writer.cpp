// SafetensorsWriter: round trips for every dtype, the on-disk layout
// (contiguous, aligned, header padded), atomic commit and its errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/safetensors_writer.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

std::vector<std::byte> slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// Files other than `keep` in `dir` (left-over temporaries).
std::vector<std::string> other_files(const fs::path& dir, const std::string& keep = "") {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep) names.push_back(e.path().filename().string());
  return names;
}

template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    FAIL() << "no error; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SafetensorsWriter, RoundTripEveryDtype) {
  fs::path dir = testing::temp_dir("writer-roundtrip");
  std::vector<OwnedTensor> tensors;
  // Odd element counts so that a naive layout would misalign later tensors.
  const Shape shapes[] = {{3, 5}, {7}, {}, {1, 3, 1}, {0, 4}};
  uint64_t seed = 1;
  for (int d = 0; d <= static_cast<int>(DType::BOOL); ++d) {
    auto dtype = static_cast<DType>(d);
    for (const Shape& shape : shapes) {
      std::string name = "t." + std::string(dtype_name(dtype)) + "." + shape_str(shape);
      tensors.push_back({name, dtype, shape, random_bytes(shape_numel(shape) * dtype_size(dtype), seed++)});
    }
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "h\xc3\xa9llo"}};
  write_safetensors((dir / "m.safetensors").string(), tensors, metadata);
  EXPECT_TRUE(other_files(dir, "m.safetensors").empty());

  Checkpoint c = Checkpoint::open((dir / "m.safetensors").string());
  ASSERT_EQ(c.tensors().size(), tensors.size());
  EXPECT_EQ(c.files()[0].metadata, metadata);
  EXPECT_EQ(c.files()[0].trailing_bytes, 0u);
  EXPECT_TRUE(c.warnings().empty());
  EXPECT_EQ(c.files()[0].header_bytes % 8, 0u);
  for (const auto& t : tensors) {
    const TensorView* v = c.find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->data.size(), t.data.size());
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), v->data.begin())) << t.name;
    // Every tensor starts aligned to its element size, in the file and in memory.
    EXPECT_EQ(v->offset % dtype_size(v->dtype), 0u) << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data.data()) % dtype_size(v->dtype), 0u) << t.name;
  }
}

TEST(SafetensorsWriter, DataIsContiguousAndCoversTheFile) {
  fs::path path = testing::temp_dir("writer-layout") / "l.safetensors";
  std::vector<OwnedTensor> tensors{{"a", DType::U8, {3}, random_bytes(3, 1)},
                                   {"b", DType::F32, {5}, random_bytes(20, 2)},
                                   {"c", DType::F16, {3}, random_bytes(6, 3)},
                                   {"d", DType::I64, {1}, random_bytes(8, 4)}};
  write_safetensors(path.string(), tensors);
  Checkpoint c = Checkpoint::open(path.string());
  const FileInfo& f = c.files()[0];
  EXPECT_EQ(f.bytes, 8 + f.header_bytes + 3 + 20 + 6 + 8);
  EXPECT_EQ((8 + f.header_bytes) % 8, 0u);
  // Largest element size first: d (8), b (4), c (2), a (1).
  const uint64_t data = 8 + f.header_bytes;
  EXPECT_EQ(c.find("d")->offset, data);
  EXPECT_EQ(c.find("b")->offset, data + 8);
  EXPECT_EQ(c.find("c")->offset, data + 28);
  EXPECT_EQ(c.find("a")->offset, data + 34);
  // Header is padded with spaces and carries no __metadata__ when empty.
  auto bytes = slurp(path);
  std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, f.header_bytes);
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
}

TEST(SafetensorsWriter, SecondWriteIsByteIdentical) {
  fs::path dir = testing::temp_dir("writer-identical");
  std::vector<OwnedTensor> tensors{{"x", DType::BF16, {4, 2}, random_bytes(16, 7)},
                                   {"y", DType::U8, {5}, random_bytes(5, 8)}};
  write_safetensors((dir / "1.safetensors").string(), tensors, {{"k", "v"}});
  // Re-writing what was read gives the same bytes.
  Checkpoint c = Checkpoint::open((dir / "1.safetensors").string());
  std::vector<OwnedTensor> again;
  for (const auto& v : c.tensors())
    again.push_back({v.name, v.dtype, v.shape, std::vector<std::byte>(v.data.begin(), v.data.end())});
  write_safetensors((dir / "2.safetensors").string(), again, c.files()[0].metadata);
  EXPECT_EQ(slurp(dir / "1.safetensors"), slurp(dir / "2.safetensors"));
}

TEST(SafetensorsWriter, ReplacesTargetAtomically) {
  fs::path dir = testing::temp_dir("writer-replace");
  fs::path path = dir / "r.safetensors";
  std::vector<OwnedTensor> one{{"a", DType::U8, {1}, random_bytes(1, 1)}};
  write_safetensors(path.string(), one);
  {
    SafetensorsWriter w(path.string());
    w.declare("b", DType::U8, {2});
    w.write(random_bytes(2, 2));
    // Before commit the target still holds the old file and a temporary exists.
    EXPECT_NE(Checkpoint::open(path.string()).find("a"), nullptr);
    auto temps = other_files(dir, "r.safetensors");
    ASSERT_EQ(temps.size(), 1u);
    EXPECT_EQ(temps[0].rfind(".r.safetensors.tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << temps[0];
    w.commit();
  }
  Checkpoint c = Checkpoint::open(path.string());
  EXPECT_EQ(c.find("a"), nullptr);
  EXPECT_NE(c.find("b"), nullptr);
  EXPECT_TRUE(other_files(dir, "r.safetensors").empty());
}

TEST(SafetensorsWriter, UncommittedWriterLeavesNothing) {
  fs::path dir = testing::temp_dir("writer-abandon");
  {
    SafetensorsWriter w((dir / "x.safetensors").string());
    w.declare("a", DType::F32, {2});
    w.write(random_bytes(8, 1));
  }
  EXPECT_TRUE(other_files(dir).empty());
}

TEST(SafetensorsWriter, Errors) {
  fs::path dir = testing::temp_dir("writer-errors");
  std::string path = (dir / "e.safetensors").string();
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::F32, {2});
    w.write(random_bytes(7, 1));
  }, "tensor 'a' (F32 [2]) needs 8 bytes, got 7");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::U8, {1});
    w.write(random_bytes(1, 1));
    w.write(random_bytes(1, 1));
  }, "past the 1 declared tensors");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::U8, {1});
    w.declare("b", DType::U8, {1});
    w.write(random_bytes(1, 1));
    w.commit();
  }, "commit with 1 of 2 declared tensors written (next: 'b')");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::U8, {1});
    w.declare("a", DType::U8, {1});
  }, "tensor 'a' declared twice");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::U8, {-2});
  }, "negative dimension");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare(std::string("bad\0name", 8), DType::U8, {1});
  }, "tensor name 'bad\\0...' holds a NUL byte");
  expect_error([&] {
    SafetensorsWriter w(path);
    w.declare("a", DType::U8, {1});
    w.write(random_bytes(1, 1));
    w.declare("b", DType::U8, {1});
  }, "declared after writing started");
  expect_error([&] { SafetensorsWriter w((dir / "missing" / "e.safetensors").string()); },
               "cannot create temporary file");
  EXPECT_TRUE(other_files(dir).empty());
}

TEST(SafetensorsWriter, EmptyCheckpoint) {
  fs::path path = testing::temp_dir("writer-empty") / "z.safetensors";
  write_safetensors(path.string(), {}, {{"only", "metadata"}});
  Checkpoint c = Checkpoint::open(path.string());
  EXPECT_TRUE(c.tensors().empty());
  EXPECT_EQ(c.files()[0].metadata.at("only"), "metadata");
}

TEST(SafetensorsWriter, DataBytes) {
  SafetensorsWriter w((testing::temp_dir("writer-bytes") / "d.safetensors").string());
  w.declare("a", DType::U8, {3});
  w.declare("b", DType::F64, {2, 2});
  EXPECT_EQ(w.data_bytes(), 3u + 32u);
}

}  // namespace
}  // namespace mixq
