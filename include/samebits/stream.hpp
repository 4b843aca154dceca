// CUDA streams, events and graphs for programs that queue samebits work on their own streams or
// time it, without including the CUDA runtime. Each class owns its CUDA object. Without the CUDA
// backend, or for a CPU device, creating one throws BackendUnavailable (DeviceScope and
// synchronize do nothing for the CPU).
#pragma once
#include "samebits/dtype.hpp"

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

// Waits until the work queued on `stream` of `device` (null: the default stream) has finished.
void synchronize(Device device, Stream stream = {});

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
// that the caller can run the work without a graph instead.
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
