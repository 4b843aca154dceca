// The bookkeeping of automatic plan reuse (core/plan_cache.hpp), without a device: keys, the byte
// and entry limits, least-recently-used eviction, addresses given up after repeated misses, and
// entries released outside the cache's lock. test_plan_cache_gpu.cpp covers the device side.
#include "core/plan_cache.hpp"
#include "testing.hpp"

#include <memory>

namespace samebits {
namespace {

using detail::PlanCache;
using detail::PlanKey;

PlanKey key(std::uintptr_t address, std::int64_t n = 100000, std::int64_t num_keys = 1000) {
  return {0, reinterpret_cast<const void*>(address), DType::i64, n, 1, num_keys};
}

std::shared_ptr<void> entry(int tag) {
  return std::make_shared<int>(tag);
}
int tag_of(const std::shared_ptr<void>& e) {
  return *static_cast<int*>(e.get());
}

TEST(PlanCache, StoresFindsAndCounts) {
  PlanCache c(1000);
  EXPECT_EQ(c.find(key(1)), nullptr);
  ASSERT_TRUE(c.wants(key(1), 100));
  c.store(key(1), entry(7), 100);
  ASSERT_NE(c.find(key(1)), nullptr);
  EXPECT_EQ(tag_of(c.find(key(1))), 7);
  // Every field of the key counts: another length, stride, dtype, target count or device misses.
  PlanKey other = key(1);
  other.stride = 2;
  EXPECT_EQ(c.find(other), nullptr);
  EXPECT_EQ(c.find(key(1, 99999)), nullptr);
  EXPECT_EQ(c.find(key(1, 100000, 1001)), nullptr);
  other = key(1);
  other.dtype = DType::i32;
  EXPECT_EQ(c.find(other), nullptr);
  other = key(1);
  other.device = 1;
  EXPECT_EQ(c.find(other), nullptr);
  c.record(key(1), true);
  c.record(key(1), true);
  const PlanCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.stored, 1);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, 100u);
  EXPECT_EQ(s.limit_bytes, 1000u);
}

TEST(PlanCache, AMissDropsTheEntryAndTwoInARowGiveTheAddressUp) {
  PlanCache c(1000);
  c.store(key(1), entry(1), 100);
  c.record(key(1), false);
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_EQ(c.stats().bytes, 0u);
  EXPECT_TRUE(c.wants(key(1), 100)); // one miss: still worth remembering
  c.store(key(1), entry(2), 100);
  c.record(key(1), false); // the second miss in a row
  EXPECT_FALSE(c.wants(key(1), 100));
  c.store(key(1), entry(3), 100);
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_TRUE(c.wants(key(2), 100)); // other addresses are not affected
  EXPECT_EQ(c.stats().misses, 2);
}

TEST(PlanCache, AHitBetweenMissesKeepsTheAddress) {
  PlanCache c(1000);
  for (int round = 0; round < 5; ++round) {
    c.store(key(1), entry(round), 100);
    c.record(key(1), false);
    c.store(key(1), entry(round), 100);
    c.record(key(1), true);
  }
  EXPECT_TRUE(c.wants(key(1), 100));
  EXPECT_EQ(c.stats().hits, 5);
  EXPECT_EQ(c.stats().misses, 5);
}

TEST(PlanCache, TheLeastRecentlyUsedGoesFirstWhenBytesRunOut) {
  PlanCache c(300);
  c.store(key(1), entry(1), 100);
  c.store(key(2), entry(2), 100);
  c.store(key(3), entry(3), 100);
  ASSERT_NE(c.find(key(1)), nullptr); // 1 is now the most recently used: 2 goes next
  c.store(key(4), entry(4), 150);
  EXPECT_NE(c.find(key(1)), nullptr);
  EXPECT_EQ(c.find(key(2)), nullptr);
  EXPECT_EQ(c.find(key(3)), nullptr); // 100 + 100 + 150 > 300: 3 had to go too
  EXPECT_NE(c.find(key(4)), nullptr);
  EXPECT_EQ(c.stats().bytes, 250u);
  // Replacing an address's entry counts its bytes once.
  c.store(key(4), entry(5), 120);
  EXPECT_EQ(tag_of(c.find(key(4))), 5);
  EXPECT_EQ(c.stats().bytes, 220u);
  EXPECT_EQ(c.stats().entries, 2u);
}

TEST(PlanCache, AtMostMaxEntriesAndNothingLargerThanTheLimit) {
  PlanCache c(1 << 20);
  for (std::uintptr_t a = 1; a <= PlanCache::kMaxEntries + 3; ++a)
    c.store(key(a), entry(static_cast<int>(a)), 10);
  EXPECT_EQ(c.stats().entries, PlanCache::kMaxEntries);
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_NE(c.find(key(PlanCache::kMaxEntries + 3)), nullptr);
  EXPECT_FALSE(c.wants(key(100), (1 << 20) + 1));
  c.store(key(100), entry(100), (1 << 20) + 1);
  EXPECT_EQ(c.find(key(100)), nullptr);
}

PlanKey short_key(std::uintptr_t address) {
  PlanKey k = key(address, 10556, 2708);
  k.stream = 7;
  k.on_device = true;
  return k;
}

// Short indices sorted on the device make room among themselves: however many fresh ones come,
// they never push a long index's plan out, and at most kMaxShortEntries are kept.
TEST(PlanCache, ShortEntriesNeverPushOutALongIndexsPlan) {
  PlanCache c(1000);
  c.store(key(1), entry(1), 300);
  c.store(key(2), entry(2), 300);
  for (std::uintptr_t a = 100; a < 100 + 3 * PlanCache::kMaxEntries; ++a) {
    ASSERT_TRUE(c.wants(short_key(a), 40));
    c.store(short_key(a), entry(static_cast<int>(a)), 40);
  }
  EXPECT_NE(c.find(key(1)), nullptr);
  EXPECT_NE(c.find(key(2)), nullptr);
  EXPECT_EQ(c.stats().entries, 2 + PlanCache::kMaxShortEntries);
  const std::uintptr_t last = 100 + 3 * PlanCache::kMaxEntries - 1;
  EXPECT_NE(c.find(short_key(last)), nullptr);                               // newest kept
  EXPECT_EQ(c.find(short_key(last - PlanCache::kMaxShortEntries)), nullptr); // older dropped
  // A short entry that only fits by dropping a long one is not stored (nor wanted).
  EXPECT_FALSE(c.wants(short_key(1), 450));
  c.store(short_key(1), entry(-1), 450);
  EXPECT_EQ(c.find(short_key(1)), nullptr);
  EXPECT_NE(c.find(key(1)), nullptr);
  EXPECT_NE(c.find(key(2)), nullptr);
  // It fits once the short ones are out of its way; a long index still takes any room.
  EXPECT_TRUE(c.wants(short_key(2), 400));
  c.store(short_key(2), entry(-2), 400);
  EXPECT_NE(c.find(short_key(2)), nullptr);
  EXPECT_EQ(c.stats().bytes, 1000u);
  c.store(key(3), entry(3), 300);
  EXPECT_NE(c.find(key(3)), nullptr);
  EXPECT_LE(c.stats().bytes, 1000u);
}

TEST(PlanCache, LimitZeroTurnsItOffAndFreesEverything) {
  PlanCache c(1000);
  auto e = entry(1);
  std::weak_ptr<void> watch = e;
  c.store(key(1), std::move(e), 100);
  c.set_limit(0);
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(c.wants(key(1), 1));
  c.store(key(1), entry(2), 1);
  EXPECT_EQ(c.stats().entries, 0u);
  c.set_limit(1000);
  EXPECT_TRUE(c.wants(key(1), 100));
  // Lowering the limit drops the least recently used entries beyond it.
  c.store(key(1), entry(1), 400);
  c.store(key(2), entry(2), 400);
  c.set_limit(500);
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_NE(c.find(key(2)), nullptr);
}

// A device entry waits for its GPU when released; it must not do so while holding the cache's
// lock, or every other thread's lookup would wait too. An entry whose release reads the cache
// shows it: under the lock that would deadlock.
TEST(PlanCache, EntriesAreReleasedOutsideTheLock) {
  PlanCache c(1000);
  int released = 0;
  auto reentrant = [&](int tag) {
    return std::shared_ptr<void>(new int(tag), [&](void* p) {
      (void)c.stats();
      ++released;
      delete static_cast<int*>(p);
    });
  };
  c.store(key(1), reentrant(1), 100);
  c.record(key(1), false); // a miss drops it
  c.store(key(2), reentrant(2), 600);
  c.store(key(3), reentrant(3), 600); // evicts 2
  c.store(key(3), reentrant(4), 600); // replaces 3
  c.set_limit(0);                     // drops 4
  EXPECT_EQ(released, 4);
}

TEST(PlanCache, ForgetAndClearDropEntriesWithoutCountingMisses) {
  PlanCache c(1000);
  c.store(key(1), entry(1), 100);
  c.store(key(2), entry(2), 100);
  c.store(key(3), entry(3), 100);
  c.forget(key(2));
  c.forget(key(9)); // nothing kept there: nothing happens
  EXPECT_EQ(c.find(key(2)), nullptr);
  EXPECT_EQ(c.stats().entries, 2u);
  EXPECT_EQ(c.stats().bytes, 200u);
  c.clear();
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(c.stats().bytes, 0u);
  EXPECT_EQ(c.stats().misses, 0);
  EXPECT_EQ(c.stats().limit_bytes, 1000u);
  EXPECT_TRUE(c.wants(key(1), 100));
}

TEST(PlanCache, PublicLimitAndStats) {
  const testing::PlanCacheLimit limit(12345);
  EXPECT_EQ(plan_cache_stats().limit_bytes, 12345u);
  set_plan_cache_limit(0);
  EXPECT_EQ(plan_cache_stats().limit_bytes, 0u);
  EXPECT_EQ(plan_cache_stats().entries, 0u);
}

TEST(PlanCache, ForgettingAStreamDropsTheEntriesThatHoldItsMemory) {
  PlanCache c(1 << 20);
  c.store(key(1), entry(1), 100, 0xA); // a copy made on stream A
  c.store(key(2), entry(2), 100, 0xB); // on B
  c.store(key(3), entry(3), 100);      // on the default stream
  c.add_owner(key(1), 0xB);            // its plan built on B
  c.add_owner(key(9), 0xB);            // no such entry: nothing happens
  PlanKey other_device = key(4);
  other_device.device = 1;
  c.store(other_device, entry(4), 100, 0xB);
  c.forget_stream(0, 0xA);
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_NE(c.find(key(2)), nullptr);
  c.store(key(1), entry(5), 100, 0xA);
  c.add_owner(key(1), 0xB);
  c.forget_stream(0,
                  0xB); // key 1 (its plan) and key 2 go; the default stream's and device 1's stay
  EXPECT_EQ(c.find(key(1)), nullptr);
  EXPECT_EQ(c.find(key(2)), nullptr);
  EXPECT_NE(c.find(key(3)), nullptr);
  EXPECT_NE(c.find(other_device), nullptr);
  EXPECT_EQ(c.stats().entries, 2u);
}

} // namespace
} // namespace samebits
