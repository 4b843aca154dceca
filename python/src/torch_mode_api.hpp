// What the drop-in mode's C++ kernels (samebits._torch_mode) call in samebits._core, handed over
// as a capsule. The library is linked into _core alone, so the kernels reach its one state (levels,
// index checks, plan cache, pending index errors) through these pointers instead of a second copy.
// Each op returns ok or the kind of error it caught; the exception itself stays in _core, on this
// thread, until _core._raise_pending() raises it in Python with its samebits class and message.
#pragma once
#include "samebits/tensor.hpp"
#include "samebits/trace.hpp"

#include <cstdint>

namespace samebits::python {

enum class ApiResult : int { ok = 0, nondeterministic = 1, other = 2 };

// What the trace recorder (trace_recorder.cpp) keeps of one digest: the leading fields of
// trace::DeviceDigest, in its order, so that a record read back from a device copies into it.
struct TraceValues {
  std::uint64_t sum_hash = 0;
  double min = 0, max = 0, sum = 0, l2 = 0;
  std::int64_t nan_count = 0, stride = 1, samples_taken = 0;
  double samples[trace::kSamples] = {};
};

struct TorchModeApi {
  int version;
  // The ops at `level` (a Determinism value) on `stream` (a cudaStream_t; null on the CPU).
  ApiResult (*index_add)(const TensorView& out, const TensorView& index, const TensorView& src,
                         double alpha, int level, void* stream);
  ApiResult (*scatter_add)(const TensorView& out, int dim, const TensorView& index,
                           const TensorView& src, int level, void* stream);
  ApiResult (*scatter_reduce)(const TensorView& out, int dim, const TensorView& index,
                              const TensorView& src, int reduce, bool include_self, int level,
                              void* stream);
  // A level's or a reduction's name as its enum value; -1 when it names none.
  int (*parse_level)(const char* name);
  int (*parse_reduce)(const char* name);
  // trace::digest of a host tensor into *out (stats_elements 0: the hash alone).
  ApiResult (*trace_digest_host)(const TensorView& t, std::int64_t stats_elements,
                                 TraceValues* out);
  // trace::digest_on_device of a contiguous CUDA tensor into the zeroed device record `record`.
  ApiResult (*trace_digest_device)(const TensorView& t, std::int64_t stats_elements,
                                   trace::DeviceDigest* record, void* stream);
  // The sum64 hash of host bytes (trace::sum_hash_bytes).
  std::uint64_t (*sum_hash_bytes)(const void* data, std::size_t nbytes);
};

inline constexpr const char* kTorchModeApiName = "samebits._core._torch_mode_api";
inline constexpr int kTorchModeApiVersion = 2;

} // namespace samebits::python
