// Prefix sums.
//
// Canonical order (the `portable` variants on every backend). Each line along `dim`,
// x[0..n), is cut into segments of 8 consecutive elements, groups of 32 segments (256 elements)
// and tiles of 8 groups (2048 elements); a line's last tile, group and segment may be short.
// Every chain below is a left-to-right running sum that starts from -0.0 (the exact additive
// identity, so a chain of one element is that element, and -0.0 inputs stay -0.0):
//   r_j  running sum of the elements of a segment up to element j (inclusive);
//   e_s  running sum of the totals of the segments before segment s in its group;
//   f_g  running sum of the totals of the groups before group g in its tile;
//   C_k  running sum of the totals of the tiles before tile k in the line;
// where a segment's total is its last r, a group's total is the chain of its 32 segment totals
// and a tile's total the chain of its 8 group totals. Then
//   out[i] = ((C_k + f_g) + e_s) + r_j        (each + rounded once, no fused operations).
// Both backends compute exactly these operations (CUDA: a thread per segment, a warp per group,
// a block per run of consecutive tiles, tile carries by a decoupled look-back that re-adds the
// published tile totals left to right; strided lines: a thread per group), so results are
// bitwise equal between CPU and GPU and independent of thread count, block count and launch
// shape.
// Accuracy: out[i] is a sum of the inputs x[0..i] whose longest rounding chain has at most
// k + 8 + 32 + 8 + 3 additions (k = i / 2048), so |out[i] - exact| <= (k + 51) u sum|x[0..i]|
// (u = 2^-24 for float32, 2^-53 for float64); a plain sequential scan has i + 1.
// NaN and infinities propagate as in any sum (NaN payloads are not specified).
//
// The `not_guaranteed` variants combine chunk totals in whatever order threads or blocks finish
// (CPU: the same chunks, carries published with atomic float adds; CUDA: the same chunks and a
// look-back that adds predecessor totals as it finds them, or, for one contiguous line of fewer
// than 2^31 elements, CUB's scan, whose tiles and look-back are its own), so the last bits vary
// from run to run.
//
// bfloat16 and float16 (every level, CPU and CUDA): the line is widened exactly to float32, the
// float32 variant computes the order above, and each out[i] is rounded once to the dtype.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along `dim` (inclusive). x and out:
// float32 or float64, the same dtype and shape, any strides; out may be x itself (in place), no
// other overlap.
void cumsum(const TensorView& x, int dim, const TensorView& out, const Options& opts = {});

} // namespace samebits
