#pragma once
// What every benchmark table header states, and the size of the rings of
// weight copies that keep M = 1 runs reading from DRAM.
#include <cstddef>
#include <string>

namespace mixq::bench {

// "commit <git describe of the built tree>, <UTC time>, load average <1 5 15
// min>, <CPU model> (<n> cpus)": the first line of every table.
std::string run_header();

// The last-level cache of CPU 0 in bytes (sysfs; 32 MiB when unknown).
size_t llc_bytes();

// A ring of weight copies is at least this many times the last-level cache,
// so a copy is evicted long before it is used again.
inline constexpr int kRingLlcFactor = 16;

// Copies of `bytes_per_copy` bytes that make such a ring (at least 1).
int ring_copies(double bytes_per_copy);

// "ring: 48 copies = 560 MiB = 17.5x the 32 MiB LLC" for a table header.
std::string ring_note(int copies, double bytes_per_copy);
// The end of a point's header line: "; " + ring_note for a ring, " (one
// copy: weights reused)" for a single copy.
std::string ring_suffix(int copies, double bytes_per_copy);

}  // namespace mixq::bench
