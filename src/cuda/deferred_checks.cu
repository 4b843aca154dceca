// Deferred index checks (cuda/deferred_checks.cuh): one host-mapped record per device, claimed by
// the first report (a report kernel, or a kernel writing through its sink) that finds an error,
// and a ring of the messages of the checks queued.
#include "core/memory.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "samebits/errors.hpp"
#include "samebits/stream.hpp"

#include <array>
#include <atomic>
#include <mutex>

namespace samebits::detail {

namespace {

constexpr unsigned long long kNone = ~0ull;
constexpr int kMaxDevices = 64;
constexpr std::size_t kRing = 4096; // messages kept for checks still queued

// What a report writes into host-mapped memory; seq last, once the rest is visible.
using Record = DeferredRecord;

struct Pending {
  std::uint64_t seq = 0;
  DeferredMessage message;
};

struct DeviceState {
  std::once_flag once;
  std::atomic<Record*> host{nullptr}; // pinned, mapped
  Record* dev = nullptr;              // its address on the device
  unsigned int* claim = nullptr;      // device memory: 0 until an error claims the record
  cudaStream_t quiet = nullptr;       // non-blocking: resets the claim without waiting for others
  std::mutex m;
  std::array<Pending, kRing> ring;
};

DeviceState& state_of(int device) {
  static std::array<DeviceState, kMaxDevices> states;
  if (device < 0 || device >= kMaxDevices)
    throw InvalidArgument("deferred index checks: CUDA device " + std::to_string(device) +
                          " is past the " + std::to_string(kMaxDevices) + " supported");
  return states[static_cast<std::size_t>(device)];
}

std::atomic<std::uint64_t> next_seq{1};

void reset_claim(DeviceState& s) {
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(s.claim, 0, sizeof(unsigned int), s.quiet));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(s.quiet));
}

void init(DeviceState& s) {
  std::call_once(s.once, [&] {
    Record* host = nullptr;
    SAMEBITS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(Record),
                                      cudaHostAllocMapped | cudaHostAllocPortable));
    *host = Record{0, 0, 0, 0};
    SAMEBITS_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.dev), host, 0));
    SAMEBITS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.claim), sizeof(unsigned int)));
    SAMEBITS_CUDA_CHECK(cudaStreamCreateWithFlags(&s.quiet, cudaStreamNonBlocking));
    reset_claim(s); // zero before any kernel reads it (waits for nothing else on the device)
    s.host.store(host, std::memory_order_release);
  });
}

__global__ void report_kernel(const unsigned long long* record, int words, DeferredIndex first,
                              DeferredIndex second, DeferredSink sink) {
  for (int w = 0; w < words; ++w) {
    const unsigned long long p = record[w];
    if (p == kNone)
      continue;
    report_to_sink(sink, w, p, deferred_index_value(w == 0 ? first : second, p));
    return;
  }
}

} // namespace

bool defer_index_checks() {
  return cuda_index_checks() == CudaIndexChecks::deferred;
}

DeferredSink deferred_sink(DeferredMessage message) {
  int device = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&device));
  DeviceState& s = state_of(device);
  init(s);
  const std::uint64_t seq = next_seq.fetch_add(1, std::memory_order_relaxed);
  {
    const std::lock_guard<std::mutex> lock(s.m);
    Pending& p = s.ring[seq % kRing];
    p.seq = seq;
    p.message = std::move(message);
  }
  return DeferredSink{s.dev, s.claim, seq};
}

void defer_index_error(const unsigned long long* record, int words, DeferredIndex first,
                       DeferredIndex second, DeferredMessage message, cudaStream_t stream) {
  const DeferredSink sink = deferred_sink(std::move(message));
  report_kernel<<<1, 1, 0, stream>>>(record, words, first, second, sink);
  SAMEBITS_CUDA_CHECK_LAUNCH("deferred index check report_kernel");
}

void raise_deferred_index_error() {
  int device = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    return; // defer_index_error refuses such a device: nothing can be pending there
  DeviceState& s = state_of(device);
  Record* host = s.host.load(std::memory_order_acquire);
  if (host == nullptr)
    return; // nothing was ever deferred on this device
  volatile Record* r = host;
  if (r->seq == 0)
    return; // the common case: no lock, no device call
  // One thread takes the error: read, clear and free the claim under the lock, so that a second
  // thread neither throws it again nor clears an error that claimed the record after it.
  const std::lock_guard<std::mutex> lock(s.m);
  const unsigned long long seq = r->seq;
  if (seq == 0)
    return;
  std::atomic_thread_fence(std::memory_order_acquire);
  const long long position = r->position, value = r->value;
  const int word = r->word;
  std::string message;
  {
    Pending& p = s.ring[seq % kRing];
    if (p.seq == seq && p.message)
      message = p.message(word, position, value);
  }
  if (message.empty()) // more than kRing checks were queued after it: its message is gone
    message = "an index checked on CUDA device " + std::to_string(device) + " at position " +
              std::to_string(position) + " (value " + std::to_string(value) +
              ") is out of range; nothing was written";
  r->seq = 0;     // first: no report kernel can write while the claim is held
  reset_claim(s); // then free the claim for the next error
  throw IndexOutOfRange(message + " (found by a deferred CUDA index check, thrown by the next "
                                  "call that looked; see CudaIndexChecks)");
}

void cuda_raise_deferred_index_error(int device) {
  const CurrentDevice on_device(Device::cuda(device));
  raise_deferred_index_error();
}

} // namespace samebits::detail
