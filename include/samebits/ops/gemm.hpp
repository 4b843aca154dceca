// General matrix multiply: c = alpha * op(a) @ op(b) + beta * c.
//
// Canonical order (the `portable` variants on every backend, for any tiling, thread count or
// launch configuration). T is the dtype (float or double); alpha and beta are first rounded to T
// (round to nearest). For each output element (i, j):
//
//   acc = +0.0
//   for p = 0, 1, ..., k-1:  acc = acc + (A[i,p] * B[p,j])   // product rounded, then sum rounded
//   if alpha == 0:  t = (nothing: a and b are not read for this call)
//   elif alpha == 1: t = acc                                  // 1 * acc, exactly
//   else:            t = alpha * acc                          // rounded
//   if beta == 0:    c = t             (c's old value is never read: NaN or inf there is ignored)
//   elif beta == 1:  c = t + c         (rounded)
//   else:            c = t + (beta * c) (beta * c rounded, then the sum rounded)
//   with alpha == 0: c = +0.0 when beta == 0, c unchanged when beta == 1, else c = beta * c.
//
// A = op(a) and B = op(b). No fused multiply-add anywhere. Because acc starts at +0.0 it is
// never -0.0, so adding a +0.0 product (padding) leaves it bitwise unchanged; a dot product whose
// products are all -0.0 gives +0.0 (as in reference BLAS). k == 0 gives acc = +0.0 and then the
// same epilogue. NaN and inf propagate; denormals are kept. NaN payloads are not part of the
// promise (a GPU returns its canonical NaN). The alpha == 1 and beta == 1 shortcuts give the same
// bits as the general formula for every non-NaN value.
//
// Variants and what selection picks (first implementable variant at or above the level):
//   CPU   not_guaranteed  cpu.split_k_atomic   k split in pieces; partials added with atomic
//                                              float adds in completion order
//         portable        cpu.packed_tiles     packed, cache-blocked, output tiles in parallel;
//                                              serves run_to_run and portable as well
//   CUDA  not_guaranteed  cuda.split_k_atomic  k split across blocks; partials added with atomicAdd
//         run_to_run      cuda.cublas          cuBLAS with one handle and one workspace per
//                                              (device, stream), atomics off, no TF32; operands
//                                              need a unit stride in one dimension
//         portable        cuda.tiled / cuda.tiled_small  shared-memory tiles; the canonical order
//   At run_to_run the CUDA backend picks cuda.cublas when the operands allow it, else cuda.tiled.
//
// Preconditions: a, b and c are 2-D; op(a): [m, k], op(b): [k, n], c: [m, n]; all three the same
// dtype (float32 or float64) and device. Any strides (leading dimensions) are accepted for a and
// b; c must not have a zero stride along a dimension of size > 1, and must not share memory with
// a or b (the result is then unspecified). Errors leave c untouched.
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

}  // namespace samebits
