// Files samebits writes (tolerance files, reports, traces, the command-line program's JSON and
// charts), and the one rule every output path follows:
//   - a regular file or a new name is replaced atomically: written to NAME.partial beside it and
//     renamed over it once complete (a failed write leaves what was there untouched);
//   - a symbolic link is followed (every link of a chain) and the file it names is replaced so,
//     in that file's directory: the link stays a link;
//   - a device, a FIFO or a socket is opened and written in place, never replaced;
//   - "-", and any name of the process's standard output or error (/dev/stdout, /dev/fd/1, a file
//     stdout is redirected to), is written to that stream, in place;
//   - an empty name, a directory, and a name whose directory does not exist are refused
//     (InvalidArgument: a usage error), as is a file that exists but may not be written.
// Missing directories are never created: the caller makes them (mkdir -p), so that a typo in a
// path is an error rather than a new directory.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace samebits::detail {

// Where a file is written until it is complete.
inline std::string partial_path(const std::string& path) {
  return path + ".partial";
}

// How an output path is written, by the rule above.
struct OutputTarget {
  enum class Kind { replace, in_place, standard_stream };
  Kind kind = Kind::replace;
  std::string path; // the file written: `path` given, after following its links
  int fd = -1;      // standard_stream: 1 or 2
};
// Resolves `path` by the rule; throws InvalidArgument naming `what` and the path for an empty
// name, a directory or a missing directory, and Error when the links cannot be followed.
OutputTarget resolve_output(const std::string& path, std::string_view what);

// Checks before the work starts that `path` can be written by the rule (for a file replaced:
// creates and removes its NAME.partial; for a device or FIFO: that it may be written, without
// opening it). Throws InvalidArgument naming `what` and the path otherwise. An empty path is an
// output option not given and is not checked (resolve_output refuses it).
void check_writable(const std::string& path, std::string_view what);

// A file being written by the rule. Destroyed without commit(), it removes its NAME.partial
// (abandon() can keep it instead).
class OutputFile {
public:
  // Resolves and opens `path`; throws Error (InvalidArgument for the refusals of resolve_output).
  OutputFile(const std::string& path, std::string_view what);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends `text`; a failure is remembered and reported by commit().
  void write(std::string_view text);
  void flush();
  // Completes the file: flushes it and, for a file replaced, renames NAME.partial over it. Throws
  // Error naming the path when anything written did not reach the file (a full disk, /dev/full).
  void commit();
  // Ends without completing: NAME.partial is removed, or kept when `keep_partial`.
  void abandon(bool keep_partial = false) noexcept;
  const std::string& path() const { return path_; }
  // Where the bytes go until commit(): NAME.partial, or the file or stream written in place.
  std::string where() const;

private:
  std::string path_, what_;
  OutputTarget target_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
  int error_ = 0;
};

// Writes `text` to `path` by the rule above, whole or not at all; throws Error naming `what` and
// the path when it cannot.
void write_whole_file(const std::string& path, std::string_view text, std::string_view what);

} // namespace samebits::detail
