// The CPU thread pool while the thread count changes: set_num_threads on one thread while ops run
// on others (bincount's and sum's jobs) neither hangs an op nor changes a result. Before the fix, a
// resize could stop a worker that a running job still waited for (the caller then waited
// forever), and a job of every thread read the thread count outside the job (a thread's share of
// the input could be skipped or counted twice). Jobs now run on whichever threads join them.
#include "testing.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

namespace samebits {
namespace {

// Ends the process if the test has not finished in time: a hang is the failure looked for here,
// and it must not hold the test run until CTest's own limit.
class Watchdog {
public:
  explicit Watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock lock(m_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "ThreadPool test: no progress in %lld s (a job waits forever)\n",
                         static_cast<long long>(limit.count()));
            std::_Exit(1);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

TEST(ThreadPool, ThreadCountChangesWhileOpsRunOnOtherThreads) {
  const testing::ThreadCount restore(num_threads());
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const std::int64_t n = 200000, bins = 50;
  Tensor x = testing::random_normal({n}, DType::f32, seed);
  Tensor index = testing::random_index(n, bins, DType::i64, seed + 1);
  Tensor sum_ref = Tensor::empty({1}, DType::f32), counts_ref = Tensor::empty({bins}, DType::i64);
  sum(x, sum_ref, {.level = Determinism::portable});
  bincount(index, TensorView{}, counts_ref, {.level = Determinism::portable});

  const Watchdog watchdog(std::chrono::seconds(120));
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    for (int i = 0; !stop.load(); ++i)
      set_num_threads(1 + i % 4);
  });
  int wrong_sums = 0, wrong_counts = 0;
  Tensor s = Tensor::empty({1}, DType::f32), counts = Tensor::empty({bins}, DType::i64);
  for (int r = 0; r < 400; ++r) {
    sum(x, s, {.level = Determinism::portable});
    wrong_sums += !bitwise_equal(s, sum_ref);
    bincount(index, TensorView{}, counts, {.level = Determinism::portable});
    wrong_counts += !bitwise_equal(counts, counts_ref);
  }
  stop = true;
  changer.join();
  EXPECT_EQ(wrong_sums, 0);
  EXPECT_EQ(wrong_counts, 0);
}

} // namespace
} // namespace samebits
