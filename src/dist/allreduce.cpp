// samebits::allreduce over any Communicator: the fixed-point sum (portable), the rank-ordered
// block sum (run_to_run) and the communicator's float sum (not_guaranteed).
#include "samebits/distributed.hpp"
#include "samebits/errors.hpp"
#include "samebits/ops/reduce.hpp"

#include <fmt/format.h>

namespace samebits {

namespace {

TensorView flat(const TensorView& t) {
  return t.reshape({t.numel()});
}

void check_tensor(const TensorView& t, Communicator& comm) {
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    throw InvalidArgument(
        fmt::format("allreduce: the tensor must be float32 or float64, got {}", t.describe()));
  if (!t.is_contiguous())
    throw InvalidArgument(
        fmt::format("allreduce: the tensor must be contiguous, got {}", t.describe()));
  if (!(t.device == comm.device()))
    throw InvalidArgument(fmt::format("allreduce: the tensor is on {}, the communicator on {}",
                                      to_string(t.device), to_string(comm.device())));
}

// The one-shot fixed-point sum. The scale comes from the global max-abs (a MAX all-reduce of one
// double) with no headroom and the default bound on contributions: it depends on the values
// only, not on the world size, so a sum of the same per-rank values has the same bits for any
// number of ranks up to 2^kContributionsLog2.
void allreduce_fixed(const TensorView& x, Communicator& comm, const std::string& name,
                     const Options& opts) {
  const std::int64_t n = x.numel();
  Options o = opts;
  o.level = Determinism::portable;
  Tensor m = Tensor::empty({1}, DType::f64, x.device, opts.stream);
  max_abs_finite(x, m, o);
  comm.max_f64(m.data<double>(), 1, opts.stream);
  const double max_abs = m.to_vector<double>()[0];
  const int s = fixed_scale(max_abs, 0, kContributionsLog2);

  // The payload: the n integers and one overflow counter, summed in one collective.
  Tensor buf = Tensor::zeros({n + 1}, DType::i64, x.device);
  const TensorView q = buf.view().slice(0, 0, n), overflow = buf.view().slice(0, n, n + 1);
  to_fixed(flat(x), s, q, overflow, false, kContributionsLog2, o);
  comm.sum_i64(buf.data<std::int64_t>(), n + 1, opts.stream);
  const std::int64_t bad = Tensor::copy_of(overflow).to_vector<std::int64_t>()[0];
  if (bad != 0)
    throw OverflowError(fmt::format("allreduce: {} has {} non-finite value(s) over the {} ranks; "
                                    "the portable all-reduce sums finite values only",
                                    name, bad, comm.size()));
  from_fixed(q, s, 1, flat(x), o);
}

// Rank r sums block r of every rank's tensor in rank order (the library's portable sum over a
// [world, block] view: a fixed order for a fixed world size), then every rank gathers the blocks.
void allreduce_blocks(const TensorView& x, Communicator& comm, const Options& opts) {
  const std::int64_t n = x.numel(), w = comm.size();
  const std::int64_t block = (n + w - 1) / w;
  Tensor send = Tensor::zeros({w * block}, x.dtype, x.device);
  copy(flat(x), send.view().slice(0, 0, n));
  Tensor recv = Tensor::empty({w, block}, x.dtype, x.device, opts.stream);
  comm.all_to_all(send.raw(), recv.raw(), block, x.dtype, opts.stream);
  Tensor mine = Tensor::empty({block}, x.dtype, x.device, opts.stream);
  Options o = opts;
  o.level = Determinism::portable;
  sum_dim(recv, 0, mine, o);
  Tensor all = Tensor::empty({w * block}, x.dtype, x.device, opts.stream);
  comm.all_gather(mine.raw(), all.raw(), block, x.dtype, opts.stream);
  copy(all.view().slice(0, 0, n), flat(x));
}

} // namespace

void allreduce(const TensorView& tensor, Determinism level, Communicator& comm,
               const std::string& name, const Options& opts) {
  check_tensor(tensor, comm);
  if (tensor.numel() == 0)
    return;
  switch (level) {
  case Determinism::portable:
    allreduce_fixed(tensor, comm, name, opts);
    return;
  case Determinism::run_to_run:
    allreduce_blocks(tensor, comm, opts);
    return;
  case Determinism::not_guaranteed:
    comm.sum_float(tensor.data, tensor.numel(), tensor.dtype, opts.stream);
    return;
  }
}

} // namespace samebits
