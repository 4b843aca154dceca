// Public entry points of index_add, scatter_add, scatter_reduce and make_index_plan: validate
// shapes, dtypes and devices, bring every op to the one ScatterArgs shape, then dispatch.
#include "samebits/ops/scatter.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/half_staging.hpp"
#include "ops/scatter.hpp"

#include <fmt/format.h>

namespace samebits {

using namespace detail;

std::string_view to_string(Reduce r) {
  switch (r) {
  case Reduce::sum:
    return "sum";
  case Reduce::mean:
    return "mean";
  case Reduce::amax:
    return "amax";
  case Reduce::amin:
    return "amin";
  case Reduce::prod:
    return "prod";
  }
  return "?";
}

Reduce parse_reduce(std::string_view s) {
  if (s == "sum")
    return Reduce::sum;
  if (s == "mean")
    return Reduce::mean;
  if (s == "amax" || s == "max")
    return Reduce::amax;
  if (s == "amin" || s == "min")
    return Reduce::amin;
  if (s == "prod")
    return Reduce::prod;
  throw InvalidArgument(
      fmt::format("unknown reduction '{}': expected sum, mean, amax, amin or prod", s));
}

namespace detail {

std::string index_error_message(const char* op, std::int64_t position, std::int64_t value,
                                std::int64_t num_targets) {
  return fmt::format("{}: index {} at position {} is out of range [0, {}); nothing was written", op,
                     value, position, num_targets);
}

} // namespace detail

namespace {

void check_index_vector(const char* op, const TensorView& index) {
  check_index_dtype(op, "index", index);
  check_data(op, "index", index);
  if (index.ndim != 1)
    throw InvalidArgument(fmt::format("{}: index must be 1-D, got {}", op, index.describe()));
}

// The index vector of index_add as a view of src's shape: stride 0 on every dim but 0.
TensorView broadcast_rows(const TensorView& index, const TensorView& src) {
  TensorView v = index;
  v.ndim = src.ndim;
  v.shape = src.shape;
  v.strides = {};
  v.strides[0] = index.strides[0];
  return v;
}

// bfloat16/float16 index_add through its float32 variants (see ops/half_staging.hpp) on the CPU;
// CUDA has variants of its own that read and write the half tensors (cuda/scatter_half.cu).
bool stage_half(const TensorView& out) {
  return is_half(out.dtype) && out.device.is_cpu();
}

void check_index_add(const char* op, const TensorView& out, const TensorView& src) {
  check_float_or_half(op, "out", out);
  check_same_dtype(op, out, src);
  check_data(op, "out", out);
  check_data(op, "src", src);
  if (src.ndim < 1 || src.ndim != out.ndim)
    throw InvalidArgument(
        fmt::format("{}: src {} and out {} must have the same number of dims (1 to {})", op,
                    src.describe(), out.describe(), kMaxDims));
  for (int d = 1; d < src.ndim; ++d)
    if (src.size(d) != out.size(d))
      throw InvalidArgument(fmt::format("{}: src {} and out {} differ in dim {}", op,
                                        src.describe(), out.describe(), d));
}

} // namespace

IndexPlan make_index_plan(const TensorView& index, std::int64_t num_targets, const Options& opts) {
  check_index_vector("make_index_plan", index);
  if (num_targets < 0)
    throw InvalidArgument(
        fmt::format("make_index_plan: num_targets must be >= 0, got {}", num_targets));
  IndexPlan plan;
  dispatch("make_index_plan", index.device, PlanArgs{index, num_targets, &plan}, opts);
  return plan;
}

void index_add(const TensorView& out, const TensorView& index, const TensorView& src, double alpha,
               const Options& opts) {
  check_index_add("index_add", out, src);
  check_index_vector("index_add", index);
  check_same_device("index_add", {out, index, src});
  check_output("index_add", "out", out, {{"src", src}, {"index", index}});
  if (index.size(0) != src.size(0))
    throw InvalidArgument(fmt::format("index_add: index {} and src {} differ in length",
                                      index.describe(), src.describe()));
  // With no element per row, no kernel would meet the index: its values are checked here.
  if (src.numel() == 0)
    if (const auto bad = first_index_outside(index, out.size(0)))
      throw IndexOutOfRange(index_error_message("index_add", bad->first, bad->second, out.size(0)));
  if (stage_half(out)) { // float32 chains, rounded once; bad indices throw before the rounding
    const Tensor of = staged_output(out, true, opts);
    index_add(of, index, to_float32(src, opts.stream), alpha, opts);
    return round_into(of, out, opts.stream);
  }
  ScatterArgs a{out,        broadcast_rows(index, src), src, 0, Reduce::sum, true, alpha, nullptr,
                "index_add"};
  dispatch("index_add", out.device, a, opts);
}

void index_add(const TensorView& out, const IndexPlan& plan, const TensorView& src, double alpha,
               const Options& opts) {
  check_index_add("index_add", out, src);
  check_same_device("index_add", {out, src});
  check_output("index_add", "out", out, {{"src", src}});
  if (!(plan.device == out.device))
    throw InvalidArgument(fmt::format("index_add: the plan lives on {} but out on {}",
                                      to_string(plan.device), to_string(out.device)));
  if (plan.num_sources != src.size(0) || plan.num_targets != out.size(0))
    throw InvalidArgument(
        fmt::format("index_add: the plan maps {} sources to {} targets, but src is {} and out {}",
                    plan.num_sources, plan.num_targets, src.describe(), out.describe()));
  if (stage_half(out)) {
    const Tensor of = staged_output(out, true, opts);
    index_add(of, plan, to_float32(src, opts.stream), alpha, opts);
    return round_into(of, out, opts.stream);
  }
  ScatterArgs a{out, TensorView{}, src, 0, Reduce::sum, true, alpha, &plan, "index_add"};
  a.index.device = out.device;
  dispatch("index_add_plan", out.device, a, opts);
}

namespace {

ScatterArgs scatter_args(const char* op, const TensorView& out, int dim, const TensorView& index,
                         const TensorView& src, Reduce reduce, bool include_self) {
  check_float_or_half(op, "out", out);
  check_same_dtype(op, out, src);
  check_index_dtype(op, "index", index);
  check_same_device(op, {out, index, src});
  check_data(op, "out", out);
  check_data(op, "index", index);
  check_data(op, "src", src);
  check_output(op, "out", out, {{"index", index}, {"src", src}});
  if (index.ndim < 1 || index.ndim != src.ndim || index.ndim != out.ndim)
    throw InvalidArgument(
        fmt::format("{}: out {}, index {} and src {} must have the same number of dims (1 to {})",
                    op, out.describe(), index.describe(), src.describe(), kMaxDims));
  const int d = normalize_dim(op, dim, index.ndim);
  TensorView s = src, o = out;
  for (int j = 0; j < index.ndim; ++j) {
    if (index.size(j) > src.size(j) || (j != d && index.size(j) > out.size(j)))
      throw InvalidArgument(fmt::format("{}: index {} is larger than src {} or out {} in dim {}",
                                        op, index.describe(), src.describe(), out.describe(), j));
    if (index.size(j) < src.size(j))
      s = s.slice(j, 0, index.size(j));
    if (j != d && index.size(j) < out.size(j))
      o = o.slice(j, 0, index.size(j));
  }
  return ScatterArgs{o, index, s, d, reduce, include_self, 1.0, nullptr, op};
}

} // namespace

void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src,
                 const Options& opts) {
  if (is_half(out.dtype)) {
    scatter_args("scatter_add", out, dim, index, src, Reduce::sum, true); // checks only
    const Tensor of = staged_output(out, true, opts);
    scatter_add(of, dim, index, to_float32(src, opts.stream), opts);
    return round_into(of, out, opts.stream);
  }
  dispatch("scatter_add", out.device,
           scatter_args("scatter_add", out, dim, index, src, Reduce::sum, true), opts);
}

void scatter_reduce(const TensorView& out, int dim, const TensorView& index, const TensorView& src,
                    Reduce reduce, bool include_self, const Options& opts) {
  if (is_half(out.dtype)) {
    scatter_args("scatter_reduce", out, dim, index, src, reduce, include_self); // checks only
    const Tensor of = staged_output(out, true, opts);
    scatter_reduce(of, dim, index, to_float32(src, opts.stream), reduce, include_self, opts);
    return round_into(of, out, opts.stream);
  }
  dispatch("scatter_reduce", out.device,
           scatter_args("scatter_reduce", out, dim, index, src, reduce, include_self), opts);
}

} // namespace samebits
