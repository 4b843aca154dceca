// Files written whole or not at all.
#include "samebits/util/files.hpp"

#include "samebits/errors.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

namespace samebits::detail {

void write_whole_file(const std::string& path, std::string_view text, std::string_view what) {
  if (path.empty())
    throw Error(fmt::format("{}: the file name is empty", what));
  const std::string temp = partial_path(path);
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr)
    throw Error(fmt::format("{}: cannot write '{}': {}", what, path, std::strerror(errno)));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    std::remove(temp.c_str());
    throw Error(fmt::format("{}: cannot write '{}': {}", what, path,
                            std::strerror(written ? errno : write_errno)));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(temp.c_str());
    throw Error(fmt::format("{}: cannot replace '{}': {}", what, path, std::strerror(e)));
  }
}

void check_writable(const std::string& path, std::string_view what) {
  if (path.empty())
    return;
  const std::string temp = partial_path(path);
  std::FILE* f = std::fopen(temp.c_str(), "ab");
  if (f == nullptr)
    throw Error(fmt::format("{}: cannot write '{}': {}", what, path, std::strerror(errno)));
  std::fclose(f);
  std::remove(temp.c_str());
}

} // namespace samebits::detail
