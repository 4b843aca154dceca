// CPU variants of gemm (canonical order: include/samebits/ops/gemm.hpp).
//
//   cpu.split_k_atomic  not_guaranteed  k cut into pieces run as separate tasks; each piece's
//                                       alpha * partial is added into the result with atomic
//                                       float adds, in whatever order the tasks finish
//   cpu.packed_tiles    portable        output tiles in parallel; per tile, panels of op(a) and
//                                       op(b) are packed and a register-blocked micro-kernel walks
//                                       k ascending for every output element
//
// Why the packed kernel follows the canonical order exactly: each output element is owned by one
// micro-tile of one task; its accumulator starts at +0 and receives a[i,p] * b[p,j] for p
// ascending, one rounded product and one rounded add each (vector lanes are independent elements,
// so vectorizing across j changes nothing), across k blocks in ascending order. Tiling and thread
// count only decide who computes an element, never how.
#include "ops/gemm.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace samebits::detail {

namespace {

constexpr std::int64_t kMR = 6;   // rows of a micro-tile
constexpr std::int64_t kKC = 256; // k block: a packed panel of b stays in L1/L2
constexpr std::int64_t kMaxMC = 96;
constexpr std::int64_t kMaxNC = 256;
template <class T> constexpr std::int64_t kNR = 64 / sizeof(T); // one 64-byte row of a micro-tile

typedef float VecF __attribute__((vector_size(32)));
typedef double VecD __attribute__((vector_size(32)));
template <class T> struct VecOf;
template <> struct VecOf<float> { using type = VecF; };
template <> struct VecOf<double> { using type = VecD; };

std::int64_t round_up(std::int64_t x, std::int64_t to) {
  return (x + to - 1) / to * to;
}

// How the micro-kernel reads A: element (row i of panel `it`, k step p) is
// base[it * panel + i * row + p * step]. Packed panels: (kc * kMR, 1, kMR); A read in place:
// its own strides (no copy when each A element meets few b panels).
struct AWalk {
  std::int64_t panel, row, step;
};

// acc[micro-tile] (kMR x NR, row-major) += a (kMR rows, kc steps) times packed b (kc x NR), p
// ascending; every micro-tile of an (mc_pad x nc_pad) block, b panels outermost so one stays hot.
template <class T>
[[gnu::always_inline]] inline void macro_body(const T* ap, AWalk w, const T* bp,
                                              std::int64_t mc_pad, std::int64_t nc_pad,
                                              std::int64_t kc, T* acc) {
  using V = typename VecOf<T>::type;
  constexpr std::int64_t NR = kNR<T>;
  constexpr std::int64_t H = NR / 2; // elements per 32-byte half
  const std::int64_t mt = mc_pad / kMR, nt = nc_pad / NR;
  for (std::int64_t jt = 0; jt < nt; ++jt) {
    const T* bpan = bp + jt * kc * NR;
    for (std::int64_t it = 0; it < mt; ++it) {
      const T* apan = ap + it * w.panel;
      T* tile = acc + (it * nt + jt) * kMR * NR;
      // 12 accumulators of 32 bytes (6 rows x 2 halves): a register each with AVX.
      V c[kMR][2];
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        std::memcpy(&c[i][0], tile + i * NR, sizeof(V));
        std::memcpy(&c[i][1], tile + i * NR + H, sizeof(V));
      }
      for (std::int64_t p = 0; p < kc; ++p) {
        V b0, b1;
        std::memcpy(&b0, bpan + p * NR, sizeof(V));
        std::memcpy(&b1, bpan + p * NR + H, sizeof(V));
        const T* a = apan + p * w.step;
#pragma GCC unroll 6
        for (int i = 0; i < kMR; ++i) {
          const T ai = a[i * w.row];
          c[i][0] = c[i][0] + b0 * ai;
          c[i][1] = c[i][1] + b1 * ai;
        }
      }
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        std::memcpy(tile + i * NR, &c[i][0], sizeof(V));
        std::memcpy(tile + i * NR + H, &c[i][1], sizeof(V));
      }
    }
  }
}

// One clone per instruction set, picked at load time: the lanes compute the same IEEE operations
// whatever the vector width, so every clone gives the same bits. ThreadSanitizer instruments the
// clones' resolver, which the loader runs before the sanitizer's runtime is up (a crash at load),
// so a TSan build keeps the default clone only.
#if defined(__SANITIZE_THREAD__)
#define SAMEBITS_CLONES
#else
#define SAMEBITS_CLONES [[gnu::target_clones("avx512f", "avx2", "avx", "default")]]
#endif
SAMEBITS_CLONES void macro_f32(const float* ap, AWalk w, const float* bp, std::int64_t mc_pad,
                               std::int64_t nc_pad, std::int64_t kc, float* acc) {
  macro_body<float>(ap, w, bp, mc_pad, nc_pad, kc, acc);
}
SAMEBITS_CLONES void macro_f64(const double* ap, AWalk w, const double* bp, std::int64_t mc_pad,
                               std::int64_t nc_pad, std::int64_t kc, double* acc) {
  macro_body<double>(ap, w, bp, mc_pad, nc_pad, kc, acc);
}
void macro(const float* ap, AWalk w, const float* bp, std::int64_t mc, std::int64_t nc,
           std::int64_t kc, float* acc) {
  macro_f32(ap, w, bp, mc, nc, kc, acc);
}
void macro(const double* ap, AWalk w, const double* bp, std::int64_t mc, std::int64_t nc,
           std::int64_t kc, double* acc) {
  macro_f64(ap, w, bp, mc, nc, kc, acc);
}

// Packs rows [i0, i0+mc) x k [p0, p0+kc) of A into kMR-row panels (p-major inside a panel);
// rows past m are +0.
template <class T>
void pack_a(const Mat<T>& A, std::int64_t m, std::int64_t i0, std::int64_t mc, std::int64_t p0,
            std::int64_t kc, T* ap) {
  if (A.rs == 1 && A.cs != 1) { // column-major A (op(a) of a row-major a): read rows of a
    const std::int64_t mc_pad = round_up(mc, kMR), valid = std::min(mc_pad, m - i0);
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* src = A.data + (p0 + p) * A.cs + i0;
      // Short reads far apart defeat the hardware prefetcher: fetch a few rows ahead.
      for (std::int64_t i = 0; i < valid; i += 64 / static_cast<std::int64_t>(sizeof(T)))
        __builtin_prefetch(src + 2 * A.cs + i);
      const std::int64_t full = valid / kMR; // panels with kMR valid rows
      for (std::int64_t it = 0; it < full; ++it) {
        T* dst = ap + it * kc * kMR + p * kMR;
        const T* from = src + it * kMR;
#pragma GCC unroll 6
        for (std::int64_t i = 0; i < kMR; ++i)
          dst[i] = from[i];
      }
      for (std::int64_t it = full; it < mc_pad / kMR; ++it) {
        T* dst = ap + it * kc * kMR + p * kMR;
        for (std::int64_t i = 0; i < kMR; ++i) {
          const std::int64_t r = it * kMR + i;
          dst[i] = r < valid ? src[r] : T(0);
        }
      }
    }
    return;
  }
  for (std::int64_t ir = 0; ir < mc; ir += kMR) {
    T* pan = ap + (ir / kMR) * kc * kMR;
    for (std::int64_t i = 0; i < kMR; ++i) {
      const std::int64_t r = i0 + ir + i;
      if (r >= m) {
        for (std::int64_t p = 0; p < kc; ++p)
          pan[p * kMR + i] = T(0);
        continue;
      }
      const T* src = A.data + r * A.rs + p0 * A.cs;
      if (A.cs == 1)
        for (std::int64_t p = 0; p < kc; ++p)
          pan[p * kMR + i] = src[p];
      else
        for (std::int64_t p = 0; p < kc; ++p)
          pan[p * kMR + i] = src[p * A.cs];
    }
  }
}

// Packs k [p0, p0+kc) x columns [j0, j0+nc) of B into NR-column panels; columns past n are +0.
template <class T>
void pack_b(const Mat<T>& B, std::int64_t n, std::int64_t p0, std::int64_t kc, std::int64_t j0,
            std::int64_t nc, T* bp) {
  constexpr std::int64_t NR = kNR<T>;
  for (std::int64_t jr = 0; jr < nc; jr += NR) {
    T* pan = bp + (jr / NR) * kc * NR;
    const std::int64_t jn = std::min(NR, n - (j0 + jr));
    if (B.cs == 1 || B.rs != 1) { // walk along rows of B
      for (std::int64_t p = 0; p < kc; ++p) {
        const T* src = B.data + (p0 + p) * B.rs + (j0 + jr) * B.cs;
        T* dst = pan + p * NR;
        if (B.cs == 1)
          for (std::int64_t j = 0; j < jn; ++j)
            dst[j] = src[j];
        else
          for (std::int64_t j = 0; j < jn; ++j)
            dst[j] = src[j * B.cs];
        for (std::int64_t j = std::max<std::int64_t>(jn, 0); j < NR; ++j)
          dst[j] = T(0);
      }
    } else { // B is column-major (op(b) of a row-major b): walk down columns
      for (std::int64_t j = 0; j < NR; ++j) {
        if (j >= jn) {
          for (std::int64_t p = 0; p < kc; ++p)
            pan[p * NR + j] = T(0);
          continue;
        }
        const T* src = B.data + p0 + (j0 + jr + j) * B.cs;
        for (std::int64_t p = 0; p < kc; ++p)
          pan[p * NR + j] = src[p];
      }
    }
  }
}

// Per-thread scratch: packed panels and the tile accumulators.
template <class T> struct Scratch { std::vector<T> ap, bp, acc; };
template <class T> Scratch<T>& scratch() {
  thread_local Scratch<T> s;
  return s;
}
template <class T> void grow(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n)
    v.resize(static_cast<std::size_t>(n));
}

// How the output is cut into tasks. Any cut gives the same bits; this one aims at a few tasks
// per thread with tiles that keep the packed panels in cache.
struct Tiling {
  std::int64_t mc, nc, tm, tn;
};
template <class T>
Tiling choose_tiling(const GemmArgs& g, std::int64_t m, std::int64_t n, std::int64_t k_pieces) {
  // A column-major op(a) is packed from rows of a: taller tiles make those reads longer.
  // (up to whole rows of a when n is small, since then A is the only large operand).
  const bool col_major_a = g.a.strides[0] == 1 && g.a.strides[1] != 1;
  const std::int64_t max_mc = !col_major_a ? kMaxMC : n <= 2 * kNR<T> ? 8 * kMaxMC : 2 * kMaxMC;
  Tiling t;
  t.nc = std::min(round_up(n, kNR<T>), kMaxNC);
  t.tn = (n + t.nc - 1) / t.nc;
  const std::int64_t want = std::max<std::int64_t>(1, 4 * num_threads() / (t.tn * k_pieces));
  t.mc = std::clamp(round_up((m + want - 1) / want, kMR), kMR, max_mc);
  t.tm = (m + t.mc - 1) / t.mc;
  return t;
}

// Accumulates rows [i0, i0+mc) x columns [j0, j0+nc) over k in [pb, pe) into s.acc (micro-tile
// layout), starting from +0. Returns the padded tile sizes.
template <class T>
std::pair<std::int64_t, std::int64_t>
accumulate_tile(const GemmArgs& g, std::int64_t i0, std::int64_t mc, std::int64_t j0,
                std::int64_t nc, std::int64_t pb, std::int64_t pe, Scratch<T>& s) {
  const std::int64_t mc_pad = round_up(mc, kMR), nc_pad = round_up(nc, kNR<T>);
  grow(s.ap, mc_pad * kKC);
  grow(s.bp, nc_pad * kKC);
  grow(s.acc, mc_pad * nc_pad);
  std::fill_n(s.acc.data(), mc_pad * nc_pad, T(0));
  const Mat<T> A = g.mat_a<T>(), B = g.mat_b<T>();
  for (std::int64_t p0 = pb; p0 < pe; p0 += kKC) {
    const std::int64_t kc = std::min(kKC, pe - p0);
    pack_b(B, g.n(), p0, kc, j0, nc, s.bp.data());
    // With at most two b panels each A element is used for at most 32 columns: copying A
    // costs more than it saves, so full row panels of a k-contiguous A are read in place (a
    // column-major A is not: its short runs far apart are read faster by pack_a); a partial last
    // panel is packed (with +0 rows) so nothing past m is read.
    const bool in_place = nc_pad <= 2 * kNR<T> && A.cs == 1;
    const std::int64_t full = in_place ? mc / kMR : 0;
    if (full > 0) {
      const T* base = A.data + i0 * A.rs + p0 * A.cs;
      macro(base, AWalk{kMR * A.rs, A.rs, A.cs}, s.bp.data(), full * kMR, nc_pad, kc, s.acc.data());
    }
    if (full * kMR < mc) {
      pack_a(A, g.m(), i0 + full * kMR, mc - full * kMR, p0, kc, s.ap.data());
      macro(s.ap.data(), AWalk{kc * kMR, 1, kMR}, s.bp.data(), mc_pad - full * kMR, nc_pad, kc,
            s.acc.data() + full * (nc_pad / kNR<T>)*kMR * kNR<T>);
    }
  }
  return {mc_pad, nc_pad};
}

// acc value of element (i, j) of a tile in micro-tile layout.
template <class T>
T tile_value(const std::vector<T>& acc, std::int64_t nc_pad, std::int64_t i, std::int64_t j) {
  constexpr std::int64_t NR = kNR<T>;
  return acc[static_cast<std::size_t>(((i / kMR) * (nc_pad / NR) + j / NR) * kMR * NR +
                                      (i % kMR) * NR + j % NR)];
}

// c = epilogue(+0, c) everywhere: the k == 0 and alpha == 0 cases, which read neither a nor b.
template <class T> void scale_only(const GemmArgs& g, const Epilogue<T>& epi) {
  T* c = static_cast<T*>(g.c.data);
  const std::int64_t m = g.m(), n = g.n(), rs = g.c.strides[0], cs = g.c.strides[1];
  parallel_for((m + 63) / 64, [&](std::int64_t t) {
    for (std::int64_t i = t * 64; i < std::min(m, (t + 1) * 64); ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        T* e = c + i * rs + j * cs;
        *e = epi(T(0), e);
      }
  });
}

template <class T> Epilogue<T> epilogue_of(const GemmArgs& g) {
  return {static_cast<T>(g.alpha), static_cast<T>(g.beta)};
}

// Small outputs with a long k (a weight gradient such as h^T @ dO: 16 x 7 outputs, k = 2708)
// leave the tile kernel little to share between rows and waste most vector lanes on a narrow n.
// This path vectorizes across the longer output side instead ("lanes", one 32-byte vector per
// task) and broadcasts the other side ("rows", up to 8 per task), walking k ascending: each
// element still gets one rounded product and one rounded add per k step from +0, so the bits are
// those of the tile kernel (a * b == b * a in IEEE arithmetic, so the orientation does not matter).
bool small_output(std::int64_t m, std::int64_t n, std::int64_t k) {
  return m * n <= 1024 && k >= 256;
}

// One task: lanes [v0, v0 + L) x rows [r0, r0 + RN) of the output. Step p reads one vector of
// X at x + p * xs and RN scalars of Y at y + p * ys + r * yr.
struct SmallWalk {
  std::int64_t xs, ys, yr;
};
template <class T, int RN>
[[gnu::always_inline]] inline void small_body(const T* x, const T* y, SmallWalk w, std::int64_t k,
                                              T* out) {
  using V = typename VecOf<T>::type;
  constexpr std::int64_t L = sizeof(V) / sizeof(T);
  V acc[RN];
  for (int r = 0; r < RN; ++r)
    acc[r] = V{};
  for (std::int64_t p = 0; p < k; ++p) {
    V xv;
    std::memcpy(&xv, x + p * w.xs, sizeof(V));
    const T* yp = y + p * w.ys;
#pragma GCC unroll 8
    for (int r = 0; r < RN; ++r)
      acc[r] = acc[r] + xv * yp[r * w.yr];
  }
  for (int r = 0; r < RN; ++r)
    std::memcpy(out + r * L, &acc[r], sizeof(V));
}
#define SAMEBITS_SMALL_CLONES(T, RN)                                                               \
  SAMEBITS_CLONES void small_##T##_##RN(const T* x, const T* y, SmallWalk w, std::int64_t k,       \
                                        T* out) {                                                  \
    small_body<T, RN>(x, y, w, k, out);                                                            \
  }
#define SAMEBITS_SMALL_KERNELS(T)                                                                  \
  SAMEBITS_SMALL_CLONES(T, 1)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 2)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 3)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 4)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 5)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 6)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 7)                                                                      \
  SAMEBITS_SMALL_CLONES(T, 8)                                                                      \
  void small_kernel(int rn, const T* x, const T* y, SmallWalk w, std::int64_t k, T* out) {         \
    using Kernel = void (*)(const T*, const T*, SmallWalk, std::int64_t, T*);                      \
    static constexpr Kernel kernels[] = {small_##T##_1, small_##T##_2, small_##T##_3,              \
                                         small_##T##_4, small_##T##_5, small_##T##_6,              \
                                         small_##T##_7, small_##T##_8};                            \
    kernels[rn - 1](x, y, w, k, out);                                                              \
  }
SAMEBITS_SMALL_KERNELS(float)
SAMEBITS_SMALL_KERNELS(double)
#undef SAMEBITS_SMALL_KERNELS
#undef SAMEBITS_SMALL_CLONES

template <class T> void gemm_small_output(const GemmArgs& g, const Epilogue<T>& epi) {
  using V = typename VecOf<T>::type;
  constexpr std::int64_t L = sizeof(V) / sizeof(T);
  const std::int64_t m = g.m(), n = g.n(), k = g.k();
  const Mat<T> A = g.mat_a<T>(), B = g.mat_b<T>();
  // Lanes run along the longer side: X(v, p) and Y(p, r) read op(a) and op(b), or op(b)^T and
  // op(a)^T, in place.
  const bool lanes_on_n = n > m;
  const std::int64_t nv = lanes_on_n ? n : m, nr = lanes_on_n ? m : n;
  const Mat<T> X = lanes_on_n ? Mat<T>{B.data, B.cs, B.rs} : A;
  const Mat<T> Y = lanes_on_n ? Mat<T>{A.data, A.cs, A.rs} : B;
  const int rn = static_cast<int>(std::min<std::int64_t>(nr, 8));
  const std::int64_t vt = (nv + L - 1) / L, rt = (nr + rn - 1) / rn;
  T* c = static_cast<T*>(g.c.data);
  const std::int64_t crs = g.c.strides[0], ccs = g.c.strides[1];
  parallel_for(vt * rt, [&](std::int64_t task) {
    const std::int64_t v0 = (task / rt) * L, r0 = (task % rt) * rn;
    const std::int64_t vn = std::min(L, nv - v0), rcount = std::min<std::int64_t>(rn, nr - r0);
    Scratch<T>& s = scratch<T>();
    grow(s.acc, rn * L);
    // Y is read in place; X too where a whole vector of lanes is contiguous, otherwise it is
    // packed k-major with +0 in the lanes past the end.
    const T* x = X.data + v0 * X.rs;
    const T* y = Y.data + r0 * Y.cs;
    SmallWalk w{X.cs, Y.rs, Y.cs};
    if (X.rs != 1 || vn < L) {
      grow(s.ap, k * L);
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t l = 0; l < L; ++l)
          s.ap[static_cast<std::size_t>(p * L + l)] = l < vn ? X(v0 + l, p) : T(0);
      x = s.ap.data();
      w.xs = L;
    }
    small_kernel(static_cast<int>(rcount), x, y, w, k, s.acc.data());
    for (std::int64_t r = 0; r < rcount; ++r)
      for (std::int64_t l = 0; l < vn; ++l) {
        const std::int64_t i = lanes_on_n ? r0 + r : v0 + l, j = lanes_on_n ? v0 + l : r0 + r;
        T* e = c + i * crs + j * ccs;
        *e = epi(s.acc[static_cast<std::size_t>(r * L + l)], e);
      }
  });
}

void gemm_packed(const GemmArgs& g, const Workspace&) {
  visit_float(g.c.dtype, "gemm", [&]<class T>() {
    const std::int64_t m = g.m(), n = g.n(), k = g.k();
    if (m == 0 || n == 0)
      return;
    const Epilogue<T> epi = epilogue_of<T>(g);
    if (k == 0 || epi.alpha == T(0))
      return scale_only<T>(g, epi);
    if (small_output(m, n, k))
      return gemm_small_output<T>(g, epi);
    const Tiling t = choose_tiling<T>(g, m, n, 1);
    T* c = static_cast<T*>(g.c.data);
    const std::int64_t crs = g.c.strides[0], ccs = g.c.strides[1];
    parallel_for(t.tm * t.tn, [&](std::int64_t task) {
      const std::int64_t i0 = (task / t.tn) * t.mc, j0 = (task % t.tn) * t.nc;
      const std::int64_t mc = std::min(t.mc, m - i0), nc = std::min(t.nc, n - j0);
      Scratch<T>& s = scratch<T>();
      const auto [mc_pad, nc_pad] = accumulate_tile<T>(g, i0, mc, j0, nc, 0, k, s);
      (void)mc_pad;
      for (std::int64_t i = 0; i < mc; ++i)
        for (std::int64_t j = 0; j < nc; ++j) {
          T* e = c + (i0 + i) * crs + (j0 + j) * ccs;
          *e = epi(tile_value(s.acc, nc_pad, i, j), e);
        }
    });
  });
}

// Number of k pieces of the split-K variant: enough that the order of the atomic adds matters.
std::int64_t split_k_pieces(std::int64_t k) {
  return std::clamp<std::int64_t>((k + 383) / 384, 1, 8);
}

void gemm_split_k(const GemmArgs& g, const Workspace&) {
  visit_float(g.c.dtype, "gemm", [&]<class T>() {
    const std::int64_t m = g.m(), n = g.n(), k = g.k();
    if (m == 0 || n == 0)
      return;
    const Epilogue<T> epi = epilogue_of<T>(g);
    if (k == 0 || epi.alpha == T(0))
      return scale_only<T>(g, epi);
    T* c = static_cast<T*>(g.c.data);
    const std::int64_t crs = g.c.strides[0], ccs = g.c.strides[1];
    // result = beta * c (the epilogue with alpha == 0), then every piece adds alpha * partial.
    std::vector<T> result(static_cast<std::size_t>(m * n));
    const Epilogue<T> init{T(0), epi.beta};
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        result[static_cast<std::size_t>(i * n + j)] = init(T(0), c + i * crs + j * ccs);
    const std::int64_t pieces = split_k_pieces(k);
    const Tiling t = choose_tiling<T>(g, m, n, pieces);
    parallel_for(t.tm * t.tn * pieces, [&](std::int64_t task) {
      const std::int64_t piece = task % pieces, tile = task / pieces;
      const std::int64_t i0 = (tile / t.tn) * t.mc, j0 = (tile % t.tn) * t.nc;
      const std::int64_t mc = std::min(t.mc, m - i0), nc = std::min(t.nc, n - j0);
      const auto [pb, pe] = split_range(k, pieces, piece);
      Scratch<T>& s = scratch<T>();
      const auto [mc_pad, nc_pad] = accumulate_tile<T>(g, i0, mc, j0, nc, pb, pe, s);
      (void)mc_pad;
      for (std::int64_t i = 0; i < mc; ++i)
        for (std::int64_t j = 0; j < nc; ++j) {
          const T v = tile_value(s.acc, nc_pad, i, j);
          std::atomic_ref<T>(result[static_cast<std::size_t>((i0 + i) * n + j0 + j)])
              .fetch_add(epi.alpha == T(1) ? v : epi.alpha * v, std::memory_order_relaxed);
        }
    });
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * crs + j * ccs] = result[static_cast<std::size_t>(i * n + j)];
  });
}

Variant<GemmArgs> cpu_variant(const char* name, Determinism level, const char* how,
                              void (*run)(const GemmArgs&, const Workspace&)) {
  return Variant<GemmArgs>{{"gemm", name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
}

} // namespace

void register_cpu_gemm(Registry& r) {
  r.add(cpu_variant("cpu.split_k_atomic", Determinism::not_guaranteed,
                    "k split into pieces; alpha * partials added with atomic float adds in "
                    "completion order",
                    gemm_split_k));
  r.add(cpu_variant("cpu.packed_tiles", Determinism::portable,
                    "packed cache-blocked tiles in parallel; each element sums k ascending "
                    "(canonical order)",
                    gemm_packed));
}

} // namespace samebits::detail
