#include "mixq/escape.hpp"

#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mixq {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] and its code point, or
// 0 when s[i] does not start one (strict: no overlongs, no surrogates, at
// most U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || len > s.size() - i) return 0;
  cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
  for (size_t j = 1; j < len; ++j) {
    const auto cc = static_cast<unsigned char>(s[i + j]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3Fu);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool invisible_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

template <class KeepCodePoint>
std::string rewrite(std::string_view text, KeepCodePoint keep) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence(text, i, cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (keep(cp))
      out.append(text.substr(i, len));
    else if (cp < 0x80)
      out += fmt::format("\\x{:02x}", cp);
    else
      out += fmt::format("\\u{:04x}", cp);
    i += len;
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = utf8_sequence(text, i, cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace

std::string escape_text(std::string_view text) {
  return rewrite(text, [](uint32_t cp) { return cp >= 0x20 && cp != 0x7F && !invisible_control(cp); });
}

std::string valid_utf8(std::string_view text) {
  return rewrite(text, [](uint32_t) { return true; });
}

void make_json_utf8(nlohmann::json& value) {
  if (value.is_string()) {
    auto& s = value.get_ref<std::string&>();
    if (!is_valid_utf8(s)) s = valid_utf8(s);
  } else if (value.is_array()) {
    for (auto& item : value) make_json_utf8(item);
  } else if (value.is_object()) {
    bool keys_ok = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      make_json_utf8(it.value());
      if (!is_valid_utf8(it.key())) keys_ok = false;
    }
    if (!keys_ok) {
      nlohmann::json fixed = nlohmann::json::object();
      for (auto it = value.begin(); it != value.end(); ++it) fixed[valid_utf8(it.key())] = std::move(it.value());
      value = std::move(fixed);
    }
  }
}

}  // namespace mixq
