// Placeholders until the integer kernels land: each fails with a clear error.
#include "linear/factories.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
std::unique_ptr<Linear> make_int8(const Layer& layer, const LinearOptions&) {
  fail("layer '{}': no linear kernel for this format yet", layer.prefix);
}
std::unique_ptr<Linear> make_convrot_w4a4(const Layer& layer, const LinearOptions&) {
  fail("layer '{}': no linear kernel for this format yet", layer.prefix);
}
}  // namespace mixq::linear
