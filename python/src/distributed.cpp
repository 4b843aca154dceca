// samebits._core bindings of the distributed fixed-point conversions
// (include/samebits/distributed.hpp), for samebits.torch.distributed: thin functions over
// caller-allocated outputs, as in ops.cpp, run without the GIL on `stream` (0 on the CPU).
#include "samebits/distributed.hpp"

#include "arrays.hpp"
#include "samebits/ops/reduce.hpp"

namespace nb = nanobind;
using namespace samebits;
using samebits::python::to_view;

namespace samebits::python {

namespace {

Options on_stream(std::uintptr_t stream) {
  Options o;
  o.level = Determinism::portable;
  o.stream.handle = reinterpret_cast<void*>(stream);
  return o;
}

} // namespace

void bind_distributed(nb::module_& m) {
  m.attr("HEADROOM_LOG2") = kHeadroomLog2;
  m.attr("CONTRIBUTIONS_LOG2") = kContributionsLog2;
  m.def("fixed_scale", &fixed_scale, nb::arg("max_abs"), nb::arg("headroom_log2") = kHeadroomLog2,
        nb::arg("contributions_log2") = kContributionsLog2);
  m.def(
      "to_fixed",
      [](nb::handle x, int s, nb::handle out, nb::handle overflow, bool accumulate,
         int contributions_log2, std::uintptr_t stream) {
        TensorView xv = to_view(x, "to_fixed: x"), ov = to_view(out, "to_fixed: out"),
                   fv = to_view(overflow, "to_fixed: overflow");
        nb::gil_scoped_release unlocked;
        to_fixed(xv, s, ov, fv, accumulate, contributions_log2, on_stream(stream));
      },
      nb::arg("x"), nb::arg("s"), nb::arg("out"), nb::arg("overflow"), nb::arg("accumulate"),
      nb::arg("contributions_log2") = kContributionsLog2, nb::arg("stream") = 0);
  m.def(
      "from_fixed",
      [](nb::handle q, int s, std::int64_t divisor, nb::handle out, std::uintptr_t stream) {
        TensorView qv = to_view(q, "from_fixed: q"), ov = to_view(out, "from_fixed: out");
        nb::gil_scoped_release unlocked;
        from_fixed(qv, s, divisor, ov, on_stream(stream));
      },
      nb::arg("q"), nb::arg("s"), nb::arg("divisor"), nb::arg("out"), nb::arg("stream") = 0);
  m.def(
      "max_abs_finite",
      [](nb::handle x, nb::handle out, std::uintptr_t stream) {
        TensorView xv = to_view(x, "max_abs_finite: x"), ov = to_view(out, "max_abs_finite: out");
        nb::gil_scoped_release unlocked;
        max_abs_finite(xv, ov, on_stream(stream));
      },
      nb::arg("x"), nb::arg("out"), nb::arg("stream") = 0);
  // The run_to_run all-reduce's block sum: out = the sum of the rows of x ([world, block]) in the
  // library's portable order (fixed for a fixed world size).
  m.def(
      "sum_ranks",
      [](nb::handle x, nb::handle out, std::uintptr_t stream) {
        TensorView xv = to_view(x, "sum_ranks: x"), ov = to_view(out, "sum_ranks: out");
        nb::gil_scoped_release unlocked;
        sum_dim(xv, 0, ov, on_stream(stream));
      },
      nb::arg("x"), nb::arg("out"), nb::arg("stream") = 0);
}

} // namespace samebits::python
