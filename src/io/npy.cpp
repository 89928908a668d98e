#include "mixq/npy.hpp"

#include <bit>
#include <cctype>
#include <cstring>
#include <map>

#include "io/atomic_file.hpp"
#include "io/file_checks.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

// .npy layout: "\x93NUMPY", major, minor, header length (u16 LE for 1.0, u32
// LE for 2.0), then an ASCII Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a final '\n' so that the data starts 64-aligned,
// then the raw little-endian data in C order.

namespace mixq {
namespace {

static_assert(std::endian::native == std::endian::little, "mixq assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint64_t kMaxNpyBytes = 16ull << 30;

// A tiny parser for the header dict: strings, True/False, tuples of ints.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  struct Value {
    std::string str;
    bool boolean = false;
    Shape tuple;
    char kind = 0;  // 's', 'b', 't'
  };

  std::map<std::string, Value> parse() {
    std::map<std::string, Value> dict;
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') break;
      std::string key = string();
      expect(':');
      if (!dict.emplace(key, value()).second) bad("duplicate key '" + key + "'");
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}'");
    }
    ++i_;
    skip();
    if (i_ != s_.size()) bad("text after the closing '}'");
    return dict;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    // The header quoted as one line (it ends in '\n', and a hostile one may
    // hold anything): Error escapes it.
    std::string_view shown = s_.substr(0, 120);
    while (!shown.empty() && (shown.back() == '\n' || shown.back() == ' ')) shown.remove_suffix(1);
    fail("{}: malformed .npy header at character {}: {} (header: {}{})", path_, i_, what, std::string(shown),
         s_.size() > 120 ? "..." : "");
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    skip();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    skip();
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  int64_t integer() {
    skip();
    if (peek() == '-') bad("negative dimension");
    if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("expected a non-negative integer");
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_add_overflow(v, int64_t(s_[i_] - '0'), &v))
        bad("dimension too large");
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2 long suffix
    return v;
  }
  Value value() {
    skip();
    Value v;
    if (peek() == '\'' || peek() == '"') {
      v.kind = 's';
      v.str = string();
    } else if (s_.substr(i_, 4) == "True" || s_.substr(i_, 5) == "False") {
      v.kind = 'b';
      v.boolean = s_[i_] == 'T';
      i_ += v.boolean ? 4 : 5;
    } else if (peek() == '(' || peek() == '[') {
      char close = peek() == '(' ? ')' : ']';
      ++i_;
      v.kind = 't';
      while (true) {
        skip();
        if (peek() == close) break;
        v.tuple.push_back(integer());
        skip();
        if (peek() == ',') ++i_;
        else if (peek() != close) bad("expected ',' or ')' in shape");
      }
      ++i_;
    } else {
      bad("expected a string, True/False or a tuple");
    }
    return v;
  }

  std::string_view s_;
  const std::string& path_;
  size_t i_ = 0;
};

std::string read_file(const std::string& path) { return read_whole_file(path, kMaxNpyBytes, ".npy input"); }

std::string shape_tuple(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) out += ",";
  return out + ")";
}

}  // namespace

NpyArray read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

NpyArray parse_npy(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    fail("{}: not a .npy file (missing the \\x93NUMPY magic)", path);
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2) {
    if (bytes.size() < 12) fail("{}: truncated .npy preamble", path);
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    fail("{}: .npy format version {}.{} is not supported (expected 1.0 or 2.0)", path, major, minor);
  }
  if (header_len > bytes.size() - header_start)
    fail("{}: .npy header of {} bytes extends past the end of the file ({} bytes)", path, header_len, bytes.size());

  auto dict = DictParser(std::string_view(bytes).substr(header_start, header_len), path).parse();
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.count(key)) fail("{}: .npy header has no '{}'", path, key);
  if (dict.size() != 3) fail("{}: .npy header has keys other than descr, fortran_order, shape", path);
  const auto& descr = dict["descr"];
  const auto& fortran = dict["fortran_order"];
  const auto& shape = dict["shape"];
  if (descr.kind != 's') fail("{}: .npy descr must be a string", path);
  if (fortran.kind != 'b') fail("{}: .npy fortran_order must be True or False", path);
  if (shape.kind != 't') fail("{}: .npy shape must be a tuple", path);
  if (descr.str.size() == 3 && descr.str[0] == '>' && descr.str[1] == 'f')
    fail("{}: .npy dtype '{}' is big-endian; only little-endian <f4 and <f2 are supported", path, descr.str);
  if (descr.str != "<f4" && descr.str != "<f2")
    fail("{}: .npy dtype '{}' is not supported (expected <f4 or <f2)", path, descr.str);
  if (fortran.boolean)
    fail("{}: .npy array is in Fortran order; only C order is supported (use np.ascontiguousarray)", path);

  const size_t item = descr.str == "<f4" ? 4 : 2;
  int64_t numel = 1;
  for (int64_t d : shape.tuple)
    if (__builtin_mul_overflow(numel, d, &numel)) fail("{}: .npy shape {} overflows", path, shape_tuple(shape.tuple));
  const size_t data_start = header_start + header_len;
  const uint64_t have = bytes.size() - data_start;
  if (static_cast<uint64_t>(numel) > have / item) {
    int64_t need = 0;
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(item), &need))
      fail("{}: .npy shape {} of {} needs more than 2^63 bytes", path, shape_tuple(shape.tuple), descr.str);
    fail("{}: .npy data is truncated: shape {} of {} needs {} bytes, found {}", path,
         shape_tuple(shape.tuple), descr.str, need, have);
  }
  const uint64_t need = static_cast<uint64_t>(numel) * item;
  if (have != need)
    fail("{}: .npy file has {} bytes after the data of shape {} of {}", path, have - need,
         shape_tuple(shape.tuple), descr.str);

  NpyArray out;
  out.shape = shape.tuple;
  out.values.resize(static_cast<size_t>(numel));
  const char* data = bytes.data() + data_start;
  if (item == 4) {
    if (numel) std::memcpy(out.values.data(), data, numel * 4);
  } else {
    for (int64_t i = 0; i < numel; ++i) {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      out.values[i] = f16_to_f32(bits);
    }
  }
  return out;
}

void write_npy(const std::string& path, const Shape& shape, const float* values) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("{}: cannot write shape {} (negative dimension)", path, shape_str(shape));
    if (__builtin_mul_overflow(numel, d, &numel)) fail("{}: shape {} overflows", path, shape_str(shape));
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // Version 1.0 stores the header length in 16 bits; longer headers need 2.0.
  const bool v2 = header.size() + 1 + 10 + 64 > 65535;
  const size_t preamble = v2 ? 12 : 10;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string head(kMagic, 6);
  head += static_cast<char>(v2 ? 2 : 1);
  head += '\0';
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) head += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  head += header;

  AtomicFile file(path);
  file.write_at(0, std::as_bytes(std::span(head)));
  if (numel) file.write_at(head.size(), std::as_bytes(std::span(values, static_cast<size_t>(numel))));
  file.resize(head.size() + static_cast<uint64_t>(numel) * 4);
  file.commit();
}

}  // namespace mixq
