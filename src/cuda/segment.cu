// CUDA variants of segment_reduce and aggregate: host side and registration (kernels:
// cuda/segment_kernels.cuh; which kernel runs for a shape: ops/segment_choice.hpp).
//
//   cuda.atomic_push       not_guaranteed  groups of lanes walk fixed chunks of edges and add each
//                                          edge's row into its target with atomic operations
//   cuda.sequential_rows   portable        pull: a group of lanes per output row (lanes across
//                                          features, 16-byte loads where aligned; few rows: the
//                                          next batches' loads issued before a batch is folded;
//                                          few rows of at most 32 columns: a warp per row staging
//                                          chunks of positions through shared memory), each
//                                          element one sequential chain in ascending CSR order,
//                                          the canonical order of include/samebits/ops/segment.hpp;
//                                          the same bits as cpu.sequential_rows for any launch
//                                          shape
//
// Unchecked offsets/indices (device tensors not validated at build time) are checked by a kernel
// that records the first bad position; every writing kernel reads that record first and exits
// if it is set, so a bad input writes nothing. The host then reads the record and throws.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "cuda/segment_kernels.cuh"
#include "ops/segment.hpp"
#include "ops/segment_choice.hpp"

#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>
#include <limits>
#include <string>

namespace samebits::detail {

namespace {

using namespace segment_kernels;

// --- host side ------------------------------------------------------------------------------

const char* op_name(const SegmentArgs& a) {
  return a.identity ? "segment_reduce" : "aggregate";
}

// The output as rows on the device: out itself, or a contiguous temporary copied back at the end.
struct DeviceOut {
  Rows rows;
  Tensor temp;
  TensorView out;
  DeviceOut(const TensorView& o, Stream stream) : out(o) {
    if (auto r = as_rows(o)) {
      rows = *r;
    } else {
      temp = Tensor::empty(o.sizes(), o.dtype, o.device, stream);
      rows = *as_rows(temp.view());
    }
  }
  void finish(cudaStream_t st) {
    if (temp.numel() == 0)
      return;
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(st));
    copy(temp.view(), out);
  }
};

// `hold` is allocated for `stream`, whose kernels read it and may still be queued when it goes.
Rows device_rows(const TensorView& t, Tensor& hold, Stream stream) {
  if (auto r = as_rows(t))
    return *r;
  hold = Tensor::copy_of(t, t.device, stream);
  return *as_rows(hold.view());
}

// Launches the check kernel when the inputs are unchecked; returns the record (or nullptr).
u64* launch_check(const SegmentArgs& a, const Workspace& ws, std::int64_t positions,
                  cudaStream_t st) {
  if (a.checked)
    return nullptr;
  auto* bad = static_cast<u64*>(ws.data);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xFF, 2 * sizeof(u64), st));
  const std::int64_t segs = a.offsets.size(0) - 1;
  const std::int64_t edges = a.identity ? 0 : a.indices.size(0);
  const std::int64_t n = std::max(segs + 1, edges);
  const auto* off = static_cast<const std::int64_t*>(a.offsets.data);
  const unsigned grid = grid_for(n, kDefaultBlock, kMaxGrid);
  if (a.identity || a.indices.dtype == DType::i32)
    check_kernel<std::int32_t><<<grid, kDefaultBlock, 0, st>>>(
        off, segs, positions,
        a.identity ? nullptr : static_cast<const std::int32_t*>(a.indices.data), edges, a.x.size(0),
        bad);
  else
    check_kernel<std::int64_t><<<grid, kDefaultBlock, 0, st>>>(
        off, segs, positions, static_cast<const std::int64_t*>(a.indices.data), edges, a.x.size(0),
        bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("segment check_kernel");
  return bad;
}

// The message for record word `word` (0: offsets, 1: indices) at `position` holding `value`.
std::string record_message(const char* op, int word, std::int64_t position, std::int64_t value,
                           std::int64_t positions, std::int64_t sources) {
  if (word == 0)
    return std::string(op) + ": offsets[" + std::to_string(position) +
           "] = " + std::to_string(value) + " is invalid: offsets must start at 0, never " +
           "decrease and end at " + std::to_string(positions);
  return std::string(op) + ": indices[" + std::to_string(position) +
         "] = " + std::to_string(value) + " is outside [0, " + std::to_string(sources) + ")";
}

// Reads the record after the writing kernels ran (they did nothing if it is set) and throws.
// In deferred mode (and `may_defer`: nothing is copied out afterwards) queues the report instead.
void report(const SegmentArgs& a, const u64* bad, std::int64_t positions, bool may_defer,
            cudaStream_t st) {
  if (bad == nullptr)
    return;
  const char* op = op_name(a);
  const std::int64_t sources = a.x.size(0);
  if (may_defer && defer_index_checks()) {
    const DeferredIndex offsets{a.offsets.data, true, a.offsets.strides[0]};
    const DeferredIndex indices =
        a.identity
            ? DeferredIndex{}
            : DeferredIndex{a.indices.data, a.indices.dtype == DType::i64, a.indices.strides[0]};
    defer_index_error(
        bad, 2, offsets, indices,
        [op, positions, sources](int word, std::int64_t position, std::int64_t value) {
          return record_message(op, word, position, value, positions, sources);
        },
        st);
    return;
  }
  u64 h[2];
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(h, bad, sizeof h, cudaMemcpyDeviceToHost, st));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(st));
  for (int word = 0; word < 2; ++word)
    if (h[word] != kNone) {
      const auto position = static_cast<std::int64_t>(h[word]);
      const std::int64_t value = read_index_value(word == 0 ? a.offsets : a.indices, position);
      throw IndexOutOfRange(record_message(op, word, position, value, positions, sources));
    }
}

// The pull kernel that `c` names, for reduce OP and V-wide loads.
template <class T, class I, int OP, int V>
void launch_pull_op(const PullParams<T, I>& p, const SegmentChoice& c, cudaStream_t st) {
  if (c.kernel == SegmentKernel::pull_ahead)
    pull_ahead_kernel<T, I, OP, V, kAheadBatch><<<dim3(c.grid, c.tiles), c.block, 0, st>>>(p);
  else if (c.batch == 4)
    pull_kernel<T, I, OP, V, 4><<<dim3(c.grid, c.tiles), c.block, 0, st>>>(p);
  else if (c.batch == 8)
    pull_kernel<T, I, OP, V, 8><<<dim3(c.grid, c.tiles), c.block, 0, st>>>(p);
  else
    pull_kernel<T, I, OP, V, 16><<<dim3(c.grid, c.tiles), c.block, 0, st>>>(p);
}

template <class T, class I, int OP>
void launch_pull(const PullParams<T, I>& p, const SegmentChoice& c, cudaStream_t st) {
  constexpr int VM = static_cast<int>(16 / sizeof(T));
  if (c.vec > 1)
    launch_pull_op<T, I, OP, VM>(p, c, st);
  else
    launch_pull_op<T, I, OP, 1>(p, c, st);
}

int op_of(Reduce r) {
  return r == Reduce::amax ? kMax : r == Reduce::amin ? kMin : kSum;
}

// The kernel choice (ops/segment_choice.hpp) of this call's shape.
template <class T, class I>
SegmentChoice choice_of(const PullParams<T, I>& p, std::int64_t positions, bool atomic) {
  SegmentShape s;
  s.segs = p.segs;
  s.cols = p.cols;
  s.positions = positions;
  s.ldx = p.ldx;
  s.ldo = p.ldo;
  s.elem_bytes = static_cast<int>(sizeof(T));
  s.aligned = aligned16(p.x) && aligned16(p.out);
  s.atomic = atomic;
  return choose_segment_kernel(s);
}

template <class T, class I> void run_typed(const SegmentArgs& a, const Workspace& ws, bool atomic) {
  cudaStream_t st = SAMEBITS_STREAM(ws.stream);
  Tensor hx;
  const Rows x = device_rows(a.x, hx, ws.stream);
  const std::int64_t positions = a.identity ? a.x.size(0) : a.indices.size(0);
  const u64* bad = launch_check(a, ws, positions, st);
  DeviceOut o(a.out, ws.stream);
  PullParams<T, I> p{static_cast<const T*>(x.data),
                     x.ld,
                     static_cast<T*>(o.rows.data),
                     o.rows.ld,
                     static_cast<const std::int64_t*>(a.offsets.data),
                     a.identity ? nullptr : static_cast<const I*>(a.indices.data),
                     a.offsets.size(0) - 1,
                     x.cols,
                     1,
                     a.reduce == Reduce::mean,
                     bad};
  const int op = op_of(a.reduce);
  const SegmentChoice c = choice_of(p, positions, atomic);
  p.group = c.group;
  switch (c.kernel) {
  case SegmentKernel::none:
    break;
  case SegmentKernel::staged:
    switch (op) {
    case kMax:
      staged_kernel<T, I, kMax><<<c.grid, c.block, 0, st>>>(p);
      break;
    case kMin:
      staged_kernel<T, I, kMin><<<c.grid, c.block, 0, st>>>(p);
      break;
    default:
      staged_kernel<T, I, kSum><<<c.grid, c.block, 0, st>>>(p);
    }
    SAMEBITS_CUDA_CHECK_LAUNCH("staged_kernel");
    break;
  case SegmentKernel::pull:
  case SegmentKernel::pull_ahead:
    switch (op) {
    case kMax:
      launch_pull<T, I, kMax>(p, c, st);
      break;
    case kMin:
      launch_pull<T, I, kMin>(p, c, st);
      break;
    default:
      launch_pull<T, I, kSum>(p, c, st);
    }
    SAMEBITS_CUDA_CHECK_LAUNCH("pull_kernel");
    break;
  case SegmentKernel::atomic_push: {
    const T start = op == kMax   ? -std::numeric_limits<T>::infinity()
                    : op == kMin ? std::numeric_limits<T>::infinity()
                                 : T(0);
    const unsigned fill_grid = grid_for(p.segs * p.cols, c.block, kMaxGrid);
    fill_kernel<T><<<fill_grid, c.block, 0, st>>>(p.out, p.ldo, p.segs, p.cols, start, bad);
    SAMEBITS_CUDA_CHECK_LAUNCH("fill_kernel");
    if (positions > 0) {
      push_kernel<T, I><<<c.grid, c.block, 0, st>>>(p, positions, op);
      SAMEBITS_CUDA_CHECK_LAUNCH("push_kernel");
    }
    finish_kernel<T><<<fill_grid, c.block, 0, st>>>(p.out, p.ldo, p.off, p.segs, p.cols,
                                                    a.reduce == Reduce::mean, bad);
    SAMEBITS_CUDA_CHECK_LAUNCH("finish_kernel");
    break;
  }
  }
  report(a, bad, positions, o.temp.numel() == 0, st);
  o.finish(st);
}

void run(const SegmentArgs& a, const Workspace& ws, bool atomic) {
  raise_deferred_index_error();
  const bool i64 = !a.identity && a.indices.dtype == DType::i64;
  if (a.x.dtype == DType::f32) {
    if (i64)
      run_typed<float, std::int64_t>(a, ws, atomic);
    else
      run_typed<float, std::int32_t>(a, ws, atomic);
  } else {
    if (i64)
      run_typed<double, std::int64_t>(a, ws, atomic);
    else
      run_typed<double, std::int32_t>(a, ws, atomic);
  }
}

void run_pull(const SegmentArgs& a, const Workspace& ws) {
  run(a, ws, false);
}
void run_push(const SegmentArgs& a, const Workspace& ws) {
  run(a, ws, true);
}

std::size_t workspace(const SegmentArgs& a) {
  return a.checked ? 0 : 2 * sizeof(u64);
}

} // namespace

void register_cuda_segment(Registry& r) {
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  for (const char* op : {"segment_reduce", "aggregate"}) {
    r.add(Variant<SegmentArgs>{
        {op, "cuda.atomic_push", DeviceType::cuda, ng,
         "lanes walk fixed chunks of edges and add each edge into its target with atomic "
         "operations, in whatever order the scheduler runs them"},
        nullptr,
        workspace,
        run_push});
    r.add(Variant<SegmentArgs>{
        {op, "cuda.sequential_rows", DeviceType::cuda, po,
         "pull: lanes across features of one output row, one sequential chain per element in "
         "ascending CSR order (bitwise equal to cpu.sequential_rows)"},
        nullptr,
        workspace,
        run_pull});
  }
}

} // namespace samebits::detail
