#pragma once
// One error type for everything mixq rejects. The message carries its own
// context (file, tensor, layer, what was expected and what was found); the CLI
// prints it as "mixq: error: <message>" and exits 1. Messages quote names and
// strings from hostile files, so the constructor escapes them (escape_text):
// every message is one printable line of valid UTF-8.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "mixq/escape.hpp"

namespace mixq {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(escape_text(message)) {}
  explicit Error(const char* message) : Error(std::string(message)) {}
};

// A command line that cannot be carried out as written (exit status 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace mixq
