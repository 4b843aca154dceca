// Automatic reuse of short indices on CUDA (the one-block sorts keep the index they sorted and
// compare it on the device next time): every repeat gives the CPU's bits; an index changed in
// place, made invalid in place (waiting or deferred checks) or restored is followed; two streams
// keep their own entries; fresh tensors with an index's contents share its entry; more distinct
// indices of one shape than it keeps are each right (and counted: one sort per miss); a bad
// fresh copy of a kept index is not kept; a zero limit, the alternative tuning and the
// one-float direct pull leave it alone.
#include "core/test_hooks.hpp"
#include "core/tuning.hpp"
#include "ops/scatter_choice.hpp"
#include "samebits/stream.hpp"
#include "testing.hpp"

#include <cuda_runtime.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace samebits {
namespace {

using testing::ChecksScope;
using testing::expanded_index;
using testing::fresh_seed;
constexpr Determinism kR2r = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();
constexpr std::size_t kOn = std::size_t{1} << 30;
constexpr const char* kReuseText = "compared on the device with the copy kept";

bool said_short_reuse() {
  return last_explain().find(kReuseText) != std::string::npos;
}

// Sorts run so far in the entry of `index`'s shape on the default stream (-1: none).
std::int64_t sorts_of(const Tensor& index, std::int64_t num_keys) {
  return short_index_sorts(index.view(), num_keys);
}

// index_add (portable), scatter_reduce amax and mean (run_to_run) of one index, on one stream.
struct Results {
  std::uint64_t added = 0, reduced_max = 0, reduced_mean = 0;
  bool operator==(const Results&) const = default;
};

Results scatter_three(const Tensor& out0, const Tensor& index, const Tensor& src,
                      Stream stream = {}) {
  const Device d = index.device();
  const std::int64_t e = src.size(0), f = src.size(1);
  // (Tensor::to shares storage when already on d: a copy each)
  const auto fresh = [&] { return d == out0.device() ? out0.clone() : out0.to(d); };
  Tensor added = fresh(), reduced_max = fresh(), reduced_mean = fresh();
  const bool cpu = d.is_cpu();
  index_add(added, index, src, 1.0, {.level = kPo, .stream = stream});
  scatter_reduce(reduced_max, 0, expanded_index(index, {e, f}), src, Reduce::amax, false,
                 {.level = cpu ? kPo : kR2r, .stream = stream});
  scatter_reduce(reduced_mean, 0, expanded_index(index, {e, f}), src, Reduce::mean, true,
                 {.level = cpu ? kPo : kR2r, .stream = stream});
  synchronize(d, stream);
  return {content_hash(added), content_hash(reduced_max), content_hash(reduced_mean)};
}

Results on_cpu(const Tensor& out0, const Tensor& index, const Tensor& src) {
  return scatter_three(out0, index.to(Device::cpu()), src.to(Device::cpu()));
}

// Random sources [e, f] of `values` and an index into n rows (`index_dtype`) on the GPU, the
// output's starting values on the host, and the CPU's results for them.
struct Inputs {
  Tensor src, index, out0;
  Results want;
};
Inputs random_inputs(std::uint64_t seed, std::int64_t e, std::int64_t n, std::int64_t f,
                     DType values, DType index_dtype) {
  Inputs in;
  in.src = testing::random_normal({e, f}, values, seed, kGpu);
  in.index = testing::random_index(e, n, index_dtype, seed + 1, kGpu);
  in.out0 = testing::random_normal({n, f}, values, seed + 2);
  in.want = on_cpu(in.out0, in.index, in.src);
  return in;
}

void expect_same(const Results& got, const Results& want, const std::string& what) {
  EXPECT_EQ(got.added, want.added) << what << ": index_add";
  EXPECT_EQ(got.reduced_max, want.reduced_max) << what << ": scatter_reduce amax";
  EXPECT_EQ(got.reduced_mean, want.reduced_mean) << what << ": scatter_reduce mean";
}

// One case per one-block sort (counting, 32-bit keys, 16-bit keys) crossed with the index dtype,
// the value dtype and the row width (F = 1 float is the direct pull, which keeps nothing).
struct Case {
  std::int64_t e, n, f;
  DType dtype, index_dtype;
};

std::vector<Case> short_cases() {
  std::vector<Case> cases;
  const std::int64_t shapes[][2] = {{10556, 2708},  {16000, 2900}, {9000, 100000},
                                    {15000, 40000}, {1, 1},        {300, 7}};
  for (const auto& s : shapes)
    for (DType idt : {DType::i64, DType::i32})
      for (DType dt : {DType::f32, DType::f64})
        for (std::int64_t f : {1, 3, 16})
          cases.push_back({s[0], s[1], f, dt, idt});
  return cases;
}

std::string name(const Case& c, std::uint64_t seed) {
  return "E=" + std::to_string(c.e) + " N=" + std::to_string(c.n) + " F=" + std::to_string(c.f) +
         " " + std::string(to_string(c.dtype)) + " index " + std::string(to_string(c.index_dtype)) +
         " seed " + std::to_string(seed);
}

TEST(ShortPlanGpu, RepeatsGiveTheCpuBitsForEveryOneBlockSort) {
  SAMEBITS_REQUIRE_CUDA();
  for (const Case& c : short_cases()) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(name(c, seed));
    // An empty cache: the index of the case before may have had this address.
    const testing::PlanCacheLimit on(kOn);
    Tensor src = testing::random_normal({c.e, c.f}, c.dtype, seed, kGpu);
    Tensor index = testing::random_index(c.e, c.n, c.index_dtype, seed + 1, kGpu);
    Tensor out0 = testing::random_normal({c.n, c.f}, c.dtype, seed + 2);
    const Results cpu = on_cpu(out0, index, src);
    const PlanCacheStats before = plan_cache_stats();
    for (int r = 0; r < 4; ++r)
      expect_same(scatter_three(out0, index, src), cpu, "repeat " + std::to_string(r));
    const bool direct = c.dtype == DType::f32 && c.f == 1;
    // One entry for the index on this stream, whichever op comes first; none for the direct pull.
    EXPECT_EQ(plan_cache_stats().stored - before.stored, direct ? 0 : 1);
    EXPECT_EQ(said_short_reuse(), !direct) << last_explain();
  }
}

TEST(ShortPlanGpu, AnIndexChangedInPlaceOrRestoredIsFollowed) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::PlanCacheLimit on(kOn);
  for (const Case& c : {Case{10556, 2708, 8, DType::f32, DType::i64},
                        Case{12000, 60000, 4, DType::f64, DType::i32}}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(name(c, seed));
    Tensor src = testing::random_normal({c.e, c.f}, c.dtype, seed, kGpu);
    Tensor index = testing::random_index(c.e, c.n, c.index_dtype, seed + 1, kGpu);
    const Tensor first = index.to(Device::cpu());
    Tensor out0 = testing::random_normal({c.n, c.f}, c.dtype, seed + 2);
    for (int r = 0; r < 2; ++r)
      expect_same(scatter_three(out0, index, src), on_cpu(out0, index, src), "first index");
    // One position moved to another target (the next one, so the sort's result differs): the
    // first, one in the middle and the last, so that each lies in another comparing block
    // (kKeptMatchPositions), then the first index again.
    for (const std::int64_t at : {std::int64_t{0}, c.e / 3, c.e - 1}) {
      Tensor one = first.clone();
      if (c.index_dtype == DType::i64)
        one.data<std::int64_t>()[at] = (one.data<std::int64_t>()[at] + 1) % c.n;
      else
        one.data<std::int32_t>()[at] =
            static_cast<std::int32_t>((one.data<std::int32_t>()[at] + 1) % c.n);
      copy(one.to(kGpu).view(), index.view());
      for (int r = 0; r < 2; ++r)
        expect_same(scatter_three(out0, index, src), on_cpu(out0, index, src),
                    "position " + std::to_string(at) + " moved");
      copy(first.to(kGpu).view(), index.view());
      expect_same(scatter_three(out0, index, src), on_cpu(out0, index, src),
                  "first index after position " + std::to_string(at));
    }
    copy(testing::random_index(c.e, c.n, c.index_dtype, seed + 3, kGpu).view(), index.view());
    expect_same(scatter_three(out0, index, src), on_cpu(out0, index, src), "all positions");
    copy(first.to(kGpu).view(), index.view());
    expect_same(scatter_three(out0, index, src), on_cpu(out0, index, src), "restored");
  }
}

void set_position(Tensor& index, std::int64_t i, std::int64_t v) {
  Tensor host = index.to(Device::cpu());
  host.data<std::int64_t>()[i] = v;
  copy(host.to(kGpu).view(), index.view());
}

// A bad value written into a kept index: the call throws (or, deferred, the next call does) and
// writes nothing; the sort of the bad index is not kept, and the restored index finds its own.
TEST(ShortPlanGpu, AnIndexMadeInvalidInPlaceWritesNothing) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::PlanCacheLimit on(kOn);
  for (CudaIndexChecks checks : {CudaIndexChecks::wait, CudaIndexChecks::deferred}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE("deferred " + std::to_string(checks == CudaIndexChecks::deferred) + " seed " +
                 std::to_string(seed));
    const std::int64_t e = 10556, n = 2708, f = 16;
    Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
    Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
    const std::int64_t good = index.to(Device::cpu()).data<std::int64_t>()[e - 5];
    Tensor out = testing::random_normal({n, f}, DType::f32, seed + 2, kGpu);
    const ChecksScope scope(checks);
    for (int r = 0; r < 2; ++r) // kept
      index_add(out, index, src, 1.0, {.level = kPo});
    synchronize(kGpu);
    const std::uint64_t before = content_hash(out);
    for (std::int64_t bad : {n, std::int64_t{-1}, (std::int64_t{1} << 32) + good}) {
      set_position(index, e - 5, bad);
      if (checks == CudaIndexChecks::wait) {
        EXPECT_THROW(index_add(out, index, src, 1.0, {.level = kPo}), IndexOutOfRange) << bad;
      } else {
        index_add(out, index, src, 1.0, {.level = kPo}); // returns; the device found it
        EXPECT_THROW(check_index_errors(kGpu), IndexOutOfRange) << bad;
      }
      EXPECT_EQ(content_hash(out), before) << "value " << bad;
    }
    set_position(index, e - 5, good);
    Tensor want = out.to(Device::cpu());
    index_add(want, index.to(Device::cpu()), src.to(Device::cpu()), 1.0, {.level = kPo});
    index_add(out, index, src, 1.0, {.level = kPo});
    synchronize(kGpu);
    EXPECT_EQ(content_hash(out), content_hash(want));
  }
}

// Two threads on their own streams, one index: an entry each, right bits on every call.
TEST(ShortPlanGpu, TwoStreamsKeepTheirOwnEntries) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const Inputs in = random_inputs(seed, 11000, 3000, 32, DType::f32, DType::i64);
  const Tensor &src = in.src, &index = in.index, &out0 = in.out0; // (the threads capture them)
  const Results& want = in.want;
  const testing::PlanCacheLimit on(kOn);
  const PlanCacheStats before = plan_cache_stats();
  std::vector<int> mismatches(2, 0), errors(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        cudaStream_t s = nullptr;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
          ++errors[t];
          return;
        }
        for (int r = 0; r < 6; ++r)
          if (!(scatter_three(out0, index, src, Stream{s}) == want))
            ++mismatches[t];
        release_stream(Stream{s}); // as samebits asks before a stream it used is destroyed
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
    EXPECT_EQ(mismatches[t], 0) << "thread " << t << ", seed " << seed;
  }
  EXPECT_EQ(plan_cache_stats().stored - before.stored, 2);
}

// A stream's kept entries go with release_stream: a later drop of the cache (limit 0 here) would
// otherwise free their buffers under a destroyed stream's handle (this crashed the process).
TEST(ShortPlanGpu, ReleasingAStreamDropsTheEntriesOfItsMemory) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t n = 3000;
  const auto [src, index, out0, want] = random_inputs(seed, 11000, n, 32, DType::f32, DType::i64);
  const testing::PlanCacheLimit on(kOn);
  for (int round = 0; round < 3; ++round) {
    std::optional<CudaStream> stream(std::in_place, kGpu);
    const Stream s = stream->stream();
    EXPECT_EQ(scatter_three(out0, index, src, s), want) << "seed " << seed;
    EXPECT_GE(short_index_sorts(index.view(), n, s), 1) << "the stream's own entry";
    const std::size_t entries = plan_cache_stats().entries;
    stream.reset(); // release_stream, then cudaStreamDestroy
    EXPECT_EQ(plan_cache_stats().entries, entries - 1) << "its entry is gone with it";
  }
  set_plan_cache_limit(0); // drops what is left: nothing of a destroyed stream
  set_plan_cache_limit(kOn);
  EXPECT_EQ(scatter_three(out0, index, src), want) << "seed " << seed;
}

TEST(ShortPlanGpu, LimitZeroAndTheAlternativeTuningSortEveryCall) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const auto [src, index, out0, want] = random_inputs(seed, 10556, 2708, 8, DType::f64, DType::i32);
  {
    const testing::PlanCacheLimit off(0);
    for (int r = 0; r < 3; ++r)
      expect_same(scatter_three(out0, index, src), want, "limit 0");
    EXPECT_FALSE(said_short_reuse()) << last_explain();
    EXPECT_EQ(plan_cache_stats().entries, 0u);
  }
  const testing::PlanCacheLimit on(kOn);
  expect_same(scatter_three(out0, index, src), want, "kept");
  EXPECT_TRUE(said_short_reuse()) << last_explain();
  {
    detail::ScatterTuning alt;
    alt.alternative = true; // the radix sort, in the call's own scratch
    const detail::TuningGuard guard(alt);
    for (int r = 0; r < 2; ++r)
      expect_same(scatter_three(out0, index, src), want, "alternative tuning");
    EXPECT_FALSE(said_short_reuse()) << last_explain();
  }
  expect_same(scatter_three(out0, index, src), want, "kept again");
  EXPECT_TRUE(said_short_reuse()) << last_explain();
}

// PyG's layers build their edge index anew every step: fresh tensors with one index's contents
// (another address, another dtype, a strided view) take one entry and give the CPU's bits.
TEST(ShortPlanGpu, FreshTensorsWithOneIndexShareItsEntry) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::PlanCacheLimit on(kOn);
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t e = 13264, n = 2708, f = 8;
  Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
  const Tensor first = testing::random_index(e, n, DType::i64, seed + 1, Device::cpu());
  Tensor out0 = testing::random_normal({n, f}, DType::f32, seed + 2);
  const Results want = on_cpu(out0, first, src);
  const PlanCacheStats before = plan_cache_stats();
  std::vector<Tensor> alive; // held, so that each copy gets an address of its own
  for (int r = 0; r < 4; ++r) {
    alive.push_back(first.to(kGpu));
    expect_same(scatter_three(out0, alive.back(), src), want, "fresh copy " + std::to_string(r));
  }
  Tensor narrow = Tensor::empty({e}, DType::i32, Device::cpu());
  for (std::int64_t i = 0; i < e; ++i)
    narrow.data<std::int32_t>()[i] = static_cast<std::int32_t>(first.data<std::int64_t>()[i]);
  expect_same(scatter_three(out0, narrow.to(kGpu), src), want, "int32 copy");
  // Every second element of a twice-as-long tensor: the same values at stride 2.
  Tensor wide = Tensor::empty({2 * e}, DType::i64, Device::cpu());
  for (std::int64_t i = 0; i < e; ++i) {
    wide.data<std::int64_t>()[2 * i] = first.data<std::int64_t>()[i];
    wide.data<std::int64_t>()[2 * i + 1] = n + 5; // out of range if ever read
  }
  const Tensor wide_gpu = wide.to(kGpu);
  const TensorView strided = wide_gpu.view().slice(0, 0, 2 * e, 2);
  Tensor added = out0.to(kGpu);
  index_add(added, strided, src, 1.0, {.level = kPo});
  synchronize(kGpu);
  EXPECT_TRUE(said_short_reuse()) << last_explain();
  EXPECT_EQ(content_hash(added), want.added) << "strided copy";
  EXPECT_EQ(plan_cache_stats().stored - before.stored, 1);
  EXPECT_EQ(sorts_of(alive.front(), n), 1) << "16 calls with one index's contents, one sort";
}

// More distinct indices of one shape than the entry keeps (kKeptSlots), in turn: each call sorts
// or takes a kept result, and every one gives the CPU's bits; two indices in turn (a graph's
// sources and targets) stay kept.
TEST(ShortPlanGpu, DistinctIndicesOfOneShapeInTurnAreEachRight) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::PlanCacheLimit on(kOn);
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t e = 10556, n = 2708, f = 4;
  Tensor src = testing::random_normal({e, f}, DType::f64, seed, kGpu);
  Tensor out0 = testing::random_normal({n, f}, DType::f64, seed + 2);
  std::int64_t sorts = 0;
  for (int distinct : {2, 6}) {
    std::vector<Tensor> indices;
    std::vector<Results> want;
    for (int i = 0; i < distinct; ++i) {
      indices.push_back(testing::random_index(e, n, DType::i32, seed + 10 * distinct + i, kGpu));
      want.push_back(on_cpu(out0, indices.back(), src));
    }
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < distinct; ++i)
        expect_same(scatter_three(out0, indices[i], src), want[i],
                    std::to_string(distinct) + " indices, round " + std::to_string(round) +
                        ", index " + std::to_string(i));
    // Two fit the slots: sorted once each. Six in turn through four least recently used slots:
    // the first of each call's three ops sorts, the other two find it.
    const std::int64_t now = sorts_of(indices[0], n);
    EXPECT_EQ(now - sorts, distinct == 2 ? 2 : 6 * 3) << distinct << " indices";
    sorts = now;
  }
}

// A fresh tensor with a kept index's contents but one bad value: the call throws and writes
// nothing, its sort is not kept, and the good index still finds its own.
TEST(ShortPlanGpu, ABadFreshCopyOfAKeptIndexIsNotKept) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::PlanCacheLimit on(kOn);
  const ChecksScope scope(CudaIndexChecks::wait);
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t e = 10556, n = 2708, f = 8;
  Tensor src = testing::random_normal({e, f}, DType::f32, seed, kGpu);
  Tensor index = testing::random_index(e, n, DType::i64, seed + 1, kGpu);
  Tensor out = testing::random_normal({n, f}, DType::f32, seed + 2, kGpu);
  index_add(out, index, src, 1.0, {.level = kPo});
  EXPECT_EQ(sorts_of(index, n), 1);
  Tensor bad = index.clone();
  set_position(bad, e / 2, n);
  const std::uint64_t before = content_hash(out);
  EXPECT_THROW(index_add(out, bad, src, 1.0, {.level = kPo}), IndexOutOfRange);
  EXPECT_EQ(content_hash(out), before);
  EXPECT_EQ(sorts_of(index, n), 2);
  Tensor want = out.to(Device::cpu());
  index_add(want, index.to(Device::cpu()), src.to(Device::cpu()), 1.0, {.level = kPo});
  index_add(out, index.clone(), src, 1.0, {.level = kPo});
  synchronize(kGpu);
  EXPECT_EQ(content_hash(out), content_hash(want));
  EXPECT_EQ(sorts_of(index, n), 2) << "the good index's slot was kept";
}

} // namespace
} // namespace samebits
