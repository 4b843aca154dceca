// CPU variants of cumsum.
//
//   cpu.atomic_carries  not_guaranteed  a line is cut into chunks; each chunk adds its total into
//                                       the carry of every later chunk with atomic float adds, in
//                                       whatever order threads finish, then rescans with its carry
//   cpu.canonical       portable        the canonical order of ops/scan.hpp: tiles' totals in
//                                       parallel, the tile carry chain per line, then each tile
//                                       rescanned from its carry (or a whole line per task when
//                                       there are many lines); the bits depend on the data alone
#include "ops/scan.hpp"

#include "core/registry.hpp"
#include "core/strided.hpp"
#include "cpu/register.hpp"
#include "cpu/thread_pool.hpp"
#include "samebits/threads.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

namespace samebits::detail {

namespace {

// Offsets (in elements) of the first element of every line along `dim`, row-major over the
// other dims.
std::vector<std::int64_t> line_offsets(const TensorView& t, int dim) {
  TensorView rest = t.select(dim, 0);
  rest.data = nullptr;
  std::vector<std::int64_t> offs;
  offs.reserve(static_cast<std::size_t>(rest.numel()));
  for_each_element(rest, rest, [&](std::int64_t o, std::int64_t) { offs.push_back(o); });
  return offs;
}

struct Lines {
  std::vector<std::int64_t> x_off, out_off;
  std::int64_t len = 0, sx = 0, so = 0;
  std::int64_t count() const { return static_cast<std::int64_t>(x_off.size()); }
};

Lines lines_of(const CumsumArgs& a) {
  Lines l;
  l.x_off = line_offsets(a.x, a.dim);
  l.out_off = line_offsets(a.out, a.dim);
  l.len = a.x.size(a.dim);
  l.sx = a.x.stride(a.dim);
  l.so = a.out.stride(a.dim);
  return l;
}

// Canonical scan of tiles [k0, k1) of one line, starting from carry C (the chain value before
// tile k0); returns the carry after tile k1 - 1. With Write = false only the totals are formed.
template <class T, bool Write>
T walk_tiles(const T* x, std::int64_t sx, T* out, std::int64_t so, std::int64_t len,
             std::int64_t k0, std::int64_t k1, T C) {
  const T z = T(-0.0);
  for (std::int64_t k = k0; k < k1; ++k) {
    T f = z;
    const std::int64_t tile_end = std::min(len, (k + 1) * kScanTile);
    for (std::int64_t g0 = k * kScanTile; g0 < tile_end; g0 += kScanGroupElems) {
      T e = z;
      const std::int64_t group_end = std::min(tile_end, g0 + kScanGroupElems);
      for (std::int64_t i0 = g0; i0 < group_end; i0 += kScanSegment) {
        const std::int64_t i1 = std::min(group_end, i0 + kScanSegment);
        T r = z;
        if constexpr (Write) {
          const T P = (C + f) + e;
          for (std::int64_t i = i0; i < i1; ++i) {
            r = r + x[i * sx];
            out[i * so] = P + r;
          }
        } else {
          for (std::int64_t i = i0; i < i1; ++i)
            r = r + x[i * sx];
        }
        e = e + r;
      }
      f = f + e;
    }
    C = C + f;
  }
  return C;
}

// The same canonical scan of whole lines, for up to kBatch lines in lockstep (adjacent columns
// of a scan along a non-last dim share cache lines and pages). Every line gets exactly
// walk_tiles' ops, so the batch size does not change the bits.
constexpr int kBatch = 256;
std::int64_t batch_size(std::int64_t lines) {
  return std::clamp<std::int64_t>(lines / (4 * num_threads()), 16, kBatch);
}
template <class T>
void walk_lines_batch(const T* xp, const std::int64_t* xoff, T* op, const std::int64_t* ooff,
                      int nb, std::int64_t sx, std::int64_t so, std::int64_t len) {
  const T z = T(-0.0);
  T C[kBatch], f[kBatch], e[kBatch], r[kBatch], P[kBatch];
  for (int w = 0; w < nb; ++w)
    C[w] = z;
  for (std::int64_t t0 = 0; t0 < len; t0 += kScanTile) {
    const std::int64_t tile_end = std::min(len, t0 + kScanTile);
    for (int w = 0; w < nb; ++w)
      f[w] = z;
    for (std::int64_t g0 = t0; g0 < tile_end; g0 += kScanGroupElems) {
      const std::int64_t group_end = std::min(tile_end, g0 + kScanGroupElems);
      for (int w = 0; w < nb; ++w)
        e[w] = z;
      for (std::int64_t i0 = g0; i0 < group_end; i0 += kScanSegment) {
        const std::int64_t i1 = std::min(group_end, i0 + kScanSegment);
        for (int w = 0; w < nb; ++w) {
          P[w] = (C[w] + f[w]) + e[w];
          r[w] = z;
        }
        for (std::int64_t i = i0; i < i1; ++i)
          for (int w = 0; w < nb; ++w) {
            r[w] = r[w] + xp[xoff[w] + i * sx];
            op[ooff[w] + i * so] = P[w] + r[w];
          }
        for (int w = 0; w < nb; ++w)
          e[w] = e[w] + r[w];
      }
      for (int w = 0; w < nb; ++w)
        f[w] = f[w] + e[w];
    }
    for (int w = 0; w < nb; ++w)
      C[w] = C[w] + f[w];
  }
}

void cumsum_canonical(const CumsumArgs& a, const Workspace&) {
  if (a.x.numel() == 0)
    return;
  visit_float(a.x.dtype, "cumsum", [&]<class T>() {
    const Lines L = lines_of(a);
    const std::int64_t nl = L.count();
    if (nl == 0 || L.len == 0)
      return;
    const T* xp = static_cast<const T*>(a.x.data);
    T* op = static_cast<T*>(a.out.data);
    const std::int64_t tiles = (L.len + kScanTile - 1) / kScanTile;
    if (tiles == 1 || nl >= 8 * num_threads()) {
      // Many lines: each task walks whole lines (one pass over the data); strided lines in
      // batches of adjacent lines.
      if (L.sx != 1) {
        const std::int64_t bs = batch_size(nl);
        parallel_for((nl + bs - 1) / bs, [&](std::int64_t t) {
          const std::int64_t l0 = t * bs;
          walk_lines_batch<T>(xp, L.x_off.data() + l0, op, L.out_off.data() + l0,
                              static_cast<int>(std::min(bs, nl - l0)), L.sx, L.so, L.len);
        });
        return;
      }
      const std::int64_t per_task = std::max<std::int64_t>(1, 16384 / L.len);
      parallel_for((nl + per_task - 1) / per_task, [&](std::int64_t t) {
        for (std::int64_t l = t * per_task; l < std::min(nl, (t + 1) * per_task); ++l)
          walk_tiles<T, true>(xp + L.x_off[l], L.sx, op + L.out_off[l], L.so, L.len, 0, tiles,
                              T(-0.0));
      });
      return;
    }
    // Few long lines: tile totals in parallel, the carry chain per line, then the rescan.
    constexpr std::int64_t kTilesPerTask = 8;
    const std::int64_t chunks = (tiles + kTilesPerTask - 1) / kTilesPerTask;
    std::vector<T> carry(static_cast<std::size_t>(nl * tiles));
    parallel_for(nl * chunks, [&](std::int64_t t) {
      const std::int64_t l = t / chunks, c = t % chunks;
      for (std::int64_t k = c * kTilesPerTask; k < std::min(tiles, (c + 1) * kTilesPerTask); ++k)
        carry[l * tiles + k] =
            walk_tiles<T, false>(xp + L.x_off[l], L.sx, nullptr, 0, L.len, k, k + 1, T(-0.0));
    });
    for (std::int64_t l = 0; l < nl; ++l) { // totals -> exclusive carries: C_k = C_{k-1} + T_{k-1}
      T C = T(-0.0);
      for (std::int64_t k = 0; k < tiles; ++k) {
        const T total = carry[l * tiles + k];
        carry[l * tiles + k] = C;
        C = C + total;
      }
    }
    parallel_for(nl * chunks, [&](std::int64_t t) {
      const std::int64_t l = t / chunks, c = t % chunks;
      const std::int64_t k0 = c * kTilesPerTask, k1 = std::min(tiles, k0 + kTilesPerTask);
      walk_tiles<T, true>(xp + L.x_off[l], L.sx, op + L.out_off[l], L.so, L.len, k0, k1,
                          carry[l * tiles + k0]);
    });
  });
}

void cumsum_atomic(const CumsumArgs& a, const Workspace&) {
  if (a.x.numel() == 0)
    return;
  visit_float(a.x.dtype, "cumsum", [&]<class T>() {
    const Lines L = lines_of(a);
    const std::int64_t nl = L.count();
    if (nl == 0 || L.len == 0)
      return;
    const T* xp = static_cast<const T*>(a.x.data);
    T* op = static_cast<T*>(a.out.data);
    const std::int64_t chunk = std::max<std::int64_t>(4096, (L.len + 63) / 64);
    const std::int64_t chunks = (L.len + chunk - 1) / chunk;
    if (chunks == 1 &&
        L.sx != 1) { // one chunk per line: plain running sums, adjacent lines together
      const std::int64_t bs = batch_size(nl);
      parallel_for((nl + bs - 1) / bs, [&](std::int64_t t) {
        const std::int64_t l0 = t * bs;
        const int nb = static_cast<int>(std::min(bs, nl - l0));
        T s[kBatch];
        for (int w = 0; w < nb; ++w)
          s[w] = T(-0.0);
        for (std::int64_t i = 0; i < L.len; ++i)
          for (int w = 0; w < nb; ++w) {
            s[w] = s[w] + xp[L.x_off[l0 + w] + i * L.sx];
            op[L.out_off[l0 + w] + i * L.so] = s[w];
          }
      });
      return;
    }
    std::vector<T> carry(static_cast<std::size_t>(nl * chunks), T(0));
    // Each chunk's total goes into the carry of every later chunk of its line, in completion
    // order: the carries' last bits depend on which thread finished first.
    parallel_for(nl * chunks, [&](std::int64_t t) {
      const std::int64_t l = t / chunks, c = t % chunks;
      const T* x = xp + L.x_off[l];
      T s = T(0);
      for (std::int64_t i = c * chunk; i < std::min(L.len, (c + 1) * chunk); ++i)
        s += x[i * L.sx];
      for (std::int64_t c2 = c + 1; c2 < chunks; ++c2)
        std::atomic_ref<T>(carry[l * chunks + c2]).fetch_add(s, std::memory_order_relaxed);
    });
    parallel_for(nl * chunks, [&](std::int64_t t) {
      const std::int64_t l = t / chunks, c = t % chunks;
      const T* x = xp + L.x_off[l];
      T* out = op + L.out_off[l];
      T s = carry[l * chunks + c];
      if (c == 0)
        s = T(-0.0);
      for (std::int64_t i = c * chunk; i < std::min(L.len, (c + 1) * chunk); ++i) {
        s = s + x[i * L.sx];
        out[i * L.so] = s;
      }
    });
  });
}

template <class Args>
Variant<Args> cpu_variant(const char* op, const char* name, Determinism level, const char* how,
                          void (*run)(const Args&, const Workspace&)) {
  return Variant<Args>{{op, name, DeviceType::cpu, level, how}, nullptr, nullptr, run};
}

} // namespace

void register_cpu_scan(Registry& r) {
  r.add(cpu_variant<CumsumArgs>("cumsum", "cpu.atomic_carries", Determinism::not_guaranteed,
                                "chunk totals added into later chunks' carries with atomic float "
                                "adds in completion order, then a rescan",
                                cumsum_atomic));
  r.add(cpu_variant<CumsumArgs>("cumsum", "cpu.canonical", Determinism::portable,
                                "canonical 8/256/2048-element blocked chains; tiles in parallel, "
                                "carries chained per line",
                                cumsum_canonical));
}

} // namespace samebits::detail
