// CPU variants of index_add, index_add with a plan, scatter_add and scatter_reduce.
//
//   cpu.atomic         not_guaranteed  sources split among threads; each contribution is combined
//                                      into its target with an atomic float add (CAS loop for
//                                      prod/amax/amin), in whatever order the threads get there
//   cpu.target_sweep   portable        index vectors: each thread owns a range of targets and scans
//                                      all sources in ascending order, applying the ones it owns
//                                      (no sort, no atomics; the default deterministic variant)
//   cpu.sorted_pull    portable        stable counting sort of the index (every call), then each
//                                      target pulls its sources in ascending order (index vectors)
//   cpu.plan_pull      portable        the same pull over a plan built once (index_add with a plan)
//   cpu.column_sweep   portable        every column (all positions but the scattered dim) is one
//                                      task that walks its sources in ascending order; any index
//
// Every portable variant computes the canonical order of include/samebits/ops/scatter.hpp: per
// target, sequential over its sources in ascending position. Work is split by target (pull) or
// by column (sweep), so no two threads ever touch one target and the thread count cannot matter.
#include "ops/scatter.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/index_plan.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "ops/combine.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

namespace samebits::detail {

namespace {

// --- the shape of a scatter -------------------------------------------------------------------

// Positions of index/src are (o, i, k): o over the dims before `dim` ("outer"), i along `dim`
// (L of them), k over the dims after it ("inner"). Offsets in elements, per tensor.
struct Geometry {
  std::int64_t L = 0, M = 0, outer = 0, inner = 0;
  std::vector<std::int64_t> src_outer, idx_outer, out_outer; // [outer]
  std::vector<std::int64_t> src_inner, idx_inner, out_inner; // [inner]
  std::int64_t src_d = 0, idx_d = 0, out_d = 0;              // strides along dim
  bool unit_inner = false;   // src and out inner offsets are 0, 1, 2, ... (rows of features)
  bool index_vector = false; // the index depends on i alone (index_add, expanded indices)
};

std::vector<std::int64_t> dim_offsets(const TensorView& v, int lo, int hi) {
  std::vector<std::int64_t> offs{0};
  for (int j = lo; j < hi; ++j) {
    std::vector<std::int64_t> next;
    next.reserve(offs.size() * static_cast<std::size_t>(v.size(j)));
    for (std::int64_t o : offs)
      for (std::int64_t x = 0; x < v.size(j); ++x)
        next.push_back(o + x * v.stride(j));
    offs.swap(next);
  }
  return offs;
}

Geometry geometry(const ScatterArgs& a) {
  Geometry g;
  const int d = a.dim, nd = a.src.ndim;
  g.L = a.src.size(d);
  g.M = a.out.size(d);
  g.src_outer = dim_offsets(a.src, 0, d);
  g.out_outer = dim_offsets(a.out, 0, d);
  g.src_inner = dim_offsets(a.src, d + 1, nd);
  g.out_inner = dim_offsets(a.out, d + 1, nd);
  g.outer = static_cast<std::int64_t>(g.src_outer.size());
  g.inner = static_cast<std::int64_t>(g.src_inner.size());
  g.src_d = a.src.stride(d);
  g.out_d = a.out.stride(d);
  if (a.plan == nullptr) {
    g.idx_outer = dim_offsets(a.index, 0, d);
    g.idx_inner = dim_offsets(a.index, d + 1, nd);
    g.idx_d = a.index.stride(d);
    g.index_vector =
        std::all_of(g.idx_outer.begin(), g.idx_outer.end(), [](auto x) { return x == 0; }) &&
        std::all_of(g.idx_inner.begin(), g.idx_inner.end(), [](auto x) { return x == 0; });
  } else {
    g.index_vector = true;
  }
  g.unit_inner = true;
  for (std::int64_t k = 0; k < g.inner; ++k)
    if (g.src_inner[static_cast<std::size_t>(k)] != k ||
        g.out_inner[static_cast<std::size_t>(k)] != k)
      g.unit_inner = false;
  return g;
}

// The index vector along `dim` (valid when g.index_vector).
TensorView index_vector_view(const ScatterArgs& a, const Geometry& g) {
  TensorView v = a.index;
  v.ndim = 1;
  v.shape = {g.L};
  v.strides = {g.idx_d};
  return v;
}

// --- combination steps: ops/combine.hpp (step<R>, identity<R>, finished<R>: the NaN rule) -----

// Calls f.template operator()<R, T, I>() for the reduction, value type and index type of `a`.
template <class F> void visit_scatter(const ScatterArgs& a, F&& f) {
  auto with_index = [&]<Reduce R, class T>() {
    if (a.plan != nullptr || a.index.dtype == DType::i64)
      f.template operator()<R, T, std::int64_t>();
    else
      f.template operator()<R, T, std::int32_t>();
  };
  auto with_value = [&]<Reduce R>() {
    visit_float(a.src.dtype, a.op, [&]<class T>() { with_index.template operator()<R, T>(); });
  };
  switch (a.reduce) {
  case Reduce::sum:
    return with_value.template operator()<Reduce::sum>();
  case Reduce::mean:
    return with_value.template operator()<Reduce::mean>();
  case Reduce::amax:
    return with_value.template operator()<Reduce::amax>();
  case Reduce::amin:
    return with_value.template operator()<Reduce::amin>();
  case Reduce::prod:
    return with_value.template operator()<Reduce::prod>();
  }
}

// Checks every index value of a general (not vector) index before anything is written; throws
// naming the first bad position in row-major order of the index.
template <class I> void check_indices(const ScatterArgs& a, const Geometry& g) {
  const I* idx = static_cast<const I*>(a.index.data);
  // An index vector (the same for every column) is checked once, not once per column.
  const std::int64_t rows = g.index_vector ? g.L : g.outer * g.L;
  const std::int64_t cols = g.index_vector ? 1 : g.inner;
  constexpr std::int64_t kRows = 4096;
  const std::int64_t tasks = (rows + kRows - 1) / kRows;
  std::vector<std::int64_t> bad(static_cast<std::size_t>(tasks), -1);
  parallel_for(tasks, [&](std::int64_t t) {
    for (std::int64_t r = t * kRows; r < std::min(rows, (t + 1) * kRows); ++r) {
      const std::int64_t o = r / g.L, i = r % g.L;
      const I* row = idx + g.idx_outer[static_cast<std::size_t>(o)] + i * g.idx_d;
      for (std::int64_t k = 0; k < cols; ++k) {
        const auto m = static_cast<std::int64_t>(row[g.idx_inner[static_cast<std::size_t>(k)]]);
        if (m < 0 || m >= g.M) {
          bad[static_cast<std::size_t>(t)] = g.index_vector ? r : r * g.inner + k;
          return;
        }
      }
    }
  });
  for (std::int64_t p : bad)
    if (p >= 0) { // position: along dim for an index vector, else row-major in the index
      const std::int64_t r = g.index_vector ? p : p / g.inner, k = g.index_vector ? 0 : p % g.inner;
      const std::int64_t o = r / g.L, i = r % g.L;
      const auto v =
          static_cast<std::int64_t>(idx[g.idx_outer[static_cast<std::size_t>(o)] + i * g.idx_d +
                                        g.idx_inner[static_cast<std::size_t>(k)]]);
      throw IndexOutOfRange(index_error_message(a.op, p, v, g.M));
    }
}

// Contributions: src, or alpha * src (rounded) for index_add with alpha != 1.
template <class T> struct Contribution {
  bool scaled;
  T alpha;
  T operator()(T v) const { return contribution(v, alpha, scaled); }
};
template <class T> Contribution<T> contribution(const ScatterArgs& a) {
  return {a.alpha != 1.0, static_cast<T>(a.alpha)};
}

// The typed inputs of the variants that read the index directly (the sweeps and the atomic
// baseline), after every index has been checked.
template <class T, class I> struct DirectInputs {
  const T* src;
  const I* idx;
  T* out;
  Contribution<T> cf;
  bool self;
};
template <class T, class I>
DirectInputs<T, I> direct_inputs(const ScatterArgs& a, const Geometry& g) {
  check_indices<I>(a, g);
  return {static_cast<const T*>(a.src.data), static_cast<const I*>(a.index.data),
          static_cast<T*>(a.out.data), contribution<T>(a), a.include_self};
}

// --- pull: each target reduces its sources in ascending order --------------------------------

template <Reduce R, class T>
void pull(const ScatterArgs& a, const Geometry& g, const std::int64_t* order,
          const std::int64_t* offsets) {
  if (g.L == 0 || g.outer == 0 || g.inner == 0)
    return;
  const T* src = static_cast<const T*>(a.src.data);
  T* out = static_cast<T*>(a.out.data);
  const auto cf = contribution<T>(a);
  const bool self = a.include_self;
  // Tasks are ranges of targets of about equal work (sources + targets), found by bisection.
  const std::int64_t work = g.L + g.M;
  const std::int64_t tasks =
      std::clamp<std::int64_t>(work / 2048, 1, 16 * std::max(1, num_threads()));
  auto first_target = [&](std::int64_t j) {
    const std::int64_t goal = j * work / tasks;
    std::int64_t lo = 0, hi = g.M; // first t with offsets[t] + t >= goal
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (offsets[mid] + mid >= goal)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  parallel_for(tasks, [&](std::int64_t j) {
    const std::int64_t t0 = first_target(j), t1 = j + 1 == tasks ? g.M : first_target(j + 1);
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = offsets[t], e = offsets[t + 1];
      if (b == e)
        continue;
      const T count = static_cast<T>(e - b + (self ? 1 : 0));
      for (std::int64_t o = 0; o < g.outer; ++o) {
        T* __restrict orow = out + g.out_outer[static_cast<std::size_t>(o)] + t * g.out_d;
        const T* sbase = src + g.src_outer[static_cast<std::size_t>(o)];
        if (g.unit_inner && g.inner == 1) {
          T acc = self ? orow[0] : cf(sbase[order[b] * g.src_d]);
          for (std::int64_t s = self ? b : b + 1; s < e; ++s)
            acc = step<R>(acc, cf(sbase[order[s] * g.src_d]));
          if constexpr (R == Reduce::mean)
            acc = acc / count;
          orow[0] = finished<R>(acc);
        } else if (g.unit_inner) {
          const std::int64_t F = g.inner;
          std::int64_t s = b;
          if (!self) {
            const T* __restrict p = sbase + order[s++] * g.src_d;
            for (std::int64_t k = 0; k < F; ++k)
              orow[k] = cf(p[k]);
          }
          if (cf.scaled) {
            for (; s < e; ++s) {
              const T* __restrict p = sbase + order[s] * g.src_d;
              for (std::int64_t k = 0; k < F; ++k)
                orow[k] = step<R>(orow[k], cf.alpha * p[k]);
            }
          } else {
            for (; s < e; ++s) {
              const T* __restrict p = sbase + order[s] * g.src_d;
              for (std::int64_t k = 0; k < F; ++k)
                orow[k] = step<R>(orow[k], p[k]);
            }
          }
          if constexpr (R == Reduce::mean)
            for (std::int64_t k = 0; k < F; ++k)
              orow[k] = finished<R>(orow[k] / count);
          else if constexpr (R != Reduce::amax && R != Reduce::amin)
            for (std::int64_t k = 0; k < F; ++k)
              orow[k] = finished<R>(orow[k]);
        } else {
          for (std::int64_t k = 0; k < g.inner; ++k) {
            T& target = orow[g.out_inner[static_cast<std::size_t>(k)]];
            const T* col = sbase + g.src_inner[static_cast<std::size_t>(k)];
            T acc = self ? target : cf(col[order[b] * g.src_d]);
            for (std::int64_t s = self ? b : b + 1; s < e; ++s)
              acc = step<R>(acc, cf(col[order[s] * g.src_d]));
            if constexpr (R == Reduce::mean)
              acc = acc / count;
            target = finished<R>(acc);
          }
        }
      }
    }
  });
}

void sorted_pull(const ScatterArgs& a, const Workspace&) {
  const Geometry g = geometry(a);
  std::unique_ptr<std::int64_t[]> order(
      new std::int64_t[static_cast<std::size_t>(std::max<std::int64_t>(g.L, 1))]);
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(g.M + 1));
  build_index_plan_cpu(index_vector_view(a, g), g.M, order.get(), offsets.data(), a.op);
  visit_scatter(
      a, [&]<Reduce R, class T, class I>() { pull<R, T>(a, g, order.get(), offsets.data()); });
}

void plan_pull(const ScatterArgs& a, const Workspace&) {
  const Geometry g = geometry(a);
  visit_scatter(a, [&]<Reduce R, class T, class I>() {
    pull<R, T>(a, g, a.plan->order.data<std::int64_t>(), a.plan->offsets.data<std::int64_t>());
  });
}

// --- target sweep: each thread owns a range of targets and scans every source ---------------

// For an index vector: part p owns targets [t0, t1) and walks all sources in ascending order,
// applying the rows that land in its range. Each part reads the whole index but only its own
// rows of src; no sort, no atomics, and a target's sources arrive in ascending order.
template <Reduce R, class T, class I> void target_sweep(const ScatterArgs& a, const Geometry& g) {
  if (g.L == 0 || g.outer == 0 || g.inner == 0)
    return;
  const auto [src, idx, out, cf, self] = direct_inputs<T, I>(a, g);
  const bool counting = !self || R == Reduce::mean;
  std::vector<std::int64_t> count(counting ? static_cast<std::size_t>(g.M) : 0, 0);
  // A part per thread, each with at least kSweepMinWork row elements: for a tiny scatter (an
  // index_add of 32 rows of 4 into 16 targets) waking a pool thread costs more than the scatter.
  constexpr std::int64_t kSweepMinWork = std::int64_t{1} << 14;
  const std::int64_t parts = std::clamp<std::int64_t>(
      std::min(g.M, g.L * g.outer * g.inner / kSweepMinWork), 1, std::max(1, num_threads()));
  parallel_for(parts, [&](std::int64_t part) {
    const auto [t0, t1] = split_range(g.M, parts, part);
    const auto width = static_cast<std::uint64_t>(t1 - t0);
    if (!counting && g.unit_inner && g.inner == 1 && g.outer == 1) {
      // One value per row: branch-free, rows of other parts go to a dummy slot (a random 50%
      // branch per row would cost more than the row itself).
      const T* sp = src + g.src_outer[0];
      T* op = out + g.out_outer[0];
      T dummy = T(0);
      for (std::int64_t i = 0; i < g.L; ++i) {
        const auto m = static_cast<std::int64_t>(idx[i * g.idx_d]);
        T* target = static_cast<std::uint64_t>(m - t0) < width ? op + m * g.out_d : &dummy;
        *target = finished<R>(step<R>(*target, cf(sp[i * g.src_d])));
      }
      return;
    }
    for (std::int64_t i = 0; i < g.L; ++i) {
      const auto m = static_cast<std::int64_t>(idx[i * g.idx_d]);
      if (static_cast<std::uint64_t>(m - t0) >= width)
        continue;
      bool first = false;
      if (counting)
        first = count[static_cast<std::size_t>(m)]++ == 0 && !self;
      for (std::int64_t o = 0; o < g.outer; ++o) {
        T* __restrict orow = out + g.out_outer[static_cast<std::size_t>(o)] + m * g.out_d;
        const T* __restrict p = src + g.src_outer[static_cast<std::size_t>(o)] + i * g.src_d;
        if (g.unit_inner) {
          if (first)
            for (std::int64_t k = 0; k < g.inner; ++k)
              orow[k] = finished<R>(cf(p[k]));
          else
            for (std::int64_t k = 0; k < g.inner; ++k)
              orow[k] = finished<R>(step<R>(orow[k], cf(p[k])));
        } else {
          for (std::int64_t k = 0; k < g.inner; ++k) {
            T& target = orow[g.out_inner[static_cast<std::size_t>(k)]];
            const T c = cf(p[g.src_inner[static_cast<std::size_t>(k)]]);
            target = finished<R>(first ? c : step<R>(target, c));
          }
        }
      }
    }
    if constexpr (R == Reduce::mean) {
      for (std::int64_t m = t0; m < t1; ++m) {
        const std::int64_t n = count[static_cast<std::size_t>(m)];
        if (n == 0)
          continue;
        const T div = static_cast<T>(n + (self ? 1 : 0));
        for (std::int64_t o = 0; o < g.outer; ++o)
          for (std::int64_t k = 0; k < g.inner; ++k) {
            T& target = out[g.out_outer[static_cast<std::size_t>(o)] + m * g.out_d +
                            g.out_inner[static_cast<std::size_t>(k)]];
            target = canonical_nan(target / div);
          }
      }
    }
  });
}

void target_sweep_variant(const ScatterArgs& a, const Workspace&) {
  const Geometry g = geometry(a);
  visit_scatter(a, [&]<Reduce R, class T, class I>() { target_sweep<R, T, I>(a, g); });
}

// --- sweep: each column walks its sources in ascending order ---------------------------------

constexpr std::int64_t kColumnBlock = 16; // columns per task (one cache line of float32)

// mean: divides every target that received n > 0 contributions by n (+1 with include_self).
// count holds one entry per (outer, target, inner) position.
template <class T>
void divide_by_counts(const Geometry& g, T* out, const std::vector<std::int64_t>& count,
                      bool self) {
  parallel_for(g.outer, [&](std::int64_t o) {
    for (std::int64_t m = 0; m < g.M; ++m)
      for (std::int64_t k = 0; k < g.inner; ++k) {
        const std::int64_t n = count[static_cast<std::size_t>((o * g.M + m) * g.inner + k)];
        if (n == 0)
          continue;
        T& target = out[g.out_outer[static_cast<std::size_t>(o)] + m * g.out_d +
                        g.out_inner[static_cast<std::size_t>(k)]];
        target = canonical_nan(target / static_cast<T>(n + (self ? 1 : 0)));
      }
  });
}

template <Reduce R, class T, class I> void sweep(const ScatterArgs& a, const Geometry& g) {
  if (g.L == 0 || g.outer == 0 || g.inner == 0)
    return;
  const auto [src, idx, out, cf, self] = direct_inputs<T, I>(a, g);
  // Contributions per target element, when the first one or the final division needs it.
  const bool counting = !self || R == Reduce::mean;
  std::vector<std::int64_t> count(counting ? static_cast<std::size_t>(g.outer * g.M * g.inner) : 0,
                                  0);
  const std::int64_t blocks = (g.inner + kColumnBlock - 1) / kColumnBlock;
  parallel_for(g.outer * blocks, [&](std::int64_t task) {
    const std::int64_t o = task / blocks, k0 = (task % blocks) * kColumnBlock;
    const std::int64_t k1 = std::min(g.inner, k0 + kColumnBlock);
    const T* sbase = src + g.src_outer[static_cast<std::size_t>(o)];
    const I* ibase = idx + g.idx_outer[static_cast<std::size_t>(o)];
    T* obase = out + g.out_outer[static_cast<std::size_t>(o)];
    for (std::int64_t i = 0; i < g.L; ++i) {
      for (std::int64_t k = k0; k < k1; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        const auto m = static_cast<std::int64_t>(ibase[i * g.idx_d + g.idx_inner[ku]]);
        T& target = obase[m * g.out_d + g.out_inner[ku]];
        const T c = cf(sbase[i * g.src_d + g.src_inner[ku]]);
        if (counting) {
          std::int64_t& n = count[static_cast<std::size_t>((o * g.M + m) * g.inner + k)];
          target = finished<R>((n == 0 && !self) ? c : step<R>(target, c));
          ++n;
        } else {
          target = finished<R>(step<R>(target, c));
        }
      }
    }
  });
  if constexpr (R == Reduce::mean)
    divide_by_counts(g, out, count, self);
}

void column_sweep(const ScatterArgs& a, const Workspace&) {
  const Geometry g = geometry(a);
  visit_scatter(a, [&]<Reduce R, class T, class I>() { sweep<R, T, I>(a, g); });
}

// --- atomic: the not_guaranteed baseline -----------------------------------------------------

template <Reduce R, class T> inline void atomic_step(T& target, T c) {
  std::atomic_ref<T> ref(target);
  if constexpr (R == Reduce::sum || R == Reduce::mean) {
    ref.fetch_add(c, std::memory_order_relaxed);
  } else {
    T old = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(old, step<R>(old, c), std::memory_order_relaxed)) {
    }
  }
}

template <Reduce R, class T, class I> void atomic_scatter(const ScatterArgs& a, const Geometry& g) {
  if (g.L == 0 || g.outer == 0 || g.inner == 0)
    return;
  const auto [src, idx, out, cf, self] = direct_inputs<T, I>(a, g);
  constexpr std::int64_t kRows = 2048;
  const std::int64_t blocks = (g.L + kRows - 1) / kRows;
  // Visits every (target, contribution) pair, sources split among threads in blocks of rows.
  auto for_each = [&](auto&& visit) {
    parallel_for(g.outer * blocks, [&](std::int64_t task) {
      const std::int64_t o = task / blocks, i0 = (task % blocks) * kRows;
      const std::int64_t i1 = std::min(g.L, i0 + kRows);
      const T* sbase = src + g.src_outer[static_cast<std::size_t>(o)];
      const I* ibase = idx + g.idx_outer[static_cast<std::size_t>(o)];
      T* obase = out + g.out_outer[static_cast<std::size_t>(o)];
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t k = 0; k < g.inner; ++k) {
          const auto ku = static_cast<std::size_t>(k);
          const auto m = static_cast<std::int64_t>(ibase[i * g.idx_d + g.idx_inner[ku]]);
          visit(obase[m * g.out_d + g.out_inner[ku]], sbase[i * g.src_d + g.src_inner[ku]],
                (o * g.M + m) * g.inner + k);
        }
    });
  };
  std::vector<std::int64_t> count(
      R == Reduce::mean ? static_cast<std::size_t>(g.outer * g.M * g.inner) : 0, 0);
  if (!self) // targets that receive contributions start from the identity
    for_each([](T& target, T, std::int64_t) {
      std::atomic_ref<T>(target).store(identity<R, T>(), std::memory_order_relaxed);
    });
  for_each([&](T& target, T v, std::int64_t e) {
    atomic_step<R>(target, cf(v));
    if constexpr (R == Reduce::mean)
      std::atomic_ref<std::int64_t>(count[static_cast<std::size_t>(e)])
          .fetch_add(1, std::memory_order_relaxed);
  });
  if constexpr (R == Reduce::mean)
    divide_by_counts(g, out, count, self);
}

void atomic(const ScatterArgs& a, const Workspace&) {
  const Geometry g = geometry(a);
  visit_scatter(a, [&]<Reduce R, class T, class I>() { atomic_scatter<R, T, I>(a, g); });
}

std::string needs_index_vector(const ScatterArgs& a) {
  if (a.plan != nullptr)
    return "";
  const Geometry g = geometry(a);
  return g.index_vector
             ? ""
             : "the index differs across columns (not an expanded vector); column_sweep takes it";
}

Variant<ScatterArgs> variant(const char* op, const char* name, Determinism level, const char* how,
                             void (*run)(const ScatterArgs&, const Workspace&),
                             std::string (*why_not)(const ScatterArgs&) = nullptr) {
  Variant<ScatterArgs> v{{op, name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
  if (why_not != nullptr)
    v.why_not = why_not;
  return v;
}

} // namespace

void register_cpu_scatter(Registry& r) {
  register_cpu_index_plan(r);
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  const char* atomic_how =
      "contributions combined into targets with atomic float ops in thread order";
  const char* pull_how =
      "stable counting sort every call, then each target pulls its sources in order";
  const char* target_how =
      "threads own target ranges; each scans all sources in order, applies its own";
  const char* sweep_how = "each column walks its sources in ascending order; columns in parallel";
  r.add(variant("index_add", "cpu.atomic", ng, atomic_how, atomic));
  r.add(variant("index_add", "cpu.target_sweep", po, target_how, target_sweep_variant));
  r.add(variant("index_add", "cpu.sorted_pull", po, pull_how, sorted_pull));
  r.add(variant("index_add", "cpu.column_sweep", po, sweep_how, column_sweep));
  r.add(variant("index_add_plan", "cpu.plan_pull", po,
                "each target pulls its sources in plan order (no sort, no atomics)", plan_pull));
  for (const char* op : {"scatter_add", "scatter_reduce"}) {
    r.add(variant(op, "cpu.atomic", ng, atomic_how, atomic));
    r.add(
        variant(op, "cpu.target_sweep", po, target_how, target_sweep_variant, needs_index_vector));
    r.add(variant(op, "cpu.sorted_pull", po, pull_how, sorted_pull, needs_index_vector));
    r.add(variant(op, "cpu.column_sweep", po, sweep_how, column_sweep));
  }
}

} // namespace samebits::detail
