// explain_kernel_choice: for one op and shape, the variant each backend runs at every level and
// the kernel each CUDA variant launches, from the families' kernel-choice functions
// (ops/*_choice.hpp). The choice is a pure function of the shape and the tuning, so this runs
// the same with or without a GPU (and in a build without CUDA).
#include "ops/histogram_choice.hpp"
#include "ops/indexing_choice.hpp"
#include "ops/launch_shape.hpp"
#include "ops/reduce_choice.hpp"
#include "ops/scan_choice.hpp"
#include "ops/scatter_choice.hpp"
#include "ops/segment_choice.hpp"
#include "samebits/errors.hpp"
#include "samebits/ops/scatter.hpp"
#include "samebits/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

namespace {

using namespace detail;

constexpr int kAssumedSms = 132; // an H200

// One CUDA variant and the kernels it launches for the query.
using Line = std::pair<std::string, std::string>;

struct Query {
  const KernelQuery& q;
  std::int64_t n = 0;        // shape[0]
  std::int64_t features = 1; // product of shape[1:]
  std::int64_t numel = 0;
  int elem = 4;
  std::int64_t rows() const { return q.rows > 0 ? q.rows : n; }
};

std::string pull_line(const Query& c, bool direct) {
  ScatterPullShape s;
  s.targets = c.rows();
  s.features = c.features;
  s.sources = c.n;
  s.src_row = s.out_row = c.features;
  s.elem_bytes = c.elem;
  s.direct = direct;
  return choose_scatter_pull(s).name();
}

std::vector<Line> scatter_lines(const Query& c) {
  const std::string& op = c.q.op;
  std::vector<Line> lines;
  const int block = scatter_block();
  lines.emplace_back("cuda.atomic",
                     fmt::format("atomic_rows_kernel (atomicAdd / atomicCAS), block {}, grid {}",
                                 block, grid_for(c.n * c.features, block, 1 << 20)));
  if (op == "index_add_plan") {
    lines.emplace_back("cuda.plan_pull", "over the plan: " + pull_line(c, false));
    return lines;
  }
  if (op != "scatter_reduce") {
    const bool yields = fixed_point_yields_to_short_sort(c.n, c.rows(), c.features);
    const bool fits =
        c.elem == 4 && c.features <= 4 && c.rows() <= (std::int64_t{1} << 21) && !yields;
    lines.emplace_back(
        "cuda.fixed_point",
        fmt::format("{} (exact int64 sums); {} this shape (float32, at most 4 features, at most "
                    "2^21 targets, and not a short index that the kept one-block sort serves "
                    "in fewer launches)",
                    !fixed_point_one_block(c.n * c.features, c.rows() * c.features)
                        ? "fixed_check_kernel, fixed_add_kernel, fixed_finish_kernel"
                    : fixed_point_blocks(c.n * c.features, 9) > 1
                        ? "fixed_cluster_kernel over a cluster of 8 blocks on GPUs of compute "
                          "capability 9 and later (rows keep their values in registers from the "
                          "check to the sums), fixed_one_block_kernel before them (check, sums "
                          "and finish in one launch)"
                        : "fixed_one_block_kernel (check, sums and finish in one launch)",
                    fits ? "takes" : "does not take"));
  }
  lines.emplace_back(
      "cuda.sort_pull",
      fmt::format("{}, then {} (an index seen before at the same address reuses its plan)",
                  index_sort_name(choose_index_sort(c.n, c.rows(), tuning<ScatterTuning>(),
                                                    c.elem == 4 && c.features == 1)),
                  pull_line(c, c.elem == 4 && c.features == 1)));
  return lines;
}

std::vector<Line> segment_lines(const Query& c) {
  SegmentShape s;
  s.segs = c.rows();
  s.cols = c.features;
  s.positions = c.n;
  s.ldx = s.ldo = c.features;
  s.elem_bytes = c.elem;
  std::vector<Line> lines;
  s.atomic = true;
  lines.emplace_back("cuda.atomic_push", choose_segment_kernel(s).name());
  s.atomic = false;
  lines.emplace_back("cuda.sequential_rows", choose_segment_kernel(s).name());
  return lines;
}

int dim_of(const Query& c) {
  const int nd = static_cast<int>(c.q.shape.size());
  const int d = c.q.dim < 0 ? c.q.dim + nd : c.q.dim;
  if (d < 0 || d >= nd)
    throw InvalidArgument(fmt::format("--dim {} is outside the {} dims of the shape", c.q.dim, nd));
  return d;
}

std::vector<Line> scan_lines(const Query& c) {
  const int d = dim_of(c);
  ScanShape s;
  for (int i = 0; i < d; ++i)
    s.outer *= c.q.shape[static_cast<std::size_t>(i)];
  s.len = c.q.shape[static_cast<std::size_t>(d)];
  for (std::size_t i = static_cast<std::size_t>(d) + 1; i < c.q.shape.size(); ++i)
    s.inner *= c.q.shape[i];
  s.elem_bytes = c.elem;
  std::vector<Line> lines;
  lines.emplace_back("cuda.cub_scan", s.outer == 1 && s.inner == 1
                                          ? "cub::DeviceScan::InclusiveSum"
                                          : "does not take it (several lines)");
  s.canonical = false;
  lines.emplace_back("cuda.lookback_unordered", choose_scan_kernel(s).name());
  s.canonical = true;
  lines.emplace_back("cuda.canonical_lookback", choose_scan_kernel(s).name());
  return lines;
}

std::vector<Line> reduce_lines(const Query& c) {
  std::int64_t M = 1, L = c.numel;
  ReduceKernel k = ReduceKernel::rows;
  if (c.q.op == "sum_dim") {
    const int d = dim_of(c);
    L = c.q.shape[static_cast<std::size_t>(d)];
    M = L == 0 ? 0 : c.numel / L;
    if (d + 1 < static_cast<int>(c.q.shape.size()) && L > 1)
      k = ReduceKernel::columns; // the reduced dim is not the innermost one
  }
  const std::int64_t C = ceil_div(L, 4096);
  auto line = [&](bool atomic) {
    std::string s = fmt::format("{} outputs of {} chunks of 4096: ", M, C) +
                    choose_reduce_launch(k, M, C, atomic).name();
    if (!atomic && C > 1)
      s += "; then rows_kernel over the partials, level by level";
    return s;
  };
  return {{"cuda.atomic_chunks", line(true)}, {"cuda.canonical_tree", line(false)}};
}

std::vector<Line> histogram_lines(const Query& c) {
  if (c.q.op == "histc")
    return {{"cuda.int_counts", choose_histc_kernel(c.n, c.rows(), kAssumedSms).name()}};
  return {{"cuda.float_atomics",
           choose_bincount_kernel(c.n, c.rows(), c.elem, false, kAssumedSms).name()},
          {"cuda.fixed_point",
           choose_bincount_kernel(c.n, c.rows(), c.elem, true, kAssumedSms).name()}};
}

std::vector<Line> indexing_lines(const Query& c) {
  IndexingShape s;
  s.gather = c.q.op == "gather";
  s.elem_bytes = c.elem;
  s.rows = c.rows();
  s.row_bytes = c.features * c.elem;
  s.elements = c.rows() * c.features;
  s.indices = s.gather ? s.elements : c.rows();
  s.check = true; // an index of unknown values
  return {{"cuda.copy", choose_indexing_kernel(s).name()}};
}

struct Family {
  std::vector<const char*> ops;
  const char* tuning;
  const char* assumes;
  std::function<std::vector<Line>(const Query&)> lines;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {{"index_add", "index_add_plan", "scatter_add", "scatter_reduce"},
       "ScatterTuning",
       "src [N, F] and out [R, F] contiguous and 16-byte aligned, an index vector of N",
       scatter_lines},
      {{"segment_reduce", "aggregate"},
       "SegmentTuning",
       "x and out contiguous rows of F values and 16-byte aligned; N CSR positions into R rows",
       segment_lines},
      {{"cumsum"},
       "ScanTuning",
       "a contiguous tensor of the shape, scanned along --dim",
       scan_lines},
      {{"sum", "sum_dim", "dot"},
       "ReduceTuning",
       "contiguous inputs; the atomic variant's grid is the blocks resident on the device",
       reduce_lines},
      {{"index_select", "gather"},
       "",
       "x [N, F] and out [R, F] contiguous and 16-byte aligned, R index values along dim 0",
       indexing_lines},
      {{"bincount", "histc"},
       "HistogramTuning",
       "N values into R bins (bincount: weights of --dtype); a device of 132 SMs (an H200)",
       histogram_lines},
  };
  return f;
}

} // namespace

std::string explain_kernel_choice(const KernelQuery& q) {
  const auto names = op_names();
  if (std::find(names.begin(), names.end(), q.op) == names.end())
    throw InvalidArgument(fmt::format("unknown op '{}'", q.op));
  if (q.shape.empty())
    throw InvalidArgument("explain_kernel_choice: the shape needs at least one size");
  for (auto s : q.shape)
    if (s < 0)
      throw InvalidArgument(fmt::format("explain_kernel_choice: negative size {}", s));
  if (q.dtype != DType::f32 && q.dtype != DType::f64)
    throw InvalidArgument("explain_kernel_choice: the dtype is float32 or float64");
  Query c{q};
  c.n = q.shape[0];
  c.features =
      std::accumulate(q.shape.begin() + 1, q.shape.end(), std::int64_t{1}, std::multiplies<>());
  c.numel = c.n * c.features;
  c.elem = static_cast<int>(size_of(q.dtype));
  std::string out =
      fmt::format("{} of shape [{}] {}{}\n", q.op, fmt::join(q.shape, ", "), to_string(q.dtype),
                  q.rows > 0 ? fmt::format(", {} output rows", q.rows) : std::string());
  const Determinism levels[] = {Determinism::not_guaranteed, Determinism::run_to_run,
                                Determinism::portable};
  for (DeviceType b : {DeviceType::cpu, DeviceType::cuda}) {
    out += fmt::format("  {:<5}", to_string(b));
    for (auto l : levels) {
      const SelectionPreview p = preview_selection(q.op, b, l);
      out += fmt::format(" {}: {};", to_string(l), p.runs ? p.variant : "throws");
    }
    out.back() = '\n';
  }
  for (const Family& f : families()) {
    if (std::find(f.ops.begin(), f.ops.end(), q.op) == f.ops.end())
      continue;
    out += "  CUDA kernels for this shape:\n";
    for (const auto& [variant, kernels] : f.lines(c))
      out += fmt::format("    {:<24} {}\n", variant, kernels);
    out += *f.tuning == '\0'
               ? fmt::format("  Assumes {} (this family has no launch tuning).\n", f.assumes)
               : fmt::format("  Assumes the default launch tuning ({}{{}}) and {}.\n", f.tuning,
                             f.assumes);
    return out;
  }
  out += "  No CUDA kernel choice for this op: each of its CUDA variants has one launch path.\n";
  return out;
}

} // namespace samebits
