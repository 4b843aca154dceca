// The op families of the backend-ops harness: for a case, the tensors (fresh random values from
// the case's seed, never zeros), the call, and a float64 reference with the scale of what each
// output element sums (the error bound is relative to it). References are computed from the
// values the placed views hold (a stride-0 view repeats its first row), in the documented order
// where it matters (which sources reach a target, what an empty target keeps).
#pragma once
#include "harness/cases.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

namespace samebits::harness {

struct Reference {
  std::vector<double> value, scale;
};

// What the runner needs for one case. roles[i] is placed with layouts[i]; the last role is the
// output. `run` calls the op on views of every role; `reference` takes every role's values (as
// placed, row-major, as doubles) and gives the expected output. `terms` bounds the rounded steps
// behind one output element (0: the result is exact, no rounding at all).
struct Problem {
  std::vector<Tensor> roles;
  std::vector<Layout> layouts;
  std::function<void(const std::vector<TensorView>&, const Options&)> run;
  std::function<Reference(const std::vector<std::vector<double>>&)> reference;
  std::int64_t terms = 0;
};

namespace detail_h {

inline std::int64_t uniform_int(std::mt19937_64& g, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(g);
}

// Values for a reduction: normal for sums, in [0.5, 1.5) for products (so they neither vanish
// nor overflow), integers for the copy ops.
inline Tensor values(const Shape& s, DType dt, std::uint64_t seed, bool product = false) {
  if (!is_floating(dt))
    return testing::random_values(s, dt, seed);
  return product ? testing::random_uniform(s, dt, 0.5, 1.5, seed)
                 : testing::random_normal(s, dt, seed);
}

// CSR offsets of `segments` segments over `total` positions, some of them empty.
inline Tensor random_offsets(std::int64_t segments, std::int64_t total, std::mt19937_64& g) {
  std::vector<std::int64_t> o(static_cast<std::size_t>(segments + 1));
  for (auto& v : o)
    v = uniform_int(g, 0, total);
  std::sort(o.begin(), o.end());
  o.front() = 0;
  o.back() = total;
  return Tensor::from_vector(o, {segments + 1});
}

inline double step(Reduce r, double acc, double c) {
  switch (r) {
  case Reduce::sum:
  case Reduce::mean:
    return acc + c;
  case Reduce::prod:
    return acc * c;
  case Reduce::amax:
    return c > acc ? c : acc;
  case Reduce::amin:
    return c < acc ? c : acc;
  }
  return acc;
}
inline double scale_step(Reduce r, double acc, double c) {
  return r == Reduce::amax || r == Reduce::amin ? std::fabs(step(r, acc, c))
                                                : step(r, acc, std::fabs(c));
}

inline std::int64_t size_for(const Case& c, std::mt19937_64& g, std::int64_t lo, std::int64_t hi) {
  if (c.size == Size::one)
    return 1;
  return uniform_int(g, lo, hi);
}

} // namespace detail_h

// index_add (and its plan form): out [n, f] += alpha * src [e, f] at rows index [e].
inline Problem index_add_problem(const Case& c) {
  using namespace detail_h;
  std::mt19937_64 g(c.seed);
  const std::int64_t e = c.size == Size::empty ? 0 : size_for(c, g, 2, 200);
  const std::int64_t n = c.size == Size::empty ? 3 : size_for(c, g, 1, 30);
  const std::int64_t f = c.size == Size::empty ? 2 : size_for(c, g, 2, 9);
  Problem p;
  p.roles = {testing::random_index(e, n, c.idx_dtype, c.seed + 1),
             values({e, f}, c.dtype, c.seed + 2), values({n, f}, c.dtype, c.seed + 3)};
  p.layouts = {c.in, c.in, c.out};
  p.terms = e + 2;
  const double alpha = c.alpha;
  const bool plan = c.family == Family::index_add_plan;
  p.run = [alpha, plan, n](const std::vector<TensorView>& v, const Options& o) {
    if (plan)
      index_add(v[2], make_index_plan(v[0], n, {.level = o.level, .stream = o.stream}), v[1], alpha,
                o);
    else
      index_add(v[2], v[0], v[1], alpha, o);
  };
  p.reference = [alpha, f](const std::vector<std::vector<double>>& in) {
    Reference r{in[2], in[2]};
    for (auto& s : r.scale)
      s = std::fabs(s);
    for (std::size_t i = 0; i < in[0].size(); ++i)
      for (std::int64_t k = 0; k < f; ++k) {
        const auto t = static_cast<std::size_t>(static_cast<std::int64_t>(in[0][i]) * f + k);
        const double x = in[1][i * static_cast<std::size_t>(f) + static_cast<std::size_t>(k)];
        r.value[t] += alpha * x;
        r.scale[t] += std::fabs(alpha * x);
      }
    return r;
  };
  return p;
}

// scatter_add / scatter_reduce along dim 0 or 1 of 2-D tensors; the index per element, or one
// vector expanded (stride 0) over the other dim.
inline Problem scatter_problem(const Case& c) {
  using namespace detail_h;
  std::mt19937_64 g(c.seed);
  const bool empty = c.size == Size::empty;
  const std::int64_t e = empty ? 0 : size_for(c, g, 1, 60); // sources along dim
  const std::int64_t n = empty ? 3 : size_for(c, g, 1, 12); // targets along dim
  const std::int64_t w = empty ? 2 : size_for(c, g, 1, 7);  // the other dim
  const int dim = c.dim;
  const Shape src_shape = dim == 0 ? Shape{e, w} : Shape{w, e};
  const Shape out_shape = dim == 0 ? Shape{n, w} : Shape{w, n};
  const bool prod = !c.add && c.reduce == Reduce::prod;
  Problem p;
  Tensor index =
      c.expanded
          ? testing::random_index(e, n, c.idx_dtype, c.seed + 1)
          : Tensor::copy_of(
                testing::random_index(e * w, n, c.idx_dtype, c.seed + 1).view().reshape(src_shape));
  p.roles = {index, values(src_shape, c.dtype, c.seed + 2, prod),
             values(out_shape, c.dtype, c.seed + 3, prod)};
  p.layouts = {c.in, c.in, c.out};
  const Reduce red = c.add ? Reduce::sum : c.reduce;
  p.terms = red == Reduce::amax || red == Reduce::amin ? 0 : e + 2; // a max is exact
  const bool self = c.add || c.include_self, add = c.add, expanded = c.expanded;
  p.run = [=](const std::vector<TensorView>& v, const Options& o) {
    TensorView idx = v[0];
    if (expanded) { // the vector [e] seen as src's shape, stride 0 across the other dim
      idx.ndim = 2;
      idx.shape = {src_shape[0], src_shape[1], 0, 0};
      idx.strides = dim == 0 ? std::array<std::int64_t, 4>{v[0].strides[0], 0, 0, 0}
                             : std::array<std::int64_t, 4>{0, v[0].strides[0], 0, 0};
    }
    if (add)
      scatter_add(v[2], dim, idx, v[1], o);
    else
      scatter_reduce(v[2], dim, idx, v[1], red, self, o);
  };
  p.reference = [=](const std::vector<std::vector<double>>& in) {
    Reference r{in[2], in[2]};
    for (auto& s : r.scale)
      s = std::fabs(s);
    std::vector<std::int64_t> count(r.value.size(), 0);
    for (std::int64_t i = 0; i < src_shape[0]; ++i) // row-major over src: ascending along dim
      for (std::int64_t j = 0; j < src_shape[1]; ++j) {
        const auto pos = static_cast<std::size_t>(i * src_shape[1] + j);
        const auto t = static_cast<std::int64_t>(
            in[0][expanded ? static_cast<std::size_t>(dim == 0 ? i : j) : pos]);
        const auto o =
            static_cast<std::size_t>(dim == 0 ? t * out_shape[1] + j : i * out_shape[1] + t);
        const double x = in[1][pos];
        if (count[o]++ == 0 && !self) {
          r.value[o] = x;
          r.scale[o] = std::fabs(x);
        } else {
          r.value[o] = step(red, r.value[o], x);
          r.scale[o] = scale_step(red, r.scale[o], x);
        }
      }
    if (red == Reduce::mean)
      for (std::size_t o = 0; o < count.size(); ++o)
        if (count[o] > 0) {
          const double d = static_cast<double>(count[o] + (self ? 1 : 0));
          r.value[o] /= d;
          r.scale[o] /= d;
        }
    return r;
  };
  return p;
}

// segment_reduce (src [e, f] over CSR offsets) and aggregate (x [nx, f] gathered through a
// CSR graph): out [s, f]; an empty segment gives +0.0.
inline Problem segment_problem(const Case& c) {
  using namespace detail_h;
  std::mt19937_64 g(c.seed);
  const bool empty = c.size == Size::empty;
  const bool agg = c.family == Family::aggregate;
  const std::int64_t s = empty ? 3 : size_for(c, g, 1, 20);
  const std::int64_t e = empty ? 0 : size_for(c, g, 1, 200);
  const std::int64_t f = empty ? 2 : size_for(c, g, 1, 7);
  const std::int64_t nx = empty ? 2 : size_for(c, g, 1, 15);
  Problem p;
  Tensor offsets = random_offsets(s, e, g);
  if (agg) {
    p.roles = {offsets, testing::random_index(e, nx, c.idx_dtype, c.seed + 1),
               values({nx, f}, c.dtype, c.seed + 2), values({s, f}, c.dtype, c.seed + 3)};
    p.layouts = {Layout::contiguous, c.in, c.in, c.out};
  } else {
    p.roles = {offsets, values({e, f}, c.dtype, c.seed + 2), values({s, f}, c.dtype, c.seed + 3)};
    p.layouts = {Layout::contiguous, c.in, c.out};
  }
  const Reduce red = c.reduce;
  p.terms = red == Reduce::amax || red == Reduce::amin ? 0 : e + 2;
  p.run = [=](const std::vector<TensorView>& v, const Options& o) {
    if (agg)
      aggregate(CsrGraph{v[0], v[1], -1}, v[2], v[3], red, o);
    else
      segment_reduce(v[1], v[0], v[2], red, o);
  };
  p.reference = [=](const std::vector<std::vector<double>>& in) {
    const auto& off = in[0];
    const auto& x = in[agg ? 2 : 1];
    Reference r{std::vector<double>(static_cast<std::size_t>(s * f), 0.0),
                std::vector<double>(static_cast<std::size_t>(s * f), 0.0)};
    for (std::int64_t t = 0; t < s; ++t)
      for (std::int64_t k = 0; k < f; ++k) {
        const auto b = static_cast<std::int64_t>(off[static_cast<std::size_t>(t)]);
        const auto end = static_cast<std::int64_t>(off[static_cast<std::size_t>(t + 1)]);
        double acc = 0, sc = 0;
        for (std::int64_t q = b; q < end; ++q) {
          const std::int64_t row =
              agg ? static_cast<std::int64_t>(in[1][static_cast<std::size_t>(q)]) : q;
          const double v = x[static_cast<std::size_t>(row * f + k)];
          acc = q == b ? v : step(red, acc, v);
          sc = q == b ? std::fabs(v) : scale_step(red, sc, v);
        }
        if (red == Reduce::mean && end > b) {
          acc /= static_cast<double>(end - b);
          sc /= static_cast<double>(end - b);
        }
        r.value[static_cast<std::size_t>(t * f + k)] = acc;
        r.scale[static_cast<std::size_t>(t * f + k)] = sc;
      }
    return r;
  };
  return p;
}

Problem other_problem(const Case& c); // families_more.hpp

inline Problem build(const Case& c) {
  switch (c.family) {
  case Family::index_add:
  case Family::index_add_plan:
    return index_add_problem(c);
  case Family::scatter:
    return scatter_problem(c);
  case Family::segment_reduce:
  case Family::aggregate:
    return segment_problem(c);
  default:
    return other_problem(c);
  }
}

} // namespace samebits::harness

#include "harness/families_more.hpp"
