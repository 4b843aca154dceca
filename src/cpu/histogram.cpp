// CPU variants of bincount and histc.
//
//   bincount  cpu.float_atomics  not_guaranteed  weights added into the bins with atomic float
//                                                adds in whatever order threads get there
//             cpu.fixed_point    portable        counts in int64; weights as exact int64 fixed
//                                                point (scale from max |w|, ops/histogram.hpp)
//   histc     cpu.int_counts     portable        per-thread int64 counts, summed exactly
// Counts (bincount without weights, histc) are exact integers in every variant.
#include <atomic>
#include <fmt/format.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "ops/histogram.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

namespace samebits::detail {

namespace {

// Round to the nearest int64, ties to even (llrint in the default rounding mode), inlined.
inline std::int64_t round_to_int64(double v) {
#if defined(__SSE2__) && defined(__x86_64__)
  return _mm_cvtsd_si64(_mm_set_sd(v));
#else
  return std::llrint(v);
#endif
}

constexpr std::int64_t kChunk = 1 << 16;        // elements per task
constexpr std::int64_t kPrivateBins = 1 << 16;  // up to this many bins: per-thread counters,
constexpr std::int64_t kPrivateTotal = 1 << 23; // or up to this many counters over all threads

std::int64_t tasks_for(std::int64_t n) {
  return (n + kChunk - 1) / kChunk;
}

// Throws IndexOutOfRange naming the first index outside [0, bins), before anything is written.
void check_indices(const TensorView& index, std::int64_t bins) {
  const std::int64_t n = index.numel(), st = index.stride(0);
  std::atomic<std::int64_t> first_bad{n};
  visit_dtype(index.dtype, [&]<class I>() {
    const I* p = static_cast<const I*>(index.data);
    parallel_for(tasks_for(n), [&](std::int64_t t) {
      for (std::int64_t i = t * kChunk; i < std::min(n, (t + 1) * kChunk); ++i) {
        const auto v = static_cast<std::int64_t>(p[i * st]);
        if (v < 0 || v >= bins) {
          std::int64_t cur = first_bad.load();
          while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
          }
          return;
        }
      }
    });
    const std::int64_t b = first_bad.load();
    if (b < n)
      throw IndexOutOfRange(
          fmt::format("bincount: index[{}] = {} is outside [0, {}) (out has {} bins)", b,
                      static_cast<std::int64_t>(p[b * st]), bins, bins));
  });
}

// Adds f(i) (an int64) into bins bin(i) for i in [0, n), exactly: per-task counters for few bins,
// integer atomics for many. The result does not depend on the order.
template <class Bin, class Val>
std::vector<std::int64_t> integer_histogram(std::int64_t n, std::int64_t bins, Bin&& bin,
                                            Val&& val) {
  std::vector<std::int64_t> total(static_cast<std::size_t>(bins), 0);
  // Per-part counters while they stay small in total (a part per thread, of at least kChunk
  // elements: a tiny bincount does not wake the pool); integer atomics beyond.
  if (bins <= kPrivateBins || bins * num_threads() <= kPrivateTotal) {
    std::mutex m;
    const std::int64_t parts = std::clamp<std::int64_t>(n / kChunk, 1, std::max(1, num_threads()));
    parallel_for(parts, [&](std::int64_t part) {
      std::vector<std::int64_t> mine(static_cast<std::size_t>(bins), 0);
      const auto [b, e] = split_range(n, parts, part);
      for (std::int64_t i = b; i < e; ++i) {
        const std::int64_t k = bin(i);
        if (k >= 0)
          mine[static_cast<std::size_t>(k)] += val(i);
      }
      std::lock_guard lock(m); // integer sums: the order of merging does not matter
      for (std::int64_t k = 0; k < bins; ++k)
        total[static_cast<std::size_t>(k)] += mine[static_cast<std::size_t>(k)];
    });
  } else {
    parallel_for(tasks_for(n), [&](std::int64_t t) {
      for (std::int64_t i = t * kChunk; i < std::min(n, (t + 1) * kChunk); ++i) {
        const std::int64_t k = bin(i);
        if (k >= 0)
          std::atomic_ref<std::int64_t>(total[static_cast<std::size_t>(k)])
              .fetch_add(val(i), std::memory_order_relaxed);
      }
    });
  }
  return total;
}

template <class T> void store(const TensorView& out, std::int64_t k, T v) {
  static_cast<T*>(out.data)[k * out.stride(0)] = v;
}

template <class F> void with_index(const TensorView& index, F&& f) {
  visit_dtype(index.dtype, [&]<class I>() {
    if constexpr (std::is_integral_v<I>) {
      const I* p = static_cast<const I*>(index.data);
      const std::int64_t st = index.stride(0);
      f([p, st](std::int64_t i) { return static_cast<std::int64_t>(p[i * st]); });
    }
  });
}

void bincount_counts(const BincountArgs& a) {
  const std::int64_t n = a.index.numel(), bins = a.out.numel();
  check_indices(a.index, bins);
  with_index(a.index, [&](auto idx) {
    const auto c = integer_histogram(n, bins, idx, [](std::int64_t) { return std::int64_t{1}; });
    for (std::int64_t k = 0; k < bins; ++k)
      store<std::int64_t>(a.out, k, c[static_cast<std::size_t>(k)]);
  });
}

void bincount_atomic(const BincountArgs& a, const Workspace&) {
  if (!a.weighted())
    return bincount_counts(a);
  const std::int64_t n = a.index.numel(), bins = a.out.numel();
  check_indices(a.index, bins);
  visit_float(a.weights.dtype, "bincount", [&]<class T>() {
    const T* w = static_cast<const T*>(a.weights.data);
    const std::int64_t sw = a.weights.stride(0);
    std::vector<T> acc(static_cast<std::size_t>(bins), T(0));
    with_index(a.index, [&](auto idx) {
      parallel_for(tasks_for(n), [&](std::int64_t t) {
        for (std::int64_t i = t * kChunk; i < std::min(n, (t + 1) * kChunk); ++i)
          std::atomic_ref<T>(acc[static_cast<std::size_t>(idx(i))])
              .fetch_add(w[i * sw], std::memory_order_relaxed);
      });
    });
    for (std::int64_t k = 0; k < bins; ++k)
      store<T>(a.out, k, acc[static_cast<std::size_t>(k)]);
  });
}

void bincount_fixed(const BincountArgs& a, const Workspace&) {
  if (!a.weighted())
    return bincount_counts(a);
  const std::int64_t n = a.index.numel(), bins = a.out.numel();
  check_indices(a.index, bins);
  visit_float(a.weights.dtype, "bincount", [&]<class T>() {
    const T* w = static_cast<const T*>(a.weights.data);
    const std::int64_t sw = a.weights.stride(0);
    // Pass 1: max |w| over finite weights (a max is exact in any order), and any non-finite.
    std::vector<double> task_max(static_cast<std::size_t>(tasks_for(n)), 0.0);
    std::atomic<bool> special{false};
    parallel_for(tasks_for(n), [&](std::int64_t t) {
      double m = 0;
      bool sp = false;
      for (std::int64_t i = t * kChunk; i < std::min(n, (t + 1) * kChunk); ++i) {
        const double v = static_cast<double>(w[i * sw]);
        if (std::isfinite(v))
          m = std::max(m, std::abs(v));
        else
          sp = true;
      }
      task_max[static_cast<std::size_t>(t)] = m;
      if (sp)
        special = true;
    });
    double max_abs = 0;
    for (double m : task_max)
      max_abs = std::max(max_abs, m);
    const int s = fixed_point_shift(n, max_abs);
    // Pass 2: exact int64 sums of the scaled, rounded weights.
    std::vector<unsigned> mask(special ? static_cast<std::size_t>(bins) : 0, 0u);
    with_index(a.index, [&](auto idx) {
      const auto q = integer_histogram(n, bins, idx, [&](std::int64_t i) -> std::int64_t {
        const double v = static_cast<double>(w[i * sw]);
        if (std::isfinite(v))
          return round_to_int64(scale_pow2(v, s));
        std::atomic_ref<unsigned>(mask[static_cast<std::size_t>(idx(i))])
            .fetch_or(special_bit(v), std::memory_order_relaxed);
        return 0;
      });
      for (std::int64_t k = 0; k < bins; ++k) {
        T r = static_cast<T>(scale_pow2(static_cast<double>(q[static_cast<std::size_t>(k)]), -s));
        if (special && mask[static_cast<std::size_t>(k)] != 0)
          r = special_value<T>(mask[static_cast<std::size_t>(k)]);
        store<T>(a.out, k, r);
      }
    });
  });
}

void histc_counts(const HistcArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "histc", [&]<class T>() {
    Tensor hold;
    const TensorView x =
        a.x.is_contiguous() ? a.x : (hold = Tensor::copy_of(a.x, Device::cpu())).view();
    const T* p = static_cast<const T*>(x.data);
    const T lo = static_cast<T>(a.lo), hi = static_cast<T>(a.hi);
    const std::int64_t bins = a.out.numel();
    const auto c = integer_histogram(
        x.numel(), bins, [&](std::int64_t i) { return histc_bin<T>(p[i], lo, hi, bins); },
        [](std::int64_t) { return std::int64_t{1}; });
    for (std::int64_t k = 0; k < bins; ++k)
      store<T>(a.out, k, static_cast<T>(c[static_cast<std::size_t>(k)]));
  });
}

template <class Args>
Variant<Args> cpu_variant(const char* op, const char* name, Determinism level, const char* how,
                          void (*run)(const Args&, const Workspace&)) {
  return Variant<Args>{{op, name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
}

} // namespace

void register_cpu_histogram(Registry& r) {
  r.add(cpu_variant<BincountArgs>("bincount", "cpu.float_atomics", Determinism::not_guaranteed,
                                  "weights added with atomic float adds in arrival order (counts: "
                                  "exact integers)",
                                  bincount_atomic));
  r.add(cpu_variant<BincountArgs>("bincount", "cpu.fixed_point", Determinism::portable,
                                  "exact int64 fixed-point sums, scale from max |w|; counts exact",
                                  bincount_fixed));
  r.add(cpu_variant<HistcArgs>("histc", "cpu.int_counts", Determinism::portable,
                               "per-thread int64 counts summed exactly, PyTorch's bin formula",
                               histc_counts));
}

} // namespace samebits::detail
