// libFuzzer target: arbitrary bytes as a .npy file through the reader that
// `mixq linear -i X.npy` uses (mixq::parse_npy; read_npy only adds the file
// read). mixq::Error is the only acceptable way to reject input; an accepted
// array must hold exactly shape's product of values.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mixq/error.hpp"
#include "mixq/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const mixq::NpyArray array = mixq::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    if (static_cast<int64_t>(array.values.size()) != mixq::shape_numel(array.shape)) std::abort();
  } catch (const mixq::Error&) {
  }
  return 0;
}
