// One malformed safetensors image per validation rule of the reader; each
// error message must name the file, the tensor and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "mixq/checkpoint.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {
namespace {

// [u64 LE length][header][data_bytes zero bytes]. `length` overrides the
// stored header length when given.
std::vector<std::byte> image(const std::string& header, size_t data_bytes,
                             std::optional<uint64_t> length = std::nullopt) {
  uint64_t n = length.value_or(header.size());
  std::vector<std::byte> bytes(8 + header.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

// Expects from_bytes to throw an Error whose message contains every needle.
void expect_error(const std::vector<std::byte>& bytes, std::vector<std::string> needles) {
  try {
    Checkpoint::from_bytes(bytes, "bad.safetensors");
    FAIL() << "accepted a malformed file; expected: " << needles.front();
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << message;
    for (const auto& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  }
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(CheckpointValidation, AcceptsAWellFormedImage) {
  auto bytes = image("{" + entry("a", "F32", "[2,3]", "[0,24]") + "," +
                         entry("b", "U8", "[]", "[24,25]") + ",\"__metadata__\":{\"k\":\"v\"}}",
                     25);
  Checkpoint c = Checkpoint::from_bytes(bytes, "good.safetensors");
  ASSERT_EQ(c.tensors().size(), 2u);
  const TensorView* a = c.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (Shape{2, 3}));
  EXPECT_EQ(a->data.size(), 24u);
  EXPECT_EQ(c.find("b")->numel(), 1);
  EXPECT_EQ(c.find("c"), nullptr);
  EXPECT_EQ(c.files()[0].metadata.at("k"), "v");
  EXPECT_EQ(c.files()[0].trailing_bytes, 0u);
  EXPECT_TRUE(c.warnings().empty());
}

// F8_E8M0 (MX block scales, as comfy-kitchen writes them) is one byte each and
// decodes as 2^(e-127), byte 0 as 0 (comfy-kitchen's e8m0_to_f32).
TEST(CheckpointValidation, AcceptsE8M0Scales) {
  auto bytes = image("{" + entry("s", "F8_E8M0", "[4]", "[0,4]") + "}", 4);
  const uint8_t codes[4] = {127, 130, 0, 1};
  std::memcpy(bytes.data() + bytes.size() - 4, codes, 4);
  Checkpoint c = Checkpoint::from_bytes(bytes, "scales.safetensors");
  const TensorView* s = c.find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->dtype, DType::F8_E8M0);
  EXPECT_EQ(dtype_name(s->dtype), "F8_E8M0");
  EXPECT_EQ(to_f32(*s), (std::vector<float>{1.0f, 8.0f, 0.0f, std::ldexp(1.0f, -126)}));
}

TEST(CheckpointValidation, FileShorterThanLengthPrefix) {
  expect_error(std::vector<std::byte>(5), {"5 bytes", "8-byte header length"});
}

TEST(CheckpointValidation, HeaderLengthHuge) {
  expect_error(image("{}", 0, ~uint64_t{0}), {"header length 18446744073709551615", "limit"});
}

TEST(CheckpointValidation, HeaderLengthOver100MiB) {
  expect_error(image("{}", 0, (100ull << 20) + 1), {"header length 104857601", "100 MiB"});
}

TEST(CheckpointValidation, HeaderLengthBeyondFile) {
  expect_error(image("{}    ", 0, 7), {"header length 7", "past the end of the file"});
}

TEST(CheckpointValidation, HeaderNotJson) {
  expect_error(image("{\"a\":", 0), {"invalid JSON"});
}

TEST(CheckpointValidation, HeaderNotAnObject) {
  expect_error(image("[1,2,3]", 0), {"must be a JSON object", "array"});
}

TEST(CheckpointValidation, UnknownDtype) {
  expect_error(image("{" + entry("w", "C64", "[4]", "[0,4]") + "}", 4),
               {"tensor 'w'", "unsupported dtype 'C64'", "BF16"});
}

TEST(CheckpointValidation, EntryMissingField) {
  expect_error(image("{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1), {"tensor 'w'", "missing 'data_offsets'"});
}

TEST(CheckpointValidation, NegativeShape) {
  expect_error(image("{" + entry("w", "U8", "[-1,4]", "[0,4]") + "}", 4),
               {"tensor 'w'", "shape dimension must be a non-negative integer", "-1"});
}

TEST(CheckpointValidation, NonIntegerShape) {
  expect_error(image("{" + entry("w", "U8", "[2.5]", "[0,2]") + "}", 4),
               {"tensor 'w'", "non-negative integer", "2.5"});
  expect_error(image("{" + entry("w", "U8", "[\"2\"]", "[0,2]") + "}", 4),
               {"tensor 'w'", "non-negative integer", "string"});
}

TEST(CheckpointValidation, OverflowingShape) {
  expect_error(image("{" + entry("w", "U8", "[4294967296,4294967296]", "[0,4]") + "}", 4),
               {"tensor 'w'", "more elements than fit in 64 bits"});
  // Element count fits but the byte size does not.
  expect_error(image("{" + entry("w", "F64", "[2305843009213693952]", "[0,4]") + "}", 4),
               {"tensor 'w'", "larger than 2^63 bytes"});
  expect_error(image("{" + entry("w", "U8", "[9223372036854775808]", "[0,4]") + "}", 4),
               {"tensor 'w'", "too large"});
}

TEST(CheckpointValidation, OffsetsReversed) {
  expect_error(image("{" + entry("w", "U8", "[0]", "[4,0]") + "}", 4), {"tensor 'w'", "[4, 0] are reversed"});
}

TEST(CheckpointValidation, OffsetsPastEnd) {
  expect_error(image("{" + entry("w", "U8", "[8]", "[0,8]") + "}", 4),
               {"tensor 'w'", "end 8 is past the end of the data section (4 bytes)"});
}

TEST(CheckpointValidation, OffsetsWrongSize) {
  expect_error(image("{" + entry("w", "F16", "[3]", "[0,4]") + "}", 8),
               {"tensor 'w'", "span 4 bytes, expected 6"});
}

TEST(CheckpointValidation, OffsetsNotAPair) {
  expect_error(image("{" + entry("w", "U8", "[1]", "[0,1,2]") + "}", 4), {"tensor 'w'", "[begin, end]"});
}

TEST(CheckpointValidation, Overlap) {
  expect_error(image("{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[2,6]") + "}", 8),
               {"'a' [0, 4]", "'b' [2, 6]", "overlap"});
  // A tensor nested inside a longer one is an overlap too.
  expect_error(image("{" + entry("a", "U8", "[8]", "[0,8]") + "," + entry("c", "U8", "[2]", "[4,6]") + "," +
                         entry("b", "U8", "[1]", "[2,3]") + "}",
                     8),
               {"'a' [0, 8]", "overlap"});
}

TEST(CheckpointValidation, EmptyTensorsDoNotOverlap) {
  auto bytes = image("{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("e", "U8", "[0]", "[2,2]") + "}", 4);
  EXPECT_EQ(Checkpoint::from_bytes(bytes).tensors().size(), 2u);
}

TEST(CheckpointValidation, DuplicateNameInFile) {
  expect_error(image("{" + entry("w", "U8", "[1]", "[0,1]") + "," + entry("w", "U8", "[1]", "[1,2]") + "}", 2),
               {"duplicate key 'w'"});
}

TEST(CheckpointValidation, DuplicateKeyInsideEntry) {
  expect_error(image("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
               {"duplicate key 'dtype'"});
}

TEST(CheckpointValidation, MetadataNotAnObject) {
  expect_error(image("{\"__metadata__\":[\"a\"]}", 0), {"__metadata__ must be an object of strings", "array"});
}

TEST(CheckpointValidation, MetadataValueNotAString) {
  expect_error(image("{\"__metadata__\":{\"format\":\"pt\",\"n\":3}}", 0),
               {"__metadata__ key 'n' must hold a string", "number"});
}

TEST(CheckpointValidation, EntryNotAnObject) {
  expect_error(image("{\"w\":3}", 0), {"tensor 'w'", "must be an object"});
}

TEST(CheckpointValidation, DeepNestingRejected) {
  std::string deep = "{\"__metadata__\":" + std::string(200, '[') + std::string(200, ']') + "}";
  expect_error(image(deep, 0), {"nested deeper than"});
}

TEST(CheckpointValidation, InvalidUtf8Rejected) {
  std::string header = "{\"w\xff\":" + std::string("{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
  expect_error(image(header, 1), {"invalid JSON"});
}

TEST(CheckpointValidation, TrailingBytesReported) {
  auto bytes = image("{" + entry("a", "U8", "[4]", "[0,4]") + "}", 4 + 13);
  Checkpoint c = Checkpoint::from_bytes(bytes, "t.safetensors");
  EXPECT_EQ(c.files()[0].trailing_bytes, 13u);
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_NE(c.warnings()[0].find("t.safetensors: 13 bytes after the last tensor"), std::string::npos)
      << c.warnings()[0];
}

TEST(CheckpointValidation, FileInfoCountsHeader) {
  std::string header = "{" + entry("a", "U8", "[4]", "[0,4]") + "}";
  Checkpoint c = Checkpoint::from_bytes(image(header, 4));
  EXPECT_EQ(c.files()[0].header_bytes, header.size());
  EXPECT_EQ(c.files()[0].bytes, 8 + header.size() + 4);
  EXPECT_EQ(c.files()[0].tensors, 1u);
  EXPECT_EQ(c.find("a")->offset, 8 + header.size());
}

}  // namespace
}  // namespace mixq
