// Public entry point of gemm: validate everything, fold the transposes into strided views, then
// dispatch to a variant.
#include "samebits/ops/gemm.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/gemm.hpp"

#include <fmt/format.h>

namespace samebits {

using namespace detail;

namespace {

void check_2d(std::string_view name, const TensorView& t) {
  if (t.ndim != 2)
    throw InvalidArgument(fmt::format("gemm: {} must be 2-D, got {}", name, t.describe()));
}

} // namespace

void gemm(Transpose trans_a, Transpose trans_b, double alpha, const TensorView& a,
          const TensorView& b, double beta, const TensorView& c, const Options& opts) {
  check_float("gemm", "a", a);
  check_same_dtype("gemm", a, b);
  check_same_dtype("gemm", a, c);
  check_same_device("gemm", {a, b, c});
  check_2d("a", a);
  check_2d("b", b);
  check_2d("c", c);
  check_data("gemm", "a", a);
  check_data("gemm", "b", b);
  check_data("gemm", "c", c);
  const TensorView oa = trans_a == Transpose::yes ? a.transpose(0, 1) : a; // [m, k]
  const TensorView ob = trans_b == Transpose::yes ? b.transpose(0, 1) : b; // [k, n]
  if (oa.shape[1] != ob.shape[0] || c.shape[0] != oa.shape[0] || c.shape[1] != ob.shape[1])
    throw InvalidArgument(fmt::format(
        "gemm: shapes do not fit: op(a) is [{}, {}], op(b) is [{}, {}], c is [{}, {}]; op(a) must "
        "be [m, k], op(b) [k, n] and c [m, n] (a {}transposed, b {}transposed)",
        oa.shape[0], oa.shape[1], ob.shape[0], ob.shape[1], c.shape[0], c.shape[1],
        trans_a == Transpose::yes ? "" : "not ", trans_b == Transpose::yes ? "" : "not "));
  check_output("gemm", "c", c, {{"a", a}, {"b", b}});
  dispatch("gemm", c.device, GemmArgs{oa, ob, c, alpha, beta}, opts);
}

} // namespace samebits
