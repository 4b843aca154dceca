// The case axes of the backend-ops harness and their generation: every op family crossed with
// its options, dtypes, input and output layouts and size classes. A case is a plain record; the
// family's builder (families.hpp) turns it into tensors, a call and a float64 reference. Cases are
// numbered in generation order and each takes its seed from the run's seed and its number, so a
// run's seed (SAMEBITS_TEST_SEED) replays every case, whichever subset runs.
#pragma once
#include "harness/layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace samebits::harness {

enum class Family : std::uint8_t {
  index_add,
  index_add_plan,
  scatter,
  segment_reduce,
  aggregate,
  sum,
  sum_dim,
  dot,
  cumsum,
  gemm,
  index_select,
  gather,
  bincount,
  histc
};

// one: every size 1; small: random sizes of a few to a few thousand elements; empty: a zero size.
enum class Size : std::uint8_t { one, small, empty };

struct Case {
  Family family{};
  DType dtype = DType::f32;     // the values' dtype
  DType idx_dtype = DType::i64; // the index's dtype, where there is one
  Layout in = Layout::contiguous, out = Layout::contiguous;
  Size size = Size::small;
  // Options (each family reads those it has).
  double alpha = 1.0, beta = 0.0; // index_add: alpha; gemm: alpha and beta
  bool add = false;               // scatter: scatter_add rather than scatter_reduce
  Reduce reduce = Reduce::sum;    // scatter, segment_reduce, aggregate
  bool include_self = true;       // scatter_reduce
  bool expanded = false;          // scatter: one index vector expanded over the other dim
  bool weighted = false;          // bincount
  int dim = 0;                    // scatter, sum_dim, cumsum, index_select, gather
  bool ta = false, tb = false;    // gemm
  int number = 0;                 // position in generation order
  std::uint64_t seed = 0;         // this case's own seed

  std::string label() const;
};

inline const char* to_string(Family f) {
  constexpr const char* names[] = {
      "index_add",    "index_add_plan", "scatter",  "segment_reduce", "aggregate",
      "sum",          "sum_dim",        "dot",      "cumsum",         "gemm",
      "index_select", "gather",         "bincount", "histc"};
  return names[static_cast<int>(f)];
}

// The registry's name of the op a case calls (selection previews and forced variants use it).
inline std::string op_name(const Case& c) {
  if (c.family == Family::scatter)
    return c.add ? "scatter_add" : "scatter_reduce";
  return to_string(c.family);
}

inline std::string Case::label() const {
  std::string s = "case " + std::to_string(number) + ": " + op_name(*this) + "[";
  switch (family) {
  case Family::index_add:
  case Family::index_add_plan:
    s += "alpha=" + std::to_string(alpha).substr(0, 5);
    break;
  case Family::scatter:
    s += (add ? std::string("add") : std::string(samebits::to_string(reduce))) +
         ",self=" + (include_self ? "1" : "0") + ",dim=" + std::to_string(dim) +
         (expanded ? ",expanded" : ",per_element");
    break;
  case Family::segment_reduce:
  case Family::aggregate:
    s += samebits::to_string(reduce);
    break;
  case Family::sum_dim:
  case Family::cumsum:
  case Family::index_select:
  case Family::gather:
    s += "dim=" + std::to_string(dim);
    break;
  case Family::gemm:
    s += std::string(ta ? "T" : "N") + (tb ? "T" : "N") +
         ",alpha=" + std::to_string(alpha).substr(0, 5) +
         ",beta=" + std::to_string(beta).substr(0, 5);
    break;
  case Family::bincount:
    s += weighted ? "weighted" : "counts";
    break;
  default:
    break;
  }
  s += "] " + std::string(samebits::to_string(dtype)) + "/" +
       std::string(samebits::to_string(idx_dtype)) + " in=" + harness::to_string(in) +
       " out=" + harness::to_string(out) + " " +
       (size == Size::one     ? "one"
        : size == Size::small ? "small"
                              : "empty");
  return s;
}

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Every case, in a fixed order. Each family's options are crossed with the dtypes, every input
// layout that changes one of its inputs, every output layout and the size classes (a zero size
// and all-ones sizes with contiguous tensors only: their layouts change nothing worth the time;
// small sizes twice, two draws);
// the index dtype alternates between cases.
inline std::vector<Case> generate_cases(std::uint64_t seed) {
  std::vector<Case> all;
  // Options of each family, as partially filled cases.
  std::vector<Case> opts;
  auto with = [&](Family f, auto&& set) {
    Case c;
    c.family = f;
    set(c);
    opts.push_back(c);
  };
  for (bool plan : {false, true})
    for (double alpha : {1.0, -0.75})
      with(plan ? Family::index_add_plan : Family::index_add, [&](Case& c) { c.alpha = alpha; });
  for (int dim : {0, 1})
    for (bool expanded : {false, true}) {
      with(Family::scatter, [&](Case& c) {
        c.add = true;
        c.dim = dim;
        c.expanded = expanded;
      });
      for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin, Reduce::prod})
        for (bool self : {true, false})
          with(Family::scatter, [&](Case& c) {
            c.reduce = r;
            c.include_self = self;
            c.dim = dim;
            c.expanded = expanded;
          });
    }
  for (Family f : {Family::segment_reduce, Family::aggregate})
    for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin})
      with(f, [&](Case& c) { c.reduce = r; });
  with(Family::sum, [](Case&) {});
  with(Family::dot, [](Case&) {});
  for (int dim : {0, 1}) {
    with(Family::sum_dim, [&](Case& c) { c.dim = dim; });
    with(Family::cumsum, [&](Case& c) { c.dim = dim; });
    with(Family::index_select, [&](Case& c) { c.dim = dim; });
    with(Family::gather, [&](Case& c) { c.dim = dim; });
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {1.0, 1.0}, {-0.5, 1.25}})
        with(Family::gemm, [&](Case& c) {
          c.ta = ta;
          c.tb = tb;
          c.alpha = alpha;
          c.beta = beta;
        });
  for (bool w : {false, true})
    with(Family::bincount, [&](Case& c) { c.weighted = w; });
  with(Family::histc, [](Case&) {});

  for (const Case& o : opts) {
    const bool copies = o.family == Family::index_select || o.family == Family::gather;
    std::vector<DType> dtypes{DType::f32, DType::f64};
    if (copies)
      dtypes = {DType::f32, DType::f64, DType::i32, DType::i64};
    if (o.family == Family::bincount && !o.weighted)
      dtypes = {DType::i64}; // counts: the output is int64 whatever else
    // Inputs of at most one dim are not changed by a transpose.
    const bool inputs_1d = o.family == Family::dot || o.family == Family::bincount;
    const bool output_1d = o.family == Family::sum || o.family == Family::dot ||
                           o.family == Family::bincount || o.family == Family::histc ||
                           (o.family == Family::sum_dim);
    for (DType dt : dtypes)
      for (Layout in : kInputLayouts) {
        if (in == Layout::transposed && inputs_1d)
          continue;
        for (Layout out : kOutputLayouts) {
          if (out == Layout::transposed && output_1d)
            continue;
          for (Size size : {Size::small, Size::small, Size::one, Size::empty}) {
            if (size != Size::small && (in != Layout::contiguous || out != Layout::contiguous))
              continue;
            Case c = o;
            c.dtype = dt;
            c.in = in;
            c.out = out;
            c.size = size;
            c.number = static_cast<int>(all.size());
            c.idx_dtype = c.number % 2 ? DType::i32 : DType::i64;
            c.seed = splitmix64(seed ^
                                (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(c.number + 1)));
            all.push_back(c);
          }
        }
      }
  }
  return all;
}

} // namespace samebits::harness
