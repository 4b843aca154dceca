// CUDA streams, events and graphs of samebits/stream.hpp, over the CUDA runtime.
#include "samebits/stream.hpp"

#include "core/backends.hpp"
#include "core/memory.hpp"
#include "cuda/check.cuh"
#include "samebits/errors.hpp"
#include "samebits/samebits.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <utility>

namespace samebits {

namespace {
Device require_cuda(Device device, const char* what) {
  if (!device.is_cuda())
    throw BackendUnavailable(fmt::format("{}: {} is not a CUDA device", what, to_string(device)));
  return device;
}
} // namespace

int current_cuda_device() {
  if (detail::cuda_device_count() == 0)
    return -1;
  int d = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

CudaStream::CudaStream(Device device) : device_(require_cuda(device, "CudaStream")) {
  const detail::CurrentDevice on_device(device_);
  cudaStream_t s = nullptr;
  SAMEBITS_CUDA_CHECK(cudaStreamCreate(&s));
  stream_.handle = s;
}

CudaStream::~CudaStream() {
  destroy();
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, Stream{})), device_(other.device_) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    destroy();
    stream_ = std::exchange(other.stream_, Stream{});
    device_ = other.device_;
  }
  return *this;
}

void CudaStream::destroy() noexcept {
  if (stream_.handle == nullptr)
    return;
  try {
    release_stream(stream_, device_);
  } catch (const Error&) {
    // A destructor cannot report it; the stream is destroyed all the same.
  }
  const detail::CurrentDevice on_device(device_);
  cudaStreamDestroy(SAMEBITS_STREAM(stream_));
  stream_ = Stream{};
}

CudaEvent::CudaEvent(Device device) {
  const detail::CurrentDevice on_device(require_cuda(device, "CudaEvent"));
  cudaEvent_t e = nullptr;
  SAMEBITS_CUDA_CHECK(cudaEventCreate(&e));
  event_ = e;
}

CudaEvent::~CudaEvent() {
  cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void CudaEvent::record(Stream stream) {
  SAMEBITS_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), SAMEBITS_STREAM(stream)));
}

float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  const auto b = static_cast<cudaEvent_t>(end.event_);
  SAMEBITS_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  SAMEBITS_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), b));
  return ms;
}

CudaGraph::CudaGraph(Stream stream, const std::function<void()>& work) {
  const cudaStream_t s = SAMEBITS_STREAM(stream);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess) {
    try {
      work();
    } catch (const Error&) {
      // An op that cannot be captured; the capture below fails and says so.
    }
    if (cudaStreamEndCapture(s, &graph) == cudaSuccess && graph != nullptr &&
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      exec = nullptr;
  }
  cudaGetLastError(); // a failed capture leaves an error behind
  graph_ = graph;
  exec_ = exec;
  if (exec_ == nullptr)
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(s));
}

CudaGraph::~CudaGraph() {
  if (exec_)
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_)
    cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CudaGraph::launch(Stream stream) const {
  if (exec_ == nullptr)
    throw InvalidArgument("CudaGraph::launch: the capture failed, there is nothing to launch");
  SAMEBITS_CUDA_CHECK(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), SAMEBITS_STREAM(stream)));
}

} // namespace samebits
