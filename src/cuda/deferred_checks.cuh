// Deferred index checks on CUDA (samebits/stream.hpp: CudaIndexChecks::deferred). An op that
// checks index values on the device keeps its check's record (one or two words, ~0 when nothing
// was found, else the first bad position) in its scratch, as in wait mode, and its kernels write
// nothing when it is set. In deferred mode it then queues report_kernel instead of waiting: the
// kernel copies the first error of the device into host-mapped memory, where the next op (or
// synchronize / check_index_errors) finds it without a round trip to the device.
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

// Throws the current device's deferred index error if it has reached the host.
void raise_deferred_index_error();

} // namespace samebits::detail
