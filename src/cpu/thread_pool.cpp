// A fixed pool of worker threads that run one job at a time; the caller joins every job.
#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

#include "samebits/errors.hpp"
#include "samebits/threads.hpp"
#include "samebits/util/num_threads_env.hpp"

namespace samebits::detail {

namespace {

// The floating-point state a job runs under: the caller's, applied by every worker before it
// takes part, so that flush-to-zero, denormals-are-zero and the rounding mode are the same on
// every thread of a job (a chunk's result must not depend on which thread ran it).
#if defined(__x86_64__) || defined(__i386__)
struct FpState {
  unsigned csr = 0; // MXCSR: FTZ, DAZ, rounding mode
  static FpState current() { return {_mm_getcsr()}; }
  void apply() const { _mm_setcsr(csr); }
};
#else
struct FpState {
  std::fenv_t env{};
  static FpState current() {
    FpState s;
    std::fegetenv(&s.env);
    return s;
  }
  void apply() const { std::fesetenv(&env); }
};
#endif

// SAMEBITS_NUM_THREADS when set (a malformed value throws InvalidArgument from the first op that
// needs the pool), else every core.
int default_threads() {
  if (const auto n = detail::num_threads_from_environment())
    return *n;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 1024u));
}

class Pool {
public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  // Waits for the job running now, if any (another thread's op): set_num_threads while an op
  // runs elsewhere must neither strand that op's caller, waiting for a worker that quit, nor change
  // the thread count under it.
  void resize(int n) {
    std::lock_guard serial(run_mutex_);
    stop();
    size_ = n;
    quit_ = false;
    for (int i = 1; i < n; ++i)
      workers_.emplace_back([this, g = generation_] { loop(g); });
  }

  // Runs body on the caller and on the workers that join before the caller has finished its own
  // part (body must let any subset of threads do the work, as parallel_for's shared task counter
  // does): a small job is not held up by waking workers.
  void run(const std::function<void()>& body) {
    std::lock_guard serial(run_mutex_);
    if (size_ == 1) {
      body();
      return;
    }
    {
      std::lock_guard lock(m_);
      body_ = &body;
      fp_state_ = FpState::current();
      active_ = 0;
      open_ = true;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    std::exception_ptr mine;
    try {
      body();
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock lock(m_);
    open_ = false; // workers not yet in stay out; wait for those that are
    done_cv_.wait(lock, [this] { return active_ == 0; });
    body_ = nullptr;
    if (mine)
      std::rethrow_exception(mine);
    if (error_)
      std::rethrow_exception(error_);
  }

private:
  void loop(std::uint64_t seen) {
    for (;;) {
      const std::function<void()>* body;
      FpState fp;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_)
          return;
        seen = generation_;
        if (!open_)
          continue; // the caller finished this job on its own
        body = body_;
        fp = fp_state_;
        ++active_;
      }
      fp.apply();
      std::exception_ptr err;
      try {
        (*body)();
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lock(m_);
      if (err && !error_)
        error_ = err;
      if (--active_ == 0)
        done_cv_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard lock(m_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_)
      t.join();
    workers_.clear();
  }

  std::atomic<int> size_{1}; // written under run_mutex_, read anywhere
  std::vector<std::thread> workers_;
  std::mutex m_, run_mutex_;
  std::condition_variable cv_, done_cv_;
  const std::function<void()>* body_ = nullptr;
  FpState fp_state_;
  int active_ = 0;    // workers inside the job's body now
  bool open_ = false; // the job takes workers that arrive now
  std::uint64_t generation_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
};

// The process's pool, started on first use with `first` threads when given (set_num_threads: the
// environment is then not consulted), else default_threads().
Pool& pool(std::optional<int> first = std::nullopt) {
  static Pool p(first ? *first : default_threads());
  return p;
}

} // namespace

void parallel_for(std::int64_t ntasks, const std::function<void(std::int64_t)>& f) {
  if (ntasks <= 0)
    return;
  Pool& p = pool();
  if (p.size() == 1 || ntasks == 1) {
    for (std::int64_t t = 0; t < ntasks; ++t)
      f(t);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  p.run([&] {
    for (;;) {
      if (failed.load(std::memory_order_relaxed))
        return;
      const std::int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= ntasks)
        return;
      try {
        f(t);
      } catch (...) {
        failed = true;
        throw;
      }
    }
  });
}

} // namespace samebits::detail

namespace samebits {

int num_threads() {
  return detail::pool().size();
}

void set_num_threads(int n) {
  if (n < 1 || n > 1024)
    throw InvalidArgument("set_num_threads: thread count must be in [1, 1024], got " +
                          std::to_string(n));
  detail::Pool& p = detail::pool(n);
  if (n != p.size())
    p.resize(n);
}

} // namespace samebits
