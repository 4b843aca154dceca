// Build identity.
#include "core/backends.hpp"
#include "samebits/samebits.hpp"

namespace samebits {

std::string_view version() { return SAMEBITS_VERSION; }
std::string_view git_revision() { return SAMEBITS_GIT_REVISION; }
bool cuda_available() { return detail::cuda_device_count() > 0; }

}  // namespace samebits
