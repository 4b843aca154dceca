// Deferred index checks on CUDA (samebits/stream.hpp: CudaIndexChecks::deferred). An op that
// checks index values on the device keeps its check's record (one or two words, ~0 when nothing
// was found, else the first bad position) in its scratch, as in wait mode, and its kernels write
// nothing when it is set. In deferred mode it then queues report_kernel instead of waiting: the
// kernel copies the first error of the device into host-mapped memory, where the next op (or
// synchronize / check_index_errors) finds it without a round trip to the device. A kernel that
// runs the check itself, or runs after it in every case, may write that report instead, through a
// DeferredSink (below): no report kernel then.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>
#include <functional>
#include <string>

namespace samebits::detail {

// The error message of a deferred check: for record word `word`, the bad position and the index
// value there (read on the device when the check gave an index to read, else -1).
using DeferredMessage =
    std::function<std::string(int word, std::int64_t position, std::int64_t value)>;

// Where the value of a bad position can be read: element position * stride of an int32 or int64
// vector on the device (index == nullptr: nothing to read).
struct DeferredIndex {
  const void* index = nullptr;
  bool is64 = false;
  std::int64_t stride = 1;
};

// Whether checks are deferred now (the process-wide setting).
bool defer_index_checks();

// Queues the report of `words` record words (at most 2) on `stream` of the current device.
void defer_index_error(const unsigned long long* record, int words, DeferredIndex first,
                       DeferredIndex second, DeferredMessage message, cudaStream_t stream);

// Where a kernel that runs its own check writes a deferred error itself, with no report kernel
// after it (one launch a call fewer): the device's host-mapped record, its claim and the sequence
// number under which the check's message waits. `record == nullptr`: nothing to report (wait mode).
struct DeferredRecord {
  unsigned long long seq; // 0: no error
  long long position;
  long long value;
  int word;
};
struct DeferredSink {
  DeferredRecord* record = nullptr;
  unsigned int* claim = nullptr;
  unsigned long long seq = 0;
};

// Registers `message` for a kernel that reports through the returned sink (deferred mode only).
DeferredSink deferred_sink(DeferredMessage message);

// The index value at `position` of `d` (-1 when `d` names no index).
__device__ inline long long deferred_index_value(const DeferredIndex& d,
                                                 unsigned long long position) {
  if (d.index == nullptr)
    return -1;
  const auto at = static_cast<long long>(position) * d.stride;
  return d.is64 ? static_cast<const long long*>(d.index)[at]
                : static_cast<long long>(static_cast<const int*>(d.index)[at]);
}

// Writes the error at `position` of record word `word` into the sink's record, unless an earlier
// error holds it. One thread calls it, once, after its check has finished.
__device__ inline void report_to_sink(const DeferredSink& s, int word, unsigned long long position,
                                      long long value) {
  if (atomicCAS(s.claim, 0u, 1u) != 0u)
    return; // an earlier error holds the record until the host has thrown it
  volatile DeferredRecord* o = s.record;
  o->position = static_cast<long long>(position);
  o->value = value;
  o->word = word;
  __threadfence_system();
  o->seq = s.seq;
}

// Throws the current device's deferred index error if it has reached the host.
void raise_deferred_index_error();

} // namespace samebits::detail
