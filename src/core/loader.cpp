// The deterministic data loader: per-epoch order and augmentation keys, workers that claim
// batches in a bounded window ahead of the consumer, and in-order delivery.
#include "samebits/loader.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

namespace samebits {

namespace {
// Domain tags for derive_seed: the shuffle and the augmentation of one epoch draw from
// independent generators.
constexpr std::uint64_t kShuffleTag = 0x73687566666c65ull; // "shuffle"
constexpr std::uint64_t kAugmentTag = 0x6175676d656e74ull; // "augment"
} // namespace

DataLoader::DataLoader(Dataset dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (dataset_.size < 0)
    throw InvalidArgument("DataLoader: negative dataset size");
  if (!dataset_.load)
    throw InvalidArgument("DataLoader: the dataset has no load function");
  if (options_.batch_size < 1)
    throw InvalidArgument(fmt::format("DataLoader: batch_size {} < 1", options_.batch_size));
  if (options_.workers < 0 || options_.workers > 1024)
    throw InvalidArgument(fmt::format("DataLoader: workers {} not in [0, 1024]", options_.workers));
  if (options_.prefetch < 1)
    throw InvalidArgument(fmt::format("DataLoader: prefetch {} < 1", options_.prefetch));
  for (const auto& f : dataset_.fields)
    if (static_cast<int>(f.shape.size()) + 1 > kMaxDims)
      throw InvalidArgument(fmt::format("DataLoader: field '{}' has {} dimensions; at most {}",
                                        f.name, f.shape.size(), kMaxDims - 1));
}

DataLoader::~DataLoader() {
  stop();
}

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t n = dataset_.size, b = options_.batch_size;
  // Without n + b - 1, which overflows for a batch size near 2^63 ("everything in one batch").
  return n / b + (!options_.drop_last && n % b != 0 ? 1 : 0);
}

std::vector<std::int64_t> DataLoader::epoch_order(std::int64_t epoch) const {
  if (options_.shuffle)
    return randperm(
        dataset_.size,
        rng::derive_seed(options_.seed, static_cast<std::uint64_t>(epoch), kShuffleTag));
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_.size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

void DataLoader::start_epoch(std::int64_t epoch) {
  stop();
  epoch_ = epoch;
  order_ = epoch_order(epoch);
  augment_key_ = rng::derive_seed(options_.seed, static_cast<std::uint64_t>(epoch), kAugmentTag);
  num_batches_ = batches_per_epoch();
  {
    std::lock_guard lock(m_);
    next_claim_ = 0;
    delivered_ = 0;
    stopping_ = false;
    ready_.clear();
  }
  active_ = true;
  for (int w = 0; w < options_.workers; ++w)
    workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::stop() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : workers_)
    t.join();
  workers_.clear();
  std::lock_guard lock(m_);
  ready_.clear();
  active_ = false;
}

Batch DataLoader::make_batch(std::int64_t b) const {
  Batch batch;
  batch.epoch = epoch_;
  batch.index = b;
  const std::int64_t begin = b * options_.batch_size;
  const std::int64_t end = begin + std::min(options_.batch_size, dataset_.size - begin);
  batch.samples.assign(order_.begin() + begin, order_.begin() + end);
  const std::int64_t rows = end - begin;
  for (const auto& f : dataset_.fields) {
    Shape s{rows};
    s.insert(s.end(), f.shape.begin(), f.shape.end());
    batch.fields.push_back(Tensor::zeros(s, f.dtype));
  }
  std::vector<TensorView> views(batch.fields.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < views.size(); ++k)
      views[k] = batch.fields[k].view().select(0, r);
    const std::int64_t index = batch.samples[static_cast<std::size_t>(r)];
    dataset_.load(index, SampleRandom(augment_key_, static_cast<std::uint64_t>(index)), views);
  }
  return batch;
}

void DataLoader::worker_loop() {
  // A worker may run ahead of the consumer by at most workers * prefetch batches.
  const std::int64_t window =
      static_cast<std::int64_t>(options_.workers) * static_cast<std::int64_t>(options_.prefetch);
  for (;;) {
    std::int64_t b;
    {
      std::unique_lock lock(m_);
      work_cv_.wait(lock, [&] {
        return stopping_ || next_claim_ >= num_batches_ || next_claim_ < delivered_ + window;
      });
      if (stopping_ || next_claim_ >= num_batches_)
        return;
      b = next_claim_++;
    }
    Slot slot;
    try {
      slot.batch = make_batch(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard lock(m_);
      if (stopping_)
        return;
      ready_.emplace(b, std::move(slot));
    }
    ready_cv_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  if (!active_)
    return std::nullopt;
  if (options_.workers == 0) {
    if (delivered_ >= num_batches_)
      return std::nullopt;
    try {
      return make_batch(delivered_++);
    } catch (...) {
      active_ = false;
      throw;
    }
  }
  Slot slot;
  {
    std::unique_lock lock(m_);
    if (delivered_ >= num_batches_)
      return std::nullopt;
    ready_cv_.wait(lock, [&] { return stopping_ || ready_.count(delivered_) > 0; });
    if (stopping_)
      return std::nullopt;
    auto it = ready_.find(delivered_);
    slot = std::move(it->second);
    ready_.erase(it);
    ++delivered_;
  }
  work_cv_.notify_all();
  if (slot.error) {
    stop();
    std::rethrow_exception(slot.error);
  }
  if (delivered_ >= num_batches_) {
    // The epoch is complete: the workers have exited or are about to.
    for (auto& t : workers_)
      t.join();
    workers_.clear();
  }
  return std::move(slot.batch);
}

} // namespace samebits
