// The data loader: identical bytes for 0, 1, 2, 4 and 8 workers whose loads sleep for random
// times, in-order delivery, per-epoch shuffles, augmentation keyed by (seed, epoch, sample),
// clean shutdown mid-epoch, and worker exceptions reaching the caller.
#include "samebits/loader.hpp"
#include "testing.hpp"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

namespace samebits {
namespace {

using namespace std::chrono_literals;

// Sample i: features = base(i) + noise from its SampleRandom, a random crop offset, a label.
// `sleepy` makes every load sleep 0-2 ms at random (real randomness, not the sample's), so that
// workers finish in a different order every run.
Dataset make_dataset(std::int64_t size, bool sleepy, std::atomic<int>* loads = nullptr) {
  Dataset d;
  d.size = size;
  d.fields = {{"x", {3, 5}, DType::f32}, {"crop", {}, DType::i64}, {"y", {}, DType::i32}};
  d.load = [sleepy, loads](std::int64_t i, const SampleRandom& r, std::span<const TensorView> out) {
    if (sleepy) {
      thread_local std::mt19937 timing(std::random_device{}());
      std::this_thread::sleep_for(std::chrono::microseconds(timing() % 2000));
    }
    if (loads)
      ++*loads;
    Tensor noise = Tensor::empty({3, 5}, DType::f32);
    fill_normal(noise, r.seed(), r.stream(), 0, 0.0, 0.1);
    float* x = out[0].ptr<float>();
    for (int k = 0; k < 15; ++k)
      x[k] = static_cast<float>(i) + noise.data<float>()[k];
    *out[1].ptr<std::int64_t>() = static_cast<std::int64_t>(r.integer(0, 7));
    *out[2].ptr<std::int32_t>() = static_cast<std::int32_t>(i % 10);
  };
  return d;
}

// Every byte the loader delivers in one epoch, with the batch structure.
std::vector<std::uint64_t> epoch_hashes(DataLoader& loader, std::int64_t epoch) {
  std::vector<std::uint64_t> h;
  loader.start_epoch(epoch);
  std::int64_t expected_index = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->index, expected_index++);
    EXPECT_EQ(b->epoch, epoch);
    for (const auto& f : b->fields)
      h.push_back(content_hash(f));
    h.push_back(content_hash(
        Tensor::from_vector(b->samples, {static_cast<std::int64_t>(b->samples.size())})));
  }
  EXPECT_EQ(expected_index, loader.batches_per_epoch());
  return h;
}

TEST(DataLoader, SameBytesForAnyWorkerCountAndTiming) {
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  std::vector<std::vector<std::uint64_t>> reference;
  for (int workers : {0, 1, 2, 4, 8}) {
    SCOPED_TRACE(workers);
    DataLoader loader(make_dataset(203, true),
                      {.batch_size = 16, .seed = seed, .workers = workers, .prefetch = 2});
    std::vector<std::vector<std::uint64_t>> epochs;
    for (std::int64_t e = 0; e < 2; ++e)
      epochs.push_back(epoch_hashes(loader, e));
    if (reference.empty()) {
      reference = epochs;
      EXPECT_NE(epochs[0], epochs[1]) << "epochs must shuffle and augment differently";
    } else {
      EXPECT_EQ(epochs, reference);
    }
  }
}

TEST(DataLoader, OrderShuffleAndAugmentationKeys) {
  const std::uint64_t seed = 11;
  DataLoader a(make_dataset(50, false), {.batch_size = 8, .seed = seed, .workers = 3});
  EXPECT_EQ(a.batches_per_epoch(), 7);
  const auto order0 = a.epoch_order(0);
  EXPECT_EQ(order0, randperm(50, rng::derive_seed(seed, 0, 0x73687566666c65ull)));
  EXPECT_NE(order0, a.epoch_order(1));
  a.start_epoch(0);
  std::vector<std::int64_t> seen;
  std::map<std::int64_t, float> first_feature;
  while (auto b = a.next()) {
    for (std::size_t r = 0; r < b->samples.size(); ++r) {
      seen.push_back(b->samples[r]);
      const float v = b->fields[0].data<float>()[r * 15];
      first_feature[b->samples[r]] = v;
      EXPECT_NEAR(v, static_cast<float>(b->samples[r]), 0.6f); // base + N(0, 0.1) noise
      EXPECT_EQ(b->fields[2].data<std::int32_t>()[r], b->samples[r] % 10);
    }
  }
  EXPECT_EQ(seen, order0);
  EXPECT_FALSE(a.next().has_value()) << "stays at the end of the epoch";
  // The same sample in another epoch gets other noise; with another batch size, the same.
  DataLoader b(make_dataset(50, false), {.batch_size = 5, .seed = seed, .workers = 0});
  b.start_epoch(0);
  while (auto batch = b.next())
    for (std::size_t r = 0; r < batch->samples.size(); ++r)
      EXPECT_EQ(batch->fields[0].data<float>()[r * 15], first_feature[batch->samples[r]]);
  b.start_epoch(1);
  int differ = 0;
  while (auto batch = b.next())
    for (std::size_t r = 0; r < batch->samples.size(); ++r)
      differ += batch->fields[0].data<float>()[r * 15] != first_feature[batch->samples[r]];
  EXPECT_GT(differ, 40);
  // No shuffle, drop_last.
  DataLoader c(make_dataset(50, false),
               {.batch_size = 8, .shuffle = false, .drop_last = true, .workers = 2});
  EXPECT_EQ(c.batches_per_epoch(), 6);
  c.start_epoch(3);
  std::int64_t expect = 0;
  while (auto batch = c.next())
    for (auto s : batch->samples)
      EXPECT_EQ(s, expect++);
  EXPECT_EQ(expect, 48);
}

TEST(DataLoader, PrefetchIsBounded) {
  std::atomic<int> loads{0};
  DataLoader loader(make_dataset(1000, false, &loads),
                    {.batch_size = 10, .workers = 2, .prefetch = 3});
  loader.start_epoch(0);
  auto first = loader.next();
  ASSERT_TRUE(first);
  std::this_thread::sleep_for(50ms);
  // Delivered 1 batch; at most workers * prefetch = 6 more may have been prepared.
  EXPECT_LE(loads.load(), 10 * (1 + 6));
  EXPECT_GE(loads.load(), 10);
}

TEST(DataLoader, StopsCleanlyMidEpoch) {
  for (int workers : {1, 4, 8}) {
    std::atomic<int> loads{0};
    auto loader = std::make_unique<DataLoader>(make_dataset(100000, true, &loads),
                                               LoaderOptions{.batch_size = 4, .workers = workers});
    loader->start_epoch(0);
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(loader->next());
    const auto t0 = std::chrono::steady_clock::now();
    loader->stop();
    EXPECT_FALSE(loader->next().has_value());
    // Restart works after a stop; then destroy mid-epoch.
    loader->start_epoch(1);
    ASSERT_TRUE(loader->next());
    loader.reset();
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 2s) << "stopping must not wait for the epoch to finish";
    EXPECT_LT(loads.load(), 1000);
  }
}

TEST(DataLoader, WorkerExceptionsReachTheCaller) {
  for (int workers : {0, 1, 4}) {
    SCOPED_TRACE(workers);
    Dataset d = make_dataset(100, true);
    auto inner = d.load;
    d.load = [inner](std::int64_t i, const SampleRandom& r, std::span<const TensorView> out) {
      if (i == 37)
        throw std::runtime_error("cannot decode sample 37: truncated file");
      inner(i, r, out);
    };
    DataLoader loader(d, {.batch_size = 10, .shuffle = false, .workers = workers});
    loader.start_epoch(0);
    int delivered = 0;
    try {
      while (loader.next())
        ++delivered;
      FAIL() << "expected the worker's exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "cannot decode sample 37: truncated file");
    }
    EXPECT_EQ(delivered, 3) << "batches before the failing one arrive first, in order";
    EXPECT_FALSE(loader.next().has_value());
    loader.start_epoch(1); // usable again
    EXPECT_TRUE(loader.next().has_value());
  }
}

TEST(DataLoader, RejectsBadOptions) {
  EXPECT_THROW(DataLoader(make_dataset(10, false), {.batch_size = 0}), InvalidArgument);
  EXPECT_THROW(DataLoader(make_dataset(10, false), {.workers = -1}), InvalidArgument);
  Dataset d = make_dataset(10, false);
  d.load = nullptr;
  EXPECT_THROW(DataLoader(d, {}), InvalidArgument);
  DataLoader empty(make_dataset(0, false), {.workers = 2});
  empty.start_epoch(0);
  EXPECT_FALSE(empty.next().has_value());
}

TEST(DataLoader, ABatchAsLargeAsAnyHoldsEverything) {
  for (bool drop_last : {false, true}) {
    DataLoader all(make_dataset(10, false), {.batch_size = std::numeric_limits<std::int64_t>::max(),
                                             .drop_last = drop_last});
    EXPECT_EQ(all.batches_per_epoch(), drop_last ? 0 : 1);
    all.start_epoch(0);
    auto b = all.next();
    ASSERT_EQ(b.has_value(), !drop_last);
    if (b) {
      EXPECT_EQ(b->samples.size(), 10u);
    }
    EXPECT_FALSE(all.next().has_value());
  }
}

// Each kind of per-sample draw has its own counter space: draws of different kinds with the same
// k agree only as often as independent draws would.
TEST(SampleRandom, KindsAreIndependent) {
  const std::uint64_t key = rng::derive_seed(5, 0, 1);
  constexpr int n = 20000;
  int int_vs_bernoulli = 0, int_vs_uniform = 0, uniform_vs_tensor = 0, normal_vs_tensor = 0;
  for (int i = 0; i < n; ++i) {
    const SampleRandom r(key, static_cast<std::uint64_t>(i));
    int_vs_bernoulli += r.integer(0, 2) == static_cast<std::uint64_t>(r.bernoulli(0, 0.5f));
    int_vs_uniform += r.integer(1, 10) == static_cast<std::uint64_t>(10 * r.uniform(4));
    uniform_vs_tensor += r.uniform(0) == rng::uniform(r.seed(), r.stream(), 0);
    normal_vs_tensor += r.normal(0) == rng::normal(r.seed(), r.stream(), 0);
    // Each draw is still a pure function of (key, index, k).
    const SampleRandom again(key, static_cast<std::uint64_t>(i));
    ASSERT_EQ(r.integer(3, 1000), again.integer(3, 1000));
    ASSERT_EQ(r.normal(7), again.normal(7));
  }
  // Independent: about n / 2 and n / 10 agreements (a shared counter space gave n and n).
  EXPECT_NEAR(int_vs_bernoulli, n / 2, 600);
  EXPECT_NEAR(int_vs_uniform, n / 10, 400);
  EXPECT_LT(uniform_vs_tensor, 10);
  EXPECT_LT(normal_vs_tensor, 10);
}

} // namespace
} // namespace samebits
