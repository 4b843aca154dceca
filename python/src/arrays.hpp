// Python arrays as samebits TensorViews, zero-copy: a torch.Tensor is read through its own
// accessors (data_ptr, shape, stride: no DLPack capsule per call, which costs microseconds), any
// other array (NumPy, CuPy, JAX, or a torch tensor given through DLPack) through nb::ndarray.
// Views carry the producer's strides; nothing is copied and nothing is owned.
#pragma once
#include "samebits/samebits.hpp"

#include <cstdint>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <optional>
#include <string>

namespace samebits::python {

namespace nb = nanobind;

// `obj` as a view. `what` names the argument in error messages ("index_add: src ...").
TensorView to_view(nb::handle obj, const char* what);

// A samebits-owned tensor (for instance an IndexPlan's order) as an array that keeps the tensor's
// storage alive; torch.from_dlpack and numpy.from_dlpack take it without a copy.
nb::object to_array(const Tensor& t);

// Per-call options: an optional level name ("portable", ...) and the CUDA stream (an integer
// cudaStream_t, 0 for the default stream) the op runs on.
Options options(const std::optional<std::string>& level, std::uintptr_t stream);

} // namespace samebits::python
