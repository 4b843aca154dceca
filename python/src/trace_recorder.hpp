// samebits.torch.trace's C++ recorder (trace_recorder.cpp), bound into samebits._torch_mode.
#pragma once
#include "torch_mode_api.hpp"

#include <nanobind/nanobind.h>

namespace samebits::python {

// Adds the class TraceRecorder to `m`; its digests go through `api` (samebits._core's table).
void bind_trace_recorder(nanobind::module_& m, const TorchModeApi* api);

} // namespace samebits::python
