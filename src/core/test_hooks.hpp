// Functions that exist for samebits' own tests (tests/testing.hpp lists the internal headers tests
// may include); not part of the public API.
#pragma once

namespace samebits {

// Forgets which ops have warned, so that warn-only mode warns again.
void reset_warnings();

} // namespace samebits
