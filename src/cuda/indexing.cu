// CUDA variants of index_select and gather: bandwidth-bound copies, no arithmetic.
//
//   cuda.copy   portable   copies elements as raw words (16-byte words for index_select rows
//                          where aligned); with nothing to round, the same bits at every level,
//                          so this one variant serves not_guaranteed, run_to_run and portable
//
// Unchecked index values are checked first by a kernel that records the first bad position; the
// copy kernel reads the record and exits if it is set, so a bad index writes nothing. The host
// then reads the record and throws IndexOutOfRange. A small call checks and copies in one block.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "ops/indexing.hpp"
#include "ops/indexing_choice.hpp"

#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

namespace {

using u64 = unsigned long long;
constexpr u64 kNone = ~0ull;
constexpr int kBlock = 256;
constexpr int kMaxGrid = 1 << 30;

// Padded4 as plain arrays for kernels.
struct Geo {
  std::int64_t size[4];
  std::int64_t xs[4];
  std::int64_t is[4];
  std::int64_t os[4];
  int dim;
};

Geo geo_of(const Padded4& p) {
  Geo g{};
  for (int d = 0; d < 4; ++d) {
    const auto u = static_cast<std::size_t>(d);
    g.size[d] = p.size[u];
    g.xs[d] = p.xs[u];
    g.is[d] = p.is[u];
    g.os[d] = p.os[u];
  }
  g.dim = p.dim;
  return g;
}

__device__ __forceinline__ void unravel(std::int64_t t, const Geo& g, std::int64_t c[4]) {
  c[3] = t % g.size[3];
  t /= g.size[3];
  c[2] = t % g.size[2];
  t /= g.size[2];
  c[1] = t % g.size[1];
  c[0] = t / g.size[1];
}

// Offset of index element number t (row-major over the index's logical shape).
__device__ __forceinline__ std::int64_t index_offset(std::int64_t t, const Geo& g, bool gather) {
  if (!gather)
    return t * g.is[g.dim];
  std::int64_t c[4];
  unravel(t, g, c);
  return c[0] * g.is[0] + c[1] * g.is[1] + c[2] * g.is[2] + c[3] * g.is[3];
}

template <class I>
__global__ void check_kernel(const I* __restrict__ idx, Geo g, bool gather, std::int64_t n,
                             std::int64_t hi, u64* bad) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n; t += stride) {
    const auto v = static_cast<std::int64_t>(idx[index_offset(t, g, gather)]);
    if (v < 0 || v >= hi)
      atomicMin(bad, static_cast<u64>(t));
  }
}

// Output element t, any layout.
template <class W, class I>
__device__ __forceinline__ void copy_element(std::int64_t t, const W* __restrict__ x,
                                             W* __restrict__ out, const I* __restrict__ idx,
                                             const Geo& g, bool gather) {
  std::int64_t c[4];
  unravel(t, g, c);
  std::int64_t ix = 0, io = 0, ii = 0;
#pragma unroll
  for (int d = 0; d < 4; ++d) {
    io += c[d] * g.os[d];
    ii += c[d] * g.is[d];
    if (d != g.dim)
      ix += c[d] * g.xs[d];
  }
  if (!gather)
    ii = c[g.dim] * g.is[g.dim];
  out[io] = x[ix + static_cast<std::int64_t>(idx[ii]) * g.xs[g.dim]];
}

// Any layout: one thread per output element.
template <class W, class I>
__global__ void copy_any(const W* __restrict__ x, W* __restrict__ out, const I* __restrict__ idx,
                         Geo g, bool gather, std::int64_t n, const u64* bad) {
  if (bad != nullptr && *bad != kNone)
    return;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n; t += stride)
    copy_element(t, x, out, idx, g, gather);
}

// A small checked call (ops/indexing_choice.hpp: one_block): the check of every index, then
// copy_any's loop, in one block. Writes the first bad position to *bad (wait mode) or reports it
// to `sink` (deferred mode): no memset before it, no report kernel after it.
template <class W, class I>
__global__ void __launch_bounds__(kOneBlockCopyThreads)
    check_copy_one_block(const W* __restrict__ x, W* __restrict__ out, const I* __restrict__ idx,
                         Geo g, bool gather, std::int64_t n_idx, std::int64_t n_out,
                         std::int64_t hi, u64* bad, DeferredSink sink) {
  __shared__ u64 first;
  if (threadIdx.x == 0)
    first = kNone;
  __syncthreads();
  for (std::int64_t t = threadIdx.x; t < n_idx; t += blockDim.x) {
    const auto v = static_cast<std::int64_t>(idx[index_offset(t, g, gather)]);
    if (v < 0 || v >= hi)
      atomicMin(&first, static_cast<u64>(t));
  }
  __syncthreads();
  const u64 found = first;
  if (found == kNone)
    for (std::int64_t t = threadIdx.x; t < n_out; t += blockDim.x)
      copy_element(t, x, out, idx, g, gather);
  if (threadIdx.x != 0)
    return;
  if (sink.record == nullptr)
    *bad = found;
  else if (found != kNone)
    report_to_sink(sink, 0, found, -1);
}

// index_select on contiguous x and out seen as [outer, D, inner] -> [outer, n, inner]: rows of
// `words` words each; threadIdx.x runs along a row, threadIdx.y over rows.
template <class W, class I>
__global__ void copy_rows(const W* __restrict__ x, W* __restrict__ out, const I* __restrict__ idx,
                          std::int64_t idx_stride, std::int64_t n, std::int64_t dsize,
                          std::int64_t rows, std::int64_t words, const u64* bad) {
  if (bad != nullptr && *bad != kNone)
    return;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.y;
  for (std::int64_t r = std::int64_t{blockIdx.x} * blockDim.y + threadIdx.y; r < rows; r += step) {
    const std::int64_t o = r / n, i = r % n;
    const std::int64_t src = o * dsize + static_cast<std::int64_t>(idx[i * idx_stride]);
    const W* from = x + src * words;
    W* to = out + r * words;
    for (std::int64_t w = threadIdx.x; w < words; w += blockDim.x)
      to[w] = from[w];
  }
}

// index_select of contiguous tensors: `c.word_bytes`-byte words, (bx, by) blocks (the choice).
template <class W, class I>
void launch_rows(const IndexArgs& a, const I* idx, const IndexingChoice& c, std::int64_t rows,
                 const u64* bad, cudaStream_t st) {
  const std::int64_t n = a.index.numel();
  std::int64_t inner = 1;
  for (int d = a.dim + 1; d < a.x.ndim; ++d)
    inner *= a.x.size(d);
  const std::int64_t words =
      inner * static_cast<std::int64_t>(size_of(a.x.dtype)) / static_cast<std::int64_t>(sizeof(W));
  const dim3 block(static_cast<unsigned>(c.bx), static_cast<unsigned>(c.by));
  copy_rows<W, I><<<c.grid, block, 0, st>>>(
      static_cast<const W*>(a.x.data), static_cast<W*>(a.out.data), idx,
      a.index.ndim == 0 ? 0 : a.index.strides[0], n, a.x.size(a.dim), rows, words, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("copy_rows");
}

// Calls f with a value of the unsigned word type of `es`-byte elements (8, 4, or 2 for bfloat16
// and float16): the element copies move raw words.
template <class F> void on_element_word(std::size_t es, F&& f) {
  if (es == 8)
    f(u64{});
  else if (es == 2)
    f(static_cast<unsigned short>(0));
  else
    f(0u);
}

template <class W, class I>
void launch_one_block(const IndexArgs& a, const I* idx, const Geo& g, bool gather, std::int64_t hi,
                      u64* bad, DeferredSink sink, cudaStream_t st) {
  check_copy_one_block<W, I><<<1, kOneBlockCopyThreads, 0, st>>>(
      static_cast<const W*>(a.x.data), static_cast<W*>(a.out.data), idx, g, gather, a.index.numel(),
      a.out.numel(), hi, bad, sink);
  SAMEBITS_CUDA_CHECK_LAUNCH("check_copy_one_block");
}

template <class W, class I>
void launch_any(const IndexArgs& a, const I* idx, const Geo& g, bool gather, unsigned grid,
                const u64* bad, cudaStream_t st) {
  copy_any<W, I><<<grid, kBlock, 0, st>>>(static_cast<const W*>(a.x.data),
                                          static_cast<W*>(a.out.data), idx, g, gather,
                                          a.out.numel(), bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("copy_any");
}

template <class I> void run_typed(const IndexArgs& a, const Workspace& ws, bool gather) {
  cudaStream_t st = SAMEBITS_STREAM(ws.stream);
  const Geo g = geo_of(pad4(a, gather));
  const I* idx = static_cast<const I*>(a.index.data);
  const std::int64_t hi = a.x.size(a.dim), n_idx = a.index.numel(), n_out = a.out.numel();
  const char* op = gather ? "gather" : "index_select";
  const std::size_t es = size_of(a.x.dtype);
  std::int64_t inner = 1, outer = 1;
  for (int d = a.dim + 1; d < a.x.ndim; ++d)
    inner *= a.x.size(d);
  for (int d = 0; d < a.dim; ++d)
    outer *= a.x.size(d);
  IndexingShape shape;
  shape.gather = gather;
  shape.contiguous = a.x.is_contiguous() && a.out.is_contiguous();
  shape.aligned = aligned16(a.x.data) && aligned16(a.out.data);
  shape.elem_bytes = static_cast<int>(es);
  shape.rows = outer * n_idx;
  shape.row_bytes = inner * static_cast<std::int64_t>(es);
  shape.elements = n_out;
  shape.indices = n_idx;
  shape.check = !a.checked && n_idx > 0;
  const IndexingChoice c = choose_indexing_kernel(shape);
  auto message = [op, hi](std::int64_t position) {
    return std::string(op) + ": index at position " + std::to_string(position) +
           " is outside [0, " + std::to_string(hi) + ")";
  };
  const auto deferred_message = [message](int, std::int64_t position, std::int64_t) {
    return message(position);
  };
  const bool defer = defer_index_checks();
  u64* bad = shape.check ? static_cast<u64*>(ws.data) : nullptr;
  if (c.kernel == IndexingKernel::one_block) {
    const DeferredSink sink = defer ? deferred_sink(deferred_message) : DeferredSink{};
    on_element_word(es, [&](auto word) {
      launch_one_block<decltype(word), I>(a, idx, g, gather, hi, bad, sink, st);
    });
    if (defer)
      return;
  } else {
    if (bad != nullptr) {
      SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xFF, sizeof(u64), st));
      check_kernel<I>
          <<<grid_for(n_idx, kBlock, kMaxGrid), kBlock, 0, st>>>(idx, g, gather, n_idx, hi, bad);
      SAMEBITS_CUDA_CHECK_LAUNCH("index check_kernel");
    }
    if (c.kernel == IndexingKernel::copy_rows) {
      if (c.word_bytes == 16)
        launch_rows<uint4, I>(a, idx, c, shape.rows, bad, st);
      else if (c.word_bytes == 8)
        launch_rows<u64, I>(a, idx, c, shape.rows, bad, st);
      else if (c.word_bytes == 2) // bfloat16, float16
        launch_rows<unsigned short, I>(a, idx, c, shape.rows, bad, st);
      else
        launch_rows<unsigned int, I>(a, idx, c, shape.rows, bad, st);
    } else if (c.kernel == IndexingKernel::copy_any) {
      on_element_word(es, [&](auto word) {
        launch_any<decltype(word), I>(a, idx, g, gather, c.grid, bad, st);
      });
    }
    if (bad != nullptr && defer) {
      defer_index_error(bad, 1, DeferredIndex{}, DeferredIndex{}, deferred_message, st);
      return;
    }
  }
  if (bad != nullptr) {
    u64 h = kNone;
    SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&h, bad, sizeof h, cudaMemcpyDeviceToHost, st));
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(st));
    if (h != kNone)
      throw IndexOutOfRange(message(static_cast<std::int64_t>(h)));
  }
}

void run(const IndexArgs& a, const Workspace& ws, bool gather) {
  raise_deferred_index_error();
  if (a.index.dtype == DType::i32)
    run_typed<std::int32_t>(a, ws, gather);
  else
    run_typed<std::int64_t>(a, ws, gather);
}

void run_index_select(const IndexArgs& a, const Workspace& ws) {
  run(a, ws, false);
}
void run_gather(const IndexArgs& a, const Workspace& ws) {
  run(a, ws, true);
}
std::size_t workspace(const IndexArgs& a) {
  return a.checked ? 0 : 16;
}

} // namespace

void register_cuda_indexing(Registry& r) {
  const char* how = "copies elements as raw words, no arithmetic: the same bits at every level, "
                    "so this one variant serves not_guaranteed, run_to_run and portable";
  r.add(Variant<IndexArgs>{
      {"index_select", "cuda.copy", DeviceType::cuda, Determinism::portable, how},
      nullptr,
      workspace,
      run_index_select});
  r.add(Variant<IndexArgs>{{"gather", "cuda.copy", DeviceType::cuda, Determinism::portable, how},
                           nullptr,
                           workspace,
                           run_gather});
}

} // namespace samebits::detail
