#pragma once
// The one place that picks the instruction set a layer's kernel runs on, for
// every layer kind: the options (KernelChoice::reference forces the reference
// kernels) and the process's active ISA (kernels/cpu.hpp: CPUID, limited by
// MIXQ_ISA or set_isa). Layer factories ask here and nowhere else.
#include "kernels/cpu.hpp"
#include "mixq/linear.hpp"

namespace mixq::linear {

// Isa::reference with KernelChoice::reference, else the active ISA.
kernels::Isa kernel_isa(const LinearOptions& options);

// The same choice in the float family's terms: avx512 / avx2 / none (reference).
enum class FastPath { none, avx2, avx512 };
FastPath fast_path(const LinearOptions& options);
// NVFP4 W4A4 also needs AVX-512 VBMI (vpermb) for its avx512 kernel; an
// avx512 CPU without it runs the AVX2 kernel (it has AVX2) instead of the
// reference.
FastPath nvfp4_w4a4_path(const LinearOptions& options);
// True when the fast AVX-512 kernels may run (options + active ISA).
bool use_avx512(const LinearOptions& options);

}  // namespace mixq::linear
