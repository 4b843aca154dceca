// The ops `samebits variability` and `samebits calibrate` can run: one entry per op, each making
// fixed random inputs (portable Philox fills, so the inputs are the same on every device) and a
// run function that overwrites the output.
#include "samebits/app/variability.hpp"
#include "samebits/random.hpp"
#include "samebits/samebits.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string>
#include <vector>

namespace samebits {

namespace {

std::string dims(const TensorView& t) {
  std::string s;
  for (int d = 0; d < t.ndim; ++d)
    s += (d ? ", " : "") + std::to_string(t.size(d));
  return fmt::format("{}[{}]", to_string(t.dtype), s);
}

// Shapes: `features` < 0 means 1-d tensors ([n] -> [rows]); otherwise [n, features].
Shape rows_shape(std::int64_t rows, std::int64_t features) {
  return features < 0 ? Shape{rows} : Shape{rows, features};
}

Tensor normal(const Shape& s, Device d, std::uint64_t seed, std::uint64_t stream) {
  Tensor t = Tensor::empty(s, DType::f32, d);
  fill_normal(t, seed, stream);
  return t;
}

Tensor indices(std::int64_t n, std::int64_t hi, Device d, std::uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::i64, d);
  fill_integers(t, 0, hi, seed, 100);
  return t;
}

// A scatter index with src's shape: row i's target repeated across the features.
Tensor expanded_index(const Tensor& index, std::int64_t features, Device d) {
  if (features < 0)
    return index.to(d);
  const auto idx = index.to_vector<std::int64_t>();
  std::vector<std::int64_t> e;
  e.reserve(idx.size() * static_cast<std::size_t>(features));
  for (auto v : idx)
    e.insert(e.end(), static_cast<std::size_t>(features), v);
  return Tensor::from_vector(e, {static_cast<std::int64_t>(idx.size()), features}, d);
}

// CSR offsets of a sorted random assignment of n sources to `rows` segments.
Tensor segment_offsets(std::int64_t n, std::int64_t rows, Device d, std::uint64_t seed) {
  const auto idx = indices(n, rows, Device::cpu(), seed).to_vector<std::int64_t>();
  std::vector<std::int64_t> off(static_cast<std::size_t>(rows + 1), 0);
  for (auto v : idx)
    ++off[static_cast<std::size_t>(v + 1)];
  for (std::size_t i = 1; i < off.size(); ++i)
    off[i] += off[i - 1];
  return Tensor::from_vector(off, {rows + 1}, d);
}

Reduce reduce_of(const OpShape& s) {
  return parse_reduce(s.reduce.empty() ? "sum" : s.reduce);
}

PreparedOp prep_sum(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor x = normal({s.n}, d, seed, 1);
  Tensor out = Tensor::empty({1}, DType::f32, d);
  return {"sum", fmt::format("x {} -> out {}", dims(x), dims(out)), out,
          [x, out](const Options& o) { sum(x, out, o); }};
}

PreparedOp prep_dot(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor a = normal({s.n}, d, seed, 1), b = normal({s.n}, d, seed, 2);
  Tensor out = Tensor::empty({1}, DType::f32, d);
  return {"dot", fmt::format("a, b {} -> out {}", dims(a), dims(out)), out,
          [a, b, out](const Options& o) { dot(a, b, out, o); }};
}

PreparedOp prep_sum_dim(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor x = normal({s.rows, s.features}, d, seed, 1);
  const int dim = s.dim;
  if (dim != 0 && dim != 1)
    throw InvalidArgument("sum_dim: --dim must be 0 or 1");
  Tensor out = Tensor::empty({dim == 0 ? s.features : s.rows}, DType::f32, d);
  return {"sum_dim", fmt::format("x {} summed over dim {} -> out {}", dims(x), dim, dims(out)), out,
          [x, out, dim](const Options& o) { sum_dim(x, dim, out, o); }};
}

PreparedOp prep_cumsum(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor x = normal({s.n}, d, seed, 1);
  Tensor out = Tensor::empty({s.n}, DType::f32, d);
  return {"cumsum", fmt::format("x {} -> out {}", dims(x), dims(out)), out,
          [x, out](const Options& o) { cumsum(x, 0, out, o); }};
}

PreparedOp prep_index_add(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor src = normal(rows_shape(s.n, s.features), d, seed, 1);
  Tensor index = indices(s.n, s.rows, d, seed);
  Tensor out = Tensor::zeros(rows_shape(s.rows, s.features), DType::f32, d);
  return {"index_add",
          fmt::format("src {} -> out {} (index int64[{}] in [0, {}))", dims(src), dims(out), s.n,
                      s.rows),
          out, [src, index, out](const Options& o) {
            fill(out, 0.0);
            index_add(out, index, src, 1.0, o);
          }};
}

PreparedOp prep_scatter(const OpShape& s, Device d, std::uint64_t seed, bool add) {
  Tensor src = normal(rows_shape(s.n, s.features), d, seed, 1);
  Tensor index = expanded_index(indices(s.n, s.rows, Device::cpu(), seed), s.features, d);
  Tensor out = Tensor::zeros(rows_shape(s.rows, s.features), DType::f32, d);
  const Reduce r = reduce_of(s);
  const std::string name = add ? "scatter_add" : "scatter_reduce";
  return {name,
          fmt::format("src {} -> out {} ({}{})", dims(src), dims(out), add ? "sum" : to_string(r),
                      add ? "" : ", include_self=false"),
          out, [src, index, out, r, add](const Options& o) {
            fill(out, 0.0);
            if (add)
              scatter_add(out, 0, index, src, o);
            else
              scatter_reduce(out, 0, index, src, r, false, o);
          }};
}

PreparedOp prep_segment(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor src = normal(rows_shape(s.n, s.features), d, seed, 1);
  Tensor offsets = segment_offsets(s.n, s.rows, d, seed);
  Tensor out = Tensor::empty(rows_shape(s.rows, s.features), DType::f32, d);
  const Reduce r = reduce_of(s);
  return {
      "segment_reduce",
      fmt::format("src {} -> out {} ({} over sorted segments)", dims(src), dims(out), to_string(r)),
      out, [src, offsets, out, r](const Options& o) { segment_reduce(src, offsets, out, r, o); }};
}

PreparedOp prep_aggregate(const OpShape& s, Device d, std::uint64_t seed) {
  // A random graph: n edges between `rows` nodes; x holds `features` values per node.
  const std::int64_t f = s.features;
  Tensor esrc = indices(s.n, s.rows, Device::cpu(), seed);
  Tensor edst = Tensor::empty({s.n}, DType::i64);
  fill_integers(edst, 0, s.rows, seed, 101);
  Csr host = csr_from_edges(esrc, edst, s.rows);
  Csr csr{host.offsets.to(d), host.indices.to(d), host.num_sources};
  Tensor x = normal({s.rows, f}, d, seed, 1);
  Tensor out = Tensor::empty({s.rows, f}, DType::f32, d);
  const Reduce r = reduce_of(s);
  return {"aggregate",
          fmt::format("x {} over {} edges -> out {} ({})", dims(x), s.n, dims(out), to_string(r)),
          out, [csr, x, out, r](const Options& o) { aggregate(csr.view(), x, out, r, o); }};
}

PreparedOp prep_bincount(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor index = indices(s.n, s.rows, d, seed);
  Tensor w = normal({s.n}, d, seed, 1);
  Tensor out = Tensor::empty({s.rows}, DType::f32, d);
  return {"bincount", fmt::format("weights {} -> out {} (weighted)", dims(w), dims(out)), out,
          [index, w, out](const Options& o) { bincount(index, w, out, o); }};
}

PreparedOp prep_gemm(const OpShape& s, Device d, std::uint64_t seed) {
  Tensor a = normal({s.rows, s.n}, d, seed, 1), b = normal({s.n, s.features}, d, seed, 2);
  Tensor c = Tensor::empty({s.rows, s.features}, DType::f32, d);
  return {
      "gemm", fmt::format("a {} @ b {} -> c {}", dims(a), dims(b), dims(c)), c,
      [a, b, c](const Options& o) { gemm(Transpose::no, Transpose::no, 1.0, a, b, 0.0, c, o); }};
}

} // namespace

const std::vector<OpEntry>& variability_ops() {
  using P = PreparedOp;
  constexpr unsigned scatter = kReadsN | kReadsRows | kReadsFeatures | kOneDimensional;
  static const std::vector<OpEntry> table = {
      {"sum", "sum of x[n]", {.n = 1 << 22}, prep_sum, kReadsN},
      {"dot", "dot product of a[n], b[n]", {.n = 1 << 22}, prep_dot, kReadsN},
      {"sum_dim",
       "x[rows, features] summed over --dim",
       {.rows = 4096, .features = 1024},
       prep_sum_dim,
       kReadsRows | kReadsFeatures | kReadsDim},
      {"cumsum", "inclusive prefix sum of x[n]", {.n = 1 << 20}, prep_cumsum, kReadsN},
      {"index_add",
       "out[rows(, features)] += src[n(, features)] at random rows (features -1: 1-d)",
       {.n = 1000000, .rows = 1000, .features = -1},
       prep_index_add,
       scatter},
      {"scatter_add",
       "as index_add, through scatter_add with an expanded index",
       {.n = 1000000, .rows = 1000, .features = -1},
       [](const OpShape& s, Device d, std::uint64_t seed) -> P {
         return prep_scatter(s, d, seed, true);
       },
       scatter},
      {"scatter_reduce",
       "scatter_reduce --reduce (sum, mean, amax, amin), include_self=false",
       {.n = 1000000, .rows = 1000, .features = -1, .reduce = "sum"},
       [](const OpShape& s, Device d, std::uint64_t seed) -> P {
         return prep_scatter(s, d, seed, false);
       },
       scatter | kReadsReduce},
      {"segment_reduce",
       "--reduce of src[n(, features)] over rows sorted segments",
       {.n = 1000000, .rows = 1000, .features = -1, .reduce = "sum"},
       prep_segment,
       scatter | kReadsReduce},
      {"aggregate",
       "graph aggregation (--reduce) of x[rows, features] over n random edges",
       {.n = 1000000, .rows = 10000, .features = 16, .reduce = "sum"},
       prep_aggregate,
       kReadsN | kReadsRows | kReadsFeatures | kReadsReduce},
      {"bincount",
       "weighted bincount: n weights into rows bins",
       {.n = 1000000, .rows = 1000},
       prep_bincount,
       kReadsN | kReadsRows},
      {"gemm",
       "a[rows, n] @ b[n, features]",
       {.n = 512, .rows = 512, .features = 512},
       prep_gemm,
       kReadsN | kReadsRows | kReadsFeatures},
  };
  return table;
}

OpShape with_defaults(const OpEntry& e, const OpShape& s) {
  OpShape r = s;
  if (r.n == 0)
    r.n = e.defaults.n;
  if (r.rows == 0)
    r.rows = e.defaults.rows;
  if (r.features == 0)
    r.features = e.defaults.features;
  if (r.reduce.empty())
    r.reduce = e.defaults.reduce;
  if (r.dim == 0)
    r.dim = e.defaults.dim;
  return r;
}

const OpEntry& find_op(const std::string& op) {
  for (const auto& e : variability_ops())
    if (e.name == op)
      return e;
  std::string known;
  for (const auto& e : variability_ops())
    known += (known.empty() ? "" : ", ") + e.name;
  throw InvalidArgument(fmt::format("unknown op '{}': known ops are {}", op, known));
}

std::string shape_value(const OpShape& s, ShapeOption bit) {
  switch (bit) {
  case kReadsN:
    return std::to_string(s.n);
  case kReadsRows:
    return std::to_string(s.rows);
  case kReadsFeatures:
    return std::to_string(s.features);
  case kReadsDim:
    return std::to_string(s.dim);
  case kReadsReduce:
    return s.reduce;
  default:
    return "";
  }
}

void check_shape(const OpEntry& e, const OpShape& s) {
  std::vector<std::string> unread, read;
  for (const auto& [bit, flag] : kShapeFlags) {
    const std::string value = shape_value(s, bit);
    if (e.reads & bit)
      read.emplace_back(flag);
    else if (!value.empty() && value != "0")
      unread.emplace_back(flag);
  }
  if (!unread.empty())
    throw InvalidArgument(fmt::format("{} {} not apply to {} (it reads {})",
                                      fmt::join(unread, ", "), unread.size() == 1 ? "does" : "do",
                                      e.name, fmt::join(read, ", ")));
  if (s.features < 0 && !(e.reads & kOneDimensional))
    throw InvalidArgument(fmt::format(
        "--features {} (1-d tensors) does not apply to {}: give 1 or more", s.features, e.name));
}

PreparedOp prepare_op(const std::string& op, const OpShape& shape, Device device,
                      std::uint64_t seed) {
  const OpEntry& e = find_op(op);
  check_shape(e, shape);
  return e.prepare(with_defaults(e, shape), device, seed);
}

} // namespace samebits
