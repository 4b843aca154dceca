// Output files by the rule of files.hpp: replaced atomically, followed through links, written in
// place when they are devices, FIFOs or the standard streams, refused when they cannot be files.
#include "samebits/util/files.hpp"

#include "samebits/errors.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace samebits::detail {

namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool same_file(const struct stat& a, int fd) {
  struct stat b {};
  return ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// `what` may be empty (the command line's checks, where CLI11 names the option).
[[noreturn]] void refuse(std::string_view what, const std::string& path, const std::string& why) {
  throw InvalidArgument(fmt::format("{}{}'{}' {}", what, what.empty() ? "" : ": ", path, why));
}

// Follows `path` through its symbolic links to what it names (which need not exist).
std::string follow_links(const std::string& path, std::string_view what) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return p;
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 2);
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
    if (n < 0)
      throw Error(fmt::format("{}: cannot read the link '{}': {}", what, p, std::strerror(errno)));
    const std::string to(buf.data(), static_cast<std::size_t>(n));
    p = to.starts_with('/') ? to : directory_of(p) + "/" + to;
  }
  refuse(what, path, "is a chain of more than 40 symbolic links");
}

} // namespace

OutputTarget resolve_output(const std::string& path, std::string_view what) {
  if (path.empty())
    throw InvalidArgument(fmt::format("{}{}the file name is empty (give a file, or - for the "
                                      "standard output)",
                                      what, what.empty() ? "" : ": "));
  if (path == "-")
    return {OutputTarget::Kind::standard_stream, path, 1};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // Another name of a standard stream (/dev/stdout, /dev/fd/2, the file stdout goes to): write
    // to the stream, so that what the shell reads or redirects is not replaced under it.
    for (int fd : {1, 2})
      if (same_file(st, fd))
        return {OutputTarget::Kind::standard_stream, path, fd};
    if (S_ISDIR(st.st_mode))
      refuse(what, path, "is a directory: give a file name");
    if (!S_ISREG(st.st_mode))
      return {OutputTarget::Kind::in_place, path, -1};
  }
  const std::string target = follow_links(path, what);
  if (::stat(target.c_str(), &st) != 0) {
    if (errno != ENOENT)
      refuse(what, path, std::strerror(errno));
    const std::string dir = directory_of(target);
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
      refuse(what, path,
             fmt::format("cannot be written: the directory '{}' does not exist (create it first, "
                         "e.g. mkdir -p {})",
                         dir, dir));
  }
  return {OutputTarget::Kind::replace, target, -1};
}

void check_writable(const std::string& path, std::string_view what) {
  if (path.empty())
    return; // an output option not given
  const OutputTarget t = resolve_output(path, what);
  switch (t.kind) {
  case OutputTarget::Kind::standard_stream:
    return;
  case OutputTarget::Kind::in_place:
    // Not opened: opening a FIFO for writing waits for a reader.
    if (::access(t.path.c_str(), W_OK) != 0)
      refuse(what, path, fmt::format("cannot be written: {}", std::strerror(errno)));
    return;
  case OutputTarget::Kind::replace:
    break;
  }
  if (::access(t.path.c_str(), F_OK) == 0 && ::access(t.path.c_str(), W_OK) != 0)
    refuse(what, path, fmt::format("cannot be written: {}", std::strerror(errno)));
  const std::string temp = partial_path(t.path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    refuse(what, path, fmt::format("cannot be written ('{}': {})", temp, std::strerror(errno)));
  ::close(fd);
  ::unlink(temp.c_str());
}

OutputFile::OutputFile(const std::string& path, std::string_view what)
    : path_(path), what_(what), target_(resolve_output(path, what)) {
  switch (target_.kind) {
  case OutputTarget::Kind::standard_stream:
    file_ = target_.fd == 1 ? stdout : stderr;
    std::fflush(file_);
    return;
  case OutputTarget::Kind::in_place: {
    const int fd = ::open(target_.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || (file_ = ::fdopen(fd, "w")) == nullptr) {
      const int e = errno;
      if (fd >= 0)
        ::close(fd);
      throw Error(fmt::format("{}: cannot write '{}': {}", what_, path_, std::strerror(e)));
    }
    return;
  }
  case OutputTarget::Kind::replace:
    break;
  }
  // The new file keeps the permissions of the one it replaces.
  struct stat st {};
  const bool existed = ::stat(target_.path.c_str(), &st) == 0;
  const std::string temp = partial_path(target_.path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error(fmt::format("{}: cannot write '{}': {}", what_, temp, std::strerror(errno)));
  if (existed)
    (void)::fchmod(fd, st.st_mode & 07777);
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const int e = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw Error(fmt::format("{}: cannot write '{}': {}", what_, temp, std::strerror(e)));
  }
}

OutputFile::~OutputFile() {
  abandon();
}

std::string OutputFile::where() const {
  return target_.kind == OutputTarget::Kind::replace ? partial_path(target_.path) : target_.path;
}

void OutputFile::write(std::string_view text) {
  if (file_ == nullptr || failed_)
    return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    failed_ = true;
    error_ = errno;
  }
}

void OutputFile::flush() {
  if (file_ != nullptr && !failed_ && std::fflush(file_) != 0) {
    failed_ = true;
    error_ = errno;
  }
}

void OutputFile::commit() {
  if (file_ == nullptr)
    throw Error(fmt::format("{}: '{}' was already closed", what_, path_));
  flush();
  bool ok = !failed_;
  int e = error_;
  if (target_.kind == OutputTarget::Kind::standard_stream) {
    file_ = nullptr; // the stream stays open
  } else {
    if (ok && target_.kind == OutputTarget::Kind::replace && ::fsync(::fileno(file_)) != 0)
      ok = false, e = errno;
    const bool closed = std::fclose(file_) == 0;
    if (ok && !closed)
      ok = false, e = errno;
    file_ = nullptr;
  }
  const std::string temp = partial_path(target_.path);
  if (!ok) {
    if (target_.kind == OutputTarget::Kind::replace)
      ::unlink(temp.c_str());
    throw Error(fmt::format("{}: cannot write '{}': {}", what_, path_, std::strerror(e)));
  }
  if (target_.kind == OutputTarget::Kind::replace &&
      std::rename(temp.c_str(), target_.path.c_str()) != 0) {
    e = errno;
    ::unlink(temp.c_str());
    throw Error(fmt::format("{}: cannot replace '{}': {}", what_, target_.path, std::strerror(e)));
  }
}

void OutputFile::abandon(bool keep_partial) noexcept {
  if (file_ == nullptr)
    return;
  if (target_.kind == OutputTarget::Kind::standard_stream) {
    std::fflush(file_);
  } else {
    std::fclose(file_);
    if (target_.kind == OutputTarget::Kind::replace && !keep_partial)
      ::unlink(partial_path(target_.path).c_str());
  }
  file_ = nullptr;
}

void write_whole_file(const std::string& path, std::string_view text, std::string_view what) {
  OutputFile f(path, what);
  f.write(text);
  f.commit();
}

} // namespace samebits::detail
