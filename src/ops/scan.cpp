// Public entry point of cumsum: validate, then dispatch to a variant.
#include "samebits/ops/scan.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/half_staging.hpp"
#include "ops/scan.hpp"

namespace samebits {

using namespace detail;

void cumsum(const TensorView& x, int dim, const TensorView& out, const Options& opts) {
  check_float_or_half("cumsum", "x", x);
  check_same_dtype("cumsum", x, out);
  check_same_device("cumsum", {x, out});
  check_data("cumsum", "x", x);
  check_data("cumsum", "out", out);
  // out may be x itself (in place: each line is read before it is written), no other overlap.
  if (same_elements(out, x))
    check_output("cumsum", "out", out, {});
  else
    check_output("cumsum", "out", out, {{"x", x}});
  const int d = normalize_dim("cumsum", dim, x.ndim);
  check_shape("cumsum", "out", out, x.sizes());
  if (is_half(x.dtype)) { // float32 prefix sums, each rounded once
    const Tensor of = staged_output(out, false, opts);
    cumsum(to_float32(x, opts.stream), d, of, opts);
    return round_into(of, out, opts.stream);
  }
  if (x.ndim == 0) { // a 0-d tensor is a line of one element
    dispatch("cumsum", x.device, CumsumArgs{x.reshape({1}), out.reshape({1}), 0}, opts);
    return;
  }
  dispatch("cumsum", x.device, CumsumArgs{x, out, d}, opts);
}

} // namespace samebits
