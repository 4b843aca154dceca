// Fuzzes the tolerance reader (tolerances_from_json). Malformed input must be refused with a
// samebits error. What it accepts must survive a round trip: to_json of what was read, read again,
// gives the same JSON (else abort: a finding).
#include "samebits/errors.hpp"
#include "samebits/tolerance.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Tolerances t;
  try {
    t = tolerances_from_json(text);
  } catch (const Error&) {
    return 0;
  }
  const std::string once = to_json(t);
  std::string twice;
  try {
    twice = to_json(tolerances_from_json(once));
  } catch (const Error& e) {
    std::fprintf(stderr, "what to_json wrote does not read back: %s\n%s\n", e.what(), once.c_str());
    std::abort();
  }
  if (once != twice) {
    std::fprintf(stderr, "round trip changed the tolerances:\n%s\n%s\n", once.c_str(),
                 twice.c_str());
    std::abort();
  }
  return 0;
}
