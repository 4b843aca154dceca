// General matrix multiply: c = alpha * op(a) @ op(b) + beta * c.
//
// Canonical order (the `portable` variants on every backend, for any tiling, thread count or
// launch configuration). T is the dtype (float or double); alpha and beta are first rounded to T
// (round to nearest). KB = 256. For each output element (i, j):
//
//   k is cut into nb = ceil(k / KB) blocks; block q covers p in [q*KB, min((q+1)*KB, k)).
//   block q:  s_q = +0.0;  for p ascending in the block:  s_q = fma(A[i,p], B[p,j], s_q)
//             (fma: a fused multiply-add, one rounding of the exact A*B + s)
//   acc = tree(0, nb), where tree(lo, hi) = s_lo when hi - lo == 1, and otherwise
//         tree(lo, lo + h) + tree(lo + h, hi) (one rounded sum), h the largest power of two
//         below hi - lo (so the left part is always a complete tree of 2^j blocks)
//   k == 0: acc = +0.0
//   if alpha == 0:  c = +0.0 if beta == 0; c if beta == 1; beta * c otherwise
//                   (a and b are not read at all)
//   else:           t = acc if alpha == 1; alpha * acc otherwise (rounded)
//                   c = t if beta == 0 (c's old value is never read: NaN or inf there is ignored)
//                       t + c if beta == 1 (rounded)
//                       t + (beta * c) otherwise (beta * c rounded, then the sum rounded)
//   (alpha and beta are compared after rounding to T.)
//
// A = op(a) and B = op(b). The order depends on k only, never on m, n, the batch or the launch,
// so a row's result does not depend on the other rows computed with it (batch invariance). Its
// rounding error grows like KB + log2(k / KB) roundings instead of k. The CPU computes the fma
// with FMA instructions where it has them (chosen at run time) and with the correctly rounded
// std::fma otherwise; CUDA with __fmaf_rn / __fma_rn: the same bits everywhere. A block of
// products that are all -0.0 sums to +0.0 (s starts at +0.0). k == 0 gives acc = +0.0 and then
// the same epilogue. NaN and inf propagate; denormals are kept. NaN payloads are not part of the
// promise (a GPU returns its canonical NaN). The alpha == 1 and beta == 1 shortcuts give the same
// bits as the general formula for every non-NaN value.
//
// Variants and what selection picks (the first implementable variant at or above the level;
// a portable variant serves every level):
//   CPU   not_guaranteed  cpu.split_k_atomic   k blocks cut into runs done as separate tasks;
//                                              alpha * sums added with atomic float adds in
//                                              completion order
//         run_to_run,     cpu.packed_tiles     packed, cache-blocked, output tiles in parallel;
//         portable                             micro-kernels per instruction set (generic
//                                              std::fma, AVX2 + FMA, AVX-512), the same bits
//   CUDA  not_guaranteed  cuda.split_k_atomic  k chunks across blocks (grid z); sums added with
//                                              atomicAdd onto beta * c
//         run_to_run      cuda.tiled_small     the cuda.tiled kernel for small products (k <= 64
//                                              and m * n <= 2^22, the small layers of a GNN), where
//                                              it beats cuBLAS; portable, so it also serves
//                                              run_to_run, and other products pass to cuda.cublas
//         run_to_run      cuda.cublas          cuBLAS, one handle and one fixed workspace per
//                                              (device, stream), atomics off, no TF32; needs a unit
//                                              stride in one dimension of a, b and c, otherwise
//                                              run_to_run selects cuda.tiled. Not batch-invariant
//                                              (its kernel and split of k depend on m): portable
//                                              is, by construction
//         portable        cuda.tiled           shared-memory tiles (128 x 128, 32 x 16 or 16 x 16
//                                              outputs per block, or 128 rows x 8/16/32 columns
//                                              with one thread per row for thin outputs, n <= 32);
//                                              each block sums an aligned run
//                                              of k blocks (a subtree of the canonical tree), and
//                                              with several runs per tile their sums go to scratch
//                                              and a second kernel combines them with the same
//                                              tree: the bits of cpu.packed_tiles
// How cuda.tiled cuts a product is a pure function of the shape (detail::choose_gemm_launch).
//
// bfloat16 and float16: the float32 canonical order on exact float32 copies of a and b (and of c
// when beta, rounded to float32, is not 0), alpha and beta rounded to float32, then each output
// rounded once to the half dtype (to nearest even), through the float32 variant of the level: the
// same bits on the CPU and CUDA at portable.
//
// Preconditions: a, b and c are 2-D; op(a): [m, k], op(b): [k, n], c: [m, n]; all three the same
// dtype (float32, float64, bfloat16 or float16) and device. Any strides (leading dimensions) are
// accepted for a and b; c must not reach an element twice (for instance a zero stride along a
// dimension of size > 1) nor share an element with a or b: either is an InvalidArgument. Errors
// leave c untouched.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

enum class Transpose : bool { no = false, yes = true };

// c = alpha * op(a) @ op(b) + beta * c, with op(a): [m, k], op(b): [k, n], c: [m, n].
// op(x) is x, or x transposed when the Transpose flag is yes (a is then [k, m], b [n, k]).
// float32 or float64, all three the same dtype. beta == 0 ignores c's old contents (NaN too).
void gemm(Transpose trans_a, Transpose trans_b, double alpha, const TensorView& a,
          const TensorView& b, double beta, const TensorView& c, const Options& opts = {});

} // namespace samebits
