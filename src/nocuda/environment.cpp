// The environment report's CUDA half in builds without CUDA.
#include "core/environment_cuda.hpp"

namespace samebits::detail {

void fill_cuda_environment(Environment& e) {
  e.cuda_compiled = false;
  e.cuda_error = "samebits was built without CUDA";
}

} // namespace samebits::detail
