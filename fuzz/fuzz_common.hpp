// Shared by the fuzzers: a scratch directory of this process (the readers take paths), and the
// rule that a reader may refuse its input only with samebits' own errors.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace samebits::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "samebits_fuzz_XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    return std::filesystem::path(t);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, const char* data, std::size_t n) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(n));
}

} // namespace samebits::fuzz
