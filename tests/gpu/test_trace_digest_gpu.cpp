// trace::digest_on_device against trace::digest of the same values on the host: for every dtype,
// sizes from empty to past one grid pass, aligned and unaligned starts, with and without
// statistics, the same hash, extremes, NaN count, stride and samples, the sums to rounding, and
// the same bits on every repeat (one record reused); the refusals.
#include "samebits/errors.hpp"
#include "samebits/trace.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstring>
#include <cuda_runtime.h>
#include <limits>
#include <string>
#include <vector>

namespace samebits {
namespace {

const Device kGpu = Device::cuda();

trace::DeviceDigest* zeroed_record() {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, sizeof(trace::DeviceDigest)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0, sizeof(trace::DeviceDigest)), cudaSuccess);
  return static_cast<trace::DeviceDigest*>(p);
}

trace::DeviceDigest read(const trace::DeviceDigest* record) {
  trace::DeviceDigest d;
  EXPECT_EQ(cudaMemcpy(&d, record, sizeof d, cudaMemcpyDeviceToHost), cudaSuccess);
  return d;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The device digest's result words as bytes (the working words excluded): repeats compare them.
std::vector<unsigned char> result_bytes(const trace::DeviceDigest& d) {
  const auto* p = reinterpret_cast<const unsigned char*>(&d);
  return {p, p + offsetof(trace::DeviceDigest, hash_acc)};
}

void expect_matches_host(const TensorView& on_gpu, std::int64_t stats, trace::DeviceDigest* rec) {
  const Tensor host = Tensor::copy_of(on_gpu, Device::cpu());
  const trace::Digest want = trace::digest(host.view(), stats);
  trace::digest_on_device(on_gpu, stats, rec);
  const trace::DeviceDigest got = read(rec);
  EXPECT_EQ(got.sum_hash, want.sum_hash);
  EXPECT_EQ(got.stride, want.stride);
  EXPECT_EQ(got.nan_count, want.nan_count);
  EXPECT_TRUE(same_bits(got.min, want.min) || (std::isnan(got.min) && std::isnan(want.min)));
  EXPECT_TRUE(same_bits(got.max, want.max) || (std::isnan(got.max) && std::isnan(want.max)));
  for (auto [g, w] : {std::pair{got.sum, want.sum}, std::pair{got.l2, want.l2}}) {
    if (std::isnan(w))
      EXPECT_TRUE(std::isnan(g));
    else if (std::isinf(w))
      EXPECT_TRUE(same_bits(g, w));
    else
      EXPECT_NEAR(g, w, 1e-9 * (1.0 + std::abs(w)));
  }
  ASSERT_EQ(got.samples_taken, static_cast<std::int64_t>(want.samples.size()));
  for (std::size_t k = 0; k < want.samples.size(); ++k)
    EXPECT_TRUE(same_bits(got.samples[k], want.samples[k]) ||
                (std::isnan(got.samples[k]) && std::isnan(want.samples[k])))
        << k;
  EXPECT_EQ(got.hash_acc, 0u) << "the working words are left zero";
  EXPECT_EQ(got.ticket, 0u);
}

TEST(TraceDigestGpu, MatchesTheHostDigestForEveryDtypeSizeAndStart) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  trace::DeviceDigest* rec = zeroed_record();
  const DType dtypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64};
  const std::int64_t sizes[] = {0, 1, 3, 4097, 300'001, (std::int64_t{1} << 21) + 5};
  for (DType dt : dtypes)
    for (std::int64_t n : sizes)
      for (std::int64_t start : {0, 1, 3}) // element offsets: starts that are not 8-byte aligned
        for (std::int64_t stats : {std::int64_t{0}, std::int64_t{65536}, std::int64_t{7}}) {
          SCOPED_TRACE(std::string(to_string(dt)) + " n " + std::to_string(n) + " start " +
                       std::to_string(start) + " stats " + std::to_string(stats));
          const Tensor x =
              testing::random_values({n + start}, dt, seed + static_cast<std::uint64_t>(n))
                  .to(kGpu);
          TensorView v = x.view();
          v.data = static_cast<char*>(v.data) + start * static_cast<std::int64_t>(size_of(dt));
          v.shape[0] = n;
          expect_matches_host(v, stats, rec);
        }
  cudaFree(rec);
}

TEST(TraceDigestGpu, NanAndInfinityFollowTheHostRules) {
  SAMEBITS_REQUIRE_CUDA();
  trace::DeviceDigest* rec = zeroed_record();
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& vals :
       {std::vector<double>{1.0, nan, -2.0, inf}, std::vector<double>{-inf, 3.0, inf},
        std::vector<double>{5e-324, -0.0, 0.0}}) {
    const Tensor host = Tensor::from_vector(vals, {static_cast<std::int64_t>(vals.size())});
    expect_matches_host(host.to(kGpu).view(), 65536, rec);
  }
  cudaFree(rec);
}

TEST(TraceDigestGpu, RepeatsGiveTheSameBitsInOneRecord) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  trace::DeviceDigest* rec = zeroed_record();
  const Tensor x = testing::random_normal({3'000'001}, DType::f32, seed, kGpu);
  trace::digest_on_device(x.view(), 65536, rec);
  const auto first = result_bytes(read(rec));
  for (int r = 0; r < 20; ++r) {
    trace::digest_on_device(x.view(), 65536, rec);
    ASSERT_EQ(result_bytes(read(rec)), first) << r;
  }
  cudaFree(rec);
}

TEST(TraceDigestGpu, RefusesHostStridedAndMissingRecords) {
  SAMEBITS_REQUIRE_CUDA();
  trace::DeviceDigest* rec = zeroed_record();
  const Tensor host = Tensor::zeros({4}, DType::f32, Device::cpu());
  EXPECT_THROW(trace::digest_on_device(host.view(), 0, rec), InvalidArgument);
  const Tensor x = Tensor::zeros({4, 4}, DType::f32, kGpu);
  TensorView t = x.view();
  std::swap(t.strides[0], t.strides[1]);
  EXPECT_THROW(trace::digest_on_device(t, 0, rec), InvalidArgument);
  EXPECT_THROW(trace::digest_on_device(x.view(), 0, nullptr), InvalidArgument);
  cudaFree(rec);
}

} // namespace
} // namespace samebits
