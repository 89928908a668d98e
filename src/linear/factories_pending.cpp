// Placeholders until the execution work lands: each fails with a clear error.
#include "linear/factories.hpp"
#include "mixq/error.hpp"

namespace mixq::linear {
#define MIXQ_PENDING(fn)                                                        \
  std::unique_ptr<Linear> fn(const Layer& layer, const LinearOptions&) {        \
    fail("layer '{}': no linear kernel for this format yet", layer.prefix);     \
  }
MIXQ_PENDING(make_unquantized)
MIXQ_PENDING(make_fp8)
MIXQ_PENDING(make_nvfp4)
MIXQ_PENDING(make_mxfp8)
MIXQ_PENDING(make_int8)
MIXQ_PENDING(make_convrot_w4a4)
#undef MIXQ_PENDING
}  // namespace mixq::linear
