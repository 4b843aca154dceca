// CPU variants of segment_reduce and aggregate.
//
//   cpu.atomic_edges      not_guaranteed  edges split into fixed chunks; each chunk folds its run
//                                         of one row into a partial and adds it into the output
//                                         with atomic float operations, in completion order
//   cpu.sequential_rows   portable        each output row reduced by one task, positions in
//                                         ascending CSR order (the canonical order of
//                                         include/samebits/ops/segment.hpp); rows in parallel
#include "ops/segment.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

namespace samebits::detail {

namespace {

constexpr std::int64_t kEdgeChunk = 1024;      // atomic variant: edges per task
constexpr std::int64_t kWorkPerTask = 1 << 15; // portable variant: ~elements per task

// Rows of `t`, or of a contiguous copy of it kept in `hold`.
Rows rows_of(const TensorView& t, Tensor& hold) {
  if (auto r = as_rows(t))
    return *r;
  hold = Tensor::copy_of(t, Device::cpu());
  return *as_rows(hold.view());
}

// The output as rows: `out` itself, or a contiguous temporary copied into out by finish().
struct OutRows {
  Rows rows;
  Tensor temp;
  TensorView out;
  explicit OutRows(const TensorView& o) : out(o) {
    if (auto r = as_rows(o)) {
      rows = *r;
    } else {
      temp = Tensor::empty(o.sizes(), o.dtype);
      rows = *as_rows(temp.view());
    }
  }
  void finish() {
    if (temp.defined() && temp.numel() > 0)
      copy(temp.view(), out);
  }
};

// Calls f(row_of) with row_of(k) = the row of x that position k reads.
template <class F> void with_rows(const SegmentArgs& a, F&& f) {
  if (a.identity)
    return f([](std::int64_t k) { return k; });
  if (a.indices.dtype == DType::i32) {
    const auto* p = static_cast<const std::int32_t*>(a.indices.data);
    return f([p](std::int64_t k) { return static_cast<std::int64_t>(p[k]); });
  }
  const auto* p = static_cast<const std::int64_t*>(a.indices.data);
  return f([p](std::int64_t k) { return p[k]; });
}

template <class T> T identity_of(Reduce r) {
  if (r == Reduce::amax)
    return -std::numeric_limits<T>::infinity();
  if (r == Reduce::amin)
    return std::numeric_limits<T>::infinity();
  return T(0);
}

// out = the finished value of a chain of `count` elements whose accumulator is acc.
template <class T> T finish(Reduce r, T acc, std::int64_t count) {
  if (count == 0)
    return T(0);
  if (r == Reduce::mean)
    return canonical_nan(acc / static_cast<T>(count));
  if (r == Reduce::sum)
    return canonical_nan(acc);
  return acc;
}

// The canonical step of reduce R (ops/combine.hpp; sum and mean share the sum's step).
template <Reduce R, class T> inline T step_of(T acc, T v) {
  return step < R == Reduce::mean ? Reduce::sum : R > (acc, v);
}

// acc[f] = step(acc[f], row[f]) for f < n.
template <Reduce R, class T> void fold(T* __restrict acc, const T* __restrict row, std::int64_t n) {
  if (n == 1) {
    acc[0] = step_of<R>(acc[0], row[0]);
    return;
  }
  for (std::int64_t f = 0; f < n; ++f)
    acc[f] = step_of<R>(acc[f], row[f]);
}

// Calls f.template operator()<R>() with the step's reduce as a constant.
template <class F> void with_reduce(Reduce r, F&& f) {
  if (r == Reduce::amax)
    return f.template operator()<Reduce::amax>();
  if (r == Reduce::amin)
    return f.template operator()<Reduce::amin>();
  return f.template operator()<Reduce::sum>();
}

// --- portable: one task per block of rows, sequential chains --------------------------------

void run_sequential(const SegmentArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "segment_reduce", [&]<class T>() {
    Tensor hx;
    const Rows x = rows_of(a.x, hx);
    OutRows o(a.out);
    const auto* off = static_cast<const std::int64_t*>(a.offsets.data);
    const std::int64_t segs = a.offsets.size(0) - 1, cols = x.cols;
    const T* xd = static_cast<const T*>(x.data);
    T* od = static_cast<T*>(o.rows.data);
    if (segs > 0 && cols > 0) {
      with_rows(a, [&](auto row_of) {
        with_reduce(a.reduce, [&]<Reduce R>() {
          // Tasks of whole rows; the split never changes a row's chain, so any split is fine.
          const std::int64_t rows_per_task = std::max<std::int64_t>(1, kWorkPerTask / (cols * 8));
          parallel_for((segs + rows_per_task - 1) / rows_per_task, [&](std::int64_t t) {
            std::vector<T> acc(static_cast<std::size_t>(cols));
            const std::int64_t end = std::min(segs, (t + 1) * rows_per_task);
            for (std::int64_t s = t * rows_per_task; s < end; ++s) {
              std::fill(acc.begin(), acc.end(), identity_of<T>(a.reduce));
              for (std::int64_t k = off[s]; k < off[s + 1]; ++k)
                fold<R>(acc.data(), xd + row_of(k) * x.ld, cols);
              T* out_row = od + s * o.rows.ld;
              const std::int64_t count = off[s + 1] - off[s];
              for (std::int64_t f = 0; f < cols; ++f)
                out_row[f] = finish(a.reduce, acc[static_cast<std::size_t>(f)], count);
            }
          });
        });
      });
    }
    o.finish();
  });
}

// --- not_guaranteed: edge chunks, partials added atomically ----------------------------------

template <class T> void atomic_combine(Reduce r, T& target, T v) {
  std::atomic_ref<T> ref(target);
  if (r == Reduce::sum || r == Reduce::mean) {
    ref.fetch_add(v, std::memory_order_relaxed);
    return;
  }
  T cur = ref.load(std::memory_order_relaxed);
  for (;;) {
    const T next = r == Reduce::amax ? combine_max(cur, v) : combine_min(cur, v);
    if (next == cur && !(next != next))
      return;
    if (ref.compare_exchange_weak(cur, next, std::memory_order_relaxed))
      return;
  }
}

void run_atomic(const SegmentArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "segment_reduce", [&]<class T>() {
    Tensor hx;
    const Rows x = rows_of(a.x, hx);
    const auto* off = static_cast<const std::int64_t*>(a.offsets.data);
    const std::int64_t segs = a.offsets.size(0) - 1, cols = x.cols;
    const std::int64_t edges = off[segs];
    const T* xd = static_cast<const T*>(x.data);
    std::vector<T> acc(static_cast<std::size_t>(segs * cols), identity_of<T>(a.reduce));
    if (segs > 0 && cols > 0 && edges > 0) {
      with_rows(a, [&](auto row_of) {
        with_reduce(a.reduce, [&]<Reduce R>() {
          parallel_for((edges + kEdgeChunk - 1) / kEdgeChunk, [&](std::int64_t c) {
            const std::int64_t k0 = c * kEdgeChunk, k1 = std::min(edges, k0 + kEdgeChunk);
            // The row holding position k0: the last s with off[s] <= k0.
            std::int64_t s = std::upper_bound(off, off + segs + 1, k0) - off - 1;
            std::vector<T> part(static_cast<std::size_t>(cols), identity_of<T>(a.reduce));
            auto flush = [&] {
              T* dst = acc.data() + s * cols;
              for (std::int64_t f = 0; f < cols; ++f) {
                atomic_combine(a.reduce, dst[f], part[static_cast<std::size_t>(f)]);
                part[static_cast<std::size_t>(f)] = identity_of<T>(a.reduce);
              }
            };
            for (std::int64_t k = k0; k < k1; ++k) {
              if (k >= off[s + 1]) {
                flush();
                while (k >= off[s + 1])
                  ++s;
              }
              fold<R>(part.data(), xd + row_of(k) * x.ld, cols);
            }
            flush();
          });
        });
      });
    }
    OutRows o(a.out);
    T* od = static_cast<T*>(o.rows.data);
    for (std::int64_t s = 0; s < segs; ++s)
      for (std::int64_t f = 0; f < cols; ++f)
        od[s * o.rows.ld + f] =
            finish(a.reduce, acc[static_cast<std::size_t>(s * cols + f)], off[s + 1] - off[s]);
    o.finish();
  });
}

Variant<SegmentArgs> cpu_variant(const char* op, const char* name, Determinism level,
                                 const char* how,
                                 void (*run)(const SegmentArgs&, const Workspace&)) {
  return Variant<SegmentArgs>{{op, name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
}

} // namespace

void register_cpu_segment(Registry& r) {
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  for (const char* op : {"segment_reduce", "aggregate"}) {
    r.add(cpu_variant(op, "cpu.atomic_edges", ng,
                      "edge chunks fold partials and add them into the output with atomic float "
                      "operations in completion order",
                      run_atomic));
    r.add(cpu_variant(op, "cpu.sequential_rows", po,
                      "one sequential chain per output element in ascending CSR order; rows in "
                      "parallel",
                      run_sequential));
  }
}

} // namespace samebits::detail
