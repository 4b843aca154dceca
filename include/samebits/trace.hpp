// Divergence tracing: a recorder that, when enabled, writes one line per op call (step, layer,
// op, dtype, shape, content hash of the output, min, max, mean, L2 norm, a few sampled values,
// and the recording thread's context label) to a streamed JSON-lines file; and the comparison of
// two such files (`samebits diff`).
//
// Overhead when disabled: one relaxed load of a global flag per call site. Wrap call sites as
//   if (samebits::trace::enabled()) samebits::trace::record(step, "conv1", "aggregate", out);
// or use SAMEBITS_TRACE(step, layer, op, out), which does exactly that.
//
// File format (one JSON object per line):
//   line 1: {"samebits_trace":1,"version":...,"git":...,"environment":{...}}
//   then:   {"i":0,"step":3,"layer":"conv1","op":"aggregate","dtype":"float32","shape":[2708,16],
//            "hash":"0123456789abcdef","sum_hash":"fedcba9876543210","min":-1.5,"max":2.25,
//            "mean":0.01,"l2":12.5,"nan":0,"samples":[...],
//            "context":"cuda not_guaranteed repeat run 2 of 3, seed 0"}
// "context" is present only while a trace::Context is alive on the recording thread.
// Two hashes: "hash" (XXH3 of dtype, shape and bytes, computed on the host) and "sum_hash" (see
// sum_hash(), which a device computes without copying the tensor to the host). Traces written
// from Python (samebits.torch.trace) carry only "sum_hash", plus "source" (file:line of the call),
// and optionally "caller" (the user's line when "source" is in a library) and "grad_fn"
// (backward ops); traces written before "sum_hash" existed carry only "hash". Entries are
// compared by every hash that both carry (see same_output()).
// Non-finite statistics are written as the strings "nan", "inf", "-inf". Statistics are computed
// in float64 in row-major order, so they are themselves reproducible.
#pragma once
#include "samebits/tensor.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace samebits::trace {

namespace detail {
inline std::atomic<bool> g_enabled{false};
// The instruction set of sum_hash_bytes' loop over whole words: `automatic` takes AVX-512 (DQ)
// where the CPU has it, else AVX2, else the baseline; `avx2` at most AVX2 (where the CPU has it);
// `baseline` the x86-64 baseline (or the portable C++ elsewhere). The same value in every case;
// the tests run each.
enum class HashIsa : std::uint8_t { automatic, avx2, baseline };
std::uint64_t sum_hash_bytes(const void* data, std::size_t nbytes, HashIsa isa);
} // namespace detail

// True while a trace is being recorded.
inline bool enabled() noexcept {
  return detail::g_enabled.load(std::memory_order_relaxed);
}

// Starts recording to `path` (by the output rule of src/core/files.hpp: a device, FIFO or
// standard stream is written in place, a link is followed). The entries go to `path`.partial,
// which replaces `path` when the recording stops, so a run that fails never leaves a cut-short
// trace under `path` (nor overwrites an earlier one there). Throws Error if the file cannot be
// opened or a trace is already being recorded.
void start(const std::string& path);
// Stops recording; `path`.partial becomes `path`. Does nothing if no trace is running.
void stop();
// Stops recording without replacing `path`: what was recorded stays in `path`.partial.
void abandon();
// Appends one entry (thread-safe; entries are numbered in the order calls reach the recorder).
// Copies `out` to the host to compute the statistics. Does nothing when disabled.
void record(std::int64_t step, std::string_view layer, std::string_view op, const TensorView& out);

// Records for its lifetime; left by an exception, it abandons the recording (see abandon()).
class Session {
public:
  explicit Session(const std::string& path) : pending_(std::uncaught_exceptions()) { start(path); }
  ~Session() noexcept(false) {
    if (std::uncaught_exceptions() > pending_)
      abandon();
    else
      stop();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

private:
  int pending_;
};

// Labels the entries that this thread records during its lifetime ("context" in the file), so
// that a trace holding several runs says which run an entry belongs to. Contexts nest: the
// innermost one labels, and the enclosing one is back when it ends. Costs nothing while no trace
// is being recorded beyond keeping the label.
//   for (int run = 1; run <= runs; ++run) {
//     samebits::trace::Context ctx(fmt::format("run {}", run));
//     train(...);
//   }
class Context {
public:
  explicit Context(std::string label);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

private:
  std::string previous_;
};
// The label of the innermost live Context on this thread; empty when there is none.
const std::string& current_context() noexcept;

// The "sum64" content hash: the tensor's bytes in row-major order, read as little-endian 64-bit
// words w_i (two float32 values a word; the last word padded with zero bytes), and
//   sum over i of (w_i XOR m_i) * m_i   (mod 2^64),   m_i = A[i % 4096] * B[i / 4096]
// with A[k] = splitmix64(2k) | 1 and B[j] = splitmix64(2j + 1) | 1 (splitmix64(x) is the
// finalizer of x + 0x9E3779B97F4A7C15). Integer addition is associative, so a GPU computes the
// same value in any reduction order; each term is a bijection of its word (m_i is odd), so
// changing any one word changes the hash; the XOR keeps values with many trailing zero bits
// (0.5, 1.0) from leaving the low bits of the sum empty. The dtype and shape are not part of it
// (an entry records them). samebits.torch.trace computes it on a CUDA device in three
// elementwise passes over native 64-bit words, and on the CPU through digest() below. Long host
// inputs are shared among the CPU's threads (the sum is the same in any order).
std::uint64_t sum_hash(const TensorView& t);
// The sum64 hash of `nbytes` bytes of host memory.
std::uint64_t sum_hash_bytes(const void* data, std::size_t nbytes);

// Number of values sampled per entry, at positions floor(k * numel / kSamples), k = 0..7.
constexpr int kSamples = 8;

// What samebits.torch.trace records of one host tensor, in one call: the sum64 hash of all its
// bytes and, when stats_elements > 0, statistics of every `stride`-th element in row-major order
// (stride = ceil(numel / stats_elements)), in float64: min, max, sum, L2 norm and NaN count. A
// NaN among them makes min, max, sum and L2 NaN (as torch.aminmax and torch.sum have it; the
// C++ recorder's entries skip NaNs in min and max instead). `samples` holds the kSamples values
// at floor(k * numel / kSamples). Throws InvalidArgument for a tensor that is not on the host.
struct Digest {
  std::uint64_t sum_hash = 0;
  double min = 0, max = 0, sum = 0, l2 = 0;
  std::int64_t nan_count = 0;
  std::int64_t stride = 1;
  std::vector<double> samples;
};
Digest digest(const TensorView& t, std::int64_t stats_elements);

// digest() for a contiguous CUDA tensor, computed on its device in one launch on `stream`, with
// no host synchronization: the result is written into *record, device memory that the caller
// reads back when it likes (samebits.torch.trace keeps a ring of records and reads them in
// batches). The hash is the same value as digest()'s; the statistics follow the same rules (every
// stride-th element, float64, NaNs making min, max, sum and l2 NaN) but sum in a fixed tree
// rather than sequentially, so their last bits may differ from the host's, the same on every run.
// `record` must be zero-filled before its first use; each digest leaves the working words it uses
// as it found them, so one record can take any number of digests in turn (one at a time on one
// stream). Throws InvalidArgument for a tensor that is not on a CUDA device or not contiguous,
// BackendUnavailable in a build without CUDA.
constexpr int kDigestStatBlocks =
    32; // blocks that share the statistics: at most 2048 elements each
struct DeviceDigest {
  std::uint64_t sum_hash = 0;
  double min = 0, max = 0, sum = 0, l2 = 0;
  std::int64_t nan_count = 0, stride = 1, samples_taken = 0;
  double samples[kSamples] = {};
  // Working words (zero between digests): the hash's running sum, the blocks' ticket, and each
  // statistics block's partial results.
  std::uint64_t hash_acc = 0;
  std::uint64_t ticket = 0;
  double part_min[kDigestStatBlocks] = {}, part_max[kDigestStatBlocks] = {};
  double part_sum[kDigestStatBlocks] = {}, part_sq[kDigestStatBlocks] = {};
  std::int64_t part_nan[kDigestStatBlocks] = {};
};
void digest_on_device(const TensorView& t, std::int64_t stats_elements, DeviceDigest* record,
                      Stream stream = {});

// One recorded entry, as read back.
struct Entry {
  std::int64_t index = 0;
  std::int64_t step = 0;
  std::string layer, op, dtype;
  Shape shape;
  std::string hash;     // XXH3 ("hash"); empty when the trace has none (Python traces)
  std::string sum_hash; // sum64 ("sum_hash"); empty in traces written before it existed
  double min = 0, max = 0, mean = 0, l2 = 0;
  std::int64_t nan_count = 0;
  std::vector<double> samples;
  std::string context; // empty when recorded outside any Context
  std::string source;  // Python traces: "file:line" of the call; may be empty
  std::string caller;  // Python traces: the user's line when `source` lies in a library
  std::string grad_fn; // Python traces: the autograd node, for ops run by backward
};

// True when the two entries' outputs have the same content by every hash kind both record;
// false also when they share no hash kind (has_common_hash()).
bool same_output(const Entry& a, const Entry& b);
bool has_common_hash(const Entry& a, const Entry& b);

struct TraceFile {
  std::string header; // the first line, as written (JSON)
  std::vector<Entry> entries;
};
// Reads a trace; throws DataError naming the file and line on malformed input.
TraceFile read(const std::string& path);

} // namespace samebits::trace

// Records only when tracing is on; the arguments are not evaluated otherwise.
#define SAMEBITS_TRACE(step, layer, op, out)                                                       \
  do {                                                                                             \
    if (::samebits::trace::enabled())                                                              \
      ::samebits::trace::record((step), (layer), (op), (out));                                     \
  } while (0)
