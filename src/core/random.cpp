// The process's generators, random fills on the CPU (CUDA in src/cuda/rng.cu) and shuffles.
#include "samebits/random.hpp"

#include "core/random_detail.hpp"
#include "core/strided.hpp"
#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <memory>

namespace samebits {

namespace {

struct Generators {
  std::mutex m;
  std::uint64_t seed = kDefaultSeed;
  std::map<std::pair<int, int>, std::unique_ptr<Generator>> by_device;
};

Generators& generators() {
  static auto* g = new Generators; // never destroyed: generators may be used at exit
  return *g;
}

constexpr std::int64_t kChunk = 1 << 16; // elements per CPU task

void fill_host_contiguous(const TensorView& out, const detail::RandomFill& f) {
  const std::int64_t n = out.numel();
  detail::visit_dtype(out.dtype, [&]<class T>() {
    T* p = static_cast<T*>(out.data);
    const std::int64_t tasks = (n + kChunk - 1) / kChunk;
    auto body = [&](std::int64_t t) {
      const std::int64_t end = std::min(n, (t + 1) * kChunk);
      for (std::int64_t i = t * kChunk; i < end; ++i)
        p[i] = detail::random_value<T>(f, f.offset + static_cast<std::uint64_t>(i));
    };
    if (tasks <= 1) {
      if (tasks == 1)
        body(0);
    } else {
      detail::parallel_for(tasks, body);
    }
  });
}

// Element i (row-major) of `out` gets index f.offset + i, whatever out's strides and device.
void fill(const TensorView& out, const detail::RandomFill& f) {
  if (out.numel() == 0)
    return;
  if (out.is_contiguous()) {
    if (out.device.is_cpu())
      fill_host_contiguous(out, f);
    else
      detail::cuda_fill_random(out, f);
    return;
  }
  Tensor tmp = Tensor::empty(out.sizes(), out.dtype, out.device);
  fill(tmp.view(), f);
  copy(tmp.view(), out);
}

void require_float(const TensorView& out, const char* what) {
  if (!is_floating(out.dtype))
    throw InvalidArgument(
        fmt::format("{}: expected a float32 or float64 tensor, got {}", what, out.describe()));
}

// Words a fill of `n` elements of this kind consumes, for generator reservations.
std::uint64_t words_for(detail::RandomKind kind, DType dtype, std::int64_t n) {
  const auto u = static_cast<std::uint64_t>(n);
  switch (kind) {
  case detail::RandomKind::uniform:
    return dtype == DType::f64 ? 2 * u : u;
  case detail::RandomKind::integers:
    return 4 * u;
  default:
    return u;
  }
}
// The element offset that corresponds to a word offset (a multiple of 4).
std::uint64_t element_offset(detail::RandomKind kind, DType dtype, std::uint64_t word) {
  switch (kind) {
  case detail::RandomKind::uniform:
    return dtype == DType::f64 ? word / 2 : word;
  case detail::RandomKind::integers:
    return word / 4;
  default:
    return word;
  }
}

void fill_from(const TensorView& out, detail::RandomFill f, Generator* gen) {
  Generator& g = gen != nullptr ? *gen : default_generator(out.device);
  const Generator::State st = g.reserve_words(words_for(f.kind, out.dtype, out.numel()));
  f.seed = st.seed;
  f.stream = st.stream;
  f.offset = element_offset(f.kind, out.dtype, st.offset);
  fill(out, f);
}

detail::RandomFill make_uniform(const TensorView& out) {
  require_float(out, "uniform");
  return {.kind = detail::RandomKind::uniform};
}
detail::RandomFill make_normal(const TensorView& out, double mean, double stddev) {
  require_float(out, "normal");
  return {.kind = detail::RandomKind::normal, .mean = mean, .stddev = stddev};
}
detail::RandomFill make_bernoulli(double p) {
  if (!(p >= 0.0 && p <= 1.0))
    throw InvalidArgument(fmt::format("bernoulli: p = {} is not in [0, 1]", p));
  return {.kind = detail::RandomKind::bernoulli, .p = static_cast<float>(p)};
}
detail::RandomFill make_integers(const TensorView& out, std::int64_t lo, std::int64_t hi) {
  if (!is_integer(out.dtype))
    throw InvalidArgument(
        fmt::format("integers: expected an int32 or int64 tensor, got {}", out.describe()));
  if (hi <= lo)
    throw InvalidArgument(fmt::format("integers: empty range [{}, {})", lo, hi));
  if (out.dtype == DType::i32 && (lo < INT32_MIN || hi - 1 > INT32_MAX))
    throw InvalidArgument(fmt::format("integers: range [{}, {}) does not fit int32", lo, hi));
  return {.kind = detail::RandomKind::integers,
          .lo = lo,
          .range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo)};
}

} // namespace

// --- generators ---------------------------------------------------------------------------------

void Generator::manual_seed(std::uint64_t seed) {
  std::lock_guard lock(m_);
  state_.seed = seed;
  state_.offset = 0;
}

Generator::State Generator::state() const {
  std::lock_guard lock(m_);
  return state_;
}

void Generator::set_state(const State& s) {
  if (s.offset % 4 != 0)
    throw InvalidArgument(
        fmt::format("Generator::set_state: offset {} is not a whole block", s.offset));
  std::lock_guard lock(m_);
  state_ = s;
}

Generator::State Generator::reserve_words(std::uint64_t words) {
  std::lock_guard lock(m_);
  const State first = state_;
  state_.offset += (words + 3) / 4 * 4;
  return first;
}

Generator& default_generator(Device device) {
  auto& g = generators();
  std::lock_guard lock(g.m);
  const std::pair<int, int> key{static_cast<int>(device.type), device.is_cpu() ? 0 : device.index};
  auto& slot = g.by_device[key];
  if (!slot)
    slot = std::make_unique<Generator>(g.seed);
  return *slot;
}

void manual_seed(std::uint64_t seed) {
  auto& g = generators();
  std::lock_guard lock(g.m);
  g.seed = seed;
  for (auto& [key, gen] : g.by_device)
    gen->set_state({seed, 0, 0});
}

std::uint64_t initial_seed() {
  auto& g = generators();
  std::lock_guard lock(g.m);
  return g.seed;
}

// --- pure fills ----------------------------------------------------------------------------------

void fill_uniform(const TensorView& out, std::uint64_t seed, std::uint64_t stream,
                  std::uint64_t offset) {
  auto f = make_uniform(out);
  f.seed = seed, f.stream = stream, f.offset = offset;
  fill(out, f);
}

void fill_normal(const TensorView& out, std::uint64_t seed, std::uint64_t stream,
                 std::uint64_t offset, double mean, double stddev) {
  auto f = make_normal(out, mean, stddev);
  f.seed = seed, f.stream = stream, f.offset = offset;
  fill(out, f);
}

void fill_bernoulli(const TensorView& out, double p, std::uint64_t seed, std::uint64_t stream,
                    std::uint64_t offset) {
  auto f = make_bernoulli(p);
  f.seed = seed, f.stream = stream, f.offset = offset;
  fill(out, f);
}

void fill_integers(const TensorView& out, std::int64_t lo, std::int64_t hi, std::uint64_t seed,
                   std::uint64_t stream, std::uint64_t offset) {
  auto f = make_integers(out, lo, hi);
  f.seed = seed, f.stream = stream, f.offset = offset;
  fill(out, f);
}

// --- generator fills -----------------------------------------------------------------------------

void uniform_(const TensorView& out, Generator* gen) {
  fill_from(out, make_uniform(out), gen);
}
void normal_(const TensorView& out, double mean, double stddev, Generator* gen) {
  fill_from(out, make_normal(out, mean, stddev), gen);
}
void bernoulli_(const TensorView& out, double p, Generator* gen) {
  fill_from(out, make_bernoulli(p), gen);
}
void integers_(const TensorView& out, std::int64_t lo, std::int64_t hi, Generator* gen) {
  fill_from(out, make_integers(out, lo, hi), gen);
}

// --- shuffles ------------------------------------------------------------------------------------

std::vector<std::int64_t> randperm(std::int64_t n, std::uint64_t seed, std::uint64_t stream) {
  if (n < 0)
    throw InvalidArgument(fmt::format("randperm: negative size {}", n));
  struct Keyed {
    std::uint64_t key;
    std::int64_t index;
  };
  std::vector<Keyed> keyed(static_cast<std::size_t>(n));
  const std::int64_t tasks = (n + kChunk - 1) / kChunk;
  auto body = [&](std::int64_t t) {
    const std::int64_t end = std::min(n, (t + 1) * kChunk);
    for (std::int64_t i = t * kChunk; i < end; ++i)
      keyed[static_cast<std::size_t>(i)] = {
          rng::shuffle_key(seed, stream, static_cast<std::uint64_t>(i)), i};
  };
  if (tasks > 1)
    detail::parallel_for(tasks, body);
  else if (tasks == 1)
    body(0);
  // (key, index) pairs are distinct, so any correct sort gives this one order.
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return a.key != b.key ? a.key < b.key : a.index < b.index;
  });
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < perm.size(); ++i)
    perm[i] = keyed[i].index;
  return perm;
}

} // namespace samebits
