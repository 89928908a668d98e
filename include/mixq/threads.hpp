#pragma once
// The one persistent pool of worker threads that every Linear, quantizer and
// transform shares (src/util/parallel.cpp).
namespace mixq {

// Threads used by every Linear (one persistent pool). 0 = all cores.
void set_num_threads(int threads);
int num_threads();

}  // namespace mixq
