// Random tensors and the process's generators, built on the counter-based Philox of rng.hpp.
//
// Every fill is a pure function of (seed, stream, offset): element i of `out` (row-major order)
// takes index offset + i of the distribution's stream, so the bits do not depend on the device,
// the thread count or the launch configuration. CPU and CUDA fills are bitwise equal.
//
// Index -> Philox words, per distribution (see rng.hpp):
//   uniform float32, bernoulli, normal: one word per element (normal: Box-Muller on word pairs)
//   uniform float64: two words per element
//   integers: one block (four words) per element, plus rare rejection retries
// Normal float64 tensors hold the float32 normal draws converted exactly.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/rng.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <mutex>
#include <vector>

namespace samebits {

// The seed every generator starts from until manual_seed is called.
constexpr std::uint64_t kDefaultSeed = 0x5a3eb175u;

// A position in a Philox stream: (seed, stream) plus the next unused word offset. Draws reserve
// words and advance the offset, so successive draws never overlap. Thread-safe.
class Generator {
public:
  struct State {
    std::uint64_t seed = kDefaultSeed;
    std::uint64_t stream = 0;
    std::uint64_t offset = 0; // in 32-bit words; always a multiple of 4 (a whole block)
    friend bool operator==(const State&, const State&) = default;
  };

  explicit Generator(std::uint64_t seed = kDefaultSeed, std::uint64_t stream = 0)
      : state_{seed, stream, 0} {}
  Generator(const Generator& other) : state_(other.state()) {}
  Generator& operator=(const Generator& other) {
    set_state(other.state());
    return *this;
  }

  // Restarts at offset 0 of (seed, stream()).
  void manual_seed(std::uint64_t seed);
  State state() const;
  void set_state(const State& s);
  // Reserves `words` 32-bit words (rounded up to whole blocks); returns the state they start at
  // (seed, stream and first word offset, read under the same lock as the reservation, so a
  // manual_seed or set_state from another thread cannot fall between the two).
  State reserve_words(std::uint64_t words);

private:
  mutable std::mutex m_;
  State state_;
};

// The generator of a device (one per CPU and per CUDA device). All start from the same seed and
// stream, so the same sequence of draws gives the same bits on the CPU and on any GPU.
Generator& default_generator(Device device = Device::cpu());
// Seeds the generators of the CPU and of every CUDA device (offsets back to 0), including those
// created later.
void manual_seed(std::uint64_t seed);
// The seed of the last manual_seed (kDefaultSeed before any).
std::uint64_t initial_seed();

// --- fills as pure functions of (seed, stream, offset) -----------------------------------------
// `out` may live on any device and have any strides. Offsets are in the distribution's own index
// (element) units, as described at the top.

// Uniform in [0, 1) (float32/float64).
void fill_uniform(const TensorView& out, std::uint64_t seed, std::uint64_t stream,
                  std::uint64_t offset = 0);
// mean + stddev * N(0, 1) (float32/float64): the product and the sum are rounded once each.
void fill_normal(const TensorView& out, std::uint64_t seed, std::uint64_t stream,
                 std::uint64_t offset = 0, double mean = 0.0, double stddev = 1.0);
// 1 with probability p, else 0 (any dtype).
void fill_bernoulli(const TensorView& out, double p, std::uint64_t seed, std::uint64_t stream,
                    std::uint64_t offset = 0);
// Integers uniform in [lo, hi) without modulo bias (int32/int64; hi > lo).
void fill_integers(const TensorView& out, std::int64_t lo, std::int64_t hi, std::uint64_t seed,
                   std::uint64_t stream, std::uint64_t offset = 0);

// --- fills that draw from a generator (nullptr: the default generator of out's device) ---------
void uniform_(const TensorView& out, Generator* gen = nullptr);
void normal_(const TensorView& out, double mean = 0.0, double stddev = 1.0,
             Generator* gen = nullptr);
void bernoulli_(const TensorView& out, double p, Generator* gen = nullptr);
void integers_(const TensorView& out, std::int64_t lo, std::int64_t hi, Generator* gen = nullptr);

// --- shuffles ----------------------------------------------------------------------------------

// A uniformly random permutation of [0, n) for (seed, stream): positions sorted by
// (rng::shuffle_key(seed, stream, i), i). The same on any thread count (keys are computed in
// parallel, the order they define is total). CPU only.
std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed, std::uint64_t stream = 0);
// Shuffles `items` in place by randperm(items.size(), seed, stream): item k moves to position
// p where perm[p] = k.
template <class T>
void shuffle(std::vector<T>& items, std::uint64_t seed, std::uint64_t stream = 0) {
  const auto perm = randperm(static_cast<std::int64_t>(items.size()), seed, stream);
  std::vector<T> out;
  out.reserve(items.size());
  for (const auto k : perm)
    out.push_back(std::move(items[static_cast<std::size_t>(k)]));
  items = std::move(out);
}

} // namespace samebits
