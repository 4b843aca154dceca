// Public entry point of gemm: validate everything, fold the transposes into strided views, then
// dispatch to a variant.
#include "samebits/ops/gemm.hpp"

#include "core/registry.hpp"
#include "ops/checks.hpp"
#include "ops/gemm.hpp"
#include "ops/half_staging.hpp"

#include <algorithm>
#include <bit>
#include <fmt/format.h>

namespace samebits {

using namespace detail;

namespace {

void check_2d(std::string_view name, const TensorView& t) {
  if (t.ndim != 2)
    throw InvalidArgument(fmt::format("gemm: {} must be 2-D, got {}", name, t.describe()));
}

} // namespace

namespace detail {

std::string GemmLaunch::describe() const {
  const char* name = tiles == GemmTiles::wide   ? "wide"
                     : tiles == GemmTiles::deep ? "deep"
                     : tiles == GemmTiles::thin ? "thin"
                                                : "narrow";
  return fmt::format("{} tiles ({}x{}{}), {} k block(s) of {} per thread block, {} group(s){}",
                     name, tile_rows, tile_cols,
                     f64_mma == GemmF64Mma::automatic ? ", FP64 tensor cores"
                     : f64_mma == GemmF64Mma::m8n8k4  ? ", FP64 tensor cores, m8n8k4"
                                                      : "",
                     group_blocks, kGemmBlockK, groups,
                     groups > 1 ? " summed by a second kernel" : "");
}

GemmLaunch choose_gemm_launch(std::int64_t m, std::int64_t n, std::int64_t k, std::size_t elem,
                              const GemmTuning& t) {
  const auto tiles_of = [&](std::int64_t r, std::int64_t c) {
    return ((m + r - 1) / r) * ((n + c - 1) / c);
  };
  const std::int64_t nb = std::max<std::int64_t>(gemm_blocks(k), 1);
  GemmLaunch l;
  l.tiles = t.tiles;
  if (l.tiles == GemmTiles::automatic) {
    // Wide tiles where there are enough of them, or enough k blocks to split over, to fill a large
    // GPU; deep ones for few narrow tiles with a long k (weight gradients); narrow otherwise.
    // Thin first: with n <= 32 a wide or narrow tile would compute mostly padding, while one
    // thread per row reads A, the big operand, once ([1M x 128] @ [128 x 16]: 0.29 ms with an
    // earlier row kernel, 1.62 ms with wide tiles, on an H200). Enough rows for a wave of 132 SMs.
    const std::int64_t wide = tiles_of(128, 128);
    if (n <= kGemmThinMaxCols && (m + 127) / 128 >= 132)
      l.tiles = GemmTiles::thin;
    else if (wide >= 128 || (m >= 128 && n >= 128 && wide * nb >= 256))
      l.tiles = GemmTiles::wide;
    else if (tiles_of(32, 16) < 132 && k >= 1024)
      l.tiles = GemmTiles::deep;
    else
      l.tiles = GemmTiles::narrow;
  }
  switch (l.tiles) {
  case GemmTiles::wide:
    l.tile_rows = 128, l.tile_cols = 128;
    break;
  case GemmTiles::deep:
    l.tile_rows = 16, l.tile_cols = 16;
    break;
  case GemmTiles::thin:
    l.tile_rows = 128, l.tile_cols = n <= 8 ? 8 : n <= 16 ? 16 : 32;
    break;
  default:
    l.tile_rows = 32, l.tile_cols = 16;
    break;
  }
  l.f64_mma = elem == 8 && l.tiles == GemmTiles::wide ? t.f64_mma : GemmF64Mma::off;
  const std::int64_t tiles = tiles_of(l.tile_rows, l.tile_cols);
  std::int64_t g = 1;
  if (t.group_blocks > 0) {
    g = static_cast<std::int64_t>(
        std::bit_floor(static_cast<std::uint64_t>(std::min(t.group_blocks, kGemmMaxGroupBlocks))));
  } else {
    // The largest group that still leaves about two waves of thread blocks on a 132-SM GPU (one
    // wide block per SM, a few narrow ones): fewer groups mean less scratch traffic. (On an H200
    // [128 x 1M] @ [1M x 128] took 1.44 ms with 256 groups of 16 blocks, 1.56 ms with 512 of 8.)
    const std::int64_t target = l.tiles == GemmTiles::wide ? 256 : 528;
    g = std::min(static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(nb))),
                 kGemmMaxGroupBlocks);
    while (g > 1 && tiles * ((nb + g - 1) / g) < target)
      g /= 2;
  }
  l.group_blocks = g;
  l.groups = (nb + g - 1) / g;
  return l;
}

} // namespace detail

void gemm(Transpose trans_a, Transpose trans_b, double alpha, const TensorView& a,
          const TensorView& b, double beta, const TensorView& c, const Options& opts) {
  check_float_or_half("gemm", "a", a);
  check_same_dtype("gemm", a, b);
  check_same_dtype("gemm", a, c);
  check_same_device("gemm", {a, b, c});
  check_2d("a", a);
  check_2d("b", b);
  check_2d("c", c);
  check_data("gemm", "a", a);
  check_data("gemm", "b", b);
  check_data("gemm", "c", c);
  const TensorView oa = trans_a == Transpose::yes ? a.transpose(0, 1) : a; // [m, k]
  const TensorView ob = trans_b == Transpose::yes ? b.transpose(0, 1) : b; // [k, n]
  if (oa.shape[1] != ob.shape[0] || c.shape[0] != oa.shape[0] || c.shape[1] != ob.shape[1])
    throw InvalidArgument(fmt::format(
        "gemm: shapes do not fit: op(a) is [{}, {}], op(b) is [{}, {}], c is [{}, {}]; op(a) must "
        "be [m, k], op(b) [k, n] and c [m, n] (a {}transposed, b {}transposed)",
        oa.shape[0], oa.shape[1], ob.shape[0], ob.shape[1], c.shape[0], c.shape[1],
        trans_a == Transpose::yes ? "" : "not ", trans_b == Transpose::yes ? "" : "not "));
  check_output("gemm", "c", c, {{"a", a}, {"b", b}});
  if (is_half(a.dtype)) { // the float32 canonical order on exact copies, each output rounded once
    const Tensor cf = staged_output(c, static_cast<float>(beta) != 0.0f, opts);
    gemm(trans_a, trans_b, alpha, to_float32(a, opts.stream), to_float32(b, opts.stream), beta, cf,
         opts);
    return round_into(cf, c, opts.stream);
  }
  dispatch("gemm", c.device, GemmArgs{oa, ob, c, alpha, beta}, opts);
}

} // namespace samebits
