// The CUDA backend's runtime: the caching allocator, copies between host and device (contiguous
// and strided), fills, synchronization, and error reporting (a failing CUDA call surfaces as a
// CudaError that names the call).
#include "core/backends.hpp"
#include "core/memory.hpp"
#include "cuda/check.cuh"
#include "testing.hpp"

#include <cmath>
#include <cuda_runtime.h>
#include <string>
#include <vector>

namespace samebits {
namespace {

using testing::fresh_seed;
const Device kGpu = Device::cuda();

// Ops on the tensors of one GPU, called while the thread has another GPU current: they run on
// their tensors' GPU (the same bits as with that GPU current), and the caller's GPU is current
// again afterwards. Needs two GPUs.
TEST(CudaRuntime, OpsRunOnTheDeviceOfTheirTensors) {
  SAMEBITS_REQUIRE_CUDA();
  if (detail::cuda_device_count() < 2)
    GTEST_SKIP() << "needs two CUDA devices";
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Device d1 = Device::cuda(1);
  const Tensor x = testing::random_normal({300001}, DType::f32, seed, d1);
  const Tensor src = testing::random_normal({300001, 8}, DType::f32, seed + 1, d1);
  const Tensor index = testing::random_index(300001, 5000, DType::i64, seed + 2, d1);
  const Tensor offsets =
      Tensor::from_vector<std::int64_t>({0, 1000, 1000, 250000, 300001}, {5}, d1);
  const Tensor a = testing::random_normal({300, 200}, DType::f32, seed + 3, d1);
  const auto run_all = [&] {
    std::vector<Tensor> r;
    r.push_back(Tensor::empty({300001}, DType::f32, d1));
    cumsum(x, 0, r.back(), {.level = Determinism::portable});
    r.push_back(Tensor::empty({300001}, DType::f32, d1));
    cumsum(x, 0, r.back(), {.level = Determinism::not_guaranteed}); // CUB's scan: checked below
    r.push_back(Tensor::full({5000, 8}, 0.5, DType::f32, d1));
    index_add(r.back(), index, src, 1.0, {.level = Determinism::portable});
    r.push_back(Tensor::empty({4, 8}, DType::f32, d1));
    segment_reduce(src, offsets, r.back(), Reduce::sum, {.level = Determinism::portable});
    r.push_back(Tensor::empty({1}, DType::f32, d1));
    sum(x, r.back(), {.level = Determinism::portable});
    r.push_back(Tensor::empty({300, 300}, DType::f32, d1));
    gemm(Transpose::no, Transpose::yes, 1.0, a, a, 0.0, r.back(), {.level = Determinism::portable});
    for (Tensor& t : r)
      t = t.to(Device::cpu());
    return r;
  };
  int before = -1;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&before));
  SAMEBITS_CUDA_CHECK(cudaSetDevice(1));
  const std::vector<Tensor> want = run_all();
  SAMEBITS_CUDA_CHECK(cudaSetDevice(0));
  const std::vector<Tensor> got = run_all();
  int after = -1;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&after));
  EXPECT_EQ(after, 0);
  SAMEBITS_CUDA_CHECK(cudaSetDevice(before));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i == 1)
      continue; // the not_guaranteed scan may differ in its last bits
    EXPECT_TRUE(bitwise_equal(got[i], want[i])) << "result " << i;
  }
  const auto g = got[1].to_vector<float>(), w = want[0].to_vector<float>();
  for (std::size_t i = 0; i < g.size(); i += 997)
    EXPECT_NEAR(g[i], w[i], 1e-3 * (1.0 + std::abs(w[i]))) << "cumsum at " << i;
}

TEST(CudaRuntime, AllocatorReusesFreedBlocksAndAllowsZeroBytes) {
  SAMEBITS_REQUIRE_CUDA();
  void* p = detail::allocate_bytes(1000, kGpu);
  ASSERT_NE(p, nullptr);
  detail::free_bytes(p, kGpu);
  void* q = detail::allocate_bytes(1000, kGpu); // same size class: the cached block comes back
  EXPECT_EQ(p, q);
  void* z = detail::allocate_bytes(0, kGpu);
  EXPECT_NE(z, nullptr);
  EXPECT_NE(z, q);
  detail::free_bytes(q, kGpu);
  detail::free_bytes(z, kGpu);
  detail::free_bytes(nullptr, kGpu); // a no-op
}

// release_stream gives back what a stream used: its cuBLAS handle and 32 MiB workspace, and the
// blocks cached for it; the stream then works again from scratch.
TEST(CudaRuntime, ReleaseStreamGivesBackWhatTheStreamUsed) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  cudaStream_t s = nullptr;
  SAMEBITS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Stream stream{s};
  const auto seed = testing::fresh_seed();
  Tensor a = testing::random_normal({256, 256}, DType::f32, seed, gpu);
  Tensor c = Tensor::empty({256, 256}, DType::f32, gpu, stream);
  Tensor big = Tensor::empty({std::int64_t{64} << 20}, DType::f32, gpu, stream); // 256 MiB
  auto use_stream = [&] {
    gemm(Transpose::no, Transpose::no, 1.0, a, a, 0.0, c,
         {.level = Determinism::run_to_run, .stream = stream});
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(s));
  };
  use_stream();
  const Tensor first = c.to(Device::cpu());
  big = Tensor{}; // its 256 MiB block goes to the stream's cache
  std::size_t free_before = 0, free_after = 0, total = 0;
  SAMEBITS_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  release_stream(stream, gpu);
  SAMEBITS_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT_GE(free_after, free_before + (std::size_t{256} << 20) + (std::size_t{32} << 20))
      << "the cached block and the cuBLAS workspace should both be back";
  use_stream(); // a new handle, the same bits
  EXPECT_TRUE(bitwise_equal(c.to(Device::cpu()), first));
  release_stream(stream, gpu);
  c = Tensor{};
  release_stream(stream, gpu);
  SAMEBITS_CUDA_CHECK(cudaStreamDestroy(s));
  EXPECT_NO_THROW(release_stream(Stream{}, gpu)) << "the default stream is left alone";
}

TEST(CudaRuntime, AllocationFailureIsCudaErrorNamingCudaMalloc) {
  SAMEBITS_REQUIRE_CUDA();
  try {
    detail::allocate_bytes(std::size_t{1} << 50, kGpu); // 1 PiB
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
  }
  // The failure is not sticky: the device still works.
  Tensor t = Tensor::full({10}, 2.5, DType::f32, kGpu);
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(10, 2.5f));
}

TEST(CudaRuntime, MissingDeviceIsBackendUnavailable) {
  SAMEBITS_REQUIRE_CUDA();
  EXPECT_THROW(detail::allocate_bytes(16, Device::cuda(detail::cuda_device_count())),
               BackendUnavailable);
  EXPECT_THROW(detail::allocate_bytes(16, Device::cuda(-1)), BackendUnavailable);
}

TEST(CudaRuntime, FailingCallThrowsCudaErrorWithCallFileAndReason) {
  SAMEBITS_REQUIRE_CUDA();
  try {
    SAMEBITS_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudaSetDevice(1 << 20)"), std::string::npos) << m;
    EXPECT_NE(m.find("test_cuda_runtime_gpu.cpp"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorInvalidDevice"), std::string::npos) << m;
  }
  try {
    Tensor a = Tensor::empty({4}, DType::f32, kGpu), b = Tensor::empty({4}, DType::f32, kGpu);
    SAMEBITS_CUDA_CHECK(cudaMemcpy(a.raw(), b.raw(), 16, static_cast<cudaMemcpyKind>(42)));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMemcpy"), std::string::npos) << e.what();
  }
  cudaGetLastError();
  int dev = -1;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev)); // still usable
  EXPECT_EQ(dev, 0);
}

TEST(CudaRuntime, CopiesRoundTripBitwiseForEveryDtype) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor h = testing::random_normal({1234, 7}, dtype, seed);
    Tensor d = h.to(kGpu);
    EXPECT_TRUE(d.device().is_cuda());
    EXPECT_TRUE(bitwise_equal(h, d.to(Device::cpu())));
    Tensor d2 = d.clone(); // device to device
    EXPECT_NE(d2.raw(), d.raw());
    EXPECT_TRUE(bitwise_equal(h, d2.to(Device::cpu())));
    EXPECT_EQ(content_hash(h), content_hash(d2));
  }
  for (DType dtype : {DType::i32, DType::i64}) {
    Tensor h = testing::random_index(5000, 1 << 30, dtype, seed);
    EXPECT_TRUE(bitwise_equal(h, h.to(kGpu).to(Device::cpu())));
  }
  Tensor e = Tensor::empty({0, 3}, DType::f32, kGpu); // empty tensors copy to nothing
  EXPECT_EQ(e.to(Device::cpu()).numel(), 0);
}

TEST(CudaRuntime, StridedViewsCopyAcrossDevices) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor h = testing::random_normal({40, 30}, DType::f64, seed);
  Tensor d = h.to(kGpu);
  // A strided device view read to the host, and a host view written into a strided device view.
  const TensorView dt = d.view().transpose(0, 1);
  Tensor back = Tensor::copy_of(dt, Device::cpu());
  Tensor want = Tensor::copy_of(h.view().transpose(0, 1), Device::cpu());
  EXPECT_TRUE(bitwise_equal(back, want)) << "seed " << seed;
  Tensor big = Tensor::full({40, 60}, -1.0, DType::f64, kGpu);
  const TensorView every_other = big.view().slice(1, 0, 60, 2);
  copy(h, every_other);
  const auto all = testing::to_doubles(big);
  const auto hv = testing::to_doubles(h);
  for (std::int64_t i = 0; i < 40; ++i)
    for (std::int64_t j = 0; j < 60; ++j) {
      const double v = all[static_cast<std::size_t>(i * 60 + j)];
      if (j % 2 == 0)
        ASSERT_EQ(v, hv[static_cast<std::size_t>(i * 30 + j / 2)]) << i << "," << j;
      else
        ASSERT_EQ(v, -1.0) << i << "," << j; // the gaps are untouched
    }
}

// A host tensor copied into, and a value filled into, a transposed view of fresh device memory:
// the view covers its whole span, so its old bytes (never written) are not read back first.
// compute-sanitizer's initcheck flags such a read; before the view was known to cover its span,
// the thin-kernel gemm test, which builds column-major operands this way, gave 5457 of them in one
// shard (run 138).
TEST(CudaRuntime, ViewsCoveringTheirSpanAreWrittenWithoutReadingIt) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::f64, DType::i64}) {
    const Tensor h = testing::random_values({37, 19}, dtype, seed);
    Tensor fresh = Tensor::empty({19, 37}, dtype, kGpu);
    const TensorView column_major = fresh.view().transpose(0, 1);
    copy(h.view(), column_major);
    EXPECT_TRUE(bitwise_equal(Tensor::copy_of(column_major, Device::cpu()), h)) << to_string(dtype);
    Tensor filled = Tensor::empty({5, 7, 3}, dtype, kGpu);
    fill(filled.view().transpose(0, 2), 3.0);
    for (double v : testing::to_doubles(filled))
      ASSERT_EQ(v, 3.0) << to_string(dtype);
  }
}

TEST(CudaRuntime, StridedViewsCopyOnTheDevice) {
  SAMEBITS_REQUIRE_CUDA();
  // Device to device with strides on either side (one kernel): the same elements as on the host,
  // and the gaps of a strided destination untouched, for every dtype.
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << to_string(dtype) << " seed " << seed);
    Tensor h = testing::random_values({6, 50, 33}, dtype, seed);
    Tensor d = h.to(kGpu);
    struct Case {
      TensorView src_host, src_dev;
    };
    const Case cases[] = {
        {h.view().transpose(0, 2), d.view().transpose(0, 2)},
        {h.view().slice(1, 3, 47, 5), d.view().slice(1, 3, 47, 5)},
        {h.view().select(2, 7), d.view().select(2, 7)},
        {h.view(), d.view()},
    };
    for (const auto& c : cases) {
      const Tensor want = Tensor::copy_of(c.src_host, Device::cpu());
      Tensor packed = Tensor::copy_of(c.src_dev, kGpu); // strided -> contiguous
      EXPECT_TRUE(packed.view().is_contiguous());
      EXPECT_TRUE(bitwise_equal(packed, want)) << c.src_dev.describe();
      // contiguous or strided -> every other element of a larger buffer
      Shape wide = c.src_dev.sizes();
      wide.back() *= 2;
      Tensor big = Tensor::full(wide, -5.0, dtype, kGpu);
      const int last = c.src_dev.ndim - 1;
      const TensorView gaps = big.view().slice(last, 0, wide.back(), 2);
      copy(c.src_dev, gaps);
      EXPECT_TRUE(bitwise_equal(Tensor::copy_of(gaps, Device::cpu()), want))
          << c.src_dev.describe();
      const auto all = testing::to_doubles(big);
      for (std::size_t i = 1; i < all.size(); i += 2)
        ASSERT_EQ(all[i], -5.0) << i;
    }
  }
  Tensor a = Tensor::empty({0, 4}, DType::f32, kGpu), b = Tensor::empty({4, 0}, DType::f32, kGpu);
  EXPECT_NO_THROW(copy(a.view(), b.view().transpose(0, 1)));
  // Overlapping views of one tensor: dst gets src as it was before the copy.
  std::vector<float> ramp(100);
  for (int i = 0; i < 100; ++i)
    ramp[static_cast<std::size_t>(i)] = static_cast<float>(i);
  Tensor t = Tensor::from_vector(ramp, {100}).to(kGpu);
  copy(t.view().slice(0, 0, 90), t.view().slice(0, 10, 100));
  const auto shifted = t.to_vector<float>();
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(shifted[static_cast<std::size_t>(i)], static_cast<float>(i < 10 ? i : i - 10)) << i;
  // A destination that reaches one element three times (stride 0): the last write wins.
  Tensor one = Tensor::full({1}, 0.0, DType::f32, kGpu);
  TensorView thrice = one.view();
  thrice.shape[0] = 3;
  thrice.strides[0] = 0;
  copy(Tensor::from_vector(std::vector<float>{1.f, 2.f, 3.f}, {3}).to(kGpu).view(), thrice);
  EXPECT_EQ(one.to_vector<float>(), std::vector<float>{3.f});
}

TEST(CudaRuntime, FillAndSynchronizeOnAStream) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor t = Tensor::empty({3, 1000}, DType::f32, kGpu);
  fill(t.view().select(0, 1), 4.0);
  fill(t.view().select(0, 0), -3.0);
  fill(t.view().select(0, 2), 0.5);
  const auto v = t.to_vector<float>();
  EXPECT_EQ(v[0], -3.0f);
  EXPECT_EQ(v[1000], 4.0f);
  EXPECT_EQ(v[2999], 0.5f);
  cudaStream_t s = nullptr;
  SAMEBITS_CUDA_CHECK(cudaStreamCreate(&s));
  Tensor out = Tensor::empty({1}, DType::f32, kGpu);
  sum(t, out, {.level = Determinism::portable, .stream = Stream{s}});
  detail::cuda_synchronize(Stream{s});
  EXPECT_EQ(out.to_vector<float>()[0], 1000 * (-3.0f + 4.0f + 0.5f));
  SAMEBITS_CUDA_CHECK(cudaStreamDestroy(s));
}

// A copy to the device, or between device buffers, has landed when it returns: work queued right
// after it on a non-blocking stream (not ordered after the copy by CUDA) reads the copied values.
// 256 MiB from pageable host memory takes milliseconds over PCIe, far longer than the launch.
TEST(CudaRuntime, CopiesHaveLandedForNonBlockingStreams) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t n = std::int64_t{1} << 26;
  Tensor host = testing::random_normal({n}, DType::f32, seed);
  Tensor expect = Tensor::empty({1}, DType::f32);
  sum(host, expect, {.level = Determinism::portable});
  cudaStream_t s = nullptr;
  SAMEBITS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Tensor out = Tensor::empty({1}, DType::f32, kGpu);
  for (int r = 0; r < 3; ++r) {
    Tensor dev = host.to(kGpu);
    sum(dev, out, {.level = Determinism::portable, .stream = Stream{s}});
    detail::cuda_synchronize(Stream{s});
    EXPECT_EQ(content_hash(out), content_hash(expect))
        << "host to device, round " << r << ", seed " << seed;
    Tensor twin = dev.clone();
    sum(twin, out, {.level = Determinism::portable, .stream = Stream{s}});
    detail::cuda_synchronize(Stream{s});
    EXPECT_EQ(content_hash(out), content_hash(expect))
        << "device to device, round " << r << ", seed " << seed;
  }
  SAMEBITS_CUDA_CHECK(cudaStreamDestroy(s));
}

// The same promise for copies of a few MiB, the size of a typical output tensor: from pageable
// memory such a copy may return with its last piece still on the way, and the sum queued at once
// on a non-blocking stream must still see every value.
TEST(CudaRuntime, FewMiBCopiesHaveLandedForNonBlockingStreams) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  cudaStream_t s = nullptr;
  SAMEBITS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Tensor out = Tensor::empty({1}, DType::f32, kGpu);
  for (const std::int64_t n :
       {std::int64_t{1} << 20, std::int64_t{3} << 20, std::int64_t{961} << 10}) {
    Tensor host = testing::random_normal({n}, DType::f32, seed + static_cast<std::uint64_t>(n));
    Tensor expect = Tensor::empty({1}, DType::f32);
    sum(host, expect, {.level = Determinism::portable});
    int wrong = 0;
    for (int r = 0; r < 40; ++r) {
      Tensor dev = host.to(kGpu);
      sum(dev, out, {.level = Determinism::portable, .stream = Stream{s}});
      detail::cuda_synchronize(Stream{s});
      if (content_hash(out) != content_hash(expect))
        ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "of 40 copies of " << n << " floats, seed " << seed;
  }
  SAMEBITS_CUDA_CHECK(cudaStreamDestroy(s));
}

} // namespace
} // namespace samebits
