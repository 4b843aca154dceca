// Fuzzes the graph reader (nn::load_dataset: nodes.tsv and edges.tsv). The input holds both files,
// nodes.tsv before the first NUL byte and edges.tsv after it (no NUL: edges.tsv is empty). A
// malformed file must be refused with DataError (or another samebits::Error); any other
// exception, a crash or a sanitizer report is a finding.
#include "fuzz_common.hpp"
#include "nn/cora.hpp"
#include "samebits/errors.hpp"

#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const auto* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(text, '\0', size);
  const std::size_t nodes =
      nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - text) : size;
  const auto& dir = fuzz::scratch_dir();
  fuzz::write_file(dir / "nodes.tsv", text, nodes);
  fuzz::write_file(dir / "edges.tsv", text + std::min(size, nodes + 1),
                   size - std::min(size, nodes + 1));
  try {
    const nn::Dataset d = nn::load_dataset(dir);
    (void)d.in_neighbours(); // what training builds next from what was read
    (void)d.class_counts();
  } catch (const Error&) {
  }
  return 0;
}
