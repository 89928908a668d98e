#pragma once
// One persistent pool of worker threads shared by every kernel. No thread is
// created per call; the calling thread takes part in the work.
#include <algorithm>
#include <cstdint>
#include <functional>

#include "mixq/threads.hpp"

namespace mixq::util {

// Splits [0, count) into at most num_threads() non-empty contiguous chunks
// (each a multiple of `grain`, except the last) and runs body(begin, end,
// thread) on them, thread = the chunk's index, the caller running chunk 0.
// Returns when all are done. Exceptions from a body are rethrown in the
// caller. Nested calls run serially. The split is made under the pool's lock
// with the thread count that runs it, so set_num_threads() on another thread
// never leaves part of [0, count) undone.
void parallel_for(int64_t count, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end, int thread)>& body);

// The same, first calling setup(chunks) on the caller with the number of
// chunks the body will see (every `thread` is < chunks). Per-thread scratch
// sized in setup fits, whatever set_num_threads() does meanwhile; sizing it
// from an earlier num_threads() does not.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int chunks)>& setup,
                  const std::function<void(int64_t begin, int64_t end, int thread)>& body);

// Rows per block when m rows are cut into blocks of at most `max_rows`
// (rounded down to a multiple of `step`, at least `step`), the block count
// rounded up to a multiple of `threads` so the blocks split evenly over
// them; the result is a multiple of `step`. The GEMMs that keep a block of
// quantized activations in L2 use it (integer large M, AMX).
inline int64_t balanced_block_rows(int64_t m, int64_t max_rows, int64_t step, int64_t threads) {
  const int64_t cap = max_rows / step * step > step ? max_rows / step * step : step;
  const int64_t t = threads > 1 ? threads : 1;
  int64_t blocks = (m + cap - 1) / cap;
  blocks = (blocks + t - 1) / t * t;
  return ((m + blocks - 1) / blocks + step - 1) / step * step;
}

// Rows [0, m) in blocks of at most max_rows rows cut by balanced_block_rows
// (as many blocks per thread), body(r0, r1) for each block, the blocks split
// over the threads. (Kernels that cut M into whole blocks of max_rows left
// every M <= max_rows on one thread.) Out of line: kernels built for one
// instruction set call it (mixq/error.hpp's fail says why that matters).
void parallel_for_row_blocks(int64_t m, int64_t max_rows, int64_t step,
                             const std::function<void(int64_t r0, int64_t r1)>& body);

}  // namespace mixq::util
