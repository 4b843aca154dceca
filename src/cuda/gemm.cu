// CUDA variants of gemm (canonical order: include/samebits/ops/gemm.hpp) and their launch.
//
//   cuda.split_k_atomic  not_guaranteed  k cut into chunks (grid z); c = beta * c first, then each
//                                        chunk's alpha * sum is added with atomicAdd, in
//                                        whatever order the blocks finish
//   cuda.tiled_small     portable        cuda.tiled, preferred for short-k products with few
//                                        outputs (it beats cuBLAS's launch there)
//   cuda.cublas          run_to_run      cuBLAS (src/cuda/gemm_cublas.cu)
//   cuda.tiled           portable        shared-memory tiles (src/cuda/gemm_kernels.cuh; float
//                                        wide tiles copied in by cp.async, src/cuda/
//                                        gemm_copy_tiles.cuh, unless A is read m-fast; float64
//                                        wide tiles on the FP64 tensor cores from sm_80), or for
//                                        thin outputs (n <= 32, many rows) one thread per row; each
//                                        thread block sums one chunk of k, an aligned run of
//                                        canonical blocks, with __fmaf_rn/__fma_rn chains and a
//                                        per-thread block counter; with several chunks per tile
//                                        the sums go to scratch and gemm_combine adds them with
//                                        the same tree: the CPU's bits for every launch shape
//
// How a product is cut (tile shape, blocks per chunk) is choose_gemm_launch's pure function of
// the shape and the GemmTuning (src/ops/gemm.hpp): never of the GPU, and never of the bits. Only
// whether float64 wide tiles run on the tensor cores depends on the GPU, with the same bits.
#include "core/registry.hpp"
#include "core/tuning.hpp"
#include "cuda/check.cuh"
#include "cuda/gemm_copy_tiles.cuh"
#include "cuda/gemm_cublas.hpp"
#include "cuda/gemm_kernels.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "ops/gemm.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <string>

namespace samebits::detail {

namespace {

using namespace cuda_gemm;

template <class T> Epilogue<T> epilogue_of(const GemmArgs& g) {
  return {static_cast<T>(g.alpha), static_cast<T>(g.beta)};
}

template <class T> void launch_scale(const GemmArgs& g, Epilogue<T> epi, cudaStream_t s) {
  const i64 total = g.m() * g.n();
  const i64 blocks = std::min<i64>((total + 255) / 256, 8192);
  gemm_scale<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
      static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1], g.m(), g.n(), epi);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_scale");
}

template <class Cfg> void check_tile(const GemmLaunch& l) {
  if (l.tile_rows != Cfg::BM || l.tile_cols != Cfg::BN)
    throw Error("gemm: the launch choice and the kernel disagree on the tile shape");
}

// A tiled launch's grid (all tiles x `groups` chunks of k), where its sums go (c, or scratch for
// partial sums: chunk z at z * m * n) and its chunk of k.
template <class T> struct TileGrid {
  dim3 grid;
  T* out;
  i64 ors, ocs, zstride, chunk;
};
template <class T>
TileGrid<T> tile_grid(const GemmArgs& g, const GemmLaunch& l, TileOut mode, T* scratch, i64 rows,
                      i64 cols) {
  const bool partial = mode == TileOut::partial;
  return {dim3(static_cast<unsigned>((g.m() + rows - 1) / rows),
               static_cast<unsigned>((g.n() + cols - 1) / cols), static_cast<unsigned>(l.groups)),
          partial ? scratch : static_cast<T*>(g.c.data),
          partial ? g.n() : g.c.strides[0],
          partial ? 1 : g.c.strides[1],
          partial ? g.m() * g.n() : 0,
          l.group_blocks * kGemmBlockK};
}

// One launch of the tiled kernel over all tiles and `groups` chunks of k (grid z).
template <class T, class Cfg>
void launch_tiles(const GemmArgs& g, const GemmLaunch& l, Epilogue<T> epi, TileOut mode, T* scratch,
                  cudaStream_t s) {
  check_tile<Cfg>(l);
  const auto [grid, out, ors, ocs, zstride, chunk] =
      tile_grid(g, l, mode, scratch, Cfg::BM, Cfg::BN);
  gemm_tiles<T, Cfg><<<grid, kThreads<Cfg>, 0, s>>>(g.mat_a<T>(), g.mat_b<T>(), out, ors, ocs,
                                                    zstride, g.m(), g.n(), g.k(), chunk, epi, mode);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_tiles");
}

// One launch of the wide float kernel that copies its tiles asynchronously (gemm_copy_tiles.cuh).
void launch_copy_tiles(const GemmArgs& g, const GemmLaunch& l, Epilogue<float> epi, TileOut mode,
                       float* scratch, cudaStream_t s) {
  check_tile<CopyFloatTiles>(l);
  constexpr int smem = copy_tiles_smem<kCopyK, kCopyStages>();
  const auto [grid, out, ors, ocs, zstride, chunk] =
      tile_grid(g, l, mode, scratch, CopyFloatTiles::BM, CopyFloatTiles::BN);
  gemm_copy_tiles<kCopyK, kCopyStages>
      <<<grid, kCopyThreads, smem, s>>>(g.mat_a<float>(), g.mat_b<float>(), out, ors, ocs, zstride,
                                        g.m(), g.n(), g.k(), chunk, epi, mode);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_copy_tiles");
}

// One launch of the thin kernel: 128 rows x BN columns per thread block, `groups` chunks of k.
template <class T, int BN>
void launch_thin(const GemmArgs& g, const GemmLaunch& l, Epilogue<T> epi, TileOut mode, T* scratch,
                 cudaStream_t s) {
  if (l.tile_rows != kThinRows || l.tile_cols != BN)
    throw Error("gemm: the launch choice and the thin kernel disagree on the tile shape");
  const auto [grid, out, ors, ocs, zstride, chunk] = tile_grid(g, l, mode, scratch, kThinRows, BN);
  gemm_thin<T, BN><<<grid, kThinRows, 0, s>>>(g.mat_a<T>(), g.mat_b<T>(), out, ors, ocs, zstride,
                                              g.m(), g.n(), g.k(), chunk, epi, mode);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_thin");
}

template <class T>
void launch_for(const GemmArgs& g, const GemmLaunch& l, Epilogue<T> epi, TileOut mode, T* scratch,
                cudaStream_t s) {
  switch (l.tiles) {
  case GemmTiles::wide:
    if constexpr (sizeof(T) == 4) {
      // A transposed a (m-fast columns, 16-byte aligned): the kernel that reads it by vectors.
      const Mat<T> A = g.mat_a<T>();
      if (A.rs == 1 && A.cs != 1 && A.cs % kPerVec16<T> == 0 && aligned16(A.data))
        return launch_tiles<T, WideFloatTilesMFast>(g, l, epi, mode, scratch, s);
      return launch_copy_tiles(g, l, epi, mode, scratch, s);
    } else {
      const int major = l.f64_mma == GemmF64Mma::off ? 0 : compute_major();
      if (major >= 9 && l.f64_mma == GemmF64Mma::automatic)
        return launch_tiles<T, WideDoubleMma16x8Tiles>(g, l, epi, mode, scratch, s);
      if (major >= 8)
        return launch_tiles<T, WideDoubleMmaTiles>(g, l, epi, mode, scratch, s);
      return launch_tiles<T, WideTiles>(g, l, epi, mode, scratch, s);
    }
  case GemmTiles::deep:
    return launch_tiles<T, DeepTiles>(g, l, epi, mode, scratch, s);
  case GemmTiles::thin:
    if (l.tile_cols <= 8)
      return launch_thin<T, 8>(g, l, epi, mode, scratch, s);
    if (l.tile_cols <= 16)
      return launch_thin<T, 16>(g, l, epi, mode, scratch, s);
    return launch_thin<T, 32>(g, l, epi, mode, scratch, s);
  default:
    return launch_tiles<T, NarrowTiles>(g, l, epi, mode, scratch, s);
  }
}

std::size_t elem_of(const GemmArgs& g) {
  return g.c.dtype == DType::f32 ? 4 : 8;
}

GemmLaunch launch_of(const GemmArgs& g) {
  return choose_gemm_launch(g.m(), g.n(), g.k(), elem_of(g), tuning<GemmTuning>());
}

std::size_t portable_scratch(const GemmArgs& g) {
  if (g.m() == 0 || g.n() == 0 || g.k() == 0 || g.alpha == 0)
    return 0;
  return launch_of(g).scratch_bytes(g.m(), g.n(), elem_of(g));
}

template <class T> void run_portable_t(const GemmArgs& g, const Workspace& ws, cudaStream_t s) {
  const Epilogue<T> epi = epilogue_of<T>(g);
  if (g.k() == 0 || epi.alpha == T(0))
    return launch_scale<T>(g, epi, s);
  const GemmLaunch l = launch_of(g);
  append_last_explain("; " + l.describe());
  if (l.groups == 1)
    return launch_for<T>(g, l, epi, TileOut::final_c, nullptr, s);
  if (ws.bytes < l.scratch_bytes(g.m(), g.n(), sizeof(T)))
    throw Error("gemm: the workspace is smaller than the launch's scratch");
  T* part = static_cast<T*>(ws.data);
  launch_for<T>(g, l, epi, TileOut::partial, part, s);
  const i64 blocks = std::min<i64>((g.m() * g.n() + 255) / 256, 65535);
  gemm_combine<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
      part, l.groups, static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1], g.m(), g.n(), epi);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_combine");
}

template <class T> void run_split_k_t(const GemmArgs& g, cudaStream_t s) {
  const Epilogue<T> epi = epilogue_of<T>(g);
  if (g.k() == 0 || epi.alpha == T(0))
    return launch_scale<T>(g, epi, s);
  GemmLaunch l = launch_of(g);
  const i64 nb = gemm_blocks(g.k());
  if (l.groups == 1 && nb > 1) { // at least two chunks, so that the adds race
    l.group_blocks = static_cast<i64>(std::bit_ceil(static_cast<std::uint64_t>(nb))) / 2;
    l.groups = (nb + l.group_blocks - 1) / l.group_blocks;
  }
  launch_scale<T>(g, Epilogue<T>{T(0), epi.beta}, s); // c = beta * c
  launch_for<T>(g, l, epi, TileOut::atomic_add, nullptr, s);
}

void run_portable(const GemmArgs& g, const Workspace& ws) {
  if (g.m() == 0 || g.n() == 0)
    return;
  const cudaStream_t s = SAMEBITS_STREAM(ws.stream);
  if (g.c.dtype == DType::f32)
    run_portable_t<float>(g, ws, s);
  else
    run_portable_t<double>(g, ws, s);
}

void run_split_k(const GemmArgs& g, const Workspace& ws) {
  if (g.m() == 0 || g.n() == 0)
    return;
  const cudaStream_t s = SAMEBITS_STREAM(ws.stream);
  if (g.c.dtype == DType::f32)
    run_split_k_t<float>(g, s);
  else
    run_split_k_t<double>(g, s);
}

// Grid limits: m tiles on x (2^31 - 1), n tiles on y and chunks on z (65535 each).
std::string tiles_why_not(const GemmArgs& g) {
  if (g.m() == 0 || g.n() == 0 || g.k() == 0)
    return {};
  const GemmLaunch l = launch_of(g);
  if ((g.n() + l.tile_cols - 1) / l.tile_cols > 65535)
    return "n = " + std::to_string(g.n()) + " needs more than 65535 column tiles";
  if ((g.m() + l.tile_rows - 1) / l.tile_rows > INT_MAX)
    return "m = " + std::to_string(g.m()) + " needs more than 2^31 - 1 row tiles";
  if (l.groups > 65535)
    return "k = " + std::to_string(g.k()) + " needs more than 65535 chunks";
  return {};
}

// Products with a short k and few outputs (the small layers of a GNN: [2708 x 16] @ [16 x 7]) run
// faster in the tiled kernel than through cuBLAS's launch and heuristics; the tiled kernel is
// portable, so it also serves run_to_run requests for them.
constexpr std::int64_t kSmallMaxK = 64;
constexpr std::int64_t kSmallMaxOutputs = std::int64_t{1} << 22;

std::string tiled_small_why_not(const GemmArgs& g) {
  std::string why = tiles_why_not(g);
  if (!why.empty())
    return why;
  if (g.k() > kSmallMaxK || g.m() * g.n() > kSmallMaxOutputs)
    return "not a small product (k <= 64 and m*n <= 2^22): cuBLAS or cuda.tiled take it";
  return {};
}

} // namespace

void register_cuda_gemm(Registry& r) {
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.split_k_atomic", DeviceType::cuda, Determinism::not_guaranteed,
       "k split across blocks; alpha * partials added with atomicAdd in completion order"},
      tiles_why_not,
      nullptr,
      run_split_k});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.tiled_small", DeviceType::cuda, Determinism::portable,
       "the cuda.tiled kernel, preferred for short-k products with few outputs (faster than "
       "cuBLAS there; same bits as cuda.tiled and the CPU)"},
      tiled_small_why_not,
      portable_scratch,
      run_portable});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.cublas", DeviceType::cuda, Determinism::run_to_run,
       "cuBLAS with one handle and fixed workspace per (device, stream), no atomics, no TF32"},
      cublas_why_not,
      nullptr,
      run_cublas});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.tiled", DeviceType::cuda, Determinism::portable,
       "shared-memory tiles; fma chains per k block (__fmaf_rn/__fma_rn), blocks combined by the "
       "fixed tree, k split over thread blocks (canonical order, equal to the CPU)"},
      tiles_why_not,
      portable_scratch,
      run_portable});
}

} // namespace samebits::detail
