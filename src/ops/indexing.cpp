// Public entry points of index_select and gather: validate shapes, dtypes, devices and (for CPU
// tensors) index values before anything is written, then dispatch.
#include "ops/indexing.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "ops/checks.hpp"
#include "samebits/ops/indexing.hpp"

#include <fmt/format.h>

namespace samebits {

using namespace detail;

namespace {

// Throws IndexOutOfRange naming the first position (row-major over index) whose value is
// outside [0, hi).
void check_index_values(const char* op, const TensorView& index, std::int64_t hi) {
  if (const auto bad = first_index_outside(index, hi))
    throw IndexOutOfRange(fmt::format("{}: index at position {} is {}, outside [0, {})", op,
                                      bad->first, bad->second, hi));
}

void check_common(const char* op, const TensorView& x, const TensorView& index,
                  const TensorView& out) {
  check_index_dtype(op, "index", index);
  check_same_dtype(op, x, out);
  check_same_device(op, {x, index, out});
  check_data(op, "x", x);
  check_data(op, "index", index);
  check_data(op, "out", out);
  check_output(op, "out", out, {{"x", x}, {"index", index}});
  if (x.ndim < 1)
    throw InvalidArgument(
        fmt::format("{}: x must have 1 to {} dims, got {}", op, kMaxDims, x.describe()));
}

} // namespace

void index_select(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
                  const Options& opts) {
  const char* op = "index_select";
  check_common(op, x, index, out);
  const int d = normalize_dim(op, dim, x.ndim);
  if (index.ndim > 1)
    throw InvalidArgument(fmt::format("{}: index must be 1-D, got {}", op, index.describe()));
  Shape expected = x.sizes();
  expected[static_cast<std::size_t>(d)] = index.numel();
  check_shape(op, "out", out, expected);
  const bool cpu = x.device.is_cpu();
  if (cpu)
    check_index_values(op, index, x.size(d));
  dispatch(op, x.device, IndexArgs{x, d, index, out, cpu}, opts);
}

void gather(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
            const Options& opts) {
  const char* op = "gather";
  check_common(op, x, index, out);
  const int d = normalize_dim(op, dim, x.ndim);
  if (index.ndim != x.ndim)
    throw InvalidArgument(fmt::format("{}: index must have as many dims as x ({}), got {}", op,
                                      x.describe(), index.describe()));
  for (int k = 0; k < x.ndim; ++k)
    if (k != d && index.size(k) > x.size(k))
      throw InvalidArgument(fmt::format("{}: index is larger than x in dim {} ({} and {})", op, k,
                                        index.describe(), x.describe()));
  check_shape(op, "out", out, index.sizes());
  const bool cpu = x.device.is_cpu();
  if (cpu && x.size(d) == 0 && index.numel() > 0)
    throw IndexOutOfRange(fmt::format("{}: x has size 0 in dim {}; no index is valid", op, d));
  if (cpu)
    check_index_values(op, index, x.size(d));
  dispatch(op, x.device, IndexArgs{x, d, index, out, cpu}, opts);
}

} // namespace samebits
