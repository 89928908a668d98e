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
  explicit Error(const std::string& message);
  explicit Error(const char* message) : Error(std::string(message)) {}
};

// A command line that cannot be carried out as written (exit status 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Throws Error(message).
[[noreturn]] void throw_error(const std::string& message);

// Throws Error with the formatted message. Always inlined, with the work out
// of line (fmt::vformat, throw_error): the kernel files built for one
// instruction set call it too, and an out-of-line copy of it compiled there
// would be a weak symbol that the linker may keep for every caller, with
// instructions other CPUs lack (scripts/check_isa_objects.py).
template <class... Args>
[[noreturn]] __attribute__((always_inline)) inline void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw_error(fmt::vformat(format, fmt::make_format_args(args...)));
}

}  // namespace mixq
