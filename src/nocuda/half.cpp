// Stand-in for the CUDA dtype conversion kernel in builds without CUDA.
#include "core/convert.hpp"
#include "samebits/errors.hpp"

namespace samebits::detail {

void cuda_convert_contiguous(const TensorView&, const TensorView&, Stream) {
  throw BackendUnavailable("this samebits was built without CUDA: no conversion on cuda devices");
}

} // namespace samebits::detail
