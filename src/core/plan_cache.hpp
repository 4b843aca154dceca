// The bookkeeping of automatic index-plan reuse (see include/samebits/ops/scatter.hpp): which
// index vectors are remembered, under what key, within what byte budget, and which keys are left
// alone because their contents change between calls. Backend-free: an entry is an opaque
// shared_ptr that the backend fills (src/cuda/plan_cache.cu holds the copy of the index and the
// plan); a hit is decided by the backend comparing contents, never by the key alone.
#pragma once
#include "samebits/dtype.hpp"
#include "samebits/ops/scatter.hpp"

#include <compare>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

namespace samebits::detail {

// Where an index vector lives and what it sorts into: the same key is a hint that the contents
// may be the same as last time, to be confirmed by comparing them.
struct PlanKey {
  int device = 0;
  const void* data = nullptr;
  DType dtype = DType::i64;
  std::int64_t n = 0, stride = 1, num_keys = 0;
  // Short indices are compared on the device by the sort itself, on one stream (its entry's
  // buffers are that stream's): the stream is then part of the key. 0 for the other entries.
  std::uintptr_t stream = 0;
  bool on_device = false;
  auto operator<=>(const PlanKey&) const = default;
};

class PlanCache {
public:
  // Consecutive content misses after which a key is no longer remembered.
  static constexpr int kVolatileAfter = 2;
  static constexpr std::size_t kMaxEntries = 16;
  static constexpr std::size_t kMaxVolatileKeys = 64;
  // Entries of short indices (PlanKey::on_device) kept at once. They make room among themselves
  // only: a training whose short indices are fresh tensors every step never pushes a long
  // index's plan (whose sort costs far more) out of the cache.
  static constexpr std::size_t kMaxShortEntries = 8;

  explicit PlanCache(std::size_t limit_bytes) : limit_(limit_bytes) {}

  // The entry remembered under `key` (made the most recently used), or null.
  std::shared_ptr<void> find(const PlanKey& key);
  // The contents behind `key` matched its entry (true) or did not (false: the entry is dropped,
  // and after kVolatileAfter misses in a row the key is not remembered again).
  void record(const PlanKey& key, bool hit);
  // Whether an index with this key and entry size should be remembered now.
  bool wants(const PlanKey& key, std::size_t bytes) const;
  // Remembers `entry` under `key` (replacing any), dropping the least recently used entries to
  // stay within the byte limit and kMaxEntries (for a short index's key: the least recently used
  // short entries alone, at most kMaxShortEntries of them; nothing is stored when that is not
  // room enough).
  // `owner` is the stream (a cudaStream_t as an integer; 0, the default stream, for none) whose
  // memory the entry holds.
  void store(const PlanKey& key, std::shared_ptr<void> entry, std::size_t bytes,
             std::uintptr_t owner = 0);
  // The entry of `key` now also holds memory of stream `owner` (its plan, built on another).
  void add_owner(const PlanKey& key, std::uintptr_t owner);
  // Drops every entry of `device` that holds memory of `stream` (release_stream: the stream is
  // about to go, and freeing an entry's memory later would name a stream that no longer exists).
  void forget_stream(int device, std::uintptr_t stream);
  // Drops the entry of `key` (a plan that could not be built, say) without counting a miss.
  void forget(const PlanKey& key);
  // Drops every entry (device memory is short); the limit and the counts stay.
  void clear();
  // A new byte limit; 0 turns the cache off. Entries beyond it are dropped.
  void set_limit(std::size_t bytes);
  PlanCacheStats stats() const;

private:
  struct Slot {
    PlanKey key;
    std::shared_ptr<void> entry;
    std::size_t bytes = 0;
    std::vector<std::uintptr_t> owners; // streams whose memory the entry holds
  };
  struct Streak {
    PlanKey key;
    int misses = 0;
  };
  // The helpers below: the caller holds m_. Dropped slots go to `into`, to be released after it.
  std::list<Slot>::iterator slot_of(const PlanKey& key);
  void take(std::list<Slot>::iterator it, std::list<Slot>& into);
  // Drops least recently used slots until at most `bytes` and `entries` are kept.
  void shrink(std::size_t bytes, std::size_t entries, std::list<Slot>& into);
  // Makes room for a short entry of `bytes` by dropping short slots only; false when it cannot.
  bool make_short_room(std::size_t bytes, std::list<Slot>& into);
  Streak* streak_of(const PlanKey& key);
  bool is_volatile(const PlanKey& key) const;

  mutable std::mutex m_;
  std::size_t limit_;
  std::list<Slot> slots_;     // most recently used first
  std::list<Streak> streaks_; // keys with misses, newest first (at most kMaxVolatileKeys)
  std::size_t bytes_ = 0;
  std::int64_t hits_ = 0, misses_ = 0, stored_ = 0;
};

// The process-wide cache (limit from SAMEBITS_PLAN_CACHE_BYTES when set, else 1 GiB).
PlanCache& plan_cache();

} // namespace samebits::detail
