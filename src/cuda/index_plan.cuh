// The GPU side of the index plan, shared by make_index_plan and the CUDA scatter variants: key
// building with index validation, a stable sort of (key, value) pairs (a counting sort for few
// keys, CUB's radix sort otherwise), CSR offsets, and the device scratch buffer they work in.
#pragma once
#include "core/registry.hpp"
#include "samebits/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <exception>
#include <memory>
#include <mutex>

namespace samebits::detail {

// Scratch device memory for one op call, carved into 256-byte-aligned pieces: the registry's
// WorkspaceBuffer (core/registry.hpp, the one scratch mechanism: the caching allocator, freed
// at scope exit), for variants whose scratch size is known only inside their run.
class DeviceScratch {
public:
  // Allocated and freed for `stream`, the stream of the kernels that use it: freed while they
  // are still queued, it is reused only behind them.
  DeviceScratch(std::size_t bytes, Device device, Stream stream) : buffer_(bytes, device, stream) {}
  // Carves `bytes` (aligned to 256) off the buffer.
  template <class T> T* take(std::int64_t count) {
    return static_cast<T*>(take_bytes(static_cast<std::size_t>(count) * sizeof(T)));
  }
  void* take_bytes(std::size_t bytes);

private:
  WorkspaceBuffer buffer_;
  std::size_t used_ = 0;
};

// Waits for `stream` when its scope is left by an exception. Declared after a DeviceScratch, it
// runs first on the way out, so scratch is not handed back while kernels queued on the stream
// (a sort, a pull) still use it.
class WaitOnUnwind {
public:
  explicit WaitOnUnwind(cudaStream_t stream)
      : stream_(stream), pending_(std::uncaught_exceptions()) {}
  ~WaitOnUnwind() {
    if (std::uncaught_exceptions() > pending_)
      (void)cudaStreamSynchronize(stream_);
  }
  WaitOnUnwind(const WaitOnUnwind&) = delete;
  WaitOnUnwind& operator=(const WaitOnUnwind&) = delete;

private:
  cudaStream_t stream_;
  int pending_;
};

// Sorting n (key, value) pairs with keys in [0, num_keys): which sort runs and the scratch it takes
// (CUB's temporary sizes are queried once, here). The counting sort (few keys) needs no key or
// input buffers; the general scatter path, which sorts composite keys, asks for the radix sort.
struct SortLayout {
  std::int64_t n = 0, num_keys = 0;
  bool counting = false;
  bool block = false;         // a one-block sort (needs vals_out and offsets only)
  bool block16 = false;       // its 16-bit form (carries no values)
  bool block_count = false;   // its counting form (also block)
  std::size_t temp_bytes = 0; // CUB's temporary storage (radix sort, or the counting sort's scan)
  std::size_t scratch_bytes = 0; // what sort_buffers carves
};
// carried: the caller passes 32-bit values for the sort to carry (sort_index_vector's values32).
SortLayout sort_layout(std::int64_t n, std::int64_t num_keys, bool allow_counting = true,
                       bool carried = false);

// The buffers of one sort, carved from scratch sized with the layout's scratch_bytes (plus the
// caller's own). Pointers a path does not use stay null.
struct SortBuffers {
  int* keys_in = nullptr;
  int* vals_in = nullptr;
  int* keys_out = nullptr;
  int* vals_out = nullptr;
  int* offsets = nullptr; // [num_keys + 1]
  int* counts = nullptr;  // counting sort: [num_keys][tiles] keys counted per tile
  int* starts = nullptr;  // counting sort: the exclusive scan of counts (each tile's first place)
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  std::int64_t n = 0, num_keys = 0;
  bool counting = false;
  bool block = false;
  bool block16 = false;
  bool block_count = false;
};
SortBuffers sort_buffers(DeviceScratch& scratch, const SortLayout& layout);
// The same for a one-block layout with its two buffers given (vals_out [n], offsets
// [num_keys + 1]): the one-block sorts use no other.
SortBuffers block_sort_buffers(const SortLayout& layout, int* vals_out, int* offsets);

// keys_in[i] = index[i] (1-D view, int32/int64, any stride), vals_in[i] = values32[i * vstride]
// when values32 is set (32-bit payloads, e.g. float bits), else i. A value outside [0, m) lowers
// *bad to its position (bad starts at all ones).
void build_vector_keys(const TensorView& index, std::int64_t m, const void* values32,
                       std::int64_t vstride, const SortBuffers& b, unsigned long long* bad,
                       cudaStream_t stream);

// Stable sort of the pairs by key, then offsets[k] = first sorted position with key >= k (radix
// layouts only).
void sort_pairs_and_offsets(const SortBuffers& b, cudaStream_t stream);

// A one-block sort's memory of the indices it sorted (automatic reuse of short indices,
// short_plan below): kKeptSlots slots, each the int32 values of an index that was sorted and
// found valid (copy, n of them) with that sort's result (order, n, and offsets, num_keys + 1), and
// `words`: per slot its last use (0: empty), a clock, the addresses of the order and offsets that
// the pull is to read (Pull::chosen), then the number of sorts that ran (short_index_sorts,
// core/test_hooks.hpp). A sort given one compares the index with every filled slot in one pass; at
// the first equal slot it points the two addresses at that slot's result and sets *bad to all ones:
// nothing is sorted or copied. Otherwise it sorts into an empty slot, or the least recently used
// one, points the addresses there, and keeps the index's values with it when they were all in range
// (else the slot is left empty). The sort's own vals_out and offsets are not written then. The
// comparison is spread over a block per kKeptMatchPositions positions (each ORs the slots it saw
// differ into words[kKeptDiffers] and takes a ticket from words[kKeptArrived]); the block that
// arrives last decides, sorts when nothing matched, and sets both words back to zero for the
// next call. Only the deciding block writes the slots, and only kernels on one stream touch them.
// The one-block layouts only, and no carried values.
constexpr int kKeptSlots = 4;
constexpr int kKeptClock = kKeptSlots;       // words[kKeptClock]: the clock
constexpr int kKeptChosen = kKeptSlots + 1;  // words[kKeptChosen + 0, 1]: order and offsets to read
constexpr int kKeptSorts = kKeptSlots + 3;   // words[kKeptSorts]: the sorts that ran
constexpr int kKeptDiffers = kKeptSlots + 4; // words[kKeptDiffers]: slots found different so far
constexpr int kKeptArrived = kKeptSlots + 5; // words[kKeptArrived]: blocks done comparing so far
constexpr int kKeptWords = kKeptSlots + 6;
constexpr int kKeptMatchPositions = 1024; // positions each comparing block takes
struct KeptIndex {
  int* copy[kKeptSlots] = {};
  int* order[kKeptSlots] = {};
  int* offsets[kKeptSlots] = {};
  unsigned long long* words = nullptr; // [kKeptWords]: last uses, clock, chosen addresses, sorts
  bool on() const { return words != nullptr; }
  const unsigned long long* chosen() const { return words + kKeptChosen; }
};

// The same for a 1-D index (int32/int64, any stride) in one call, with keys in [0, b.num_keys):
// vals_out holds values32[i * vstride] (or i) in stable key order and offsets the CSR offsets;
// keys_* are not kept. The layout says which sort: the one-block sort, the counting sort, or
// build_vector_keys and the radix sort. *bad (when set) ends as the first position whose value is
// outside the range, or all ones; such a value sorts as key 0. The callers need not set *bad.
// `kept` (the one-block sorts of positions only): see KeptIndex.
void sort_index_vector(const TensorView& index, const void* values32, std::int64_t vstride,
                       const SortBuffers& b, unsigned long long* bad, cudaStream_t stream,
                       KeptIndex kept = {});

// Reads *bad (waits for the stream); -1 when every index was in range.
std::int64_t first_bad_position(const unsigned long long* bad, cudaStream_t stream);

// Automatic plan reuse (src/cuda/plan_cache.cu). find_cached_plan: the plan of `index` when a copy
// of the same contents (same address, length, stride, dtype and num_keys) was remembered; it
// compares the contents on `stream` and waits for the answer, builds the plan on the first equal
// call, and makes `stream` wait until the plan is ready. `hold` keeps the entry alive until the
// caller has queued its reads. remember_index: keeps an int32 copy of a valid index (queued on
// `stream`) when the cache wants one.
struct CachedPlan {
  const int* order = nullptr;
  const int* offsets = nullptr;
  std::shared_ptr<void> hold;
  explicit operator bool() const { return order != nullptr; }
};
CachedPlan find_cached_plan(const TensorView& index, std::int64_t num_keys, cudaStream_t stream);
void remember_index(const TensorView& index, std::int64_t num_keys, cudaStream_t stream);
// Whether automatic plan reuse looks at this index at all (large enough, on CUDA, int-sized keys).
bool plan_reuse_applies(const TensorView& index, std::int64_t num_keys);

// Automatic reuse of short indices (fewer than kPlanCacheMinSources entries, sorted by a one-block
// sort): no wait for the host. short_plan gives the check's record `bad` and the KeptIndex to pass
// to the sort of `index` on `stream` (its slots hold the order and offsets the pull reads), all
// kept in the plan cache under the index's length, num_keys and the stream, not its address: a
// later call with contents equal to one of the slots finds its sort done, even from a fresh tensor
// (PyG layers build their edge indices anew every step). Empty when the cache is off or full of
// larger entries, the stream is being captured into a CUDA graph, or no memory is left. `hold`
// keeps the entry and `lock` keeps other threads off it until the caller has queued the sort and
// every read of its buffers.
struct ShortPlan {
  unsigned long long* bad = nullptr;
  KeptIndex kept;
  std::shared_ptr<void> hold;
  std::unique_lock<std::mutex> lock; // after hold: unlocked before the entry can go
  explicit operator bool() const { return kept.on(); }
};
ShortPlan short_plan(const TensorView& index, std::int64_t num_keys, cudaStream_t stream);

class Registry;
void register_cuda_index_plan(Registry& r);

} // namespace samebits::detail
