// The order of the tile-partials scatter sum (cuda.tile_partials, run_to_run): index_add and
// scatter_add of rows of at least 8 features into few targets, with no global sort. Its bits are a
// function of the shapes alone, the same on every run, launch configuration and GPU, and differ
// from the canonical order's (include/samebits/ops/scatter.hpp). Here: the sizes that define it,
// shared by the kernels (cuda/scatter_tile_partials.cu) and the tests that rebuild the order on
// the host.
//
// Source rows are cut into tiles of kTileRows consecutive rows and tiles into chunks of
// tile_chunk_tiles() consecutive tiles. Within a tile, rows are put in stable order of target; the
// sorted tile is read kSubRows ranks at a time, and a sub-tile in runs of kRunRows ranks. For one
// target and one feature, with c the contributions in that order:
//
//   partial(chunk) = -0, then for each sub-tile of the chunk (in order) holding contributions of
//   the target, at ranks split by the kRunRows boundaries into pieces P1, P2, ...:
//     s = fold(P1); s = s + fold(P2); ...; partial = partial + s    (fold: left to right)
//   out = out + partial(0) + partial(1) + ...   (left to right; a target whose partials are all
//   -0 keeps its bits)
#pragma once
#include <algorithm>
#include <cstdint>

namespace samebits::detail {

inline constexpr std::int64_t kTileRows = 4096;  // rows sorted together (one block)
inline constexpr int kSubRows = 1024;            // sorted ranks staged together
inline constexpr int kRunRows = 32;              // ranks one lane group sums before combining
inline constexpr int kSliceFeatures = 8;         // features one block sums

// Tiles per chunk for L source rows into M targets of F features. Enough chunks to keep the GPU
// busy (about 512 blocks over the feature slices), few enough that the partials (chunks * M * F
// values, written once and read once) stay within an eighth of the source's bytes.
inline std::int64_t tile_chunk_tiles(std::int64_t L, std::int64_t M, std::int64_t F) {
  const std::int64_t tiles = (L + kTileRows - 1) / kTileRows;
  const std::int64_t slices = (F + kSliceFeatures - 1) / kSliceFeatures;
  const std::int64_t want = std::max<std::int64_t>(1, std::min(L / (16 * std::max<std::int64_t>(M, 1)), (512 + slices - 1) / slices));
  const std::int64_t chunks = std::clamp<std::int64_t>(want, 1, std::max<std::int64_t>(tiles, 1));
  return (tiles + chunks - 1) / chunks;
}

}  // namespace samebits::detail
