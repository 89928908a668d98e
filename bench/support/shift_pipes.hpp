#pragma once
// Which vector pipes AVX2's shifts share (bench/isa/shift_pipes.avx2.cpp,
// compiled with the AVX2 flags; call only where best_isa() is Isa::avx2 or
// above). The few-row FP8 decodes (FloatIo<Avx2>::fp8_by_exponent,
// fp8_rows_in_place.avx2.cpp) are shifts, shuffles and FMAs: an op on the
// shifts' pipes costs decode throughput, elsewhere it rides free.
#include <vector>

#include "support/pipe_probe.hpp"

namespace mixq::bench {

// Time of 8 independent `vpsrad` with 8 ops of one kind added, relative to
// the 8 alone (1.0: the ops ride free; 2.0: they run on the same pipes, at
// the same rate; 3.0: one a cycle there). Register-only asm loops, but for
// the ops that load (marked "m"), which read one cache line.
std::vector<PipeShare> measure_shift_pipe_shares();

}  // namespace mixq::bench
