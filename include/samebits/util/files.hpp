// Files samebits writes in one piece (tolerance files, reports, the command-line program's JSON
// and charts): whole or not at all.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include <string>
#include <string_view>

namespace samebits::detail {

// Where a file is written until it is complete (also a trace being recorded, see trace.hpp).
inline std::string partial_path(const std::string& path) {
  return path + ".partial";
}

// Writes `text` to `path` through `path`.partial, which replaces `path` only once it is complete:
// a failed write (a missing directory, a full disk) throws Error naming `what` and the path, and
// leaves whatever was at `path` untouched.
void write_whole_file(const std::string& path, std::string_view text, std::string_view what);
// Checks before the work starts that `path` can be written (creates and removes its temporary
// file); throws Error naming `what` and the path otherwise. Empty paths are not checked.
void check_writable(const std::string& path, std::string_view what);

} // namespace samebits::detail
