// Shared test helpers.
#include "testing.hpp"

#include "core/strided.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace samebits::testing {

std::uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

TensorView expanded_index(const Tensor& vec, const Shape& shape) {
  TensorView v = vec.view();
  v.ndim = static_cast<int>(shape.size());
  for (int j = 0; j < v.ndim; ++j) {
    v.shape[static_cast<std::size_t>(j)] = shape[static_cast<std::size_t>(j)];
    v.strides[static_cast<std::size_t>(j)] = j == 0 ? vec.view().strides[0] : 0;
  }
  return v;
}

bool all_printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

bool case_in_shard(int c) {
  static const std::pair<int, int> shard = [] {
    const char* e = std::getenv("SAMEBITS_TEST_SHARD");
    int i = 0, n = 1;
    if (e != nullptr && (std::sscanf(e, "%d/%d", &i, &n) != 2 || n < 1 || i < 0 || i >= n))
      throw std::invalid_argument(
          std::string("SAMEBITS_TEST_SHARD must be i/n with 0 <= i < n, got ") + e);
    return std::pair{i, n};
  }();
  return c % shard.second == shard.first;
}

namespace {
struct WorkLimit {
  std::int64_t limit = -1; // none
  std::int64_t skipped = 0;
  WorkLimit() {
    const char* e = std::getenv("SAMEBITS_TEST_WORK_LIMIT");
    if (e == nullptr || *e == '\0')
      return;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (*end != '\0' || v < 0)
      throw std::invalid_argument(
          std::string("SAMEBITS_TEST_WORK_LIMIT must be a count of elements, got ") + e);
    limit = v;
  }
  ~WorkLimit() {
    if (skipped > 0)
      std::fprintf(stderr, "%lld case(s) above SAMEBITS_TEST_WORK_LIMIT=%lld left out\n",
                   static_cast<long long>(skipped), static_cast<long long>(limit));
  }
};
} // namespace

bool within_work_limit(std::int64_t work) {
  static WorkLimit w;
  if (w.limit < 0 || work <= w.limit)
    return true;
  ++w.skipped;
  return false;
}

namespace {
template <class Dist>
Tensor random_tensor(const Shape& shape, DType dtype, std::uint64_t seed, Device device,
                     Dist dist) {
  Tensor t = Tensor::empty(shape, dtype, Device::cpu());
  std::mt19937_64 gen(seed);
  detail::visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      p[i] = static_cast<T>(dist(gen));
  });
  return device.is_cpu() ? t : t.to(device);
}
} // namespace

Tensor random_normal(const Shape& shape, DType dtype, std::uint64_t seed, Device device) {
  return random_tensor(shape, dtype, seed, device, std::normal_distribution<double>());
}

Tensor random_uniform(const Shape& shape, DType dtype, double lo, double hi, std::uint64_t seed,
                      Device device) {
  return random_tensor(shape, dtype, seed, device, std::uniform_real_distribution<double>(lo, hi));
}

Tensor random_index(std::int64_t n, std::int64_t hi, DType dtype, std::uint64_t seed,
                    Device device) {
  Tensor t = Tensor::empty({n}, dtype, Device::cpu());
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> d(0, hi - 1);
  detail::visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(d(gen));
  });
  return device.is_cpu() ? t : t.to(device);
}

Tensor random_values(const Shape& shape, DType dtype, std::uint64_t seed) {
  if (is_floating(dtype))
    return random_normal(shape, dtype, seed);
  std::int64_t n = 1;
  for (auto v : shape)
    n *= v;
  return Tensor::copy_of(random_index(n, 1 << 30, dtype, seed).view().reshape(shape));
}

std::vector<double> to_doubles(const TensorView& t) {
  Tensor c = Tensor::copy_of(t, Device::cpu());
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  detail::visit_dtype(c.dtype(), [&]<class T>() {
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(c.data<T>()[i]);
  });
  return v;
}

double error_against_scale(const TensorView& out, const std::vector<double>& ref,
                           const std::vector<double>& scale) {
  const auto o = to_doubles(out);
  if (o.size() != ref.size() || o.size() != scale.size())
    return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (std::isnan(o[i]) && !std::isnan(ref[i]))
      return std::numeric_limits<double>::infinity();
    num += (o[i] - ref[i]) * (o[i] - ref[i]);
    den += scale[i] * scale[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

double relative_error(const TensorView& out, const std::vector<double>& ref) {
  return error_against_scale(out, ref, ref);
}

TensorView strided_copy(const Tensor& t, Tensor& keep) {
  if (t.ndim() == 0) {
    keep = t.clone();
    return keep.view();
  }
  Shape big = t.sizes();
  big.back() *= 2;
  // The gaps hold a poison value so that a kernel that reads them shows up in the results.
  keep = Tensor::full(big, is_floating(t.dtype()) ? std::nan("") : -7.0, t.dtype(), t.device());
  TensorView v = keep.view().slice(t.ndim() - 1, 0, big.back(), 2);
  copy(t.view(), v);
  return v;
}

} // namespace samebits::testing
