#include "util/parallel.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/threads.hpp"

namespace mixq::util {
namespace {

thread_local bool inside_pool = false;

// Workers sleep on a condition variable between calls and spin briefly after a
// job so that back-to-back small calls (M = 1 decode) do not pay a wake-up.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  // Returns the thread count that runs now: fewer than asked when the
  // system refused a thread (see start_workers).
  int resize(int threads) {
    std::lock_guard<std::mutex> call(call_mutex_);
    stop_workers();
    threads_.store(std::max(1, threads), std::memory_order_relaxed);
    start_workers();
    return threads_.load(std::memory_order_relaxed);
  }

  // Splits [0, count) into `units` grains over the threads there are now
  // (under call_mutex_, which resize() takes too) and runs every chunk.
  void run(int64_t count, int64_t grain, int64_t units, const std::function<void(int)>* setup,
           const std::function<void(int64_t, int64_t, int)>& body) {
    std::lock_guard<std::mutex> call(call_mutex_);
    // Equal chunks of whole grains; recounted so that none is empty.
    const int64_t threads = threads_.load(std::memory_order_relaxed);
    const int64_t per_chunk_units = (units + threads - 1) / threads;
    const int chunks = static_cast<int>((units + per_chunk_units - 1) / per_chunk_units);
    const int64_t per_chunk = per_chunk_units * grain;
    if (setup) (*setup)(chunks);
    if (chunks <= 1) {  // resized to 1 thread meanwhile: run here, nested calls serial
      struct Inside {
        Inside() { inside_pool = true; }
        ~Inside() { inside_pool = false; }
      } inside;
      body(0, count, 0);
      return;
    }
    const std::function<void(int)> task = [&](int chunk) {
      const int64_t begin = chunk * per_chunk;
      body(begin, std::min(count, begin + per_chunk), chunk);
    };
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      chunks_ = chunks;
      pending_.store(chunks - 1, std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_chunk(0);
    while (pending_.load(std::memory_order_acquire) != 0) {
      std::this_thread::yield();
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  Pool() {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads_.store(static_cast<int>(std::max<long>(1, cores)));
    start_workers();
  }
  ~Pool() { stop_workers(); }

  void run_chunk(int index) {
    inside_pool = true;
    try {
      (*task_)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_pool = false;
  }

  // Spins up to kSpin after each job (a decode step issues one small call per
  // layer back to back; a futex wake-up costs 10-50 us, a whole M = 1 GEMV of a
  // 3072x3072 int8 layer ~150 us), then sleeps on the condition variable.
  // `seen` is the generation when the worker was created (under call_mutex_):
  // reading it inside the new thread could already see the first job's.
  void worker(int index, uint64_t seen) {
    constexpr auto kSpin = std::chrono::microseconds(200);
    for (;;) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0;; ++i) {
        if (generation_.load(std::memory_order_acquire) != seen ||
            stop_flag_.load(std::memory_order_acquire))
          break;
        _mm_pause();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) break;
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        if (index >= chunks_) continue;
      }
      run_chunk(index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // Starts threads_ - 1 workers. When the system refuses one (pthread_create
  // fails: thread or memory limits), the pool keeps those that started and
  // lowers threads_ to match, so that run() never waits for a chunk no thread
  // takes and no joinable std::thread is left to a destructor (which would
  // std::terminate the process).
  void start_workers() {
    stop_ = false;
    stop_flag_.store(false);
    const uint64_t now = generation_.load();
    const int threads = threads_.load(std::memory_order_relaxed);
    try {
      workers_.reserve(static_cast<size_t>(threads - 1));
      for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, now] { worker(i, now); });
    } catch (const std::exception&) {  // std::system_error from a thread, std::bad_alloc from reserve
      threads_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_relaxed);
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      stop_flag_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::mutex call_mutex_;  // one parallel region at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  int chunks_ = 0;
  std::atomic<int> threads_{1};  // written under call_mutex_; read without it by num_threads()
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  std::atomic<bool> stop_flag_{false};  // stop_ readable without the mutex while spinning
  std::atomic<int> pending_{0};
  std::exception_ptr error_;
};

}  // namespace

namespace {

void run_parallel(int64_t count, int64_t grain, const std::function<void(int)>* setup,
                  const std::function<void(int64_t, int64_t, int)>& body) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (count + grain - 1) / grain;
  Pool& pool = Pool::instance();
  // One chunk needs no split, so no lock: small calls from several threads
  // still run side by side. (The thread count read here only picks the path;
  // a serial run is right whatever it becomes.)
  if (units <= 1 || inside_pool || pool.threads() <= 1) {
    if (setup) (*setup)(1);
    body(0, count, 0);
    return;
  }
  pool.run(count, grain, units, setup, body);
}

}  // namespace

void parallel_for(int64_t count, int64_t grain,
                  const std::function<void(int64_t, int64_t, int)>& body) {
  run_parallel(count, grain, nullptr, body);
}

void parallel_for(int64_t count, int64_t grain, const std::function<void(int)>& setup,
                  const std::function<void(int64_t, int64_t, int)>& body) {
  run_parallel(count, grain, &setup, body);
}

}  // namespace mixq::util

namespace mixq {

void set_num_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  const int running = util::Pool::instance().resize(threads);
  if (running < threads)
    fail("set_num_threads({}): the system refused to start more threads; the pool runs {} thread(s)", threads,
         running);
}

int num_threads() { return util::Pool::instance().threads(); }

void util::parallel_for_row_blocks(int64_t m, int64_t max_rows, int64_t step,
                                   const std::function<void(int64_t r0, int64_t r1)>& body) {
  const int64_t rows = balanced_block_rows(m, max_rows, step, num_threads());
  parallel_for((m + rows - 1) / rows, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) body(b * rows, std::min(m, (b + 1) * rows));
  });
}

}  // namespace mixq
