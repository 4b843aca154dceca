// The sum64 content hash of trace entries and the one-pass digest of a host tensor that
// samebits.torch.trace records (see samebits/trace.hpp for both definitions).
#include "core/strided.hpp"
#include "core/sum_hash_terms.hpp"
#include "core/trace_device.hpp"
#include "core/trace_stats.hpp"
#include "cpu/thread_pool.hpp"
#include "samebits/errors.hpp"
#include "samebits/trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace samebits::trace {

namespace {

constexpr std::size_t kRow = detail::kSumHashRow; // m_i = A[i % kRow] * B[i / kRow]
constexpr std::size_t kTaskRows = 64;             // rows of words per task of the pool (2 MiB)

const std::array<std::uint64_t, kRow>& column_multipliers() {
  static const std::array<std::uint64_t, kRow> cols = [] {
    std::array<std::uint64_t, kRow> c{};
    for (std::size_t k = 0; k < kRow; ++k)
      c[k] = detail::column_multiplier(k);
    return c;
  }();
  return cols;
}

// The terms (w_i ^ m_i) * m_i of the whole words [begin, end) of one row, m_i = cols[i - base] *
// row. Written once and compiled three times below: for the baseline instruction set, with AVX2
// and with AVX-512 (DQ: 64-bit multiplies of 8 words at a time), chosen at run time. Integer
// arithmetic modulo 2^64 gives the same sum every way.
[[gnu::always_inline]] inline std::uint64_t row_terms(const unsigned char* bytes,
                                                      const std::uint64_t* cols, std::uint64_t row,
                                                      std::size_t base, std::size_t begin,
                                                      std::size_t end) {
  std::uint64_t h = 0;
  for (std::size_t i = begin; i < end; ++i) {
    std::uint64_t w;
    std::memcpy(&w, bytes + 8 * i, 8); // little-endian hosts only
    const std::uint64_t m = cols[i - base] * row;
    h += (w ^ m) * m;
  }
  return h;
}

using RowTerms = std::uint64_t (*)(const unsigned char*, const std::uint64_t*, std::uint64_t,
                                   std::size_t, std::size_t, std::size_t);

std::uint64_t row_terms_baseline(const unsigned char* bytes, const std::uint64_t* cols,
                                 std::uint64_t row, std::size_t base, std::size_t begin,
                                 std::size_t end) {
  return row_terms(bytes, cols, row, base, begin, end);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SAMEBITS_HASH_X86_BUILDS 1
__attribute__((target("avx512f,avx512dq"))) std::uint64_t
row_terms_avx512(const unsigned char* bytes, const std::uint64_t* cols, std::uint64_t row,
                 std::size_t base, std::size_t begin, std::size_t end) {
  return row_terms(bytes, cols, row, base, begin, end);
}

__attribute__((target("avx2"))) std::uint64_t row_terms_avx2(const unsigned char* bytes,
                                                             const std::uint64_t* cols,
                                                             std::uint64_t row, std::size_t base,
                                                             std::size_t begin, std::size_t end) {
  return row_terms(bytes, cols, row, base, begin, end);
}
#endif

RowTerms row_terms_for(detail::HashIsa isa) {
#ifdef SAMEBITS_HASH_X86_BUILDS
  static const bool has_avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  if (isa == detail::HashIsa::automatic && has_avx512)
    return row_terms_avx512;
  if ((isa == detail::HashIsa::automatic || isa == detail::HashIsa::avx2) && has_avx2)
    return row_terms_avx2;
#endif
  (void)isa;
  return row_terms_baseline;
}

// The hash's terms of words [first, last) of the row-major `bytes` (the word that holds their end
// is padded with zero bytes).
std::uint64_t hash_words(const unsigned char* bytes, std::size_t nbytes, std::size_t first,
                         std::size_t last, RowTerms terms) {
  const auto& cols = column_multipliers();
  const std::size_t whole = nbytes / 8; // words with no padding
  std::uint64_t h = 0;
  for (std::size_t r = first / kRow; r * kRow < last; ++r) {
    const std::uint64_t row = detail::row_multiplier(r);
    const std::size_t begin = std::max(first, r * kRow), end = std::min(last, (r + 1) * kRow);
    const std::size_t full = std::clamp(whole, begin, end);
    h += terms(bytes, cols.data(), row, r * kRow, begin, full);
    for (std::size_t i = full; i < end; ++i) { // the padded last word
      std::uint64_t w = 0;
      std::memcpy(&w, bytes + 8 * i, nbytes - 8 * i);
      const std::uint64_t m = cols[i - r * kRow] * row;
      h += (w ^ m) * m;
    }
  }
  return h;
}

// v is a host tensor; its row-major bytes, copied only when it is not contiguous.
struct HostBytes {
  Tensor copy;
  const unsigned char* data = nullptr;
  std::size_t size = 0;
};
HostBytes host_bytes(const TensorView& v) {
  if (!v.device.is_cpu())
    throw InvalidArgument("trace::digest: the tensor is on " + to_string(v.device) +
                          "; it takes host tensors");
  HostBytes b;
  if (v.is_contiguous()) {
    b.data = static_cast<const unsigned char*>(v.data);
  } else {
    b.copy = Tensor::copy_of(v, Device::cpu());
    b.data = static_cast<const unsigned char*>(b.copy.raw());
  }
  b.size = static_cast<std::size_t>(v.numel()) * size_of(v.dtype);
  return b;
}

} // namespace

namespace detail {

std::uint64_t sum_hash_bytes(const void* data, std::size_t nbytes, HashIsa isa) {
  const RowTerms terms = row_terms_for(isa);
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::size_t words = (nbytes + 7) / 8;
  const std::size_t per_task = kTaskRows * kRow;
  const auto tasks = static_cast<std::int64_t>((words + per_task - 1) / per_task);
  if (tasks <= 1)
    return hash_words(bytes, nbytes, 0, words, terms);
  // The sum is taken modulo 2^64, so the tasks' partial sums add up to the same value in any order.
  std::vector<std::uint64_t> parts(static_cast<std::size_t>(tasks));
  samebits::detail::parallel_for(tasks, [&](std::int64_t t) {
    const std::size_t first = static_cast<std::size_t>(t) * per_task;
    parts[static_cast<std::size_t>(t)] =
        hash_words(bytes, nbytes, first, std::min(words, first + per_task), terms);
  });
  std::uint64_t h = 0;
  for (std::uint64_t p : parts)
    h += p;
  return h;
}

} // namespace detail

std::uint64_t sum_hash_bytes(const void* data, std::size_t nbytes) {
  return detail::sum_hash_bytes(data, nbytes, detail::HashIsa::automatic);
}

std::uint64_t sum_hash(const TensorView& t) {
  if (!t.device.is_cpu()) {
    const Tensor host = Tensor::copy_of(t, Device::cpu());
    return sum_hash_bytes(host.raw(), host.nbytes());
  }
  const HostBytes b = host_bytes(t);
  return sum_hash_bytes(b.data, b.size);
}

Digest digest(const TensorView& t, std::int64_t stats_elements) {
  const HostBytes b = host_bytes(t);
  Digest d;
  d.sum_hash = sum_hash_bytes(b.data, b.size);
  const std::int64_t n = t.numel();
  if (stats_elements <= 0 || n == 0)
    return d;
  d.stride = (n + stats_elements - 1) / stats_elements;
  samebits::detail::visit_dtype(t.dtype, [&]<class T>() {
    detail::Moments m = detail::moments(reinterpret_cast<const T*>(b.data), n, d.stride);
    d.nan_count = m.nan_count;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const bool any_nan = d.nan_count > 0;
    d.min = any_nan ? nan : m.lo;
    d.max = any_nan ? nan : m.hi;
    d.sum = any_nan ? nan : m.sum;
    d.l2 = any_nan ? nan : std::sqrt(m.sq);
    d.samples = std::move(m.samples);
  });
  return d;
}

void digest_on_device(const TensorView& t, std::int64_t stats_elements, DeviceDigest* record,
                      Stream stream) {
  if (!t.device.is_cuda())
    throw InvalidArgument("trace::digest_on_device: the tensor is on " + to_string(t.device) +
                          "; it takes CUDA tensors (trace::digest takes host ones)");
  if (!t.is_contiguous())
    throw InvalidArgument("trace::digest_on_device: the tensor is not contiguous");
  if (record == nullptr)
    throw InvalidArgument("trace::digest_on_device: no record to write into");
  samebits::detail::cuda_trace_digest(t, std::max<std::int64_t>(stats_elements, 0), record, stream);
}

} // namespace samebits::trace
