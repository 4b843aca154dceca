// Automatic plan reuse on the GPU (include/samebits/ops/scatter.hpp says what users get;
// core/plan_cache.hpp keeps the keys and the budget). An entry holds an int32 copy of an index
// that was sorted and found valid, and, from the first call that passed the same contents again,
// the plan of that index: the stable order and the CSR offsets, built by the same sort the
// scatter runs. A lookup compares the caller's index with the copy on the caller's stream and
// waits for the answer; nothing but equal contents reuses a plan.
#include "core/memory.hpp"
#include "core/plan_cache.hpp"
#include "core/test_hooks.hpp"
#include "cuda/check.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/launch.cuh"

#include <cuda_runtime.h>
#include <memory>
#include <mutex>

namespace samebits::detail {

namespace {

constexpr int kBlock = 256;

struct Entry {
  int device = 0;
  Tensor copy;                 // int32[n]: the index values
  Tensor order;                // int32[n], once planned
  Tensor offsets;              // int32[num_keys + 1], once planned
  cudaEvent_t ready = nullptr; // recorded after the copy, and again after the plan
  bool planned = false;
  std::mutex m;
  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  // Work queued on any stream may still read the entry: wait for the device before the memory
  // goes back to the allocator.
  ~Entry() {
    int saved = 0;
    if (cudaGetDevice(&saved) != cudaSuccess)
      return;
    cudaSetDevice(device);
    cudaDeviceSynchronize();
    if (ready != nullptr)
      cudaEventDestroy(ready);
    cudaSetDevice(saved);
  }
};

// What an entry holds once its plan is built, as the allocator holds it (size classes): the
// int32 copy of the index, the int32 order and the int32 offsets.
std::size_t entry_bytes(std::int64_t n, std::int64_t num_keys) {
  const auto index_bytes = static_cast<std::size_t>(4 * n);
  return 2 * cuda_allocation_bytes(index_bytes) +
         cuda_allocation_bytes(static_cast<std::size_t>(4 * (num_keys + 1)));
}

PlanKey key_of(const TensorView& index, std::int64_t num_keys) {
  return {index.device.index, index.data, index.dtype, index.numel(), index.strides[0], num_keys};
}

bool cacheable(const TensorView& index, std::int64_t num_keys) {
  return index.device.is_cuda() && index.numel() >= kPlanCacheMinSources && num_keys > 0 &&
         num_keys < std::numeric_limits<int>::max();
}

unsigned blocks_for(std::int64_t n) {
  return grid_for(n, kBlock, std::int64_t{sm_count()} * 16);
}

// *differs = 1 when some index[i] != copy[i]; threads stop early once one has seen a difference.
template <class I>
__global__ void differs_kernel(const I* idx, std::int64_t stride, std::int64_t n, const int* copy,
                               int* differs) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  int round = 0;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    if ((round++ & 7) == 0 && *static_cast<volatile int*>(differs) != 0)
      return;
    if (static_cast<std::int64_t>(idx[i * stride]) != copy[i])
      *differs = 1;
  }
}

template <class I>
__global__ void narrow_kernel(const I* idx, std::int64_t stride, std::int64_t n, int* copy) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step)
    copy[i] = static_cast<int>(idx[i * stride]);
}

bool same_contents(const TensorView& index, const Entry& e, cudaStream_t stream) {
  const std::int64_t n = index.numel();
  DeviceScratch flag(256, index.device,
                     Stream{stream}); // one int (take() carves in 256-byte steps)
  int* differs = flag.take<int>(1);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(differs, 0, sizeof(int), stream));
  const int* copy = e.copy.data<std::int32_t>();
  if (index.dtype == DType::i32)
    differs_kernel<<<blocks_for(n), kBlock, 0, stream>>>(
        static_cast<const std::int32_t*>(index.data), index.strides[0], n, copy, differs);
  else
    differs_kernel<<<blocks_for(n), kBlock, 0, stream>>>(
        static_cast<const std::int64_t*>(index.data), index.strides[0], n, copy, differs);
  SAMEBITS_CUDA_CHECK_LAUNCH("plan cache differs_kernel");
  int h = 1;
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&h, differs, sizeof h, cudaMemcpyDeviceToHost, stream));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h == 0;
}

// Sorts the entry's copy into its plan (the caller holds e.m), then marks it ready on `stream`.
void build_plan(Entry& e, std::int64_t num_keys, cudaStream_t stream) {
  const std::int64_t n = e.copy.numel();
  Tensor order = Tensor::empty({n}, DType::i32, e.copy.device(), Stream{stream});
  Tensor offsets = Tensor::empty({num_keys + 1}, DType::i32, e.copy.device(), Stream{stream});
  {
    const SortLayout layout = sort_layout(n, num_keys);
    DeviceScratch scratch(layout.scratch_bytes, e.copy.device(), Stream{stream});
    const WaitOnUnwind wait_on_error(stream);
    SortBuffers b = sort_buffers(scratch, layout);
    b.vals_out = order.data<std::int32_t>(); // the sort writes the plan in place
    b.offsets = offsets.data<std::int32_t>();
    sort_index_vector(e.copy.view(), nullptr, 0, b, nullptr, stream);
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream)); // before the scratch goes back
  }
  e.order = std::move(order);
  e.offsets = std::move(offsets);
  e.planned = true;
  SAMEBITS_CUDA_CHECK(cudaEventRecord(e.ready, stream));
}

} // namespace

bool plan_reuse_applies(const TensorView& index, std::int64_t num_keys) {
  return cacheable(index, num_keys);
}

CachedPlan find_cached_plan(const TensorView& index, std::int64_t num_keys, cudaStream_t stream) {
  if (!cacheable(index, num_keys))
    return {};
  const PlanKey key = key_of(index, num_keys);
  auto held = plan_cache().find(key);
  if (held == nullptr)
    return {};
  auto& e = *static_cast<Entry*>(held.get());
  SAMEBITS_CUDA_CHECK(cudaStreamWaitEvent(stream, e.ready, 0));
  const bool same = same_contents(index, e, stream);
  plan_cache().record(key, same);
  if (!same)
    return {};
  std::lock_guard lock(e.m);
  if (!e.planned) {
    try {
      build_plan(e, num_keys, stream);
      plan_cache().add_owner(key, reinterpret_cast<std::uintptr_t>(stream)); // order, offsets
    } catch (const CudaError&) {
      // No memory for the plan (or its sort): this call sorts as if nothing had been kept.
      plan_cache().forget(key);
      return {};
    }
  } else {
    SAMEBITS_CUDA_CHECK(cudaStreamWaitEvent(stream, e.ready, 0));
  }
  return {e.order.data<std::int32_t>(), e.offsets.data<std::int32_t>(), std::move(held)};
}

namespace {

// A short index shape's entry (its length and num_keys, on one stream): kKeptSlots slots of
// indices sorted before with their results, and the words: the check's record (bad), then
// KeptIndex's (last uses, clock, the addresses the pull reads). Every buffer is allocated for the
// entry's stream, and only kernels on that stream touch them: freed without a wait, the memory
// is handed out again only behind that work.
struct ShortEntry {
  Tensor slots; // int32[kKeptSlots][2 n + num_keys + 1]: copy, order, offsets
  Tensor words; // int64[1 + kKeptWords]
  std::mutex m; // held from the sort's launch to the last launch that reads the buffers
};

std::int64_t slot_words(std::int64_t n, std::int64_t num_keys) {
  return 2 * n + num_keys + 1;
}

std::size_t short_entry_bytes(std::int64_t n, std::int64_t num_keys) {
  return cuda_allocation_bytes(static_cast<std::size_t>(4 * kKeptSlots * slot_words(n, num_keys))) +
         cuda_allocation_bytes(8 * (1 + kKeptWords));
}

std::shared_ptr<ShortEntry> new_short_entry(const TensorView& index, std::int64_t num_keys,
                                            cudaStream_t stream) {
  const Stream st{stream};
  auto e = std::make_shared<ShortEntry>();
  try {
    e->slots = Tensor::empty({kKeptSlots * slot_words(index.numel(), num_keys)}, DType::i32,
                             index.device, st);
    e->words = Tensor::empty({1 + kKeptWords}, DType::i64, index.device, st);
  } catch (const CudaError&) {
    return nullptr; // no memory to spare: the call sorts in its own scratch
  }
  // every slot empty and the clock at 0: the first sort compares with nothing
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(e->words.view().data, 0, 8 * (1 + kKeptWords), stream));
  return e;
}

PlanKey short_key(const TensorView& index, std::int64_t num_keys, cudaStream_t stream) {
  // Not the address, stride or dtype: the sort compares values, wherever they lie.
  PlanKey key{index.device.index, nullptr, DType::i64, index.numel(), 0, num_keys};
  key.stream = reinterpret_cast<std::uintptr_t>(stream);
  key.on_device = true;
  return key;
}

std::int64_t short_plan_sorts(const TensorView& index, std::int64_t num_keys, cudaStream_t stream) {
  std::shared_ptr<void> held = plan_cache().find(short_key(index, num_keys, stream));
  if (held == nullptr)
    return -1;
  auto& e = *static_cast<ShortEntry*>(held.get());
  const std::lock_guard lock(e.m);
  unsigned long long sorts = 0;
  const auto* words = static_cast<const unsigned long long*>(e.words.view().data);
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&sorts, words + 1 + kKeptSorts, sizeof sorts,
                                      cudaMemcpyDeviceToHost, stream));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<std::int64_t>(sorts);
}

} // namespace

ShortPlan short_plan(const TensorView& index, std::int64_t num_keys, cudaStream_t stream) {
  const std::int64_t n = index.numel();
  if (!index.device.is_cuda() || n == 0 || n >= kPlanCacheMinSources || num_keys <= 0 ||
      num_keys >= std::numeric_limits<int>::max() || stream == cudaStreamPerThread ||
      cuda_stream_capturing(Stream{stream}))
    return {}; // (the per-thread default stream's handle names a different stream per thread)
  const PlanKey key = short_key(index, num_keys, stream);
  std::shared_ptr<void> held = plan_cache().find(key);
  if (held == nullptr) {
    const std::size_t bytes = short_entry_bytes(n, num_keys);
    if (!plan_cache().wants(key, bytes))
      return {};
    auto e = new_short_entry(index, num_keys, stream);
    if (e == nullptr)
      return {};
    held = e;
    plan_cache().store(key, std::move(e), bytes, reinterpret_cast<std::uintptr_t>(stream));
  }
  auto& e = *static_cast<ShortEntry*>(held.get());
  ShortPlan p;
  p.lock = std::unique_lock(e.m);
  auto* words = static_cast<unsigned long long*>(e.words.view().data);
  p.bad = words;
  p.kept.words = words + 1;
  int* slots = e.slots.data<std::int32_t>();
  const std::int64_t per = slot_words(n, num_keys);
  for (int s = 0; s < kKeptSlots; ++s) {
    p.kept.copy[s] = slots + s * per;
    p.kept.order[s] = slots + s * per + n;
    p.kept.offsets[s] = slots + s * per + 2 * n;
  }
  p.hold = std::move(held);
  return p;
}

void remember_index(const TensorView& index, std::int64_t num_keys, cudaStream_t stream) {
  if (!cacheable(index, num_keys))
    return;
  const PlanKey key = key_of(index, num_keys);
  const std::int64_t n = index.numel();
  const std::size_t bytes = entry_bytes(n, num_keys);
  if (!plan_cache().wants(key, bytes))
    return;
  auto e = std::make_shared<Entry>();
  e->device = index.device.index;
  try {
    e->copy = Tensor::empty({n}, DType::i32, index.device, Stream{stream});
  } catch (const CudaError&) {
    return; // no memory to spare: the call has done its work, nothing is kept
  }
  int* copy = e->copy.data<std::int32_t>();
  if (index.dtype == DType::i32)
    narrow_kernel<<<blocks_for(n), kBlock, 0, stream>>>(
        static_cast<const std::int32_t*>(index.data), index.strides[0], n, copy);
  else
    narrow_kernel<<<blocks_for(n), kBlock, 0, stream>>>(
        static_cast<const std::int64_t*>(index.data), index.strides[0], n, copy);
  SAMEBITS_CUDA_CHECK_LAUNCH("plan cache narrow_kernel");
  SAMEBITS_CUDA_CHECK(cudaEventCreateWithFlags(&e->ready, cudaEventDisableTiming));
  SAMEBITS_CUDA_CHECK(cudaEventRecord(e->ready, stream));
  plan_cache().store(key, std::move(e), bytes, reinterpret_cast<std::uintptr_t>(stream));
}

} // namespace samebits::detail

namespace samebits {

std::int64_t short_index_sorts(const TensorView& index, std::int64_t num_keys, Stream stream) {
  return detail::short_plan_sorts(index, num_keys, SAMEBITS_STREAM(stream));
}

} // namespace samebits
