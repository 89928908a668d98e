#pragma once
// One persistent pool of worker threads shared by every kernel. No thread is
// created per call; the calling thread takes part in the work.
#include <cstdint>
#include <functional>

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

}  // namespace mixq::util
