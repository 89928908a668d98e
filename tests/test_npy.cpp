// .npy reading and writing: round trips (v1.0, v2.0 headers, <f2 input) and
// one malformed file per rejection rule.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "mixq/error.hpp"
#include "mixq/npy.hpp"
#include "mixq/numeric.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A .npy file with the given header dict text and raw data, version `major`.
fs::path npy_file(const fs::path& dir, const std::string& name, const std::string& dict,
                  const std::string& data, int major = 1) {
  std::string header = dict;
  size_t preamble = major == 1 ? 10 : 12;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + data;
  fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

void expect_error(const fs::path& path, const std::vector<std::string>& needles) {
  try {
    read_npy(path.string());
    FAIL() << "accepted " << path;
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path.filename().string()), std::string::npos) << message;
    for (const auto& n : needles) EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' not in: " << message;
  }
}

TEST(Npy, RoundTrip) {
  fs::path dir = testing::temp_dir("npy-roundtrip");
  for (const Shape& shape : {Shape{3, 5}, Shape{7}, Shape{}, Shape{2, 0, 3}, Shape{2, 3, 4}}) {
    auto values = testing::random_floats(static_cast<size_t>(shape_numel(shape)), 42);
    fs::path path = dir / "a.npy";
    write_npy(path.string(), shape, values.data());
    NpyArray a = read_npy(path.string());
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.values, values);
    // The data starts 64-aligned, as numpy writes it.
    std::string bytes = slurp(path);
    EXPECT_EQ((bytes.size() - values.size() * 4) % 64, 0u);
    EXPECT_EQ(bytes[6], '\x01');
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporaries
}

TEST(Npy, WritesNumpyHeaderText) {
  fs::path path = testing::temp_dir("npy-header") / "h.npy";
  float v[3] = {1, 2, 3};
  write_npy(path.string(), {3}, v);
  std::string bytes = slurp(path);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  // Padded with spaces and a newline so that the data starts at byte 128.
  EXPECT_EQ(bytes.size(), 128u + 12u);
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes.find_first_not_of(' ', 10 + dict.size()), 127u);
}

TEST(Npy, ReadsVersion2AndHalf) {
  fs::path dir = testing::temp_dir("npy-v2");
  std::vector<float> values{1.5f, -2.0f, 0.25f, 65504.0f};
  auto a = read_npy(npy_file(dir, "v2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                             f32_bytes(values), 2).string());
  EXPECT_EQ(a.shape, (Shape{2, 2}));
  EXPECT_EQ(a.values, values);

  std::string half;
  for (float v : values) {
    uint16_t bits = f32_to_f16(v);
    half.append(reinterpret_cast<const char*>(&bits), 2);
  }
  auto h = read_npy(npy_file(dir, "h.npy", "{\"descr\": \"<f2\", \"fortran_order\": False, \"shape\": (4,)}", half).string());
  EXPECT_EQ(h.shape, (Shape{4}));
  EXPECT_EQ(h.values, values);  // all exactly representable in f16
}

TEST(Npy, Rejects) {
  fs::path dir = testing::temp_dir("npy-bad");
  const std::string ok_data = f32_bytes({1, 2, 3, 4});
  expect_error(npy_file(dir, "fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", ok_data),
               {"Fortran order"});
  expect_error(npy_file(dir, "f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", ok_data),
               {"dtype '<f8' is not supported"});
  expect_error(npy_file(dir, "big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", ok_data),
               {"'>f4' is big-endian"});
  expect_error(npy_file(dir, "short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", ok_data),
               {"truncated", "needs 24 bytes, found 16"});
  expect_error(npy_file(dir, "long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", ok_data),
               {"4 bytes after the data"});
  expect_error(npy_file(dir, "neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", ok_data),
               {"negative dimension"});
  expect_error(npy_file(dir, "huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ok_data),
               {"overflows"});
  expect_error(npy_file(dir, "nokey.npy", "{'descr': '<f4', 'shape': (4,), }", ok_data), {"no 'fortran_order'"});
  expect_error(npy_file(dir, "garbage.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,) junk", ok_data),
               {"malformed .npy header"});
  expect_error(npy_file(dir, "v3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", ok_data, 3),
               {"version 3.0 is not supported"});
  fs::path magic = dir / "magic.npy";
  std::ofstream(magic, std::ios::binary) << "PK\x03\x04 not numpy";
  expect_error(magic, {"not a .npy file"});
  // Header length pointing past the end of the file.
  fs::path cut = dir / "cut.npy";
  std::ofstream(cut, std::ios::binary) << std::string("\x93NUMPY\x01\x00\xff\x7f{'descr'", 18);
  expect_error(cut, {"extends past the end"});
  expect_error(dir / "absent.npy", {"cannot open: No such file or directory"});
}

TEST(Npy, WriteRejectsNegativeShape) {
  fs::path dir = testing::temp_dir("npy-write-bad");
  float v = 0;
  EXPECT_THROW(write_npy((dir / "x.npy").string(), {-1}, &v), Error);
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace mixq
