// kernels::StreamingRead, the buffer behind the read calibration and the
// benchmarks' "read beside" columns: the window it reads is rounded to whole
// pages per thread, never passes the buffer's end (it wraps), and a read of
// the whole buffer is what read_bandwidth_gbs times.
#include <gtest/gtest.h>

#include "kernels/calibrate.hpp"
#include "kernels/cpu.hpp"
#include "mixq/threads.hpp"

namespace {

using mixq::kernels::StreamingRead;

class StreamingReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mixq::kernels::best_isa() < mixq::kernels::Isa::avx2) GTEST_SKIP() << "the read loops need AVX2";
    saved_ = mixq::num_threads();
    mixq::set_num_threads(2);
  }
  void TearDown() override {
    if (saved_ > 0) mixq::set_num_threads(saved_);
  }
  int saved_ = 0;
};

TEST_F(StreamingReadTest, BufferIsWholePagesPerThread) {
  EXPECT_EQ(StreamingRead(size_t(1) << 20).size(), size_t(1) << 20);
  EXPECT_EQ(StreamingRead(100000).size(), 12u * 4096 * 2);  // 100000 / 2 threads = 12.2 pages
  EXPECT_EQ(StreamingRead(1).size(), 2u * 4096);            // at least a page per thread
}

TEST_F(StreamingReadTest, WindowsAreWholePagesPerThreadAndWrap) {
  StreamingRead buffer(size_t(1) << 20);
  EXPECT_EQ(buffer.read_next(300000), 36u * 4096 * 2);  // 300000 / 2 = 36.6 pages a thread
  EXPECT_EQ(buffer.read_next(0), 2u * 4096);            // at least a page a thread
  EXPECT_EQ(buffer.read_next(size_t(1) << 30), buffer.size());  // at most the buffer
  // Windows that do not fit before the end start again at the front: many
  // reads of 3/8 of the buffer stay inside it (a read past the mapping's end
  // would fault).
  for (int i = 0; i < 20; ++i) EXPECT_EQ(buffer.read_next(buffer.size() * 3 / 8), buffer.size() * 3 / 8);
}

TEST_F(StreamingReadTest, CalibrationOverTheBufferReportsARate) {
  StreamingRead buffer(size_t(8) << 20);
  const mixq::kernels::Rate r = mixq::kernels::read_bandwidth_gbs(buffer, 3);
  EXPECT_GT(r.median, 0.0);
  EXPECT_GE(r.best, r.median);
}

}  // namespace
