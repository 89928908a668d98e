#pragma once
// Which vector pipes the int8 dot instruction shares (bench/isa/
// dot_pipes.avx512.cpp, compiled with the AVX-512 VNNI flags; call only where
// best_isa() is Isa::avx512 or above). SVDQuant's and NVFP4's per-block fp32
// epilogues sit next to `vpdpbusd` in one loop: where an epilogue op shares
// the dot's pipes it costs dot throughput, elsewhere it rides free.
#include <vector>

#include "support/pipe_probe.hpp"

namespace mixq::bench {

// Time of 12 independent `vpdpbusd` with 3 ops of one kind added, relative
// to the 12 alone (1.0: the ops ride free; 1.25: they take 3 of the 12 dots'
// slots, i.e. run on the same pipes; 1.5: each takes two, a half-rate op
// there). Register-only asm loops. Also "12 on one register": the 12 dots as
// one dependency chain, whose ratio is the dot's latency in units of its
// issue interval (8: 4 cycles at 2 a cycle).
std::vector<PipeShare> measure_dot_pipe_shares();

}  // namespace mixq::bench
