// samebits/stream.hpp without the CUDA backend: creating a stream, event or graph throws.
#include "samebits/stream.hpp"

#include "samebits/errors.hpp"

namespace samebits {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw BackendUnavailable(std::string(what) + ": samebits was built without CUDA");
}
} // namespace

int current_cuda_device() {
  return -1;
}

CudaStream::CudaStream(Device) {
  no_cuda("CudaStream");
}
CudaStream::~CudaStream() = default;
CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(other.stream_), device_(other.device_) {}
CudaStream& CudaStream::operator=(CudaStream&&) noexcept = default;
void CudaStream::destroy() noexcept {}

CudaEvent::CudaEvent(Device) {
  no_cuda("CudaEvent");
}
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(Stream) {
  no_cuda("CudaEvent::record");
}
float CudaEvent::elapsed_ms(const CudaEvent&, const CudaEvent&) {
  no_cuda("CudaEvent::elapsed_ms");
}

CudaGraph::CudaGraph(Stream, const std::function<void()>&) {
  no_cuda("CudaGraph");
}
CudaGraph::~CudaGraph() = default;
void CudaGraph::launch(Stream) const {
  no_cuda("CudaGraph::launch");
}

} // namespace samebits
