#include "linear/kernel_path.hpp"

#include "kernels/x86/nvfp4_w4a4.hpp"

namespace mixq::linear {

kernels::Isa kernel_isa(const LinearOptions& options) {
  if (options.kernel != KernelChoice::automatic) return kernels::Isa::reference;
  return kernels::active_isa();
}

FastPath fast_path(const LinearOptions& options) {
  switch (kernel_isa(options)) {
    case kernels::Isa::amx:  // AMX serves the integer family only (kernels/int_kernel.cpp)
    case kernels::Isa::avx512: return FastPath::avx512;
    case kernels::Isa::avx2: return FastPath::avx2;
    default: return FastPath::none;
  }
}

FastPath nvfp4_w4a4_path(const LinearOptions& options) {
  const FastPath path = fast_path(options);
  if (path == FastPath::avx512 && !kernels::x86::nvfp4_avx512_supported()) return FastPath::avx2;
  return path;
}

bool use_avx512(const LinearOptions& options) { return fast_path(options) == FastPath::avx512; }

}  // namespace mixq::linear
