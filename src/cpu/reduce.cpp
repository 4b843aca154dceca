// CPU variants of sum, sum_dim and dot.
//
//   cpu.atomic_chunks   not_guaranteed  threads claim chunks and add their partial sums into the
//                                       result with atomic float adds, in whatever order they
//                                       finish
//   cpu.canonical_tree  portable        the canonical order of ops/reduce.hpp; chunks in parallel,
//                                       each chunk's sum independent of the thread that runs it
#include "ops/reduce.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/canonical_sum.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"

#include <atomic>

namespace samebits::detail {

namespace {

constexpr std::int64_t kAtomicChunk = 4096;

// A contiguous view of x (x itself, or a copy kept in `hold`).
TensorView contiguous_input(const TensorView& x, Tensor& hold) {
  if (x.is_contiguous())
    return x;
  hold = Tensor::copy_of(x, Device::cpu());
  return hold.view();
}

// The base offset of every output element of sum_dim, in x's strides, row-major over out.
std::vector<std::int64_t> outer_offsets(const TensorView& x, int dim) {
  // x's shape and strides without `dim` (built by hand: select would refuse an empty `dim`, and
  // a sum over an empty dim is a tensor of +0.0).
  TensorView rest = x;
  for (int d = dim; d + 1 < x.ndim; ++d) {
    rest.shape[static_cast<std::size_t>(d)] = x.shape[static_cast<std::size_t>(d + 1)];
    rest.strides[static_cast<std::size_t>(d)] = x.strides[static_cast<std::size_t>(d + 1)];
  }
  rest.ndim = x.ndim - 1;
  rest.shape[static_cast<std::size_t>(rest.ndim)] = 0;
  rest.strides[static_cast<std::size_t>(rest.ndim)] = 0;
  rest.data = nullptr;
  std::vector<std::int64_t> offs;
  offs.reserve(static_cast<std::size_t>(rest.numel()));
  for_each_element(rest, rest, [&](std::int64_t o, std::int64_t) { offs.push_back(o); });
  return offs;
}

template <class T> void atomic_add(T& target, T v) {
  std::atomic_ref<T>(target).fetch_add(v, std::memory_order_relaxed);
}

template <class T> void store_out(const TensorView& out, std::int64_t i, T v) {
  // out may be strided; i is the row-major index.
  std::array<std::int64_t, kMaxDims> idx{};
  std::int64_t rem = i;
  for (int d = out.ndim - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = rem % out.shape[static_cast<std::size_t>(d)];
    rem /= out.shape[static_cast<std::size_t>(d)];
  }
  static_cast<T*>(out.data)[out.offset(idx)] = v;
}

// --- sum ------------------------------------------------------------------------------------

void sum_canonical(const SumArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "sum", [&]<class T>() {
    Tensor hold;
    const TensorView x = contiguous_input(a.x, hold);
    const T* p = static_cast<const T*>(x.data);
    const T r = canonical_sum<T>(
        x.numel(), [p](std::int64_t i) { return p[i]; }, true);
    store_out<T>(a.out, 0, r);
  });
}

void sum_atomic(const SumArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "sum", [&]<class T>() {
    Tensor hold;
    const TensorView x = contiguous_input(a.x, hold);
    const T* p = static_cast<const T*>(x.data);
    const std::int64_t n = x.numel();
    T total = T(0);
    parallel_for((n + kAtomicChunk - 1) / kAtomicChunk, [&](std::int64_t c) {
      const std::int64_t e = std::min(n, (c + 1) * kAtomicChunk);
      T s = T(0);
      for (std::int64_t i = c * kAtomicChunk; i < e; ++i)
        s += p[i];
      atomic_add(total, s);
    });
    store_out<T>(a.out, 0, total);
  });
}

// --- sum_dim --------------------------------------------------------------------------------

void sum_dim_canonical(const SumArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "sum_dim", [&]<class T>() {
    const auto offs = outer_offsets(a.x, a.dim);
    const std::int64_t len = a.x.size(a.dim), stride = a.x.stride(a.dim);
    const T* p = static_cast<const T*>(a.x.data);
    const auto m = static_cast<std::int64_t>(offs.size());
    std::vector<T> result(offs.size());
    parallel_for((m + 63) / 64, [&](std::int64_t t) {
      for (std::int64_t o = t * 64; o < std::min(m, (t + 1) * 64); ++o) {
        const T* base = p + offs[static_cast<std::size_t>(o)];
        result[static_cast<std::size_t>(o)] =
            canonical_sum<T>(len, [base, stride](std::int64_t i) { return base[i * stride]; });
      }
    });
    for (std::int64_t o = 0; o < m; ++o)
      store_out<T>(a.out, o, result[static_cast<std::size_t>(o)]);
  });
}

void sum_dim_atomic(const SumArgs& a, const Workspace&) {
  visit_float(a.x.dtype, "sum_dim", [&]<class T>() {
    const auto offs = outer_offsets(a.x, a.dim);
    const std::int64_t len = a.x.size(a.dim), stride = a.x.stride(a.dim);
    const T* p = static_cast<const T*>(a.x.data);
    const auto m = static_cast<std::int64_t>(offs.size());
    std::vector<T> result(offs.size(), T(0));
    const std::int64_t pieces = std::max<std::int64_t>(1, (len + kAtomicChunk - 1) / kAtomicChunk);
    // Work items: (output element, piece of the reduced dim), claimed in any order.
    parallel_for(m * pieces, [&](std::int64_t t) {
      const std::int64_t o = t / pieces, piece = t % pieces;
      const std::int64_t b = piece * kAtomicChunk, e = std::min(len, b + kAtomicChunk);
      const T* base = p + offs[static_cast<std::size_t>(o)];
      T s = T(0);
      for (std::int64_t i = b; i < e; ++i)
        s += base[i * stride];
      atomic_add(result[static_cast<std::size_t>(o)], s);
    });
    for (std::int64_t o = 0; o < m; ++o)
      store_out<T>(a.out, o, result[static_cast<std::size_t>(o)]);
  });
}

// --- dot --------------------------------------------------------------------------------------

void dot_canonical(const DotArgs& a, const Workspace&) {
  visit_float(a.a.dtype, "dot", [&]<class T>() {
    Tensor ha, hb;
    const T* pa = static_cast<const T*>(contiguous_input(a.a, ha).data);
    const T* pb = static_cast<const T*>(contiguous_input(a.b, hb).data);
    const std::int64_t n = a.a.numel();
    if (n == 0) {
      store_out<T>(a.out, 0, T(0));
      return;
    }
    // The canonical sum of the rounded products, chunk by chunk: each chunk's products are formed
    // in a buffer first (a plain vector multiply), then summed by the chunk tree. Same bits as
    // summing pa[i] * pb[i] directly; two simple loops vectorize where one fused loop did not.
    const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<T> partial(static_cast<std::size_t>(chunks));
    constexpr std::int64_t kChunksPerTask = 16;
    parallel_for((chunks + kChunksPerTask - 1) / kChunksPerTask, [&](std::int64_t t) {
      T prod[kSumChunk];
      const std::int64_t end = std::min(chunks, (t + 1) * kChunksPerTask);
      for (std::int64_t c = t * kChunksPerTask; c < end; ++c) {
        const std::int64_t base = c * kSumChunk, len = std::min(kSumChunk, n - base);
        for (std::int64_t i = 0; i < len; ++i)
          prod[i] = pa[base + i] * pb[base + i];
        partial[static_cast<std::size_t>(c)] =
            canonical_chunk<T>(len, [&prod](std::int64_t i) { return prod[i]; });
      }
    });
    store_out<T>(a.out, 0,
                 chunks == 1 ? partial[0] : canonical_sum_partials<T>(std::move(partial)));
  });
}

void dot_atomic(const DotArgs& a, const Workspace&) {
  visit_float(a.a.dtype, "dot", [&]<class T>() {
    Tensor ha, hb;
    const T* pa = static_cast<const T*>(contiguous_input(a.a, ha).data);
    const T* pb = static_cast<const T*>(contiguous_input(a.b, hb).data);
    const std::int64_t n = a.a.numel();
    T total = T(0);
    parallel_for((n + kAtomicChunk - 1) / kAtomicChunk, [&](std::int64_t c) {
      const std::int64_t e = std::min(n, (c + 1) * kAtomicChunk);
      T s = T(0);
      for (std::int64_t i = c * kAtomicChunk; i < e; ++i)
        s += pa[i] * pb[i];
      atomic_add(total, s);
    });
    store_out<T>(a.out, 0, total);
  });
}

template <class Args>
Variant<Args> cpu_variant(const char* op, const char* name, Determinism level, const char* how,
                          void (*run)(const Args&, const Workspace&)) {
  return Variant<Args>{{op, name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
}

} // namespace

void register_cpu_reduce(Registry& r) {
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  // Preference order: the atomic variant first (what not_guaranteed callers get today), then the
  // canonical tree, which every deterministic request selects.
  r.add(cpu_variant<SumArgs>("sum", "cpu.atomic_chunks", ng,
                             "chunk sums added with atomic float adds in completion order",
                             sum_atomic));
  r.add(cpu_variant<SumArgs>("sum", "cpu.canonical_tree", po,
                             "canonical 256-lane, 4096-element chunk tree; chunks in parallel",
                             sum_canonical));
  r.add(cpu_variant<SumArgs>("sum_dim", "cpu.atomic_chunks", ng,
                             "pieces of the reduced dim added with atomic float adds",
                             sum_dim_atomic));
  r.add(cpu_variant<SumArgs>("sum_dim", "cpu.canonical_tree", po,
                             "canonical tree along dim, output elements in parallel",
                             sum_dim_canonical));
  r.add(cpu_variant<DotArgs>("dot", "cpu.atomic_chunks", ng,
                             "chunk dot products added with atomic float adds", dot_atomic));
  r.add(cpu_variant<DotArgs>("dot", "cpu.canonical_tree", po,
                             "rounded products summed in the canonical tree", dot_canonical));
}

} // namespace samebits::detail
