// Public entry points of bincount and histc: validate the arguments (index values are checked by
// the variants, before they write), then dispatch to a variant.
#include "samebits/ops/histogram.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/half_staging.hpp"
#include "ops/histogram.hpp"

#include <cmath>

namespace samebits {

using namespace detail;

void bincount(const TensorView& index, const TensorView& weights, const TensorView& out,
              const Options& opts) {
  const BincountArgs args{index, weights, out};
  check_index_dtype("bincount", "index", index);
  check_data("bincount", "index", index);
  check_data("bincount", "out", out);
  if (index.ndim != 1)
    throw InvalidArgument(fmt::format("bincount: index must be 1-d, got {}", index.describe()));
  if (out.ndim != 1)
    throw InvalidArgument(fmt::format("bincount: out must be 1-d, got {}", out.describe()));
  if (args.weighted()) {
    check_float_or_half("bincount", "weights", weights);
    check_data("bincount", "weights", weights);
    check_same_dtype("bincount", weights, out);
    check_same_device("bincount", {index, weights, out});
    check_output("bincount", "out", out, {{"index", index}, {"weights", weights}});
    if (weights.ndim != 1 || weights.numel() != index.numel())
      throw InvalidArgument(fmt::format("bincount: weights must be 1-d with index's length, got {} "
                                        "for index {}",
                                        weights.describe(), index.describe()));
  } else {
    check_same_device("bincount", {index, out});
    check_output("bincount", "out", out, {{"index", index}});
    if (out.dtype != DType::i64)
      throw InvalidArgument(
          fmt::format("bincount: counts need an int64 out, got {}", out.describe()));
  }
  if (args.weighted() && is_half(weights.dtype)) {
    // Through float64 (exact weights), so the fixed-point sum is rounded once, into the half out.
    const Tensor wd = to_dtype(weights, DType::f64, opts.stream);
    const Tensor od = Tensor::empty(out.sizes(), DType::f64, out.device, opts.stream);
    bincount(index, wd, od, opts);
    return round_into(od, out, opts.stream);
  }
  dispatch("bincount", index.device, args, opts);
}

void histc(const TensorView& x, double lo, double hi, const TensorView& out, const Options& opts) {
  check_float("histc", "x", x);
  check_same_dtype("histc", x, out);
  check_same_device("histc", {x, out});
  check_data("histc", "x", x);
  check_data("histc", "out", out);
  check_output("histc", "out", out, {{"x", x}});
  if (out.ndim != 1 || out.numel() == 0)
    throw InvalidArgument(
        fmt::format("histc: out must be 1-d with at least one bin, got {}", out.describe()));
  // The range as the kernels see it, in x's dtype: finite, increasing, finite width.
  const bool ok = x.dtype == DType::f32
                      ? std::isfinite(static_cast<float>(lo)) &&
                            std::isfinite(static_cast<float>(hi)) &&
                            static_cast<float>(lo) < static_cast<float>(hi) &&
                            std::isfinite(static_cast<float>(hi) - static_cast<float>(lo))
                      : std::isfinite(lo) && std::isfinite(hi) && lo < hi && std::isfinite(hi - lo);
  if (!ok)
    throw InvalidArgument(fmt::format("histc: the range [{}, {}] must be finite with lo < hi (in "
                                      "{}); pass the data's min and max for PyTorch's default",
                                      lo, hi, to_string(x.dtype)));
  dispatch("histc", x.device, HistcArgs{x, lo, hi, out}, opts);
}

} // namespace samebits
