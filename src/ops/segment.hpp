// Arguments of segment_reduce and aggregate as their variants receive them, the row-matrix view
// both backends compute on, and the canonical combine steps (shared by the CPU and CUDA code so
// that the two cannot drift apart).
#pragma once
#include "ops/host_device.hpp"
#include "samebits/ops/segment.hpp"
#include "samebits/tensor.hpp"

#include <bit>
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

// The canonical combine steps (see include/samebits/ops/segment.hpp).
template <class T> SAMEBITS_HD T combine_max(T acc, T v) {
  return (v > acc || v != v) ? v : acc;
}
template <class T> SAMEBITS_HD T combine_min(T acc, T v) {
  return (v < acc || v != v) ? v : acc;
}

// NaN results of arithmetic carry different bits on different hardware (x86 keeps an operand's
// payload or makes 0xFFC00000; NVIDIA GPUs make 0x7FFFFFFF), so sum and mean write every NaN
// as the one quiet NaN below. amax/amin only select elements, so they keep the input's NaN.
SAMEBITS_HD inline float canonical_nan(float v) {
#if defined(__CUDA_ARCH__)
  return v != v ? __int_as_float(0x7fc00000) : v;
#else
  return v != v ? std::bit_cast<float>(0x7fc00000u) : v;
#endif
}
SAMEBITS_HD inline double canonical_nan(double v) {
#if defined(__CUDA_ARCH__)
  return v != v ? __longlong_as_double(0x7ff8000000000000LL) : v;
#else
  return v != v ? std::bit_cast<double>(std::uint64_t{0x7ff8000000000000ULL}) : v;
#endif
}

// Host-side validation (CPU tensors): throws IndexOutOfRange naming the op and the first bad
// position. `rows` is the number of rows of x (the bound of every index).
void check_csr_values(const char* op, const TensorView& offsets, const TensorView& indices,
                      bool identity, std::int64_t num_positions, std::int64_t rows);

// Test hook for the CUDA variants: block size (threads; 0 = default), whether vector loads are
// allowed, whether rows of at most 32 columns take the staged warp-per-row kernel, whether the
// pull kernel may load row numbers ahead, and the positions a lane loads before folding them
// when it does not (4, 8 or 16; 0 = chosen from the shape). Launch configuration never changes
// results; tests use it to show that.
struct SegmentLaunch {
  int block_threads = 0;
  bool allow_vector = true;
  bool allow_staged = true;
  bool allow_prefetch = true;
  int batch = 0;
};
void set_cuda_segment_launch(SegmentLaunch l);
SegmentLaunch cuda_segment_launch();

} // namespace samebits::detail
