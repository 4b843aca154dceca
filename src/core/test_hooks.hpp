// Functions that exist for samebits' own tests (tests/testing.hpp lists the internal headers tests
// may include); not part of the public API.
#pragma once
#include "samebits/stream.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits {

// Forgets which ops have warned, so that warn-only mode warns again.
void reset_warnings();

// How many sorts ran in the CUDA short-index entry that `index` would use with `num_keys` targets
// on `stream` (src/cuda/plan_cache.cu; CUDA builds only; waits for the stream); -1 when there is
// none. Equal contents must not sort again.
std::int64_t short_index_sorts(const TensorView& index, std::int64_t num_keys, Stream stream = {});

} // namespace samebits
