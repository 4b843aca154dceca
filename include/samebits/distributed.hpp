// Same bits on any number of ranks: exact fixed-point conversions (float <-> int64 at a
// power-of-two scale) and an all-reduce over an abstract communicator (MPI for CPU tensors, NCCL
// for CUDA tensors, each built when its library is found).
//
// Fixed point (the `portable` all-reduce and the gradient accumulator of samebits.torch). A
// tensor's contributions (one per rank, or one per micro-batch) are converted at one scale 2^s,
// shared by all of them and known before the first is converted:
//
//   q = round_half_even(double(x) * 2^s)         (to_fixed; exact product, one rounding)
//   y = T((double(Q) * 2^-s) / double(divisor))  (from_fixed; Q the int64 sum of the q's)
//
// Integer addition is associative, so Q, hence y, is the same for every order, partition and
// world size. Every step above is one IEEE operation in round-to-nearest, so the CPU and CUDA
// give the same bits. Range: a conversion is valid when |x| * 2^s <= 2^(62 - C) (C =
// kContributionsLog2: at most 2^C contributions are summed, so Q stays within 2^62 and cannot
// overflow); a value beyond that, or a NaN or an infinity, is not converted (q = 0) and counts
// one in the `overflow` counter, which the all-reduce sums with the payload and turns into an
// OverflowError naming the tensor. Resolution: 2^-s.
//
// The scale. fixed_scale(M, H, C) = 62 - C - H - e, with 2^(e-1) <= M < 2^e (M = 0 counts as
// M = 1): values up to 2^H * M (H: headroom) convert, and a value of M is resolved to 2^(e-62+C+H),
// i.e. 2^-(62-C-H) = 2^-34 of M by default, ten bits below float32 rounding. A value more than
// 2^(34-24) = 1024 times smaller than M keeps fewer than float32's 24 bits; one below 2^-35 M
// rounds to zero. The one-shot all-reduce takes M = the global max-abs of the tensor (one MAX
// all-reduce of a double) with H = 0 and C = ceil(log2 world_size); the accumulator takes M from
// the previous step (see python/samebits/torch/distributed/ and docs/distributed.md).
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace samebits {

inline constexpr int kHeadroomLog2 = 16;      // default H: values up to 2^16 times the reference
inline constexpr int kContributionsLog2 = 12; // default C: at most 4096 contributions per sum
inline constexpr int kMaxFixedScale = 1000;   // |s| is clamped here (2^s stays a normal double)

// The shift s for reference max-abs `max_abs` (>= 0, finite), headroom 2^headroom_log2 and at
// most 2^contributions_log2 contributions. Clamped to [-kMaxFixedScale, kMaxFixedScale].
int fixed_scale(double max_abs, int headroom_log2 = kHeadroomLog2,
                int contributions_log2 = kContributionsLog2);

// out[i] (+)= round(x[i] * 2^s). x: float32/float64, contiguous; out: int64 of x's numel,
// contiguous, on x's device; accumulate: add to out instead of overwriting it. overflow: an
// int64[1] on x's device to which the number of values not converted (out of range for
// contributions_log2, or not finite) is added; those leave out unchanged. Asynchronous on CUDA
// (opts.stream); bitwise equal on every backend.
void to_fixed(const TensorView& x, int s, const TensorView& out, const TensorView& overflow,
              bool accumulate, int contributions_log2 = kContributionsLog2,
              const Options& opts = {});

// out[i] = T((double(q[i]) * 2^-s) / double(divisor)), T = out's dtype (float32/float64).
// q: int64, contiguous; divisor >= 1.
void from_fixed(const TensorView& q, int s, std::int64_t divisor, const TensorView& out,
                const Options& opts = {});

// The largest |x[i]| over x's finite values (0 if none), as a double (exact: max does not round),
// written to out (a float64[1] on x's device).
void max_abs_finite(const TensorView& x, const TensorView& out, const Options& opts = {});

// --- the all-reduce --------------------------------------------------------------------------

// The collectives the all-reduce needs, on buffers of the tensor's device (blocking with respect
// to the host for CPU communicators; stream-ordered on opts.stream for CUDA ones).
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0; // where the buffers live
  virtual void sum_i64(std::int64_t* data, std::int64_t n, Stream stream) = 0;
  virtual void max_f64(double* data, std::int64_t n, Stream stream) = 0;
  // The float sum as the library does it (order unspecified: level not_guaranteed).
  virtual void sum_float(void* data, std::int64_t n, DType dtype, Stream stream) = 0;
  // recv[r * n .. (r+1) * n) = rank r's send[r_this * n ..]: the r-th block of every rank's send
  // goes to rank r (MPI_Alltoall); and allgather: recv[r * n ..) = rank r's send.
  virtual void all_to_all(const void* send, void* recv, std::int64_t n_per_rank, DType dtype,
                          Stream stream) = 0;
  virtual void all_gather(const void* send, void* recv, std::int64_t n, DType dtype,
                          Stream stream) = 0;
};

// Sums `tensor` (float32/float64, contiguous) over the communicator's ranks in place; every rank
// ends with the same bits.
//   portable:       the fixed-point sum above: the same bits for every world size and backend
//                   (a sum of W values, each exact to 2^-s); payload one int64 per element.
//   run_to_run:     each rank sums one block of the elements over the ranks in rank order
//                   (all-to-all, then all-gather): the same bits on every run for one world size.
//   not_guaranteed: the communicator's own float sum.
// `name` names the tensor in errors. Throws OverflowError for non-finite values at portable.
void allreduce(const TensorView& tensor, Determinism level, Communicator& comm,
               const std::string& name = "tensor", const Options& opts = {});

// The communicators, each in its own library so that only programs that use one link it:
// samebits_mpi (built when CMake finds MPI) and samebits_nccl (built with the CUDA backend when
// it finds NCCL). MPI: MPI_COMM_WORLD, CPU buffers (MPI must already be initialised). NCCL: one
// rank of a clique given by its unique id (128 bytes, from nccl_unique_id() on rank 0, passed to
// the others by any means).
std::unique_ptr<Communicator> make_mpi_communicator();
std::string nccl_unique_id();
std::unique_ptr<Communicator> make_nccl_communicator(const std::string& unique_id, int rank,
                                                     int size, int cuda_device);

} // namespace samebits
