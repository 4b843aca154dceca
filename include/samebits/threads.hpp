// The CPU backend's fixed-size thread pool. Deterministic variants give the same bits for every
// thread count; the not_guaranteed ones do not.
#pragma once

namespace samebits {

// Number of threads CPU ops use (default: hardware concurrency, or SAMEBITS_NUM_THREADS).
int num_threads();
// Sets the thread count (>= 1). Takes effect for the next op; not to be called while ops run.
void set_num_threads(int n);

}  // namespace samebits
