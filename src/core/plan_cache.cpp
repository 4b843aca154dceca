// Automatic index-plan reuse: the backend-free bookkeeping (keys, byte budget, volatile keys).
#include "core/plan_cache.hpp"

#include "samebits/errors.hpp"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <string>

namespace samebits {
namespace detail {

std::list<PlanCache::Slot>::iterator PlanCache::slot_of(const PlanKey& key) {
  return std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.key == key; });
}

void PlanCache::take(std::list<Slot>::iterator it, std::list<Slot>& into) {
  bytes_ -= it->bytes;
  into.splice(into.end(), slots_, it);
}

void PlanCache::shrink(std::size_t bytes, std::size_t entries, std::list<Slot>& into) {
  while (!slots_.empty() && (bytes_ > bytes || slots_.size() > entries))
    take(std::prev(slots_.end()), into);
}

bool PlanCache::make_short_room(std::size_t bytes, std::list<Slot>& into) {
  std::size_t shorts = static_cast<std::size_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.key.on_device; }));
  auto full = [&] {
    return shorts >= kMaxShortEntries || slots_.size() >= kMaxEntries || bytes_ + bytes > limit_;
  };
  for (auto it = slots_.end(); full() && it != slots_.begin();) {
    --it; // from the least recently used
    if (!it->key.on_device)
      continue;
    auto next = std::next(it);
    take(it, into);
    --shorts;
    it = next;
  }
  return !full();
}

std::shared_ptr<void> PlanCache::find(const PlanKey& key) {
  std::lock_guard lock(m_);
  auto it = slot_of(key);
  if (it == slots_.end())
    return nullptr;
  slots_.splice(slots_.begin(), slots_, it);
  return slots_.front().entry;
}

PlanCache::Streak* PlanCache::streak_of(const PlanKey& key) {
  for (auto& s : streaks_)
    if (s.key == key)
      return &s;
  return nullptr;
}

bool PlanCache::is_volatile(const PlanKey& key) const {
  return std::any_of(streaks_.begin(), streaks_.end(),
                     [&](const Streak& s) { return s.key == key && s.misses >= kVolatileAfter; });
}

// Each of the calls below that drops entries collects them in `dropped`, declared before the lock:
// they are released after it, since a device entry waits for its GPU when released.

void PlanCache::record(const PlanKey& key, bool hit) {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  if (hit) {
    ++hits_;
    streaks_.remove_if([&](const Streak& s) { return s.key == key; });
    return;
  }
  ++misses_;
  if (auto it = slot_of(key); it != slots_.end())
    take(it, dropped);
  if (Streak* s = streak_of(key)) {
    ++s->misses;
  } else {
    streaks_.push_front({key, 1});
    if (streaks_.size() > kMaxVolatileKeys)
      streaks_.pop_back();
  }
}

bool PlanCache::wants(const PlanKey& key, std::size_t bytes) const {
  std::lock_guard lock(m_);
  if (limit_ == 0 || bytes > limit_ || is_volatile(key))
    return false;
  if (!key.on_device)
    return true;
  // A short entry fits when the long ones leave it room (make_short_room drops short ones only).
  std::size_t longs = 0, long_bytes = 0;
  for (const Slot& s : slots_)
    if (!s.key.on_device) {
      ++longs;
      long_bytes += s.bytes;
    }
  return longs < kMaxEntries && long_bytes + bytes <= limit_;
}

void PlanCache::store(const PlanKey& key, std::shared_ptr<void> entry, std::size_t bytes,
                      std::uintptr_t owner) {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  if (limit_ == 0 || bytes > limit_ || is_volatile(key))
    return;
  if (auto it = slot_of(key); it != slots_.end())
    take(it, dropped);
  if (key.on_device) {
    if (!make_short_room(bytes, dropped))
      return;
  } else {
    shrink(limit_ - bytes, kMaxEntries - 1, dropped); // room for this one
  }
  slots_.push_front({key, std::move(entry), bytes, {owner}});
  bytes_ += bytes;
  ++stored_;
}

void PlanCache::add_owner(const PlanKey& key, std::uintptr_t owner) {
  std::lock_guard lock(m_);
  if (auto it = slot_of(key); it != slots_.end())
    if (std::find(it->owners.begin(), it->owners.end(), owner) == it->owners.end())
      it->owners.push_back(owner);
}

void PlanCache::forget_stream(int device, std::uintptr_t stream) {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    const auto next = std::next(it);
    if (it->key.device == device &&
        std::find(it->owners.begin(), it->owners.end(), stream) != it->owners.end())
      take(it, dropped);
    it = next;
  }
}

void PlanCache::forget(const PlanKey& key) {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  if (auto it = slot_of(key); it != slots_.end())
    take(it, dropped);
}

void PlanCache::clear() {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  shrink(0, 0, dropped);
}

void PlanCache::set_limit(std::size_t bytes) {
  std::list<Slot> dropped;
  std::lock_guard lock(m_);
  limit_ = bytes;
  shrink(limit_, kMaxEntries, dropped);
  if (limit_ == 0)
    streaks_.clear();
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard lock(m_);
  return {hits_, misses_, stored_, slots_.size(), bytes_, limit_};
}

PlanCache& plan_cache() {
  static auto* c = [] {
    std::size_t limit = std::size_t{1} << 30;
    if (const char* e = std::getenv("SAMEBITS_PLAN_CACHE_BYTES"); e != nullptr && *e != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(e, &end, 10);
      if (end == e || *end != '\0' || *e == '-')
        throw InvalidArgument(
            fmt::format("SAMEBITS_PLAN_CACHE_BYTES='{}': expected a byte count (0 turns "
                        "automatic plan reuse off)",
                        e));
      limit = static_cast<std::size_t>(v);
    }
    return new PlanCache(limit); // never destroyed: entries hold device memory
  }();
  return *c;
}

} // namespace detail

void set_plan_cache_limit(std::size_t bytes) {
  detail::plan_cache().set_limit(bytes);
}
PlanCacheStats plan_cache_stats() {
  return detail::plan_cache().stats();
}

} // namespace samebits
