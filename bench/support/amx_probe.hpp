#pragma once
// AMX tile probes for bench_amx (bench/isa/amx_probe.avx512amx.cpp, compiled
// with the AMX flags; call only where best_isa() is Isa::amx).
#include <cstdint>

namespace mixq::bench {

// Nanoseconds per tdpbsud when A tiles hold `k_bytes` (16, 32 or 64) bytes
// per row and B tiles k_bytes / 4 rows: four independent accumulators on
// tiles that stay in registers, `rounds` rounds of four.
double amx_tdpbsud_ns(int k_bytes, int64_t rounds);

}  // namespace mixq::bench
