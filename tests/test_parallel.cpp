// The persistent pool: every index visited exactly once, chunk sizes honour the
// grain, exceptions reach the caller, nested calls run serially, and the pool
// keeps working after resizes and failures.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "util/parallel.hpp"
#include "mixq/linear.hpp"

namespace {

using mixq::util::parallel_for;

std::vector<int> visit_counts(int64_t count, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
  parallel_for(count, grain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

TEST(Parallel, EveryIndexOnceForZeroOneAndOddCounts) {
  for (int threads : {1, 2, 3}) {
    mixq::set_num_threads(threads);
    EXPECT_EQ(mixq::num_threads(), threads);
    for (int64_t count : {0, 1, 2, 3, 7, 13, 64, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        auto hits = visit_counts(count, grain);
        ASSERT_EQ(hits.size(), static_cast<size_t>(count));
        for (int h : hits) ASSERT_EQ(h, 1) << "count " << count << " grain " << grain;
      }
    }
  }
  mixq::set_num_threads(0);
}

TEST(Parallel, ZeroCountNeverCallsBody) {
  bool called = false;
  parallel_for(0, 1, [&](int64_t, int64_t, int) { called = true; });
  parallel_for(-5, 1, [&](int64_t, int64_t, int) { called = true; });
  EXPECT_FALSE(called);
}

TEST(Parallel, ChunksAreGrainMultiplesAndThreadIdsDistinct) {
  mixq::set_num_threads(3);
  std::atomic<int> bad{0}, calls{0};
  std::vector<std::atomic<int>> ids(3);
  parallel_for(100, 8, [&](int64_t b, int64_t e, int t) {
    calls.fetch_add(1);
    if (b % 8 != 0 || (e != 100 && (e - b) % 8 != 0)) bad.fetch_add(1);
    if (t < 0 || t >= 3) bad.fetch_add(1);
    else ids[static_cast<size_t>(t)].fetch_add(1);
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(calls.load(), 3);
  for (auto& id : ids) EXPECT_EQ(id.load(), 1);
  mixq::set_num_threads(0);
}

TEST(Parallel, ExceptionsPropagateFromWorkersAndCaller) {
  mixq::set_num_threads(2);
  // Chunk 1 runs on a worker, chunk 0 on the caller: both must surface.
  EXPECT_THROW(parallel_for(10, 1,
                            [&](int64_t b, int64_t, int) {
                              if (b != 0) throw std::runtime_error("worker");
                            }),
               std::runtime_error);
  EXPECT_THROW(parallel_for(10, 1,
                            [&](int64_t b, int64_t, int) {
                              if (b == 0) throw std::invalid_argument("caller");
                            }),
               std::invalid_argument);
  // Still usable afterwards.
  auto hits = visit_counts(50, 1);
  for (int h : hits) EXPECT_EQ(h, 1);
  mixq::set_num_threads(0);
}

TEST(Parallel, NestedCallsRunSerially) {
  mixq::set_num_threads(2);
  std::vector<std::atomic<int>> hits(40 * 30);
  std::atomic<int> inner_thread_nonzero{0};
  parallel_for(40, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      parallel_for(30, 1, [&](int64_t ib, int64_t ie, int t) {
        if (t != 0 || ib != 0 || ie != 30) inner_thread_nonzero.fetch_add(1);
        for (int64_t j = ib; j < ie; ++j) hits[static_cast<size_t>(i * 30 + j)].fetch_add(1);
      });
    }
  });
  EXPECT_EQ(inner_thread_nonzero.load(), 0);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  mixq::set_num_threads(0);
}

TEST(Parallel, ManyBackToBackSmallCalls) {
  mixq::set_num_threads(2);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 2000; ++r)
    parallel_for(4, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  EXPECT_EQ(sum.load(), 2000 * 6);
  mixq::set_num_threads(0);
}

}  // namespace
