// The CPU backend's fixed-size thread pool. Deterministic variants give the same bits for every
// thread count; the not_guaranteed ones do not. Every thread of an op runs under the calling
// thread's floating-point mode (flush-to-zero, denormals-are-zero, rounding), so which thread
// computes which part never changes the result.
#pragma once
#include <cstdint>
#include <functional>

namespace samebits {

// Number of threads CPU ops use: SAMEBITS_NUM_THREADS when set, else the hardware's thread count
// (at most 1024). The pool starts on first use; a SAMEBITS_NUM_THREADS that is not a whole number
// in [1, 1024] makes that first use (this call, or any CPU op) throw InvalidArgument, unless
// set_num_threads came first.
int num_threads();
// Sets the thread count, in [1, 1024] (InvalidArgument otherwise); called first, it overrides
// SAMEBITS_NUM_THREADS. Takes effect for the next op: called while an op runs on another thread,
// it waits for that op's parallel part to finish. Not to be called from inside a task of
// parallel_for (it would wait for itself).
void set_num_threads(int n);

// Runs f(task) for every task in [0, ntasks) on the pool; the calling thread takes part. Which
// thread runs a task varies from call to call, so a deterministic result must depend on each
// task's work alone, never on the thread or the order. The first exception a task throws is
// rethrown here once all tasks have stopped. For kernels written outside samebits (the
// GraphSAGE model's); samebits ops call it themselves.
void parallel_for(std::int64_t ntasks, const std::function<void(std::int64_t task)>& f);

} // namespace samebits
