// Public entry points of sum, sum_dim and dot: validate, then dispatch to a variant.
#include "samebits/ops/reduce.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/half_staging.hpp"
#include "ops/reduce.hpp"

namespace samebits {

using namespace detail;

void sum(const TensorView& x, const TensorView& out, const Options& opts) {
  check_float_or_half("sum", "x", x);
  check_same_dtype("sum", x, out);
  check_same_device("sum", {x, out});
  check_data("sum", "x", x);
  check_data("sum", "out", out);
  check_output("sum", "out", out, {{"x", x}});
  if (out.numel() != 1)
    throw InvalidArgument("sum: out must have exactly one element, got " + out.describe());
  if (is_half(x.dtype)) { // float32 sum, rounded once
    const Tensor of = staged_output(out, false, opts);
    sum(to_float32(x, opts.stream), of, opts);
    return round_into(of, out, opts.stream);
  }
  dispatch("sum", x.device, SumArgs{x, out, -1}, opts);
}

void sum_dim(const TensorView& x, int dim, const TensorView& out, const Options& opts) {
  check_float_or_half("sum_dim", "x", x);
  check_same_dtype("sum_dim", x, out);
  check_same_device("sum_dim", {x, out});
  check_data("sum_dim", "x", x);
  check_data("sum_dim", "out", out);
  check_output("sum_dim", "out", out, {{"x", x}});
  const int d = normalize_dim("sum_dim", dim, x.ndim);
  if (x.ndim == 0)
    throw InvalidArgument("sum_dim: x is 0-d; use sum");
  Shape expected = x.sizes();
  expected.erase(expected.begin() + d);
  check_shape("sum_dim", "out", out, expected);
  if (is_half(x.dtype)) {
    const Tensor of = staged_output(out, false, opts);
    sum_dim(to_float32(x, opts.stream), d, of, opts);
    return round_into(of, out, opts.stream);
  }
  dispatch("sum_dim", x.device, SumArgs{x, out, d}, opts);
}

void dot(const TensorView& a, const TensorView& b, const TensorView& out, const Options& opts) {
  check_float_or_half("dot", "a", a);
  check_same_dtype("dot", a, b);
  check_same_dtype("dot", a, out);
  check_same_device("dot", {a, b, out});
  check_data("dot", "a", a);
  check_data("dot", "b", b);
  check_data("dot", "out", out);
  check_output("dot", "out", out, {{"a", a}, {"b", b}});
  if (a.numel() != b.numel())
    throw InvalidArgument("dot: a and b have different numbers of elements: " + a.describe() +
                          " and " + b.describe());
  if (out.numel() != 1)
    throw InvalidArgument("dot: out must have exactly one element, got " + out.describe());
  if (is_half(a.dtype)) { // products and sums in float32, rounded once
    const Tensor of = staged_output(out, false, opts);
    dot(to_float32(a, opts.stream), to_float32(b, opts.stream), of, opts);
    return round_into(of, out, opts.stream);
  }
  dispatch("dot", a.device, DotArgs{a, b, out}, opts);
}

} // namespace samebits
