// samebits/stream.hpp on a GPU: a CudaStream gives back what samebits cached for it when it is
// destroyed (the rule `bench graphsage` broke, issue 23), events time work, and a captured graph
// replays an op with the same bits as the op itself.
#include "samebits/stream.hpp"
#include "testing.hpp"

#include <cuda_runtime.h>
#include <optional>

namespace samebits {
namespace {

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

TEST(StreamGpu, DestroyingACudaStreamGivesBackItsCacheAndCublasWorkspace) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Tensor a = testing::random_normal({256, 256}, DType::f32, seed, gpu);
  std::optional<CudaStream> stream(std::in_place, gpu);
  const Stream s = stream->stream();
  Tensor c = Tensor::empty({256, 256}, DType::f32, gpu, s);
  Tensor big = Tensor::empty({std::int64_t{64} << 20}, DType::f32, gpu, s); // 256 MiB
  gemm(Transpose::no, Transpose::no, 1.0, a, a, 0.0, c,
       {.level = Determinism::run_to_run, .stream = s}); // a cuBLAS handle and 32 MiB workspace
  synchronize(gpu, s);
  c = Tensor{};
  big = Tensor{}; // both blocks go to the stream's cache
  const std::size_t before = free_device_bytes();
  stream.reset();
  EXPECT_GE(free_device_bytes(), before + (std::size_t{256} << 20) + (std::size_t{32} << 20))
      << "the cached blocks and the cuBLAS workspace should be back once the stream is gone";
}

TEST(StreamGpu, AGraphReplaysAnOpWithItsBitsAndEventsTimeIt) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const DeviceScope scope(gpu);
  CudaStream stream(gpu);
  const Stream s = stream.stream();
  Tensor x = testing::random_normal({1 << 20}, DType::f32, seed, gpu);
  Tensor direct = Tensor::empty({1}, DType::f32, gpu, s);
  Tensor replayed = Tensor::empty({1}, DType::f32, gpu, s);
  const Options portable{.level = Determinism::portable, .stream = s};
  sum(x, direct, portable);
  synchronize(gpu, s);
  CudaGraph graph(s, [&] { sum(x, replayed, portable); });
  CudaEvent start(gpu), end(gpu);
  start.record(s);
  if (graph.captured())
    graph.launch(s);
  else
    sum(x, replayed, portable);
  end.record(s);
  EXPECT_GE(CudaEvent::elapsed_ms(start, end), 0.f);
  EXPECT_TRUE(bitwise_equal(direct.to(Device::cpu()), replayed.to(Device::cpu())));
}

} // namespace
} // namespace samebits
