// samebits._core op bindings: one thin function per C++ op, in the C++ argument order, writing
// into outputs the caller allocated (samebits.torch allocates them with torch). Every function
// takes `level` (a level name or None: the thread's mode) and `stream` (a cudaStream_t as an
// integer; 0 is the default stream) and runs without the GIL.
#include "arrays.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;
using namespace samebits;
using samebits::python::options;
using samebits::python::to_view;

namespace samebits::python {

namespace {

using Level = std::optional<std::string>;

// Runs `op` with the GIL released (views are plain pointers; the Python arguments keep the memory
// alive for the call).
template <class F> void run(F&& op) {
  nb::gil_scoped_release unlocked;
  op();
}

// An IndexPlan as Python sees it: the plan plus its tensors as arrays (built once).
struct PyPlan {
  IndexPlan plan;
  nb::object order, offsets;
};

} // namespace

void bind_ops(nb::module_& m) {
  auto level_arg = nb::arg("level").none() = nb::none();
  auto stream_arg = nb::arg("stream") = 0;

  m.def(
      "index_add",
      [](nb::handle out, nb::handle index, nb::handle src, double alpha, const Level& level,
         std::uintptr_t stream) {
        TensorView o = to_view(out, "index_add: out"), i = to_view(index, "index_add: index"),
                   s = to_view(src, "index_add: src");
        run([&] { index_add(o, i, s, alpha, options(level, stream)); });
      },
      nb::arg("out"), nb::arg("index"), nb::arg("src"), nb::arg("alpha") = 1.0, level_arg,
      stream_arg);

  nb::class_<PyPlan>(m, "IndexPlan")
      .def(
          "__init__",
          [](PyPlan* p, nb::handle index, std::int64_t num_targets, std::uintptr_t stream) {
            TensorView i = to_view(index, "IndexPlan: index");
            IndexPlan plan;
            {
              nb::gil_scoped_release unlocked;
              plan = make_index_plan(i, num_targets, options(std::nullopt, stream));
            }
            new (p) PyPlan{plan, to_array(plan.order), to_array(plan.offsets)};
          },
          nb::arg("index"), nb::arg("num_targets"), stream_arg)
      .def_ro("order", &PyPlan::order)
      .def_ro("offsets", &PyPlan::offsets)
      .def_prop_ro("num_sources", [](const PyPlan& p) { return p.plan.num_sources; })
      .def_prop_ro("num_targets", [](const PyPlan& p) { return p.plan.num_targets; })
      .def_prop_ro("device", [](const PyPlan& p) { return to_string(p.plan.device); })
      .def(
          "index_add",
          [](const PyPlan& p, nb::handle out, nb::handle src, double alpha, const Level& level,
             std::uintptr_t stream) {
            TensorView o = to_view(out, "index_add: out"), s = to_view(src, "index_add: src");
            run([&] { index_add(o, p.plan, s, alpha, options(level, stream)); });
          },
          nb::arg("out"), nb::arg("src"), nb::arg("alpha") = 1.0, level_arg, stream_arg);

  m.def(
      "scatter_add",
      [](nb::handle out, int dim, nb::handle index, nb::handle src, const Level& level,
         std::uintptr_t stream) {
        TensorView o = to_view(out, "scatter_add: out"), i = to_view(index, "scatter_add: index"),
                   s = to_view(src, "scatter_add: src");
        run([&] { scatter_add(o, dim, i, s, options(level, stream)); });
      },
      nb::arg("out"), nb::arg("dim"), nb::arg("index"), nb::arg("src"), level_arg, stream_arg);

  m.def(
      "scatter_reduce",
      [](nb::handle out, int dim, nb::handle index, nb::handle src, const std::string& reduce,
         bool include_self, const Level& level, std::uintptr_t stream) {
        TensorView o = to_view(out, "scatter_reduce: out"),
                   i = to_view(index, "scatter_reduce: index"),
                   s = to_view(src, "scatter_reduce: src");
        Reduce r = parse_reduce(reduce);
        run([&] { scatter_reduce(o, dim, i, s, r, include_self, options(level, stream)); });
      },
      nb::arg("out"), nb::arg("dim"), nb::arg("index"), nb::arg("src"), nb::arg("reduce"),
      nb::arg("include_self") = true, level_arg, stream_arg);

  m.def(
      "segment_reduce",
      [](nb::handle src, nb::handle offsets, nb::handle out, const std::string& reduce,
         const Level& level, std::uintptr_t stream) {
        TensorView s = to_view(src, "segment_reduce: src"),
                   f = to_view(offsets, "segment_reduce: offsets"),
                   o = to_view(out, "segment_reduce: out");
        Reduce r = parse_reduce(reduce);
        run([&] { segment_reduce(s, f, o, r, options(level, stream)); });
      },
      nb::arg("src"), nb::arg("offsets"), nb::arg("out"), nb::arg("reduce"), level_arg, stream_arg);

  m.def(
      "aggregate",
      [](nb::handle offsets, nb::handle indices, nb::handle x, nb::handle out,
         const std::string& reduce, std::int64_t checked_sources, const Level& level,
         std::uintptr_t stream) {
        CsrGraph g{to_view(offsets, "aggregate: offsets"), to_view(indices, "aggregate: indices"),
                   checked_sources};
        TensorView xv = to_view(x, "aggregate: x"), o = to_view(out, "aggregate: out");
        Reduce r = parse_reduce(reduce);
        run([&] { aggregate(g, xv, o, r, options(level, stream)); });
      },
      nb::arg("offsets"), nb::arg("indices"), nb::arg("x"), nb::arg("out"), nb::arg("reduce"),
      nb::arg("checked_sources") = -1, level_arg, stream_arg);

  m.def(
      "index_select",
      [](nb::handle x, int dim, nb::handle index, nb::handle out, const Level& level,
         std::uintptr_t stream) {
        TensorView xv = to_view(x, "index_select: x"), i = to_view(index, "index_select: index"),
                   o = to_view(out, "index_select: out");
        run([&] { index_select(xv, dim, i, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("dim"), nb::arg("index"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "gather",
      [](nb::handle x, int dim, nb::handle index, nb::handle out, const Level& level,
         std::uintptr_t stream) {
        TensorView xv = to_view(x, "gather: x"), i = to_view(index, "gather: index"),
                   o = to_view(out, "gather: out");
        run([&] { gather(xv, dim, i, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("dim"), nb::arg("index"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "cumsum",
      [](nb::handle x, int dim, nb::handle out, const Level& level, std::uintptr_t stream) {
        TensorView xv = to_view(x, "cumsum: x"), o = to_view(out, "cumsum: out");
        run([&] { cumsum(xv, dim, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("dim"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "bincount",
      [](nb::handle index, nb::handle weights, nb::handle out, const Level& level,
         std::uintptr_t stream) {
        TensorView i = to_view(index, "bincount: index"), o = to_view(out, "bincount: out");
        // No weights: a default view (null data, no dims), which the C++ op reads as counts.
        TensorView w = weights.is_none() ? TensorView{} : to_view(weights, "bincount: weights");
        run([&] { bincount(i, w, o, options(level, stream)); });
      },
      nb::arg("index"), nb::arg("weights").none(), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "histc",
      [](nb::handle x, double lo, double hi, nb::handle out, const Level& level,
         std::uintptr_t stream) {
        TensorView xv = to_view(x, "histc: x"), o = to_view(out, "histc: out");
        run([&] { histc(xv, lo, hi, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("lo"), nb::arg("hi"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "sum",
      [](nb::handle x, nb::handle out, const Level& level, std::uintptr_t stream) {
        TensorView xv = to_view(x, "sum: x"), o = to_view(out, "sum: out");
        run([&] { sum(xv, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "sum_dim",
      [](nb::handle x, int dim, nb::handle out, const Level& level, std::uintptr_t stream) {
        TensorView xv = to_view(x, "sum: x"), o = to_view(out, "sum: out");
        run([&] { sum_dim(xv, dim, o, options(level, stream)); });
      },
      nb::arg("x"), nb::arg("dim"), nb::arg("out"), level_arg, stream_arg);

  m.def(
      "gemm",
      [](bool trans_a, bool trans_b, double alpha, nb::handle a, nb::handle b, double beta,
         nb::handle c, const Level& level, std::uintptr_t stream) {
        TensorView av = to_view(a, "gemm: a"), bv = to_view(b, "gemm: b"),
                   cv = to_view(c, "gemm: c");
        run([&] {
          gemm(trans_a ? Transpose::yes : Transpose::no, trans_b ? Transpose::yes : Transpose::no,
               alpha, av, bv, beta, cv, options(level, stream));
        });
      },
      nb::arg("trans_a"), nb::arg("trans_b"), nb::arg("alpha"), nb::arg("a"), nb::arg("b"),
      nb::arg("beta"), nb::arg("c"), level_arg, stream_arg);

  m.def("set_plan_cache_limit", &set_plan_cache_limit);
}

} // namespace samebits::python
