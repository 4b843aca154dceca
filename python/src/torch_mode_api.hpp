// What the drop-in mode's C++ kernels (samebits._torch_mode) call in samebits._core, handed over
// as a capsule. The library is linked into _core alone, so the kernels reach its one state (levels,
// index checks, plan cache, pending index errors) through these pointers instead of a second copy.
// Each op returns ok or the kind of error it caught; the exception itself stays in _core, on this
// thread, until _core._raise_pending() raises it in Python with its samebits class and message.
#pragma once
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits::python {

enum class ApiResult : int { ok = 0, nondeterministic = 1, other = 2 };

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
};

inline constexpr const char* kTorchModeApiName = "samebits._core._torch_mode_api";
inline constexpr int kTorchModeApiVersion = 1;

} // namespace samebits::python
