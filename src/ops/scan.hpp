// Arguments of cumsum as its variants receive them (already validated), and the constants of
// the canonical scan order documented in include/samebits/ops/scan.hpp.
#pragma once
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits::detail {

struct CumsumArgs {
  TensorView x;
  TensorView out; // x's shape and dtype
  int dim = 0;    // normalized
};

inline constexpr int kScanSegment = 8;                              // elements per segment
inline constexpr int kScanGroup = 32;                               // segments per group
inline constexpr int kScanTileGroups = 8;                           // groups per tile
inline constexpr int kScanGroupElems = kScanSegment * kScanGroup;   // 256
inline constexpr int kScanTile = kScanGroupElems * kScanTileGroups; // 2048

// Canonical tiles per block-unit of the CUDA look-back: 8 (float) or 4 (double) by default, so
// that a look-back step covers that many tiles and the chain of posted carries keeps ahead of the
// memory system; 4 float tiles where the smaller units apply (ops/scan_choice.cpp). A launch
// choice, not part of the order: the carry chain runs through a unit tile by tile.
constexpr int scan_unit_tiles(int elem_bytes) {
  return 32 / elem_bytes;
}
inline constexpr int kScanSmallUnitTiles = 4;

// A tensor seen as [outer, len, inner] around `dim`, with x's and out's strides per part.
// Lines are the (outer, inner) pairs; `dim` has length len.
struct ScanLayout {
  std::int64_t outer = 1, len = 1, inner = 1;
};

} // namespace samebits::detail
