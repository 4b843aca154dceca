// Fuzzes the trace reader (trace::read) and what `samebits diff` does with what it read (diff of
// the trace with itself, its text and its SVG). Malformed input must be refused with a samebits
// error; any other exception, a crash or a sanitizer report is a finding.
#include "fuzz_common.hpp"
#include "samebits/errors.hpp"
#include "samebits/trace.hpp"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const auto path = fuzz::scratch_dir() / "trace.jsonl";
  fuzz::write_file(path, reinterpret_cast<const char*>(data), size);
  try {
    const trace::TraceFile t = trace::read(path.string());
    const trace::DiffReport r = trace::diff(t, t);
    (void)trace::format_diff(r);
    (void)trace::diff_svg(r);
  } catch (const Error&) {
  }
  return 0;
}
