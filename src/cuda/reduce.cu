// CUDA variants of sum, sum_dim and dot.
//
//   cuda.atomic_chunks   not_guaranteed  canonical chunk sums, combined with atomic float adds
//                                        into the result in whatever order warps finish
//   cuda.canonical_tree  portable        the canonical order of ops/reduce.hpp, bit for bit the
//                                        CPU's; also what run_to_run gets (a separate fixed-grid
//                                        tree would not be faster: both read the input once)
//
// Every reduction is "M outputs, each the sum of L elements": output o reads
// base(o) + i * S for i < L. Level 1 reads the input, one 4096-element chunk per task, and writes
// one partial per chunk ([M, C] with C = ceil(L / 4096)); each further level sums the partials of
// the one before the same way until C == 1, the last level writing the outputs. Two level-1
// kernels:
//   rows     one warp per chunk (S == 1 or nothing better): 16-byte loads when the chunk is full
//            and aligned, coalesced element loads otherwise. All levels above the first use it.
//   columns  S != 1 (reducing a non-innermost dim): a block takes 32 neighbouring outputs and
//            16 threads per output, each thread holding 16 lanes, so a warp reads 32 neighbouring
//            outputs' elements at once.
// The tree's shape is fixed by the canonical order alone; block and grid sizes (ReduceTuning,
// ops/reduce_choice.hpp, which chooses them) only decide which warp computes which chunk.
#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cuda/canonical_sum.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "ops/reduce.hpp"
#include "ops/reduce_choice.hpp"

#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

namespace samebits::detail {

namespace {

using canonical::kChunk;
using canonical::kLanes;
using canonical::kSteps;
using canonical::Lanes;
using canonical::StridedLanes;

// What level 1 (or a later level) reads: M rows of L elements; row o starts at rest.offset(o),
// its element i is at + i * S. b is dot's second operand (same layout) or null.
template <class T> struct RowsIn {
  const T* a = nullptr;
  const T* b = nullptr;
  std::int64_t L = 0;
  std::int64_t S = 1;
  StridedIndex rest;
  bool vec = false; // S == 1 and every row start 16-byte aligned: full chunks use 16-byte loads
};

// Where chunk results go: partial[o * C + c] while C > 1; out[out_index.offset(o)] when C == 1.
// The atomic variant adds every chunk result into partial[o] instead (M accumulators).
template <class T> struct ChunkOut {
  T* partial = nullptr;
  T* out = nullptr;
  StridedIndex out_index;
  std::int64_t M = 0;
  std::int64_t C = 0;
};

template <class T>
__device__ void store_final(const ChunkOut<T>& d, std::int64_t o, std::int64_t c, T v) {
  if (d.C == 1)
    d.out[d.out_index.offset(o)] = v;
  else
    d.partial[o * d.C + c] = v;
}

// One warp per (output, chunk) task, tasks in grid-stride order.
template <class T, bool kDot, bool kAtomic>
__global__ void __launch_bounds__(256) rows_kernel(RowsIn<T> in, ChunkOut<T> d) {
  using V = typename Vec16<T>::type;
  constexpr int kVec = canonical::kVec<T>;
  constexpr int kSlots = canonical::kSlots<T>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warps = static_cast<int>(blockDim.x >> 5);
  const std::int64_t tasks = d.M * d.C;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * warps;
  T carry = T(0);
  std::int64_t carry_row = -1; // atomic variant: the output `carry` belongs to
  for (std::int64_t task = static_cast<std::int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
       task < tasks; task += step) {
    const std::int64_t o = d.M == 1 ? 0 : task / d.C, c = task - o * d.C; // whole sums: no division
    const std::int64_t start = c * kChunk;
    const std::int64_t len = min(kChunk, in.L - start);
    const std::int64_t base = in.rest.offset(o) + start * in.S;
    T sum;
    if (in.vec && len == kChunk) {
      Lanes<T> lanes;
      lanes.init();
      // Batches of 16 independent 16-byte loads per thread are written before their adds, so
      // the compiler may keep up to 8 KiB per warp in flight; how many it keeps is its choice
      // (it trades them for occupancy), and many resident warps cover the rest of the latency.
      constexpr int kBatch = 16 / kSlots / (kDot ? 2 : 1); // rows per batch
      const V* pa = reinterpret_cast<const V*>(in.a + base) + lane;
      const V* pb = kDot ? reinterpret_cast<const V*>(in.b + base) + lane : nullptr;
#pragma unroll
      for (int j0 = 0; j0 < kSteps; j0 += kBatch) {
        V xa[kBatch][kSlots], xb[kDot ? kBatch : 1][kSlots];
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
#pragma unroll
          for (int r = 0; r < kSlots; ++r) {
            const int v = (j0 + j) * (kLanes / kVec) + 32 * r; // in 16-byte groups
            xa[j][r] = __ldg(pa + v);
            if constexpr (kDot)
              xb[j][r] = __ldg(pb + v);
          }
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
#pragma unroll
          for (int r = 0; r < kSlots; ++r) {
            if constexpr (kDot)
              lanes.add_products(r, xa[j][r], xb[j][r]);
            else
              lanes.add(r, xa[j][r]);
          }
      }
      sum = lanes.tree();
    } else {
      StridedLanes<T> lanes;
      lanes.init();
      const std::int64_t S = in.S;
      const T* pa = in.a + base + lane * S;
      const T* pb = kDot ? in.b + base + lane * S : nullptr;
#pragma unroll 1
      for (int j = 0; j < kSteps && j * kLanes < len; ++j) // short rows: skip empty steps
#pragma unroll
        for (int q = 0; q < StridedLanes<T>::kPerThread; ++q) {
          const int i = j * kLanes + 32 * q; // element lane + i of the chunk
          if (lane + i < len) {
            T x = pa[i * S];
            if constexpr (kDot) {
              if constexpr (sizeof(T) == 4)
                x = __fmul_rn(x, pb[i * S]);
              else
                x = __dmul_rn(x, pb[i * S]);
            }
            lanes.acc[q] = lanes.acc[q] + x;
          }
        }
      sum = lanes.tree();
    }
    if constexpr (kAtomic) {
      if (o != carry_row) {
        if (lane == 0 && carry_row >= 0)
          atomicAdd(d.partial + carry_row, carry);
        carry_row = o;
        carry = sum;
      } else {
        carry = carry + sum;
      }
    } else if (lane == 0) {
      store_final(d, o, c, sum);
    }
  }
  if constexpr (kAtomic)
    if (lane == 0 && carry_row >= 0)
      atomicAdd(d.partial + carry_row, carry);
}

constexpr int kColumnThreads = kReduceColumnThreads;  // threads per output (blockDim.y)
constexpr int kColumnLanes = kLanes / kColumnThreads; // lanes per thread: y + 16 m, m < 16
constexpr int kMaxColumns = kReduceMaxColumns;        // outputs per block (blockDim.x)

// The in-thread steps of the halving tree, s = 16 sm for sm = kSm, kSm / 2, ..., 1:
// acc[m] = acc[m] + acc[m + sm] (lanes y + 16 m and y + 16 (m + sm)).
template <int kSm, class T> __device__ __forceinline__ void column_tree(T (&acc)[kColumnLanes]) {
  if constexpr (kSm >= 1) {
#pragma unroll
    for (int m = 0; m < kSm; ++m)
      acc[m] = acc[m] + acc[m + kSm];
    column_tree<kSm / 2>(acc);
  }
}

// Block (cols, 16): thread (x, y) holds lanes y + 16 m of output g * cols + x, so each load of a
// warp reads 32 neighbouring outputs' elements of one input row. Tasks are (group of cols
// outputs, chunk), in grid-stride order; the loop is uniform per block.
template <class T, bool kAtomic>
__global__ void __launch_bounds__(kColumnThreads* kMaxColumns)
    columns_kernel(RowsIn<T> in, ChunkOut<T> d) {
  __shared__ T red[kColumnThreads][kMaxColumns];
  const int cols = static_cast<int>(blockDim.x);
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const std::int64_t groups = (d.M + cols - 1) / cols;
  const std::int64_t tasks = groups * d.C;
  for (std::int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const std::int64_t g = task / d.C, c = task - g * d.C;
    const std::int64_t o = g * cols + x;
    const bool active = o < d.M;
    const std::int64_t start = c * kChunk;
    const std::int64_t len = min(kChunk, in.L - start);
    T acc[kColumnLanes];
#pragma unroll
    for (int m = 0; m < kColumnLanes; ++m)
      acc[m] = T(-0.0);
    if (active) {
      const std::int64_t S = in.S;
      const T* p = in.a + in.rest.offset(o) + (start + y) * S; // this thread's lane y
      if (len == kChunk) {
#pragma unroll 2
        for (int j = 0; j < kSteps; ++j) {
          T v[kColumnLanes]; // one row's loads, all issued before they are added
#pragma unroll
          for (int m = 0; m < kColumnLanes; ++m)
            v[m] = p[static_cast<std::int64_t>(j * kLanes + kColumnThreads * m) * S];
#pragma unroll
          for (int m = 0; m < kColumnLanes; ++m)
            acc[m] = acc[m] + v[m];
        }
      } else {
#pragma unroll 1
        for (int j = 0; j < kSteps && j * kLanes < len; ++j)
#pragma unroll
          for (int m = 0; m < kColumnLanes; ++m) {
            const int i = j * kLanes + y + kColumnThreads * m;
            if (i < len)
              acc[m] = acc[m] + p[static_cast<std::int64_t>(i - y) * S];
          }
      }
    }
    column_tree<kColumnLanes / 2>(acc); // s = 128 .. 16, within the thread
    red[y][x] = acc[0];                 // s = 8 .. 1, across the 16 threads of the output
    __syncthreads();
    for (int s = kColumnThreads / 2; s >= 1; s /= 2) {
      if (y < s)
        red[y][x] = red[y][x] + red[y + s][x];
      __syncthreads();
    }
    if (y == 0 && active) {
      if constexpr (kAtomic)
        atomicAdd(d.partial + o, red[0][x]);
      else
        store_final(d, o, c, red[0][x]);
    }
  }
}

// out[out_index.offset(o)] = acc[o], or +0.0 when acc is null (empty sums).
template <class T>
__global__ void store_kernel(const T* __restrict__ acc, T* out, StridedIndex out_index,
                             std::int64_t M) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < M;
       o += step)
    out[out_index.offset(o)] = acc != nullptr ? acc[o] : T(0);
}

// --- host side ----------------------------------------------------------------------------------

// Everything a call needs, derived from its arguments alone (workspace_bytes and run agree).
struct Plan {
  std::int64_t M = 0, L = 0;
  bool gather_a = false, gather_b = false; // non-contiguous whole-tensor inputs copied first
  std::size_t off_a = 0, off_b = 0;
  std::vector<std::size_t> level_off; // partials of level k: [M, C_k], C_k > 1
  std::size_t off_acc = 0;            // atomic variant: M accumulators
  std::size_t bytes = 0;
};

Plan make_plan(std::size_t elem, std::int64_t M, std::int64_t L, bool gather_a, bool gather_b,
               bool atomic) {
  Plan p;
  p.M = M;
  p.L = L;
  p.gather_a = gather_a;
  p.gather_b = gather_b;
  WorkspaceLayout w;
  const auto n = static_cast<std::size_t>(M * L);
  if (gather_a)
    p.off_a = w.add(n * elem);
  if (gather_b)
    p.off_b = w.add(n * elem);
  if (M > 0 && L > 0) {
    if (atomic) {
      p.off_acc = w.add(static_cast<std::size_t>(M) * elem);
    } else {
      for (std::int64_t C = ceil_div(L, kChunk); C > 1; C = ceil_div(C, kChunk))
        p.level_off.push_back(w.add(static_cast<std::size_t>(M * C) * elem));
    }
  }
  p.bytes = w.total();
  return p;
}

Plan plan_sum(const SumArgs& a, bool atomic) {
  const std::size_t elem = size_of(a.x.dtype);
  if (a.dim < 0)
    return make_plan(elem, 1, a.x.numel(), !a.x.is_contiguous(), false, atomic);
  const std::int64_t L = a.x.size(a.dim);
  return make_plan(elem, L == 0 ? a.out.numel() : a.x.numel() / L, L, false, false, atomic);
}

Plan plan_dot(const DotArgs& a, bool atomic) {
  return make_plan(size_of(a.a.dtype), 1, a.a.numel(), !a.a.is_contiguous(), !a.b.is_contiguous(),
                   atomic);
}

template <class T, bool kDot, bool kAtomic>
void launch_rows(const RowsIn<T>& in, const ChunkOut<T>& d, cudaStream_t stream) {
  const ReduceLaunch l = choose_reduce_launch(ReduceKernel::rows, d.M, d.C, kAtomic);
  auto kernel = rows_kernel<T, kDot, kAtomic>;
  const std::int64_t cap = l.cap > 0 ? l.cap : resident_blocks(kernel, l.block);
  kernel<<<grid_size(l.work, cap), l.block, 0, stream>>>(in, d);
  SAMEBITS_CUDA_CHECK_LAUNCH("rows_kernel (sum/sum_dim/dot)");
}

template <class T, bool kAtomic>
void launch_columns(const RowsIn<T>& in, const ChunkOut<T>& d, cudaStream_t stream) {
  const ReduceLaunch l = choose_reduce_launch(ReduceKernel::columns, d.M, d.C, kAtomic);
  columns_kernel<T, kAtomic>
      <<<grid_size(l.work, l.cap), dim3(static_cast<unsigned>(l.block), kColumnThreads), 0,
         stream>>>(in, d);
  SAMEBITS_CUDA_CHECK_LAUNCH("columns_kernel (sum_dim)");
}

template <class T>
void launch_store(const T* acc, T* out, const StridedIndex& out_index, std::int64_t M,
                  cudaStream_t stream) {
  constexpr int kBlock = 256;
  store_kernel<T>
      <<<grid_size(ceil_div(M, kBlock), 4096), kBlock, 0, stream>>>(acc, out, out_index, M);
  SAMEBITS_CUDA_CHECK_LAUNCH("store_kernel (sum/sum_dim/dot)");
}

// Runs the levels of a reduction described by `in` (level 1) into out.
template <class T, bool kAtomic>
void reduce(RowsIn<T> in, bool dot, bool columns, T* out, const StridedIndex& out_index,
            const Plan& plan, char* ws, cudaStream_t stream) {
  const std::int64_t M = plan.M;
  if (M == 0)
    return;
  if (in.L == 0) {
    launch_store<T>(nullptr, out, out_index, M, stream);
    return;
  }
  std::int64_t C = ceil_div(in.L, kChunk);
  if constexpr (kAtomic) {
    T* acc = reinterpret_cast<T*>(ws + plan.off_acc);
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<std::size_t>(M) * sizeof(T), stream));
    const ChunkOut<T> d{acc, out, out_index, M, C};
    if (columns)
      launch_columns<T, true>(in, d, stream);
    else if (dot)
      launch_rows<T, true, true>(in, d, stream);
    else
      launch_rows<T, false, true>(in, d, stream);
    launch_store<T>(acc, out, out_index, M, stream);
    return;
  }
  std::size_t level = 0;
  T* dst = C > 1 ? reinterpret_cast<T*>(ws + plan.level_off[level]) : nullptr;
  const ChunkOut<T> d{dst, out, out_index, M, C};
  if (columns)
    launch_columns<T, false>(in, d, stream);
  else if (dot)
    launch_rows<T, true, false>(in, d, stream);
  else
    launch_rows<T, false, false>(in, d, stream);
  while (C > 1) { // the partials [M, C] are the next level's rows
    RowsIn<T> next;
    next.a = dst;
    next.L = C;
    next.rest.ndim = 1;
    next.rest.size[0] = M;
    next.rest.stride[0] = C;
    next.vec = aligned16(dst) && (M == 1 || (C * static_cast<std::int64_t>(sizeof(T))) % 16 == 0);
    const std::int64_t C2 = ceil_div(C, kChunk);
    T* dst2 = C2 > 1 ? reinterpret_cast<T*>(ws + plan.level_off[++level]) : nullptr;
    launch_rows<T, false, false>(next, ChunkOut<T>{dst2, out, out_index, M, C2}, stream);
    C = C2;
    dst = dst2;
  }
}

// A contiguous view's data, or a contiguous copy of it gathered into the workspace.
template <class T>
const T* contiguous_data(const TensorView& v, bool gather, char* at, cudaStream_t stream) {
  if (!gather)
    return static_cast<const T*>(v.data);
  if constexpr (sizeof(T) == 4)
    gather_contiguous<std::uint32_t>(v, at, stream);
  else
    gather_contiguous<std::uint64_t>(v, at, stream);
  return reinterpret_cast<const T*>(at);
}

template <bool kAtomic> void run_sum(const SumArgs& a, const Workspace& ws) {
  visit_float(a.x.dtype, "sum", [&]<class T>() {
    cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
    const Plan plan = plan_sum(a, kAtomic);
    char* w = static_cast<char*>(ws.data);
    RowsIn<T> in;
    bool columns = false;
    if (a.dim < 0) {
      in.a = contiguous_data<T>(a.x, plan.gather_a, w + plan.off_a, stream);
      in.L = a.x.numel();
      in.vec = aligned16(in.a);
    } else {
      in.a = static_cast<const T*>(a.x.data);
      in.L = a.x.size(a.dim);
      in.S = in.L > 1 ? a.x.stride(a.dim) : 1;
      in.rest = StridedIndex::without(a.x, a.dim);
      in.vec = in.S == 1 && aligned16(in.a);
      for (int d = 0; d < in.rest.ndim; ++d)
        if (in.rest.size[d] > 1 &&
            (in.rest.stride[d] * static_cast<std::int64_t>(sizeof(T))) % 16 != 0)
          in.vec = false;
      columns = in.S != 1 && plan.M > 1;
    }
    reduce<T, kAtomic>(in, false, columns, static_cast<T*>(a.out.data), StridedIndex::of(a.out),
                       plan, w, stream);
  });
}

template <bool kAtomic> void run_dot(const DotArgs& a, const Workspace& ws) {
  visit_float(a.a.dtype, "dot", [&]<class T>() {
    cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
    const Plan plan = plan_dot(a, kAtomic);
    char* w = static_cast<char*>(ws.data);
    RowsIn<T> in;
    in.a = contiguous_data<T>(a.a, plan.gather_a, w + plan.off_a, stream);
    in.b = contiguous_data<T>(a.b, plan.gather_b, w + plan.off_b, stream);
    in.L = a.a.numel();
    in.vec = aligned16(in.a) && aligned16(in.b);
    reduce<T, kAtomic>(in, true, false, static_cast<T*>(a.out.data), StridedIndex::of(a.out), plan,
                       w, stream);
  });
}

template <class Args>
Variant<Args> cuda_variant(const char* op, const char* name, Determinism level, const char* how,
                           std::size_t (*bytes)(const Args&),
                           void (*run)(const Args&, const Workspace&)) {
  return Variant<Args>{{op, name, DeviceType::cuda, level, how}, nullptr, bytes, run};
}

std::size_t sum_bytes_atomic(const SumArgs& a) {
  return plan_sum(a, true).bytes;
}
std::size_t sum_bytes_canonical(const SumArgs& a) {
  return plan_sum(a, false).bytes;
}
std::size_t dot_bytes_atomic(const DotArgs& a) {
  return plan_dot(a, true).bytes;
}
std::size_t dot_bytes_canonical(const DotArgs& a) {
  return plan_dot(a, false).bytes;
}

} // namespace

void register_cuda_reduce(Registry& r) {
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  r.add(cuda_variant<SumArgs>(
      "sum", "cuda.atomic_chunks", ng,
      "canonical 4096-element chunk sums added with atomicAdd in completion order",
      sum_bytes_atomic, run_sum<true>));
  r.add(cuda_variant<SumArgs>(
      "sum", "cuda.canonical_tree", po,
      "canonical 256-lane, 4096-element chunk tree: one warp per chunk, 16-byte loads, "
      "partials summed by the same tree",
      sum_bytes_canonical, run_sum<false>));
  r.add(cuda_variant<SumArgs>("sum_dim", "cuda.atomic_chunks", ng,
                              "canonical chunk sums along dim added with atomicAdd per output",
                              sum_bytes_atomic, run_sum<true>));
  r.add(cuda_variant<SumArgs>(
      "sum_dim", "cuda.canonical_tree", po,
      "canonical tree along dim: warp per chunk of rows, or 8 threads per output "
      "across neighbouring columns",
      sum_bytes_canonical, run_sum<false>));
  r.add(
      cuda_variant<DotArgs>("dot", "cuda.atomic_chunks", ng,
                            "canonical chunk dot products added with atomicAdd in completion order",
                            dot_bytes_atomic, run_dot<true>));
  r.add(cuda_variant<DotArgs>("dot", "cuda.canonical_tree", po,
                              "rounded products (no FMA) summed in the canonical tree",
                              dot_bytes_canonical, run_dot<false>));
}

} // namespace samebits::detail
