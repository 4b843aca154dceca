// Arguments of segment_reduce and aggregate as their variants receive them and the row-matrix
// view both backends compute on. The combine steps are ops/combine.hpp (shared with scatter).
#pragma once
#include "ops/combine.hpp"
#include "samebits/ops/segment.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <optional>

namespace samebits::detail {

// segment_reduce is aggregate with indices = identity (row k of x is position k).
struct SegmentArgs {
  TensorView x;       // float [R, ...]: the rows that are reduced
  TensorView offsets; // int64 [S + 1]
  TensorView indices; // int32/int64 [E]; unused when `identity`
  TensorView out;     // [S, ...]
  Reduce reduce = Reduce::sum;
  bool identity = false; // segment_reduce: v_k = x[k]
  // Offsets and indices are known valid (checked on the host, or when the Csr was built).
  // False only for device tensors: the CUDA variants then check before writing.
  bool checked = false;
};

// A tensor seen as a matrix: element (r, c) at data[r * ld + c], c < cols.
struct Rows {
  void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 1;
  std::int64_t ld = 0;
};

// Rows of a tensor whose dims after the first collapse into one unit-stride run; nullopt
// otherwise (callers then work on a contiguous copy).
inline std::optional<Rows> as_rows(const TensorView& t) {
  Rows r{t.data, t.ndim == 0 ? 1 : t.shape[0], 1, 0};
  std::int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 1; --d) {
    const auto du = static_cast<std::size_t>(d);
    if (t.shape[du] != 1 && t.strides[du] != expected)
      return std::nullopt;
    expected *= t.shape[du];
  }
  r.cols = expected;
  r.ld = t.ndim == 0 ? expected : t.strides[0];
  if (t.ndim >= 1 && t.shape[0] <= 1)
    r.ld = expected; // any stride of a single row is fine
  return r;
}

// Host-side validation (CPU tensors): throws IndexOutOfRange naming the op and the first bad
// position. `rows` is the number of rows of x (the bound of every index).
void check_csr_values(const char* op, const TensorView& offsets, const TensorView& indices,
                      bool identity, std::int64_t num_positions, std::int64_t rows);

} // namespace samebits::detail
