// The NCCL communicator on 2..4 GPUs of one host (one thread per rank; skipped with fewer than
// two devices): the portable all-reduce gives every rank the bits of the CPU fixed-point sum of
// the same contributions, and run_to_run gives every rank the same bits on every repeat.
#include "core/backends.hpp"
#include "samebits/distributed.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

namespace samebits {
namespace {

// Runs fn(rank, comm) on `world` threads, one GPU each; rethrows the first failure.
void on_ranks(int world, const std::function<void(int, Communicator&)>& fn) {
  const std::string id = nccl_unique_id();
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = make_nccl_communicator(id, r, world, r);
        fn(r, *comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads)
    t.join();
  for (auto& e : errors)
    if (e)
      std::rethrow_exception(e);
}

TEST(DistributedNccl, PortableEqualsTheCpuFixedPointSum) {
  const int world = std::min(detail::cuda_device_count(), 4);
  if (world < 2)
    GTEST_SKIP() << "needs two CUDA devices";
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t n = (1 << 20) + 3;
  std::vector<Tensor> xs;
  double m = 0;
  for (int r = 0; r < world; ++r) {
    xs.push_back(testing::random_normal({n}, DType::f32, seed + static_cast<unsigned>(r)));
    Tensor mr = Tensor::empty({1}, DType::f64);
    max_abs_finite(xs.back(), mr);
    m = std::max(m, mr.to_vector<double>()[0]);
  }
  const int s = fixed_scale(m, 0, kContributionsLog2);
  Tensor q = Tensor::zeros({n}, DType::i64), bad = Tensor::zeros({1}, DType::i64);
  for (auto& x : xs)
    to_fixed(x, s, q, bad, true);
  Tensor expected = Tensor::empty({n}, DType::f32);
  from_fixed(q, s, 1, expected);

  std::vector<Tensor> portable(static_cast<std::size_t>(world)), r2r(portable);
  on_ranks(world, [&](int r, Communicator& comm) {
    const auto i = static_cast<std::size_t>(r);
    Tensor x = xs[i].to(Device::cuda(r));
    allreduce(x, Determinism::portable, comm, "x");
    portable[i] = x.to(Device::cpu());
    Tensor a = xs[i].to(Device::cuda(r)), b = xs[i].to(Device::cuda(r));
    allreduce(a, Determinism::run_to_run, comm, "a");
    allreduce(b, Determinism::run_to_run, comm, "b");
    ASSERT_EQ(std::memcmp(a.to(Device::cpu()).raw(), b.to(Device::cpu()).raw(), a.nbytes()), 0);
    r2r[i] = a.to(Device::cpu());
  });
  for (int r = 0; r < world; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(std::memcmp(portable[i].raw(), expected.raw(), expected.nbytes()), 0) << r;
    EXPECT_EQ(std::memcmp(r2r[i].raw(), r2r[0].raw(), expected.nbytes()), 0) << r;
  }
}

} // namespace
} // namespace samebits
