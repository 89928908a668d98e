#pragma once
// Which vector pipes the int8 dot instruction shares (bench/isa/
// dot_pipes.avx512.cpp, compiled with the AVX-512 VNNI flags; call only where
// best_isa() is Isa::avx512 or above). SVDQuant's and NVFP4's per-block fp32
// epilogues sit next to `vpdpbusd` in one loop: where an epilogue op shares
// the dot's pipes it costs dot throughput, elsewhere it rides free.
namespace mixq::bench {

// Time of 12 independent `vpdpbusd` with 3 ops of each kind added, relative
// to the 12 alone (1.0: the ops ride free; 1.25: they take 3 of the 12 dots'
// slots, i.e. run on the same pipes). Register-only asm loops.
struct DotPipeShares {
  double mul, add, cvt, fma;  // vmulps, vaddps, vcvtdq2ps, vfmadd231ps
};
DotPipeShares measure_dot_pipe_shares();

}  // namespace mixq::bench
