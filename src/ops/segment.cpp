// Public entry points of segment_reduce and aggregate (validate, then dispatch to a variant), and
// the CSR builders csr_from_edges and transpose (host algorithms; results go back to the device
// of their inputs).
#include "ops/segment.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "ops/checks.hpp"
#include "ops/half_staging.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <vector>

namespace samebits {

using namespace detail;

namespace detail {

namespace {
template <class I> std::int64_t at(const TensorView& t, std::int64_t i) {
  return static_cast<std::int64_t>(static_cast<const I*>(t.data)[i * t.strides[0]]);
}
std::int64_t index_at(const TensorView& t, std::int64_t i) {
  return t.dtype == DType::i32 ? at<std::int32_t>(t, i) : at<std::int64_t>(t, i);
}

// A contiguous view of a 1-D index tensor (itself or a copy kept in `hold`).
TensorView contiguous_1d(const TensorView& t, Tensor& hold) {
  if (t.is_contiguous())
    return t;
  hold = Tensor::copy_of(t, t.device);
  return hold.view();
}

void check_rows_match(const char* op, const TensorView& x, const TensorView& out,
                      std::int64_t out_rows) {
  if (x.ndim < 1 || out.ndim != x.ndim)
    throw InvalidArgument(fmt::format("{}: x must have at least 1 dim and out as many as x; got "
                                      "{} and {}",
                                      op, x.describe(), out.describe()));
  Shape expected = x.sizes();
  expected[0] = out_rows;
  check_shape(op, "out", out, expected);
}

} // namespace

void check_csr_values(const char* op, const TensorView& offsets, const TensorView& indices,
                      bool identity, std::int64_t num_positions, std::int64_t rows) {
  const std::int64_t n = offsets.size(0);
  const auto* off = static_cast<const std::int64_t*>(offsets.data);
  const std::int64_t os = offsets.strides[0];
  if (off[0] != 0)
    throw IndexOutOfRange(fmt::format("{}: offsets[0] is {}, must be 0", op, off[0]));
  for (std::int64_t i = 1; i < n; ++i)
    if (off[i * os] < off[(i - 1) * os])
      throw IndexOutOfRange(fmt::format("{}: offsets decrease at position {} ({} after {})", op, i,
                                        off[i * os], off[(i - 1) * os]));
  if (off[(n - 1) * os] != num_positions)
    throw IndexOutOfRange(fmt::format("{}: the last offset is {}, must equal the number of {} ({})",
                                      op, off[(n - 1) * os], identity ? "rows of src" : "indices",
                                      num_positions));
  if (identity)
    return;
  for (std::int64_t k = 0; k < num_positions; ++k) {
    const std::int64_t v = index_at(indices, k);
    if (v < 0 || v >= rows)
      throw IndexOutOfRange(fmt::format("{}: indices[{}] = {} is outside [0, {})", op, k, v, rows));
  }
}

} // namespace detail

void segment_reduce(const TensorView& src, const TensorView& offsets, const TensorView& out,
                    Reduce reduce, const Options& opts) {
  const char* op = "segment_reduce";
  check_float_or_half(op, "src", src);
  check_same_dtype(op, src, out);
  check_same_device(op, {src, offsets, out});
  check_data(op, "src", src);
  check_data(op, "offsets", offsets);
  check_data(op, "out", out);
  check_output(op, "out", out, {{"src", src}, {"offsets", offsets}});
  if (offsets.dtype != DType::i64 || offsets.ndim != 1 || offsets.size(0) < 1)
    throw InvalidArgument(fmt::format("{}: offsets must be int64 [num_segments + 1], got {}", op,
                                      offsets.describe()));
  if (reduce == Reduce::prod)
    throw InvalidArgument(
        fmt::format("{}: reduce must be sum, mean, amax or amin, got {}", op, to_string(reduce)));
  check_rows_match(op, src, out, offsets.size(0) - 1);
  if (is_half(src.dtype)) { // float32 chains, rounded once; bad offsets throw before the rounding
    const Tensor of = staged_output(out, false, opts);
    segment_reduce(to_float32(src, opts.stream), offsets, of, reduce, opts);
    return round_into(of, out, opts.stream);
  }
  Tensor hold;
  const TensorView off = contiguous_1d(offsets, hold);
  SegmentArgs a{src, off, TensorView{}, out, reduce, true, false};
  a.indices.device = src.device;
  if (src.device.is_cpu()) {
    check_csr_values(op, off, {}, true, src.size(0), src.size(0));
    a.checked = true;
  }
  dispatch(op, src.device, a, opts);
}

void aggregate(const CsrGraph& graph, const TensorView& x, const TensorView& out, Reduce reduce,
               const Options& opts) {
  const char* op = "aggregate";
  check_float_or_half(op, "x", x);
  check_same_dtype(op, x, out);
  check_same_device(op, {graph.offsets, graph.indices, x, out});
  check_data(op, "x", x);
  check_data(op, "out", out);
  check_data(op, "offsets", graph.offsets);
  check_data(op, "indices", graph.indices);
  check_output(op, "out", out,
               {{"x", x}, {"graph offsets", graph.offsets}, {"graph indices", graph.indices}});
  if (graph.offsets.dtype != DType::i64 || graph.offsets.ndim != 1 || graph.offsets.size(0) < 1)
    throw InvalidArgument(fmt::format("{}: graph offsets must be int64 [num_nodes + 1], got {}", op,
                                      graph.offsets.describe()));
  check_index_dtype(op, "graph indices", graph.indices);
  if (graph.indices.ndim != 1)
    throw InvalidArgument(
        fmt::format("{}: graph indices must be 1-D, got {}", op, graph.indices.describe()));
  if (reduce == Reduce::prod)
    throw InvalidArgument(
        fmt::format("{}: reduce must be sum, mean, amax or amin, got {}", op, to_string(reduce)));
  check_rows_match(op, x, out, graph.offsets.size(0) - 1);
  if (is_half(x.dtype)) {
    const Tensor of = staged_output(out, false, opts);
    aggregate(graph, to_float32(x, opts.stream), of, reduce, opts);
    return round_into(of, out, opts.stream);
  }
  Tensor hold_off, hold_idx;
  const TensorView off = contiguous_1d(graph.offsets, hold_off);
  const TensorView idx = contiguous_1d(graph.indices, hold_idx);
  SegmentArgs a{x, off, idx, out, reduce, false, false};
  if (x.device.is_cpu()) {
    check_csr_values(op, off, idx, false, idx.size(0), x.size(0));
    a.checked = true;
  } else {
    // A graph validated at build time needs no check if x has all the rows it may address.
    a.checked = graph.checked_sources >= 0 && x.size(0) >= graph.checked_sources;
  }
  dispatch(op, x.device, a, opts);
}

// --- CSR builders ---------------------------------------------------------------------------

namespace {

template <class I>
Csr build_csr(const I* src, const I* dst, std::int64_t e, std::int64_t num_nodes) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(num_nodes + 1), 0);
  for (std::int64_t k = 0; k < e; ++k)
    ++off[static_cast<std::size_t>(dst[k]) + 1];
  for (std::int64_t i = 0; i < num_nodes; ++i)
    off[static_cast<std::size_t>(i + 1)] += off[static_cast<std::size_t>(i)];
  Csr c;
  c.offsets = Tensor::from_vector(off, {num_nodes + 1});
  c.indices = Tensor::empty({e}, dtype_of<I>());
  I* idx = c.indices.data<I>();
  std::vector<std::int64_t> fill(off.begin(), off.end() - 1);
  for (std::int64_t k = 0; k < e; ++k)
    idx[fill[static_cast<std::size_t>(dst[k])]++] = src[k];
  for (std::int64_t i = 0; i < num_nodes; ++i)
    std::sort(idx + off[static_cast<std::size_t>(i)], idx + off[static_cast<std::size_t>(i + 1)]);
  c.num_sources = num_nodes;
  return c;
}

Csr to_device(Csr c, Device d) {
  c.offsets = c.offsets.to(d);
  c.indices = c.indices.to(d);
  return c;
}

} // namespace

Csr csr_from_edges(const TensorView& src, const TensorView& dst, std::int64_t num_nodes) {
  const char* op = "csr_from_edges";
  check_index_dtype(op, "src", src);
  check_same_dtype(op, src, dst);
  check_same_device(op, {src, dst});
  if (src.ndim != 1 || dst.ndim != 1 || src.size(0) != dst.size(0))
    throw InvalidArgument(fmt::format("{}: src and dst must be 1-D of one length, got {} and {}",
                                      op, src.describe(), dst.describe()));
  if (num_nodes < 0)
    throw InvalidArgument(fmt::format("{}: num_nodes is negative", op));
  const Tensor hs = Tensor::copy_of(src, Device::cpu()), hd = Tensor::copy_of(dst, Device::cpu());
  const std::int64_t e = hs.numel();
  for (std::int64_t k = 0; k < e; ++k) {
    const std::int64_t s = index_at(hs.view(), k), t = index_at(hd.view(), k);
    if (s < 0 || s >= num_nodes || t < 0 || t >= num_nodes)
      throw IndexOutOfRange(
          fmt::format("{}: edge {} ({} -> {}) has a node outside [0, {})", op, k, s, t, num_nodes));
  }
  Csr c = src.dtype == DType::i32
              ? build_csr(hs.data<std::int32_t>(), hd.data<std::int32_t>(), e, num_nodes)
              : build_csr(hs.data<std::int64_t>(), hd.data<std::int64_t>(), e, num_nodes);
  return to_device(std::move(c), src.device);
}

Csr transpose(const Csr& csr, std::int64_t num_source_nodes) {
  const char* op = "transpose";
  if (csr.offsets.dtype() != DType::i64 || csr.offsets.ndim() != 1 || csr.offsets.numel() < 1)
    throw InvalidArgument(fmt::format("{}: offsets must be int64 [num_nodes + 1]", op));
  check_index_dtype(op, "indices", csr.indices);
  if (num_source_nodes < 0)
    throw InvalidArgument(fmt::format("{}: num_source_nodes is negative", op));
  const Tensor ho = csr.offsets.to(Device::cpu()), hi = csr.indices.to(Device::cpu());
  const std::int64_t n = ho.numel() - 1, e = hi.numel();
  check_csr_values(op, ho.view(), hi.view(), false, e, num_source_nodes);
  // Row i's entries are visited for i ascending, so each transposed row comes out sorted.
  std::vector<std::int64_t> src(static_cast<std::size_t>(e)), dst(static_cast<std::size_t>(e));
  const auto* off = ho.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = off[i]; k < off[i + 1]; ++k) {
      src[static_cast<std::size_t>(k)] = i;
      dst[static_cast<std::size_t>(k)] = index_at(hi.view(), k);
    }
  Csr c;
  if (csr.indices.dtype() == DType::i32) {
    std::vector<std::int32_t> s32(src.begin(), src.end()), d32(dst.begin(), dst.end());
    c = build_csr(s32.data(), d32.data(), e, num_source_nodes);
  } else {
    c = build_csr(src.data(), dst.data(), e, num_source_nodes);
  }
  // Indices of the transpose address the rows of `csr`.
  c.num_sources = n;
  return to_device(std::move(c), csr.offsets.device());
}

} // namespace samebits
