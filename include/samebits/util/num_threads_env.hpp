// The CPU thread count that the SAMEBITS_NUM_THREADS environment variable asks for.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include <optional>

namespace samebits::detail {

// The thread count in SAMEBITS_NUM_THREADS; nullopt when the variable is unset or empty. Throws
// InvalidArgument naming the variable and its value when the value is not a whole number in
// [1, 1024], the range set_num_threads() takes.
std::optional<int> num_threads_from_environment();

} // namespace samebits::detail
