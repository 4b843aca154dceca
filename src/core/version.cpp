// Build identity.
#include "core/backends.hpp"
#include "samebits/samebits.hpp"

namespace samebits {

namespace detail {
const char* build_git_revision(); // generated at build time: cmake/git_revision.cmake
}

std::string_view version() {
  return SAMEBITS_VERSION;
}
std::string_view git_revision() {
  return detail::build_git_revision();
}
bool cuda_built() {
#if defined(SAMEBITS_HAS_CUDA)
  return true;
#else
  return false;
#endif
}
bool cuda_available() {
  return detail::cuda_device_count() > 0;
}

} // namespace samebits
