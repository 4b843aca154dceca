// CUDA streams, events and graphs for programs that queue samebits work on their own streams or
// time it, without including the CUDA runtime. Each class owns its CUDA object. Without the CUDA
// backend, or for a CPU device, creating one throws BackendUnavailable (DeviceScope and
// synchronize do nothing for the CPU).
#pragma once
#include "samebits/dtype.hpp"

#include <cstdint>
#include <functional>
#include <memory>

namespace samebits {

namespace detail {
class CurrentDevice;
}

// Makes `device` the calling thread's current CUDA device for the scope and restores the previous
// one after; nothing for the CPU. Streams, events and graphs belong to the device current when
// they are created.
class DeviceScope {
public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

private:
  std::unique_ptr<detail::CurrentDevice> current_;
};

// Waits until the work queued on `stream` of `device` (null: the default stream) has finished,
// then throws a deferred index error of `device` if one was found (see CudaIndexChecks).
void synchronize(Device device, Stream stream = {});

// How the CUDA ops that check index values report a bad one (IndexOutOfRange). Either way a bad
// index writes nothing: the kernels read the check's result before they write.
//  - wait (the default): the op waits for its check and throws before it returns. That is one
//    host round trip per call, and the op cannot be captured into a CUDA graph.
//  - deferred: the op returns without waiting. The first bad index the device finds is kept and
//    thrown by the next samebits call that can defer a check (index_add, scatter_add,
//    scatter_reduce, index_select, gather, segment_reduce, aggregate on CUDA), by synchronize or
//    by check_index_errors, whichever comes once the device has run the check; later errors are
//    dropped until that one is thrown. Like PyTorch's own asynchronous CUDA index errors, but
//    the output is left untouched and the device stays usable. These still wait: index plans
//    and scatters whose index is large enough for automatic plan reuse (the plan must be known
//    valid), the bfloat16/float16 atomic scatters, sorted scatters whose index is not one value
//    per row (the general path), and ops on strided tensors that go through contiguous copies.
// Process-wide; the CPU backend always throws before it returns.
enum class CudaIndexChecks : std::uint8_t { wait, deferred };
void set_cuda_index_checks(CudaIndexChecks checks);
CudaIndexChecks cuda_index_checks();

// Waits for `device` and throws its deferred index error, if one was found; nothing for the CPU.
void check_index_errors(Device device);

// The calling thread's current CUDA device (the one DeviceScope sets); -1 without CUDA or device.
int current_cuda_device();

// A CUDA stream on `device`. Destroying it first calls release_stream(stream, device), so that
// the device memory, cuBLAS handle and workspace samebits cached for it go back, as the library's
// rule for destroying a stream asks.
class CudaStream {
public:
  explicit CudaStream(Device device);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Stream stream() const { return stream_; }
  Device device() const { return device_; }

private:
  void destroy() noexcept;
  Stream stream_{};
  Device device_{};
};

// A CUDA event on `device`, for timing work queued on a stream.
class CudaEvent {
public:
  explicit CudaEvent(Device device);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Marks the point in `stream`'s queue that the event completes at.
  void record(Stream stream);
  // Milliseconds between two recorded events; waits for `end` to complete.
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& end);

private:
  void* event_ = nullptr; // cudaEvent_t
};

// One capture of the launches that `work` queues on `stream`, replayed by launch(). A capture
// fails, and captured() is false, when the work synchronizes, allocates or throws a samebits
// Error while it is recorded; the error that left is cleared and the stream synchronized, so
// that the caller can run the work without a graph instead. Device memory that the captured work
// allocated and freed on `stream` (ops' scratch) stays with the graph: it is never handed out
// again, so replays cannot write into memory allocated after the capture.
class CudaGraph {
public:
  CudaGraph(Stream stream, const std::function<void()>& work);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool captured() const { return exec_ != nullptr; }
  // Queues the captured launches on `stream`; InvalidArgument when nothing was captured.
  void launch(Stream stream) const;

private:
  void* graph_ = nullptr; // cudaGraph_t
  void* exec_ = nullptr;  // cudaGraphExec_t
};

} // namespace samebits
