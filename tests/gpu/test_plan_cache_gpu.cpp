// Automatic plan reuse on CUDA: an index passed again reuses its plan and gives the bits of the
// sort on every call and of the CPU; an index changed in place (contents, or a value out of
// range) is never served a stale plan; an address whose contents keep changing is given up;
// small indices and a zero limit are left alone.
#include "testing.hpp"

#include <cuda_runtime.h>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace samebits {
namespace {

using testing::expanded_index;
using testing::fresh_seed;
constexpr Determinism kR2r = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();
constexpr std::size_t kOn = std::size_t{1} << 30;

// The CPU's portable results of the three scatters over one index (the reference bits).
struct Results {
  Tensor added, reduced_max, reduced_mean;
};

Results on_cpu(const Tensor& out0, const Tensor& index, const Tensor& src) {
  const Tensor i = index.to(Device::cpu()), s = src.to(Device::cpu());
  Results r{out0.clone(), out0.clone(), out0.clone()}; // out0 is on the CPU
  const std::int64_t e = s.size(0), f = s.size(1);
  index_add(r.added, i, s, 1.0, {.level = kPo});
  scatter_reduce(r.reduced_max, 0, expanded_index(i, {e, f}), s, Reduce::amax, false,
                 {.level = kPo});
  scatter_reduce(r.reduced_mean, 0, expanded_index(i, {e, f}), s, Reduce::mean, true,
                 {.level = kPo});
  return r;
}

Results on_gpu(const Tensor& out0, const Tensor& index, const Tensor& src, Determinism level) {
  Results r{out0.to(kGpu), out0.to(kGpu), out0.to(kGpu)};
  const std::int64_t e = src.size(0), f = src.size(1);
  index_add(r.added, index, src, 1.0, {.level = level});
  scatter_reduce(r.reduced_max, 0, expanded_index(index, {e, f}), src, Reduce::amax, false,
                 {.level = level});
  scatter_reduce(r.reduced_mean, 0, expanded_index(index, {e, f}), src, Reduce::mean, true,
                 {.level = level});
  return r;
}

void expect_same_bits(const Results& a, const Results& b, const char* what) {
  EXPECT_EQ(content_hash(a.added), content_hash(b.added)) << what << ": index_add";
  EXPECT_EQ(content_hash(a.reduced_max), content_hash(b.reduced_max))
      << what << ": scatter_reduce amax";
  EXPECT_EQ(content_hash(a.reduced_mean), content_hash(b.reduced_mean))
      << what << ": scatter_reduce mean";
}

TEST(PlanCacheGpu, RepeatedIndexReusesThePlanWithTheCpuBits) {
  SAMEBITS_REQUIRE_CUDA();
  struct S {
    std::int64_t e, n, f;
    DType dtype, index_dtype;
    bool heavy = false;
  };
  // Rows of one float (the sort carries values: the plan is built on the first repeat), rows of
  // several, float64, an int32 index, few targets (the counting sort) and many (the radix sort),
  // and many targets of a few sources each with one of 400.
  for (const S sh :
       {S{200000, 5000, 1, DType::f32, DType::i64}, S{100000, 3000, 16, DType::f32, DType::i32},
        S{70000, 100, 5, DType::f64, DType::i64}, S{300000, 200000, 2, DType::f32, DType::i64},
        S{120000, 20000, 1, DType::f32, DType::i64, true}}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " heavy "
                                      << sh.heavy << " seed " << seed);
    Tensor src = testing::random_normal({sh.e, sh.f}, sh.dtype, seed, kGpu);
    Tensor index = testing::random_index(sh.e, sh.n, sh.index_dtype, seed + 1);
    if (sh.heavy) {
      ASSERT_EQ(sh.index_dtype, DType::i64);
      for (std::int64_t i = 0; i < 400; ++i)
        index.data<std::int64_t>()[i * 97] = 7;
    }
    index = index.to(kGpu);
    Tensor out0 = testing::random_normal({sh.n, sh.f}, sh.dtype, seed + 2);
    const Results cpu = on_cpu(out0, index, src);
    const testing::PlanCacheLimit on(kOn);
    const PlanCacheStats before = plan_cache_stats();
    for (int r = 0; r < 6; ++r)
      expect_same_bits(on_gpu(out0, index, src, kPo), cpu, "repeat");
    const PlanCacheStats after = plan_cache_stats();
    // The first index_add sorts and remembers; every later call of the three ops reuses.
    EXPECT_EQ(after.stored - before.stored, 1);
    EXPECT_EQ(after.hits - before.hits, 6 * 3 - 1);
    EXPECT_EQ(after.misses, before.misses);
    // scatter_reduce has no fixed-point variant: at run_to_run it reuses the plan too.
    Tensor again = out0.to(kGpu);
    scatter_reduce(again, 0, expanded_index(index, {sh.e, sh.f}), src, Reduce::amax, false,
                   {.level = kR2r});
    EXPECT_EQ(content_hash(again), content_hash(cpu.reduced_max));
    EXPECT_EQ(plan_cache_stats().hits - after.hits, 1);
    EXPECT_NE(last_explain().find("plan was reused"), std::string::npos) << last_explain();
  }
}

TEST(PlanCacheGpu, AnIndexChangedInPlaceIsSortedAgain) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const std::int64_t e = 150000, n = 4000, f = 8;
  Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
  Tensor out0 = testing::random_normal({n, f}, DType::f32, seed + 2);
  const testing::PlanCacheLimit on(kOn);
  for (int r = 0; r < 3; ++r)
    expect_same_bits(on_gpu(out0, index, src, kPo), on_cpu(out0, index, src), "first index");
  // One entry, counted as the allocator holds it: the int32 copy and order of 150000 positions in
  // 1 MiB size classes, the 4001 int32 offsets in 16 KiB.
  EXPECT_EQ(plan_cache_stats().entries, 1u);
  EXPECT_EQ(plan_cache_stats().bytes, 2 * (std::size_t{1} << 20) + (std::size_t{16} << 10));
  // The same address, other contents: one position changed, then all of them.
  Tensor one = index.to(Device::cpu());
  one.data<std::int64_t>()[e / 2] = (one.data<std::int64_t>()[e / 2] + 1) % n;
  copy(one.to(kGpu).view(), index.view());
  const PlanCacheStats before = plan_cache_stats();
  expect_same_bits(on_gpu(out0, index, src, kPo), on_cpu(out0, index, src), "one position changed");
  EXPECT_EQ(plan_cache_stats().misses - before.misses, 1);
  copy(testing::random_index(e, n, DType::i64, seed + 3, kGpu).view(), index.view());
  for (int r = 0; r < 2; ++r)
    expect_same_bits(on_gpu(out0, index, src, kPo), on_cpu(out0, index, src),
                     "all positions changed");
}

TEST(PlanCacheGpu, AnIndexMadeInvalidInPlaceThrowsAndWritesNothing) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t e = 100000, n = 700, f = 4;
  Tensor src = testing::random_normal({e, f}, DType::f64, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i32, seed + 1, kGpu);
  const testing::PlanCacheLimit on(kOn);
  Tensor out = testing::random_normal({n, f}, DType::f64, seed + 2, kGpu);
  for (int r = 0; r < 3; ++r)
    index_add(out, index, src, 1.0, {.level = kPo}); // remembered, planned
  Tensor bad = index.to(Device::cpu());
  bad.data<std::int32_t>()[e - 7] = static_cast<std::int32_t>(n);
  copy(bad.to(kGpu).view(), index.view());
  const std::uint64_t kept = content_hash(out);
  EXPECT_THROW(index_add(out, index, src, 1.0, {.level = kPo}), IndexOutOfRange);
  EXPECT_EQ(content_hash(out), kept);
}

TEST(PlanCacheGpu, AnAddressRefilledEveryCallIsGivenUp) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t e = 120000, n = 9000, f = 6;
  Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed, kGpu);
  Tensor out0 = testing::random_normal({n, f}, DType::f32, seed + 2);
  const testing::PlanCacheLimit on(kOn);
  const PlanCacheStats before = plan_cache_stats();
  for (int r = 0; r < 6; ++r) {
    copy(testing::random_index(e, n, DType::i64, seed + 10 + static_cast<std::uint64_t>(r), kGpu)
             .view(),
         index.view());
    Tensor out = out0.to(kGpu), cpu = out0.clone();
    index_add(out, index, src, 1.0, {.level = kPo});
    index_add(cpu, index.to(Device::cpu()), src.to(Device::cpu()), 1.0, {.level = kPo});
    EXPECT_EQ(content_hash(out), content_hash(cpu)) << "refill " << r;
  }
  const PlanCacheStats after = plan_cache_stats();
  // Remembered on the first call, missed on the second (remembered again) and third: then left
  // alone, so the last three calls neither compare nor copy.
  EXPECT_EQ(after.stored - before.stored, 2);
  EXPECT_EQ(after.misses - before.misses, 2);
  EXPECT_EQ(after.hits, before.hits);
}

TEST(PlanCacheGpu, TargetCountIsPartOfTheKey) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t e = 90000, n = 2000, f = 3;
  Tensor src = testing::random_normal({e, f}, DType::f64, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
  const testing::PlanCacheLimit on(kOn);
  for (std::int64_t rows : {n, n + 5, n, n + 5}) {
    Tensor out0 = testing::random_normal({rows, f}, DType::f64, seed + 2);
    Tensor out = out0.to(kGpu), cpu = out0.clone();
    index_add(out, index, src, 1.0, {.level = kPo});
    index_add(cpu, index.to(Device::cpu()), src.to(Device::cpu()), 1.0, {.level = kPo});
    EXPECT_EQ(content_hash(out), content_hash(cpu)) << rows << " targets";
  }
}

TEST(PlanCacheGpu, SmallIndicesAndLimitZeroAreLeftAlone) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor src = testing::random_normal({kPlanCacheMinSources - 1, 4}, DType::f64, seed, kGpu);
  Tensor index = testing::random_index(kPlanCacheMinSources - 1, 50, DType::i64, seed + 1, kGpu);
  Tensor out = Tensor::zeros({50, 4}, DType::f64, kGpu);
  {
    const testing::PlanCacheLimit on(kOn);
    const PlanCacheStats before = plan_cache_stats();
    for (int r = 0; r < 3; ++r)
      index_add(out, index, src, 1.0, {.level = kPo});
    EXPECT_EQ(plan_cache_stats().stored, before.stored);
  }
  Tensor big_src = testing::random_normal({kPlanCacheMinSources, 4}, DType::f64, seed, kGpu);
  Tensor big_index = testing::random_index(kPlanCacheMinSources, 50, DType::i64, seed + 1, kGpu);
  const testing::PlanCacheLimit off(0);
  for (int r = 0; r < 3; ++r)
    index_add(out, big_index, big_src, 1.0, {.level = kPo});
  EXPECT_EQ(plan_cache_stats().entries, 0u);
  EXPECT_EQ(plan_cache_stats().bytes, 0u);
}

// When device memory runs out, what the cache keeps is given back before the allocation fails.
TEST(PlanCacheGpu, ShortDeviceMemoryEmptiesTheCache) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t e = 200000, n = 1000, f = 2;
  Tensor src = testing::random_normal({e, f}, DType::f64, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
  Tensor out = Tensor::zeros({n, f}, DType::f64, kGpu);
  const testing::PlanCacheLimit on(kOn);
  for (int r = 0; r < 2; ++r)
    index_add(out, index, src, 1.0, {.level = kPo});
  ASSERT_EQ(plan_cache_stats().entries, 1u);
  EXPECT_THROW(Tensor::empty({std::int64_t{1} << 42}, DType::f32, kGpu), CudaError); // 16 TiB
  EXPECT_EQ(plan_cache_stats().entries, 0u);
  EXPECT_EQ(plan_cache_stats().bytes, 0u);
  // And the next calls remember again.
  for (int r = 0; r < 2; ++r)
    index_add(out, index, src, 1.0, {.level = kPo});
  EXPECT_EQ(plan_cache_stats().entries, 1u);
}

// Two threads, each on its own stream, reusing one remembered plan at once (built on whichever
// stream gets there first, read on both).
TEST(PlanCacheGpu, TwoStreamsShareAPlan) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t e = 400000, n = 30000, f = 32;
  Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
  Tensor out0 = testing::random_normal({n, f}, DType::f32, seed + 2);
  Tensor cpu = out0.clone();
  index_add(cpu, index.to(Device::cpu()), src.to(Device::cpu()), 1.0, {.level = kPo});
  const std::uint64_t want = content_hash(cpu);
  const testing::PlanCacheLimit on(kOn);
  std::vector<int> mismatches(2, 0), errors(2, 0);
  std::vector<std::string> notes(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        cudaStream_t s = nullptr;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
          ++errors[t];
          return;
        }
        for (int r = 0; r < 5; ++r) {
          Tensor out = out0.to(kGpu);
          index_add(out, index, src, 1.0, {.level = kPo, .stream = Stream{s}});
          if (cudaStreamSynchronize(s) != cudaSuccess) {
            ++errors[t];
            break;
          }
          const bool reused = last_explain().find("plan was reused") != std::string::npos;
          if (content_hash(out) != want) {
            ++mismatches[t];
            notes[t] += " call " + std::to_string(r) + (reused ? " (plan reused)" : " (sorted)");
          }
        }
        cudaStreamDestroy(s);
      } catch (const std::exception& ex) {
        ADD_FAILURE() << "thread " << t << ": " << ex.what();
        ++errors[t];
      }
    });
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(errors[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t << ", seed " << seed << ":" << notes[t];
  }
}

} // namespace
} // namespace samebits
