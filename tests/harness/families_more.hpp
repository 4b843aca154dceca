// The remaining op families of the backend-ops harness (included by families.hpp): sums, dot,
// cumsum, gemm, the copy ops and the counting ops.
#pragma once
#include "harness/families.hpp"

namespace samebits::harness {

namespace detail_h {

// A reference whose scale is |value| (copies and counts, which are exact).
inline Reference exact(std::vector<double> v) {
  Reference r{v, v};
  for (auto& s : r.scale)
    s = std::fabs(s);
  return r;
}

// Sums of x [r, c] along dim (0 or 1), or of everything (dim -1).
inline Reference sums(const std::vector<double>& x, std::int64_t r, std::int64_t c, int dim) {
  const std::int64_t n = dim < 0 ? 1 : dim == 0 ? c : r;
  Reference ref{std::vector<double>(static_cast<std::size_t>(n), 0.0),
                std::vector<double>(static_cast<std::size_t>(n), 0.0)};
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) {
      const auto o = static_cast<std::size_t>(dim < 0 ? 0 : dim == 0 ? j : i);
      const double v = x[static_cast<std::size_t>(i * c + j)];
      ref.value[o] += v;
      ref.scale[o] += std::fabs(v);
    }
  return ref;
}

} // namespace detail_h

inline Problem other_problem(const Case& c) {
  using namespace detail_h;
  std::mt19937_64 g(c.seed);
  const bool empty = c.size == Size::empty;
  Problem p;
  switch (c.family) {
  case Family::sum:
  case Family::sum_dim: {
    // Up to 12000 elements: several of the canonical tree's 4096-element chunks.
    const std::int64_t r = empty ? 0 : size_for(c, g, 1, 40),
                       k = empty ? 3 : size_for(c, g, 1, 300);
    const bool all = c.family == Family::sum;
    const int dim = all ? -1 : c.dim;
    p.roles = {values({r, k}, c.dtype, c.seed + 1), values({all        ? 1
                                                            : dim == 0 ? k
                                                                       : r},
                                                           c.dtype, c.seed + 2)};
    p.layouts = {c.in, c.out};
    p.terms = r * k + 1;
    p.run = [=](const std::vector<TensorView>& v, const Options& o) {
      if (all)
        sum(v[0], v[1], o);
      else
        sum_dim(v[0], dim, v[1], o);
    };
    p.reference = [=](const std::vector<std::vector<double>>& in) {
      return sums(in[0], r, k, dim);
    };
    return p;
  }
  case Family::dot: {
    const std::int64_t n = empty ? 0 : size_for(c, g, 1, 9000);
    p.roles = {values({n}, c.dtype, c.seed + 1), values({n}, c.dtype, c.seed + 2),
               values({1}, c.dtype, c.seed + 3)};
    p.layouts = {c.in, c.in, c.out};
    p.terms = 2 * n + 1;
    p.run = [](const std::vector<TensorView>& v, const Options& o) { dot(v[0], v[1], v[2], o); };
    p.reference = [](const std::vector<std::vector<double>>& in) {
      Reference r{{0.0}, {0.0}};
      for (std::size_t i = 0; i < in[0].size(); ++i) {
        r.value[0] += in[0][i] * in[1][i];
        r.scale[0] += std::fabs(in[0][i] * in[1][i]);
      }
      return r;
    };
    return p;
  }
  case Family::cumsum: {
    const std::int64_t r = empty ? 0 : size_for(c, g, 1, 6), k = empty ? 4 : size_for(c, g, 1, 700);
    const int dim = c.dim;
    p.roles = {values({r, k}, c.dtype, c.seed + 1), values({r, k}, c.dtype, c.seed + 2)};
    p.layouts = {c.in, c.out};
    p.terms = (dim == 0 ? r : k) + 1;
    p.run = [dim](const std::vector<TensorView>& v, const Options& o) {
      cumsum(v[0], dim, v[1], o);
    };
    p.reference = [=](const std::vector<std::vector<double>>& in) {
      Reference ref{in[0], in[0]};
      for (std::int64_t i = 0; i < r; ++i)
        for (std::int64_t j = 0; j < k; ++j) {
          const auto at = static_cast<std::size_t>(i * k + j);
          ref.scale[at] = std::fabs(in[0][at]);
          const bool first = dim == 0 ? i == 0 : j == 0;
          if (!first) {
            const auto prev =
                static_cast<std::size_t>(dim == 0 ? at - static_cast<std::size_t>(k) : at - 1);
            ref.value[at] += ref.value[prev];
            ref.scale[at] += ref.scale[prev];
          }
        }
      return ref;
    };
    return p;
  }
  case Family::gemm: {
    const std::int64_t m = size_for(c, g, 1, 24), n = size_for(c, g, 1, 24);
    const std::int64_t k = empty ? 0 : size_for(c, g, 1, 40);
    const bool ta = c.ta, tb = c.tb;
    const double alpha = c.alpha, beta = c.beta;
    p.roles = {values(ta ? Shape{k, m} : Shape{m, k}, c.dtype, c.seed + 1),
               values(tb ? Shape{n, k} : Shape{k, n}, c.dtype, c.seed + 2),
               values({m, n}, c.dtype, c.seed + 3)};
    p.layouts = {c.in, c.in, c.out};
    p.terms = 2 * k + 4;
    p.run = [=](const std::vector<TensorView>& v, const Options& o) {
      gemm(ta ? Transpose::yes : Transpose::no, tb ? Transpose::yes : Transpose::no, alpha, v[0],
           v[1], beta, v[2], o);
    };
    p.reference = [=](const std::vector<std::vector<double>>& in) {
      Reference r{std::vector<double>(static_cast<std::size_t>(m * n)),
                  std::vector<double>(static_cast<std::size_t>(m * n))};
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0, sc = 0;
          for (std::int64_t q = 0; q < k; ++q) {
            const double a = in[0][static_cast<std::size_t>(ta ? q * m + i : i * k + q)];
            const double b = in[1][static_cast<std::size_t>(tb ? j * k + q : q * n + j)];
            acc += a * b;
            sc += std::fabs(a * b);
          }
          const auto o = static_cast<std::size_t>(i * n + j);
          const double cv = beta == 0 ? 0.0 : in[2][o];
          r.value[o] = alpha * acc + beta * cv;
          r.scale[o] = std::fabs(alpha) * sc + std::fabs(beta * cv);
        }
      return r;
    };
    return p;
  }
  case Family::index_select:
  case Family::gather: {
    const std::int64_t r = size_for(c, g, 1, 12), k = size_for(c, g, 1, 12);
    const int dim = c.dim;
    const std::int64_t along = dim == 0 ? r : k; // the size of x along dim: the index bound
    const bool sel = c.family == Family::index_select;
    Tensor x = values({r, k}, c.dtype, c.seed + 1);
    if (sel) {
      const std::int64_t n = empty ? 0 : size_for(c, g, 1, 15);
      const Shape os = dim == 0 ? Shape{n, k} : Shape{r, n};
      p.roles = {x, testing::random_index(n, along, c.idx_dtype, c.seed + 2),
                 values(os, c.dtype, c.seed + 3)};
    } else {
      // index.size(d) <= x.size(d) off dim; any size along dim.
      const std::int64_t n = empty ? 0 : size_for(c, g, 1, 15);
      const Shape is = dim == 0 ? Shape{n, size_for(c, g, 1, k)} : Shape{size_for(c, g, 1, r), n};
      p.roles = {
          x,
          Tensor::copy_of(testing::random_index(is[0] * is[1], along, c.idx_dtype, c.seed + 2)
                              .view()
                              .reshape(is)),
          values(is, c.dtype, c.seed + 3)};
    }
    p.layouts = {c.in, c.in, c.out};
    p.terms = 0;
    p.run = [=](const std::vector<TensorView>& v, const Options& o) {
      if (sel)
        index_select(v[0], dim, v[1], v[2], o);
      else
        gather(v[0], dim, v[1], v[2], o);
    };
    if (sel) {
      const std::int64_t n = p.roles[1].numel();
      p.reference = [=](const std::vector<std::vector<double>>& in) {
        const std::int64_t rows = dim == 0 ? n : r, cols = dim == 0 ? k : n;
        std::vector<double> out(static_cast<std::size_t>(rows * cols));
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j) {
            const auto t =
                static_cast<std::int64_t>(in[1][static_cast<std::size_t>(dim == 0 ? i : j)]);
            out[static_cast<std::size_t>(i * cols + j)] =
                in[0][static_cast<std::size_t>(dim == 0 ? t * k + j : i * k + t)];
          }
        return exact(out);
      };
    }
    if (!sel) {
      const Shape is = p.roles[1].sizes();
      p.reference = [=](const std::vector<std::vector<double>>& in) {
        std::vector<double> out(in[1].size());
        for (std::int64_t i = 0; i < is[0]; ++i)
          for (std::int64_t j = 0; j < is[1]; ++j) {
            const auto e = static_cast<std::size_t>(i * is[1] + j);
            const auto t = static_cast<std::int64_t>(in[1][e]);
            out[e] = in[0][static_cast<std::size_t>(dim == 0 ? t * k + j : i * k + t)];
          }
        return exact(out);
      };
    }
    return p;
  }
  case Family::bincount: {
    const std::int64_t n = empty ? 0 : size_for(c, g, 1, 300), bins = size_for(c, g, 1, 20);
    const bool w = c.weighted;
    if (w)
      p.roles = {testing::random_index(n, bins, c.idx_dtype, c.seed + 1),
                 values({n}, c.dtype, c.seed + 2), values({bins}, c.dtype, c.seed + 3)};
    else
      p.roles = {testing::random_index(n, bins, c.idx_dtype, c.seed + 1),
                 testing::random_values({bins}, DType::i64, c.seed + 3)};
    p.layouts = w ? std::vector<Layout>{c.in, c.in, c.out} : std::vector<Layout>{c.in, c.out};
    // Fixed point: each weight is exact to 2^(ceil(log2 n) - 62) of the largest one, which the
    // scale below (count times the largest |w|) covers with 8 n units of the dtype.
    p.terms = w ? 8 * std::max<std::int64_t>(n, 1) : 0;
    p.run = [w](const std::vector<TensorView>& v, const Options& o) {
      bincount(v[0], w ? v[1] : TensorView{}, v[w ? 2 : 1], o);
    };
    p.reference = [=](const std::vector<std::vector<double>>& in) {
      Reference r{std::vector<double>(static_cast<std::size_t>(bins), 0.0),
                  std::vector<double>(static_cast<std::size_t>(bins), 0.0)};
      double most = 0;
      if (w)
        for (double x : in[1])
          most = std::max(most, std::fabs(x));
      for (std::size_t i = 0; i < in[0].size(); ++i) {
        const auto b = static_cast<std::size_t>(in[0][i]);
        r.value[b] += w ? in[1][i] : 1.0;
        r.scale[b] += w ? most : 1.0;
      }
      return r;
    };
    return p;
  }
  case Family::histc: {
    const std::int64_t r = empty ? 0 : size_for(c, g, 1, 30), k = size_for(c, g, 1, 30);
    const std::int64_t bins = size_for(c, g, 1, 20);
    p.roles = {values({r, k}, c.dtype, c.seed + 1), values({bins}, c.dtype, c.seed + 2)};
    p.layouts = {c.in, c.out};
    p.terms = 0;
    constexpr double lo = -1.0, hi = 1.5;
    const DType dt = c.dtype;
    p.run = [](const std::vector<TensorView>& v, const Options& o) {
      histc(v[0], lo, hi, v[1], o);
    };
    // The documented bin rule, in the input dtype.
    p.reference = [=](const std::vector<std::vector<double>>& in) {
      std::vector<double> counts(static_cast<std::size_t>(bins), 0.0);
      auto rule = [&]<class T>(T) {
        const T l = static_cast<T>(lo), h = static_cast<T>(hi);
        for (double d : in[0]) {
          const T x = static_cast<T>(d);
          if (!(l <= x && x <= h))
            continue;
          auto b = static_cast<std::int64_t>(((x - l) * static_cast<T>(bins)) / (h - l));
          counts[static_cast<std::size_t>(std::min(b, bins - 1))] += 1;
        }
      };
      if (dt == DType::f32)
        rule(0.0f);
      else
        rule(0.0);
      return exact(counts);
    };
    return p;
  }
  default:
    break;
  }
  throw std::logic_error("harness: no builder for this family");
}

} // namespace samebits::harness
