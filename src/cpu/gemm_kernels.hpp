// The CPU gemm's micro-kernels, one set per instruction set (generic std::fma, AVX2 + FMA,
// AVX-512), each compiled in its own file with its own flags and picked at run time. Every set
// computes the canonical order (include/samebits/ops/gemm.hpp) exactly: one fma per product along
// a k block, block partials combined by the binary counter of src/ops/gemm.hpp, so all give the
// same bits and differ only in speed.
#pragma once
#include <cstdint>

namespace samebits::detail::cpu_gemm {

constexpr std::int64_t kMR = 6;       // rows of a micro-tile
constexpr std::int64_t kBlockK = 256; // kGemmBlockK of src/ops/gemm.hpp (checked there)

// How a micro-kernel reads A: element (row i of panel `it`, k step p) is
// base[it * panel + i * row + p * step]. Packed panels: (kc * kMR, 1, kMR); A read in place:
// its own strides.
struct AWalk {
  std::int64_t panel, row, step;
};

// One task of the small-output path: step p reads one vector of lanes of X at x + p * xs and
// `rows` scalars of Y at y + p * ys + r * yr.
struct SmallWalk {
  std::int64_t xs, ys, yr;
};

template <class T> struct KernelSet {
  std::int64_t nr;    // columns of a micro-tile (two vectors)
  std::int64_t lanes; // elements of one vector
  // For every micro-tile of an (mc_pad x nc_pad) block, the k block q (kc <= KB steps, from +0,
  // a packed or in-place A and a packed B) is summed as an fma chain and pushed onto the tile's
  // stack: level l of a micro-tile starts at stack + l * level_stride (micro-tile layout,
  // kMR x nr row-major per micro-tile, micro-tiles (it, jt) at (it * nt + jt) * kMR * nr).
  void (*push_block)(const T* ap, AWalk w, const T* bp, std::int64_t mc_pad, std::int64_t nc_pad,
                     std::int64_t kc, std::int64_t q, T* stack, std::int64_t level_stride);
  // The whole canonical sum over k for `rows` (1 to 8) outputs x `lanes` outputs: out[r * lanes
  // + l] (the small-output path).
  void (*small)(int rows, const T* x, const T* y, SmallWalk w, std::int64_t k, T* out);
};

struct Isa {
  const char* name;
  KernelSet<float> f32;
  KernelSet<double> f64;
};

// nullptr when the build has no such set (not x86-64); whether the CPU runs it is the caller's
// question.
const Isa* isa_generic();
const Isa* isa_avx2();
const Isa* isa_avx512();

} // namespace samebits::detail::cpu_gemm
