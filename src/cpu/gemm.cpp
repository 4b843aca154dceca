// CPU variants of gemm (canonical order: include/samebits/ops/gemm.hpp).
//
//   cpu.split_k_atomic  not_guaranteed  k cut into runs of blocks run as separate tasks; each
//                                       run's alpha * sum is added into the result with atomic
//                                       float adds, in whatever order the tasks finish
//   cpu.packed_tiles    portable        output tiles in parallel; per tile, panels of op(a) and
//                                       op(b) one k block deep are packed and a register-blocked
//                                       micro-kernel (cpu/gemm_kernels.hpp) sums each block as
//                                       an fma chain and pushes it onto the tile's block counter
//
// Why the packed kernel follows the canonical order exactly: each output element is owned by one
// micro-tile of one task; a k block of it is one fma chain from +0 in ascending k (vector lanes
// are independent elements, so the vector width changes nothing), and the blocks are combined by
// the binary counter of src/ops/gemm.hpp, which is the canonical tree. Tiling, thread count and
// instruction set only decide who computes an element and how fast, never how.
#include "ops/gemm.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "core/tuning.hpp"
#include "cpu/gemm_kernels.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

namespace samebits::detail {

namespace {

using namespace cpu_gemm;
static_assert(kBlockK == kGemmBlockK, "the micro-kernels' block is the canonical one");

constexpr std::int64_t kKC = kGemmBlockK; // a packed panel is one k block deep
constexpr std::int64_t kMaxMC = 384;      // tall tiles: each packed b panel serves more rows
constexpr std::int64_t kMaxNC = 256;

std::int64_t round_up(std::int64_t x, std::int64_t to) {
  return (x + to - 1) / to * to;
}

bool cpu_has(CpuGemmIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
  case CpuGemmIsa::avx512:
    return isa_avx512() != nullptr && __builtin_cpu_supports("avx512f");
  case CpuGemmIsa::avx2:
    return isa_avx2() != nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  default:
    return true;
  }
#else
  return isa == CpuGemmIsa::generic || isa == CpuGemmIsa::automatic;
#endif
}

// The micro-kernel set the tuning asks for; automatic: the widest this CPU runs.
const Isa& kernels() {
  switch (tuning<GemmTuning>().cpu_isa) {
  case CpuGemmIsa::generic:
    return *isa_generic();
  case CpuGemmIsa::avx2:
    if (!cpu_has(CpuGemmIsa::avx2))
      throw InvalidArgument("gemm: the AVX2 + FMA micro-kernels do not run on this CPU");
    return *isa_avx2();
  case CpuGemmIsa::avx512:
    if (!cpu_has(CpuGemmIsa::avx512))
      throw InvalidArgument("gemm: the AVX-512 micro-kernels do not run on this CPU");
    return *isa_avx512();
  case CpuGemmIsa::automatic:
    break;
  }
  static const Isa* best = cpu_has(CpuGemmIsa::avx512) ? isa_avx512()
                           : cpu_has(CpuGemmIsa::avx2) ? isa_avx2()
                                                       : isa_generic();
  return *best;
}

template <class T> const KernelSet<T>& kernel_set(const Isa& isa) {
  if constexpr (sizeof(T) == 4)
    return isa.f32;
  else
    return isa.f64;
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
            std::int64_t nc, std::int64_t NR, T* bp) {
  if (B.cs == 1) { // rows of B are contiguous: read each row once, in order, into every panel
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* src = B.data + (p0 + p) * B.rs + j0;
      for (std::int64_t jr = 0; jr < nc; jr += NR) {
        T* dst = bp + (jr / NR) * kc * NR + p * NR;
        const std::int64_t jn = std::min(NR, n - (j0 + jr));
        for (std::int64_t j = 0; j < jn; ++j)
          dst[j] = src[jr + j];
        for (std::int64_t j = std::max<std::int64_t>(jn, 0); j < NR; ++j)
          dst[j] = T(0);
      }
    }
    return;
  }
  for (std::int64_t jr = 0; jr < nc; jr += NR) {
    T* pan = bp + (jr / NR) * kc * NR;
    const std::int64_t jn = std::min(NR, n - (j0 + jr));
    if (B.rs != 1) { // neither stride is 1: walk along rows of B
      for (std::int64_t p = 0; p < kc; ++p) {
        const T* src = B.data + (p0 + p) * B.rs + (j0 + jr) * B.cs;
        T* dst = pan + p * NR;
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

// Per-thread scratch: packed panels, the tiles' block counters (levels of mc_pad x nc_pad, in
// micro-tile layout) and the small path's outputs.
template <class T> struct Scratch { std::vector<T> ap, bp, stack, out; };
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
Tiling choose_tiling(const GemmArgs& g, std::int64_t NR, std::int64_t m, std::int64_t n,
                     std::int64_t k_pieces) {
  // A column-major op(a) is packed from rows of a: taller tiles make those reads longer.
  // (up to whole rows of a when n is small, since then A is the only large operand).
  const bool col_major_a = g.a.strides[0] == 1 && g.a.strides[1] != 1;
  const std::int64_t max_mc = !col_major_a ? kMaxMC : n <= 2 * NR ? 8 * kMaxMC : 2 * kMaxMC;
  Tiling t;
  t.nc = std::min(round_up(n, NR), round_up(kMaxNC, NR));
  t.tn = (n + t.nc - 1) / t.nc;
  const std::int64_t want = std::max<std::int64_t>(1, 4 * num_threads() / (t.tn * k_pieces));
  t.mc = std::clamp(round_up((m + want - 1) / want, kMR), kMR, max_mc);
  t.tm = (m + t.mc - 1) / t.mc;
  return t;
}

// A tile's sums over the k blocks [qb, qe): rows [i0, i0+mc) x columns [j0, j0+nc), each block
// pushed onto the tile's block counter in s.stack. Returns the padded tile sizes.
template <class T>
std::pair<std::int64_t, std::int64_t>
push_tile_blocks(const GemmArgs& g, const KernelSet<T>& ks, std::int64_t i0, std::int64_t mc,
                 std::int64_t j0, std::int64_t nc, std::int64_t qb, std::int64_t qe,
                 Scratch<T>& s) {
  const std::int64_t NR = ks.nr;
  const std::int64_t mc_pad = round_up(mc, kMR), nc_pad = round_up(nc, NR);
  const std::int64_t area = mc_pad * nc_pad;
  grow(s.ap, mc_pad * kKC);
  grow(s.bp, nc_pad * kKC);
  grow(s.stack, std::bit_width(static_cast<std::uint64_t>(qe - qb)) * area);
  const Mat<T> A = g.mat_a<T>(), B = g.mat_b<T>();
  const std::int64_t k = g.k();
  for (std::int64_t q = qb; q < qe; ++q) {
    const std::int64_t p0 = q * kKC, kc = std::min(kKC, k - p0);
    pack_b(B, g.n(), p0, kc, j0, nc, NR, s.bp.data());
    // Full row panels of a k-contiguous A are read in place: six rows streaming along k are as
    // cache-friendly as a packed panel, and copying A cost a quarter of the time at 1024^3 (a
    // column-major A is packed: its short runs far apart are read faster by pack_a); a partial
    // last panel is packed (with +0 rows) so nothing past m is read.
    const bool in_place = A.cs == 1;
    const std::int64_t full = in_place ? mc / kMR : 0;
    if (full > 0) {
      const T* base = A.data + i0 * A.rs + p0 * A.cs;
      ks.push_block(base, AWalk{kMR * A.rs, A.rs, A.cs}, s.bp.data(), full * kMR, nc_pad, kc,
                    q - qb, s.stack.data(), area);
    }
    if (full * kMR < mc) {
      pack_a(A, g.m(), i0 + full * kMR, mc - full * kMR, p0, kc, s.ap.data());
      ks.push_block(s.ap.data(), AWalk{kc * kMR, 1, kMR}, s.bp.data(), mc_pad - full * kMR, nc_pad,
                    kc, q - qb, s.stack.data() + full * (nc_pad / NR) * kMR * NR, area);
    }
  }
  return {mc_pad, nc_pad};
}

// Calls f(i, j, sums, count) for every row segment of an mc x nc tile after nb pushes: count
// (at most NR) consecutive sums of row i from column j. A sum is the value at level ctz(nb) plus
// the entries of the higher set bits of nb, lowest first (src/ops/gemm.hpp). Walks the
// micro-tile layout in order, a segment at a time, so that the fold and the copy vectorize.
template <class T, class F>
void for_each_tile_row(const std::vector<T>& stack, std::int64_t NR, std::int64_t mc,
                       std::int64_t nc, std::int64_t mc_pad, std::int64_t nc_pad, std::int64_t nb,
                       F&& f) {
  const std::int64_t area = mc_pad * nc_pad, nt = nc_pad / NR;
  const int low = gemm_store_level(nb - 1);
  int higher[64], nh = 0;
  for (int l = low + 1; l < 63 && (nb >> l) != 0; ++l)
    if ((nb >> l) & 1)
      higher[nh++] = l;
  T row[64]; // NR <= 64
  for (std::int64_t it = 0; it * kMR < mc; ++it)
    for (std::int64_t jt = 0; jt < nt; ++jt) {
      const T* tile = stack.data() + (it * nt + jt) * kMR * NR;
      const std::int64_t rows = std::min(kMR, mc - it * kMR), cols = std::min(NR, nc - jt * NR);
      for (std::int64_t i = 0; i < rows; ++i) {
        const T* e = tile + i * NR + low * area;
        if (nh == 0) {
          f(it * kMR + i, jt * NR, e, cols);
          continue;
        }
        for (std::int64_t j = 0; j < cols; ++j)
          row[j] = e[j];
        for (int h = 0; h < nh; ++h) {
          const T* u = tile + i * NR + higher[h] * area;
          for (std::int64_t j = 0; j < cols; ++j)
            row[j] = u[j] + row[j];
        }
        f(it * kMR + i, jt * NR, static_cast<const T*>(row), cols);
      }
    }
}

// Writes count sums of row r of c from column j through the epilogue; a plain copy for the
// common alpha == 1, beta == 0 into a row-contiguous c.
template <class T>
void store_row(const GemmArgs& g, const Epilogue<T>& epi, std::int64_t r, std::int64_t j,
               const T* sums, std::int64_t count) {
  const std::int64_t crs = g.c.strides[0], ccs = g.c.strides[1];
  T* e = static_cast<T*>(g.c.data) + r * crs + j * ccs;
  if (ccs == 1 && epi.alpha == T(1) && epi.beta == T(0)) {
    std::copy(sums, sums + count, e);
    return;
  }
  for (std::int64_t q = 0; q < count; ++q)
    e[q * ccs] = epi(sums[q], e + q * ccs);
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
// This path vectorizes across the longer output side instead ("lanes", one vector per task) and
// broadcasts the other side ("rows", up to 8 per task), summing k in the canonical order: the bits
// are those of the tile kernel (a * b == b * a in IEEE arithmetic, so the orientation does not
// matter).
bool small_output(std::int64_t m, std::int64_t n, std::int64_t k) {
  return m * n <= 1024 && k >= 256;
}

template <class T>
void gemm_small_output(const GemmArgs& g, const KernelSet<T>& ks, const Epilogue<T>& epi) {
  const std::int64_t L = ks.lanes;
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
    grow(s.out, rn * L);
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
    ks.small(static_cast<int>(rcount), x, y, w, k, s.out.data());
    for (std::int64_t r = 0; r < rcount; ++r)
      for (std::int64_t l = 0; l < vn; ++l) {
        const std::int64_t i = lanes_on_n ? r0 + r : v0 + l, j = lanes_on_n ? v0 + l : r0 + r;
        T* e = c + i * crs + j * ccs;
        *e = epi(s.out[static_cast<std::size_t>(r * L + l)], e);
      }
  });
}

void gemm_packed(const GemmArgs& g, const Workspace&) {
  const Isa& isa = kernels();
  visit_float(g.c.dtype, "gemm", [&]<class T>() {
    const KernelSet<T>& ks = kernel_set<T>(isa);
    const std::int64_t m = g.m(), n = g.n(), k = g.k();
    if (m == 0 || n == 0)
      return;
    const Epilogue<T> epi = epilogue_of<T>(g);
    if (k == 0 || epi.alpha == T(0))
      return scale_only<T>(g, epi);
    if (small_output(m, n, k))
      return gemm_small_output<T>(g, ks, epi);
    const Tiling t = choose_tiling(g, ks.nr, m, n, 1);
    const std::int64_t nb = gemm_blocks(k);
    parallel_for(t.tm * t.tn, [&](std::int64_t task) {
      const std::int64_t i0 = (task / t.tn) * t.mc, j0 = (task % t.tn) * t.nc;
      const std::int64_t mc = std::min(t.mc, m - i0), nc = std::min(t.nc, n - j0);
      Scratch<T>& s = scratch<T>();
      const auto [mc_pad, nc_pad] = push_tile_blocks<T>(g, ks, i0, mc, j0, nc, 0, nb, s);
      for_each_tile_row(s.stack, ks.nr, mc, nc, mc_pad, nc_pad, nb,
                        [&](std::int64_t i, std::int64_t j, const T* v, std::int64_t count) {
                          store_row(g, epi, i0 + i, j0 + j, v, count);
                        });
    });
  });
}

// Number of k pieces of the split-K variant: enough that the order of the atomic adds matters.
std::int64_t split_k_pieces(std::int64_t nb) {
  return std::clamp<std::int64_t>((nb + 1) / 2, 1, 8);
}

void gemm_split_k(const GemmArgs& g, const Workspace&) {
  const Isa& isa = kernels();
  visit_float(g.c.dtype, "gemm", [&]<class T>() {
    const KernelSet<T>& ks = kernel_set<T>(isa);
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
    const std::int64_t nb = gemm_blocks(k), pieces = split_k_pieces(nb);
    const Tiling t = choose_tiling(g, ks.nr, m, n, pieces);
    parallel_for(t.tm * t.tn * pieces, [&](std::int64_t task) {
      const std::int64_t piece = task % pieces, tile = task / pieces;
      const std::int64_t i0 = (tile / t.tn) * t.mc, j0 = (tile % t.tn) * t.nc;
      const std::int64_t mc = std::min(t.mc, m - i0), nc = std::min(t.nc, n - j0);
      const auto [qb, qe] = split_range(nb, pieces, piece);
      if (qb == qe)
        return;
      Scratch<T>& s = scratch<T>();
      const auto [mc_pad, nc_pad] = push_tile_blocks<T>(g, ks, i0, mc, j0, nc, qb, qe, s);
      for_each_tile_row(s.stack, ks.nr, mc, nc, mc_pad, nc_pad, qe - qb,
                        [&](std::int64_t i, std::int64_t j, const T* v, std::int64_t count) {
                          for (std::int64_t q = 0; q < count; ++q)
                            std::atomic_ref<T>(
                                result[static_cast<std::size_t>((i0 + i) * n + j0 + j + q)])
                                .fetch_add(epi.alpha == T(1) ? v[q] : epi.alpha * v[q],
                                           std::memory_order_relaxed);
                        });
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

bool cpu_gemm_has(CpuGemmIsa isa) {
  return cpu_has(isa);
}

const char* cpu_gemm_isa_name() {
  return kernels().name;
}

void register_cpu_gemm(Registry& r) {
  r.add(cpu_variant("cpu.split_k_atomic", Determinism::not_guaranteed,
                    "k split into pieces; alpha * partials added with atomic float adds in "
                    "completion order",
                    gemm_split_k));
  r.add(cpu_variant("cpu.packed_tiles", Determinism::portable,
                    "packed cache-blocked tiles in parallel; fma chains per k block, blocks "
                    "combined by the fixed tree (canonical order)",
                    gemm_packed));
}

} // namespace samebits::detail
