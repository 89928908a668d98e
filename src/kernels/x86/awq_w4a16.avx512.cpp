// AVX-512 AWQ W4A16 linears (awq_w4a16.hpp), two cores over the same packed
// weights; kernels::float_dot() (measured per process) picks one per layer.
//  - awq_avx512 (`vdpbf16ps`): the core of awq_bf16_impl.hpp with its
//    tuning AwqBf16Tile.
//  - awq_avx512_fma (`vfmadd231ps`): the f32-FMA core written once for every
//    target in awq_w4a16_impl.hpp.
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 headers
// (the _mm512_undefined_* idiom); nothing of ours is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/x86/awq_bf16_impl.hpp"
#include "kernels/x86/awq_w4a16_impl.hpp"

namespace mixq::kernels::x86 {

void awq_avx512(const AwqPacked& w, const float* x, int64_t m, float* y) { awq_bf16(w, x, m, y); }

// ---- f32-FMA core: awq_w4a16_impl.hpp compiled for AVX-512 ----------------
void awq_avx512_fma(const AwqPacked& w, const float* x, int64_t m, float* y) { awq_fma<Avx512>(w, x, m, y); }

}  // namespace mixq::kernels::x86
