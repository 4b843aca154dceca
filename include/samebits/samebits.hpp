// samebits: bitwise-reproducible numerical ops. Include this for the whole public API.
//
// Every op checks its arguments before it writes anything. Among those checks: an op's output must
// not reach an element twice (a stride 0 over several elements, or strides that make elements
// coincide) nor share an element with any of its inputs, where threads would race on it or read
// what the op already wrote; such an output is an InvalidArgument naming what it overlaps. Views
// of one buffer that share no element (column blocks, interleaved slices) are separate tensors.
// cumsum alone also takes its input as its output (in place). An accumulating op (index_add,
// scatter_*) reads its output by design; that is not an overlap.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"
#include "samebits/errors.hpp"
#include "samebits/ops/gemm.hpp"
#include "samebits/ops/histogram.hpp"
#include "samebits/ops/indexing.hpp"
#include "samebits/ops/reduce.hpp"
#include "samebits/ops/scan.hpp"
#include "samebits/ops/scatter.hpp"
#include "samebits/ops/segment.hpp"
#include "samebits/registry.hpp"
#include "samebits/tensor.hpp"
#include "samebits/threads.hpp"

namespace samebits {

std::string_view version();
std::string_view git_revision();
// True when samebits was built with its CUDA backend (whether or not a device is present).
bool cuda_built();
// True when the CUDA backend is compiled in and at least one device is present.
bool cuda_available();
// Before destroying a CUDA stream that samebits ops or tensors used: waits for the stream, then
// gives back the device memory cached for it, its cuBLAS handle and workspace (run_to_run GEMM)
// and the kept index plans whose buffers came from it. Without this, what a destroyed stream used
// stays cached, and a kept plan freed later names the destroyed stream (undefined behaviour in
// the CUDA runtime: a crash, in practice). The
// default stream (null) and CPU devices are left alone; no call on the stream may be running, and
// later calls on it start afresh.
void release_stream(Stream stream, Device device = Device::cuda());

} // namespace samebits
