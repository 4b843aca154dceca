// A deterministic data loader: batches prepared by N worker threads with prefetching, delivered
// in order, with the same bytes for any number of workers and any thread timing.
//
// What makes it deterministic:
//   - the sample order of epoch e is randperm(size, derive_seed(seed, e, "shuffle")), a pure
//     function of (seed, epoch);
//   - sample i of epoch e gets a SampleRandom keyed by (derive_seed(seed, e, "augment"), i), so
//     its random augmentation depends on (seed, epoch, i) and not on which worker loads it or when;
//   - batches are handed out strictly in order; a worker only ever fills its own batch.
// The dataset's load function must itself be a pure function of its arguments (and thread-safe).
//
//   samebits::DataLoader loader(dataset, {.batch_size = 64, .seed = 1, .workers = 4});
//   for (std::int64_t epoch = 0; epoch < 10; ++epoch) {
//     loader.start_epoch(epoch);
//     while (auto batch = loader.next()) train_step(batch->fields[0], batch->fields[1]);
//   }
#pragma once
#include "samebits/random.hpp"
#include "samebits/tensor.hpp"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace samebits {

// The random numbers of one sample in one epoch: Philox stream `index` under keys derived from the
// epoch's augmentation key. Draw k of each kind is a pure function of (seed, epoch, index, k), and
// the kinds are independent of one another: uniform, normal, bernoulli and integer each draw from
// their own key, and whole-tensor draws (seed(), stream()) from a fifth, so integer(0, 2) says
// nothing about bernoulli(0, 0.5) or about fill_normal(t, seed(), stream(), 0).
class SampleRandom {
public:
  SampleRandom(std::uint64_t key, std::uint64_t index)
      : key_(key), index_(index), uniform_key_(rng::derive_seed(key, 1, kKindTag)),
        normal_key_(rng::derive_seed(key, 2, kKindTag)),
        bernoulli_key_(rng::derive_seed(key, 3, kKindTag)),
        integer_key_(rng::derive_seed(key, 4, kKindTag)) {}
  // Uniform in [0, 1) (24 random bits).
  float uniform(std::uint64_t k) const { return rng::uniform(uniform_key_, index_, k); }
  // Standard normal.
  float normal(std::uint64_t k) const { return rng::normal(normal_key_, index_, k); }
  // 1 with probability p rounded up to a multiple of 2^-24 (see rng::bernoulli).
  bool bernoulli(std::uint64_t k, float p) const {
    return rng::bernoulli(bernoulli_key_, index_, k, p);
  }
  // Uniform in [0, range), range >= 1, without bias.
  std::uint64_t integer(std::uint64_t k, std::uint64_t range) const {
    return rng::uniform_int(integer_key_, index_, k, range);
  }
  // For whole-tensor draws: fill_normal(t, r.seed(), r.stream(), offset), etc.
  std::uint64_t seed() const { return key_; }
  std::uint64_t stream() const { return index_; }

private:
  static constexpr std::uint64_t kKindTag = 0x6b696e64; // "kind": the per-kind keys' derivation
  std::uint64_t key_, index_;
  std::uint64_t uniform_key_, normal_key_, bernoulli_key_, integer_key_;
};

// One per-sample tensor of a dataset (a batch stacks it to [batch, ...shape]; shape has at most
// 3 dimensions).
struct Field {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

struct Dataset {
  std::int64_t size = 0;
  std::vector<Field> fields;
  // Writes sample `index` into `out` (one CPU view per field, with the field's shape). Called
  // from several threads at once: must be thread-safe and depend on its arguments only.
  std::function<void(std::int64_t index, const SampleRandom& random,
                     std::span<const TensorView> out)>
      load;
};

struct LoaderOptions {
  std::int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false; // drop a last, smaller batch
  std::uint64_t seed = kDefaultSeed;
  int workers = 0;  // 0: next() prepares each batch on the calling thread
  int prefetch = 2; // batches prepared ahead, per worker
};

struct Batch {
  std::int64_t epoch = 0;
  std::int64_t index = 0;            // position of the batch in its epoch
  std::vector<std::int64_t> samples; // dataset indices, in batch order
  std::vector<Tensor> fields;        // per Dataset field: [samples.size(), ...field shape], CPU
};

class DataLoader {
public:
  DataLoader(Dataset dataset, LoaderOptions options);
  ~DataLoader(); // stops the workers (mid-epoch is fine)
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts epoch `epoch`, abandoning the one in progress; workers begin preparing batches.
  void start_epoch(std::int64_t epoch);
  // The next batch of the current epoch, in order; nullopt at its end (or before any epoch). An
  // exception thrown by the dataset's load is rethrown here, as it was thrown, when its batch is
  // due; the epoch is over after that.
  std::optional<Batch> next();
  // Stops the workers now: the samples they are loading are finished, everything else is
  // dropped. next() returns nullopt until the next start_epoch.
  void stop();

  std::int64_t batches_per_epoch() const;
  // The sample order of an epoch (identity without shuffling).
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;
  const LoaderOptions& options() const { return options_; }

private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  Batch make_batch(std::int64_t b) const;
  void worker_loop();

  Dataset dataset_;
  LoaderOptions options_;
  // The current epoch (read-only while workers run).
  std::int64_t epoch_ = 0;
  std::vector<std::int64_t> order_;
  std::uint64_t augment_key_ = 0;
  std::int64_t num_batches_ = 0;
  bool active_ = false;
  // Shared with the workers, under m_.
  std::mutex m_;
  std::condition_variable work_cv_, ready_cv_;
  std::int64_t next_claim_ = 0, delivered_ = 0;
  bool stopping_ = false;
  std::map<std::int64_t, Slot> ready_;
  std::vector<std::thread> workers_;
};

} // namespace samebits
