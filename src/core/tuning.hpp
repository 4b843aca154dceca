// Launch tuning of the op families: one plain struct per family (for example `ScatterTuning`,
// declared beside the family's kernel-choice function), whose default-constructed value is what
// runs. The family's kernel-choice function reads it; tests and benchmarks set another value
// through `set_tuning` or, scoped, `TuningGuard`. This is the only way launch shapes change: no
// environment variable is read at launch time. Every tuning gives the same bits at `run_to_run`
// and `portable` (the tests run each one).
//
// Setting a tuning is process-wide and not synchronized: change it only while no op runs.
#pragma once

namespace samebits::detail {

template <class Tuning> Tuning& tuning_slot() {
  static Tuning value{};
  return value;
}

// The tuning the family's next launch uses.
template <class Tuning> const Tuning& tuning() {
  return tuning_slot<Tuning>();
}

template <class Tuning> void set_tuning(const Tuning& t) {
  tuning_slot<Tuning>() = t;
}

// Sets a tuning for the life of the guard and restores the previous one.
template <class Tuning> class TuningGuard {
public:
  explicit TuningGuard(const Tuning& t) : saved_(tuning<Tuning>()) { set_tuning(t); }
  ~TuningGuard() { set_tuning(saved_); }
  TuningGuard(const TuningGuard&) = delete;
  TuningGuard& operator=(const TuningGuard&) = delete;

private:
  Tuning saved_;
};

} // namespace samebits::detail
