#pragma once
// One persistent pool of worker threads shared by every kernel. No thread is
// created per call; the calling thread takes part in the work.
#include <cstdint>
#include <functional>

namespace mixq::util {

// Splits [0, count) into at most num_threads() contiguous chunks (each a
// multiple of `grain`, except the last) and runs body(begin, end, thread) on
// them, the caller running chunk 0. Returns when all are done. Exceptions from
// a body are rethrown in the caller. Nested calls run serially.
void parallel_for(int64_t count, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end, int thread)>& body);

}  // namespace mixq::util
