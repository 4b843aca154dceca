// Random fills on CUDA devices, in builds without CUDA: a clear error.
#include "core/random_detail.hpp"
#include "samebits/errors.hpp"

namespace samebits::detail {

void cuda_fill_random(const TensorView&, const RandomFill&) {
  throw BackendUnavailable("random fill on a CUDA tensor: this samebits was built without CUDA");
}

} // namespace samebits::detail
