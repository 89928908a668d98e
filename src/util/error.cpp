// mixq::Error's constructor and throw_error, out of line (mixq/error.hpp says why).
#include "mixq/error.hpp"

#include "mixq/escape.hpp"

namespace mixq {

Error::Error(const std::string& message) : std::runtime_error(escape_text(message)) {}

void throw_error(const std::string& message) { throw Error(message); }

}  // namespace mixq
