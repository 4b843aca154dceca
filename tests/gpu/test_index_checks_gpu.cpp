// Deferred index checks on CUDA (samebits/stream.hpp: CudaIndexChecks). For every op that can
// defer, index dtype and level, generated: a bad index returns at once, writes nothing, and is
// thrown by check_index_errors or by the next checking call; valid inputs give the bits of wait
// mode; only the first error is kept; a deferred op can be captured into a CUDA graph; an index
// that automatic plan reuse may remember still waits.
#include "samebits/samebits.hpp"
#include "samebits/stream.hpp"
#include "testing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cuda_runtime.h>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace samebits {
namespace {

using testing::ChecksScope;

// One op call: writes `out` from inputs built for `seed`; `bad` plants one out-of-range index
// (or, for segment_reduce, one decreasing offset).
struct Case {
  std::string name;
  std::function<void(const Tensor& out, bool bad, DType index_dtype, std::uint64_t seed,
                     const Options& o)>
      run;
  Shape out_shape;
  std::int64_t positions = 0; // index positions (L)
};

constexpr std::int64_t kL = 3000, kM = 700, kN = 900;

Tensor index_with(std::int64_t n, std::int64_t hi, DType dt, std::uint64_t seed, bool bad,
                  std::int64_t bad_value) {
  Tensor idx = testing::random_index(n, hi, dt, seed);
  if (bad) {
    const std::int64_t at = static_cast<std::int64_t>(seed % static_cast<std::uint64_t>(n));
    if (dt == DType::i32)
      idx.data<std::int32_t>()[at] = static_cast<std::int32_t>(bad_value);
    else
      idx.data<std::int64_t>()[at] = bad_value;
  }
  return idx.to(Device::cuda());
}

// The cases with L index positions (rows of src, x or out).
void add_cases(std::vector<Case>& c, std::int64_t L) {
  for (std::int64_t f : {std::int64_t{1}, std::int64_t{8}}) {
    const std::string fs = " F=" + std::to_string(f);
    c.push_back({"index_add" + fs,
                 [f, L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
                   Tensor idx = index_with(L, kM, dt, s, bad, kM + 3);
                   Tensor src = testing::random_normal({L, f}, DType::f32, s + 1, Device::cuda());
                   index_add(out, idx, src, 0.5, o);
                 },
                 {kM, f},
                 L});
    c.push_back({"scatter_add" + fs,
                 [f, L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
                   Tensor idx = index_with(L, kM, dt, s, bad, -1);
                   Tensor src = testing::random_normal({L, f}, DType::f32, s + 1, Device::cuda());
                   scatter_add(out, 0, testing::expanded_index(idx, {L, f}), src, o);
                 },
                 {kM, f},
                 L});
    c.push_back(
        {"scatter_reduce amax" + fs,
         [f, L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
           Tensor idx = index_with(L, kM, dt, s, bad, kM);
           Tensor src = testing::random_normal({L, f}, DType::f64, s + 1, Device::cuda());
           scatter_reduce(out, 0, testing::expanded_index(idx, {L, f}), src, Reduce::amax, true, o);
         },
         {kM, f},
         L});
  }
  c.push_back({"index_select",
               [L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
                 Tensor x = testing::random_normal({kN, 16}, DType::f32, s + 1, Device::cuda());
                 index_select(x, 0, index_with(L, kN, dt, s, bad, kN + 100), out, o);
               },
               {L, 16},
               L});
  c.push_back({"gather",
               [L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
                 Tensor x = testing::random_normal({kN, 4}, DType::f64, s + 1, Device::cuda());
                 Tensor idx = index_with(L * 4, kN, dt, s, bad, -7);
                 gather(x, 0, idx.view().reshape({L, 4}), out, o);
               },
               {L, 4},
               L});
  c.push_back({"segment_reduce",
               [L](const Tensor& out, bool bad, DType, std::uint64_t s, const Options& o) {
                 // kM segments over L rows: sorted cut points, one made to decrease when bad.
                 std::vector<std::int64_t> cuts(static_cast<std::size_t>(kM + 1));
                 std::mt19937_64 gen(s);
                 for (auto& v : cuts)
                   v = static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(L + 1));
                 std::sort(cuts.begin(), cuts.end());
                 cuts.front() = 0;
                 cuts.back() = L;
                 if (bad)
                   cuts[static_cast<std::size_t>(kM / 2)] = L + 1;
                 Tensor off = Tensor::empty({kM + 1}, DType::i64, Device::cpu());
                 std::copy(cuts.begin(), cuts.end(), off.data<std::int64_t>());
                 Tensor x = testing::random_normal({L, 8}, DType::f32, s + 1, Device::cuda());
                 segment_reduce(x, off.to(Device::cuda()), out, Reduce::sum, o);
               },
               {kM, 8},
               L});
  c.push_back({"aggregate",
               [L](const Tensor& out, bool bad, DType dt, std::uint64_t s, const Options& o) {
                 // kM nodes with L / kM edges each (at least one), sources in [0, kN).
                 const std::int64_t per = std::max<std::int64_t>(L / kM, 1);
                 Tensor off = Tensor::empty({kM + 1}, DType::i64, Device::cpu());
                 for (std::int64_t i = 0; i <= kM; ++i)
                   off.data<std::int64_t>()[i] = i * per;
                 Tensor idx = index_with(per * kM, kN, dt, s, bad, kN);
                 Tensor x = testing::random_normal({kN, 8}, DType::f32, s + 1, Device::cuda());
                 Tensor offd = off.to(Device::cuda());
                 aggregate(CsrGraph{offd.view(), idx.view()}, x, out, Reduce::mean, o);
               },
               {kM, 8},
               L});
}

// Every case at four sizes, around the one-block kernels' limits: at 600 positions every op that
// has one takes it (fixed-point sums, the one-block counting sort of 700 targets, check and copy);
// at 3000 index_add of one feature and gather still do, index_select (48000 values) takes the
// check and copy kernels; at 13000 the rows still take the one-block counting sort; at 20000
// every op takes its multi-kernel path.
constexpr std::int64_t kSizes[] = {600, kL, 13000, 20000};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const std::int64_t L : kSizes)
    add_cases(c, L);
  return c;
}

DType out_dtype(const Case& c) {
  return c.name.find("amax") != std::string::npos || c.name == "gather" ? DType::f64 : DType::f32;
}

constexpr Determinism kLevels[] = {Determinism::run_to_run, Determinism::portable};
// The atomic variants defer too; their bits differ from run to run, so only the bad-index tests
// run them.
constexpr Determinism kAllLevels[] = {Determinism::not_guaranteed, Determinism::run_to_run,
                                      Determinism::portable};
constexpr DType kIndexTypes[] = {DType::i32, DType::i64};

std::string what_of(const std::function<void()>& f) {
  return testing::caught<IndexOutOfRange>(f).value_or("");
}

TEST(IndexChecksGpu, DeferredBadIndexWritesNothingAndIsThrownOnceByCheckIndexErrors) {
  SAMEBITS_REQUIRE_CUDA();
  const ChecksScope scope(CudaIndexChecks::deferred);
  const Device gpu = Device::cuda();
  int n = 0;
  for (const Case& c : cases())
    for (Determinism level : kAllLevels)
      for (DType dt : kIndexTypes) {
        if (c.name.rfind("segment_reduce", 0) == 0 && dt == DType::i32)
          continue; // offsets are int64 only
        const auto seed = testing::fresh_seed();
        SCOPED_TRACE(c.name + " L=" + std::to_string(c.positions) + " at " +
                     std::string(to_string(level)) + ", " + std::string(to_string(dt)) + ", seed " +
                     std::to_string(seed));
        Tensor out = testing::random_normal(c.out_shape, out_dtype(c), seed + 9, gpu);
        const Tensor before = Tensor::copy_of(out.view(), Device::cpu());
        const std::string at_call = what_of([&] { c.run(out, true, dt, seed, {.level = level}); });
        EXPECT_EQ(at_call, "") << "the call waited for its check instead of deferring it";
        const std::string later = what_of([&] { check_index_errors(gpu); });
        EXPECT_NE(later.find(c.name.substr(0, c.name.find(' '))), std::string::npos)
            << "check_index_errors should name the op: '" << later << "'";
        EXPECT_NE(later.find("deferred"), std::string::npos) << later;
        EXPECT_TRUE(bitwise_equal(Tensor::copy_of(out.view(), Device::cpu()), before))
            << "a bad index wrote into the output";
        EXPECT_EQ(what_of([&] { check_index_errors(gpu); }), "") << "the error was thrown twice";
        ++n;
      }
  EXPECT_EQ(n, 4 * 57); // 4 sizes x 10 cases x 3 levels x 2 index types, segment offsets int64
}

TEST(IndexChecksGpu, ValidInputsGiveTheBitsOfWaitModeAndNoError) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (const Case& c : cases())
    for (Determinism level : kLevels)
      for (DType dt : kIndexTypes) {
        if (c.name.rfind("segment_reduce", 0) == 0 && dt == DType::i32)
          continue;
        const auto seed = testing::fresh_seed();
        SCOPED_TRACE(c.name + " L=" + std::to_string(c.positions) + " at " +
                     std::string(to_string(level)) + ", seed " + std::to_string(seed));
        Tensor waited = testing::random_normal(c.out_shape, out_dtype(c), seed + 9, gpu);
        Tensor deferred = Tensor::copy_of(waited.view(), gpu);
        {
          const ChecksScope scope(CudaIndexChecks::wait);
          c.run(waited, false, dt, seed, {.level = level});
        }
        const ChecksScope scope(CudaIndexChecks::deferred);
        c.run(deferred, false, dt, seed, {.level = level});
        EXPECT_EQ(what_of([&] { check_index_errors(gpu); }), "");
        EXPECT_TRUE(bitwise_equal(waited, deferred));
      }
}

// The atomic variants with valid indices, deferred: no error is reported (their bits vary from run
// to run, so only the absence of an error is compared).
TEST(IndexChecksGpu, ValidInputsAtNotGuaranteedReportNoError) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const ChecksScope scope(CudaIndexChecks::deferred);
  for (const Case& c : cases())
    for (DType dt : kIndexTypes) {
      if (c.name.rfind("segment_reduce", 0) == 0 && dt == DType::i32)
        continue;
      const auto seed = testing::fresh_seed();
      SCOPED_TRACE(c.name + " L=" + std::to_string(c.positions) + ", seed " + std::to_string(seed));
      Tensor out = testing::random_normal(c.out_shape, out_dtype(c), seed + 9, gpu);
      c.run(out, false, dt, seed, {.level = Determinism::not_guaranteed});
      EXPECT_EQ(what_of([&] { check_index_errors(gpu); }), "");
    }
}

TEST(IndexChecksGpu, TheNextCheckingCallThrowsItBeforeWriting) {
  SAMEBITS_REQUIRE_CUDA();
  const ChecksScope scope(CudaIndexChecks::deferred);
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::vector<Case> all = cases();
  auto named = [&](const std::string& name) {
    return *std::find_if(all.begin(), all.end(), [&](const Case& c) { return c.name == name; });
  };
  const Case add = named("index_add F=8"), select = named("index_select");
  Tensor out = testing::random_normal(add.out_shape, DType::f32, seed, gpu);
  add.run(out, true, DType::i64, seed, {.level = Determinism::run_to_run});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); // the device has run the check
  Tensor sel = testing::random_normal(select.out_shape, DType::f32, seed + 1, gpu);
  const Tensor sel_before = Tensor::copy_of(sel.view(), Device::cpu());
  const std::string e =
      what_of([&] { select.run(sel, false, DType::i64, seed, {.level = Determinism::portable}); });
  EXPECT_NE(e.find("index_add"), std::string::npos) << "'" << e << "'";
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(sel.view(), Device::cpu()), sel_before));
  // Thrown once: the same call now runs.
  select.run(sel, false, DType::i64, seed, {.level = Determinism::portable});
  EXPECT_EQ(what_of([&] { check_index_errors(gpu); }), "");
}

// Holds a stream until release() (at most 20 s): the work queued behind it has not run while
// the host queues more.
class StreamGate {
public:
  explicit StreamGate(Stream s) {
    EXPECT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(s.handle), &StreamGate::wait, &open_),
              cudaSuccess);
  }
  void release() { open_.store(true); }
  ~StreamGate() { release(); }

private:
  static void CUDART_CB wait(void* flag) {
    auto* open = static_cast<std::atomic<bool>*>(flag);
    for (int i = 0; i < 20000 && !open->load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> open_{false};
};

TEST(IndexChecksGpu, OnlyTheFirstErrorIsKept) {
  SAMEBITS_REQUIRE_CUDA();
  const ChecksScope scope(CudaIndexChecks::deferred);
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const DeviceScope on(gpu);
  CudaStream stream(gpu);
  const Options o{.level = Determinism::run_to_run, .stream = stream.stream()};
  // Everything the two calls read is on the device before the gate closes the stream.
  Tensor idx = index_with(kL, kM, DType::i64, seed, true, kM + 1);
  Tensor src = testing::random_normal({kL, 8}, DType::f32, seed + 1, gpu);
  Tensor out = testing::random_normal({kM, 8}, DType::f32, seed + 2, gpu);
  Tensor x = testing::random_normal({kN, 8}, DType::f32, seed + 3, gpu);
  Tensor sel_idx = index_with(kL, kN, DType::i32, seed + 4, true, -2);
  Tensor sel = Tensor::empty({kL, 8}, DType::f32, gpu, stream.stream());
  // Once outside the gate with valid indices: the first deferred check sets up its host record
  // and the stream's memory cache fills (allocating may wait for the device).
  Tensor ok_idx = index_with(kL, kM, DType::i64, seed, false, 0);
  Tensor ok_sel = index_with(kL, kN, DType::i32, seed + 4, false, 0);
  index_add(out, ok_idx, src, 1.0, o);
  index_select(x, 0, ok_sel, sel, o);
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.stream().handle)), cudaSuccess);
  {
    StreamGate gate(stream.stream());
    index_add(out, idx, src, 1.0, o);    // the first error, in stream order
    index_select(x, 0, sel_idx, sel, o); // the second
    gate.release();
  }
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.stream().handle)), cudaSuccess);
  const std::string first = what_of([&] { check_index_errors(gpu); });
  EXPECT_NE(first.find("index_add"), std::string::npos) << first;
  EXPECT_EQ(what_of([&] { check_index_errors(gpu); }), "") << "the second error was kept";
}

TEST(IndexChecksGpu, ADeferredScatterIsCapturedIntoAGraph) {
  SAMEBITS_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const DeviceScope on(gpu);
  CudaStream stream(gpu);
  const Stream s = stream.stream();
  const Options o{.level = Determinism::portable, .stream = s};
  Tensor idx = testing::random_index(kL, kM, DType::i64, seed, gpu);
  Tensor src = testing::random_normal({kL, 8}, DType::f32, seed + 1, gpu);
  Tensor direct = Tensor::empty({kM, 8}, DType::f32, gpu, s);
  Tensor replayed = Tensor::empty({kM, 8}, DType::f32, gpu, s);
  fill(direct, 0.0);
  fill(replayed, 0.0);
  {
    const ChecksScope waits(CudaIndexChecks::wait);
    index_add(direct, idx, src, 1.0, o); // also warms the stream's memory cache
    synchronize(gpu, s);
    CudaGraph waiting(s, [&] { index_add(replayed, idx, src, 1.0, o); });
    EXPECT_FALSE(waiting.captured()) << "a waiting check cannot be captured";
  }
  const ChecksScope defers(CudaIndexChecks::deferred);
  fill(replayed, 0.0);
  CudaGraph graph(s, [&] { index_add(replayed, idx, src, 1.0, o); });
  ASSERT_TRUE(graph.captured());
  graph.launch(s);
  synchronize(gpu, s);
  EXPECT_TRUE(bitwise_equal(direct, replayed));
}

TEST(IndexChecksGpu, AnIndexThatPlanReuseMayRememberStillWaits) {
  SAMEBITS_REQUIRE_CUDA();
  const ChecksScope scope(CudaIndexChecks::deferred);
  const Device gpu = Device::cuda();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t n = kPlanCacheMinSources + 100;
  Tensor idx = index_with(n, kM, DType::i64, seed, true, kM);
  Tensor src = testing::random_normal({n, 8}, DType::f32, seed + 1, gpu);
  Tensor out = testing::random_normal({kM, 8}, DType::f32, seed + 2, gpu);
  const Tensor before = Tensor::copy_of(out.view(), Device::cpu());
  EXPECT_THROW(index_add(out, idx, src, 1.0, {.level = Determinism::portable}), IndexOutOfRange);
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(out.view(), Device::cpu()), before));
}

} // namespace
} // namespace samebits
