// The backend-ops harness's runner (after ggml's test-backend-ops): every generated case, on one
// backend, at every level and every variant that backend registers for the op, under every launch
// configuration given (CPU thread counts, CUDA launch shapes). Each result is checked:
//   - against the float64 reference, element by element, within 2 * terms units of the dtype of
//     the element's scale (exactly where the op is exact: copies, counts, amax/amin);
//   - at portable: bitwise equal to the CPU's portable result on contiguous copies with 1 thread;
//   - at run_to_run and portable: bitwise equal to a second run of the same call;
//   - inputs unchanged, and nothing written outside the output view.
// Environment: SAMEBITS_TEST_SEED replays a run (its seed is printed first), SAMEBITS_TEST_FILTER
// keeps the cases whose label contains it, SAMEBITS_TEST_SHARD=i/n keeps every n-th case, and
// SAMEBITS_TEST_LIST=1 prints the labels of the cases kept instead of running them.
#pragma once
#include "harness/families.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

namespace samebits::harness {

// A launch configuration: `enter` applies it and returns what restores the previous one when
// dropped.
struct Config {
  std::string name;
  std::function<std::shared_ptr<void>()> enter;
};

// The run's seed: SAMEBITS_TEST_SEED when set, else a fresh one.
inline std::uint64_t run_seed() {
  if (const char* e = std::getenv("SAMEBITS_TEST_SEED"); e != nullptr && *e != '\0')
    return std::strtoull(e, nullptr, 10);
  return testing::fresh_seed();
}

struct Totals {
  std::int64_t cases = 0, runs = 0, skipped = 0, refused = 0, failures = 0;
};

// True when the environment keeps only some of the cases (a filter or a shard).
inline bool narrowed() {
  for (const char* v : {"SAMEBITS_TEST_FILTER", "SAMEBITS_TEST_SHARD"})
    if (const char* e = std::getenv(v); e != nullptr && *e != '\0')
      return true;
  return false;
}

class Runner {
public:
  Runner(Device target, std::vector<Config> configs)
      : target_(target), configs_(std::move(configs)) {}

  // Runs every selected case; returns the totals (failures were reported through ADD_FAILURE).
  Totals run_all() {
    const std::uint64_t seed = run_seed();
    std::printf("backend-ops harness on %s: seed %llu (replay: SAMEBITS_TEST_SEED=%llu)\n",
                target_.is_cpu() ? "cpu" : "cuda", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
    seed_ = seed;
    const char* filter = std::getenv("SAMEBITS_TEST_FILTER");
    const char* list = std::getenv("SAMEBITS_TEST_LIST");
    const bool list_only = list != nullptr && *list != '\0' && *list != '0';
    for (const Case& c : generate_cases(seed)) {
      if (!testing::case_in_shard(c.number))
        continue;
      if (filter != nullptr && *filter != '\0' && c.label().find(filter) == std::string::npos)
        continue;
      if (list_only) {
        ++total_.cases;
        std::printf("%s\n", c.label().c_str());
        continue;
      }
      run_case(c);
    }
    std::printf("%-16s %8s %9s %8s %8s %8s\n", "op", "cases", "runs", "skipped", "refused",
                "failed");
    for (const auto& [op, t] : per_op_)
      std::printf("%-16s %8lld %9lld %8lld %8lld %8lld\n", op.c_str(),
                  static_cast<long long>(t.cases), static_cast<long long>(t.runs),
                  static_cast<long long>(t.skipped), static_cast<long long>(t.refused),
                  static_cast<long long>(t.failures));
    std::printf("%-16s %8lld %9lld %8lld %8lld %8lld   (seed %llu)\n", "total",
                static_cast<long long>(total_.cases), static_cast<long long>(total_.runs),
                static_cast<long long>(total_.skipped), static_cast<long long>(total_.refused),
                static_cast<long long>(total_.failures), static_cast<unsigned long long>(seed));
    return total_;
  }

private:
  struct Entry {
    std::string variant; // empty: selection chooses
    Determinism level;
  };

  std::vector<Entry> entries(const std::string& op) const {
    std::vector<Entry> e;
    for (Determinism l :
         {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable})
      e.push_back({"", l});
    for (const VariantInfo& v : list_variants(op))
      if (v.backend == target_.type)
        e.push_back({v.name, v.level});
    return e;
  }

  void fail(const Case& c, const std::string& where, const std::string& what) {
    ++total_.failures;
    ++per_op_[op_name(c)].failures;
    if (total_.failures <= 40)
      ADD_FAILURE() << c.label() << " | " << where << ": " << what
                    << " (replay: SAMEBITS_TEST_SEED=" << seed_ << " SAMEBITS_TEST_FILTER='case "
                    << c.number << ":')";
    else if (total_.failures == 41)
      ADD_FAILURE() << "more failures: only the first 40 are shown";
  }

  static std::vector<TensorView> views(const std::vector<Placed>& p) {
    std::vector<TensorView> v;
    for (const auto& x : p)
      v.push_back(x.view);
    return v;
  }

  std::vector<Placed> place_all(const Problem& p, Device d) const {
    std::vector<Placed> out;
    for (std::size_t i = 0; i < p.roles.size(); ++i)
      out.push_back(place(p.roles[i], p.layouts[i], d));
    return out;
  }

  // "" when `got` is within the reference's bound, else the first element that is not.
  static std::string check_reference(const Tensor& got, const Reference& ref, std::int64_t terms) {
    const auto v = testing::to_doubles(got);
    if (v.size() != ref.value.size())
      return "reference has " + std::to_string(ref.value.size()) + " elements, result " +
             std::to_string(v.size());
    const double u = got.dtype() == DType::f32 ? 0x1p-24 : got.dtype() == DType::f64 ? 0x1p-53 : 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double bound = 2.0 * static_cast<double>(terms) * u * ref.scale[i];
      if (!(std::fabs(v[i] - ref.value[i]) <= bound))
        return "element " + std::to_string(i) + " is " + std::to_string(v[i]) +
               ", float64 reference " + std::to_string(ref.value[i]) + " (bound " +
               std::to_string(bound) + ")";
    }
    return "";
  }

  static std::string first_bit_difference(const Tensor& a, const Tensor& b) {
    if (bitwise_equal(a, b))
      return "";
    const auto x = testing::to_doubles(a), y = testing::to_doubles(b);
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "element %zu: %.17g against %.17g", i, x[i], y[i]);
        return buf;
      }
    return "shapes or dtypes differ";
  }

  // Runs p on `target_` with fresh placements; returns the output (host copy) or throws.
  Tensor run_once(const Case& c, const Problem& p, const Options& o, const std::string& where) {
    std::vector<Placed> placed = place_all(p, target_);
    std::vector<Tensor> before;
    for (const auto& x : placed)
      before.push_back(Tensor::copy_of(x.buffer.view(), Device::cpu()));
    p.run(views(placed), o);
    for (std::size_t i = 0; i < placed.size(); ++i) {
      const bool output = i + 1 == placed.size();
      const std::string w = untouched_outside(
          placed[i], before[i], Tensor::copy_of(placed[i].buffer.view(), Device::cpu()), output);
      if (!w.empty())
        fail(c, where, (output ? "" : "role " + std::to_string(i) + " ") + w);
    }
    return Tensor::copy_of(placed.back().view, Device::cpu());
  }

  void run_case(const Case& c) {
    const std::string op = op_name(c);
    Totals& mine = per_op_[op];
    ++mine.cases;
    ++total_.cases;
    const Problem p = build(c);
    // The reference, from the values the views hold, and the CPU's portable bits.
    const std::vector<Placed> host = place_all(p, Device::cpu());
    std::vector<std::vector<double>> in;
    for (const auto& x : host)
      in.push_back(testing::to_doubles(x.view));
    const Reference ref = p.reference(in);
    Tensor canon;
    bool have_canon = false;
    if (preview_selection(op, DeviceType::cpu, Determinism::portable).runs) {
      testing::ThreadCount one(1);
      std::vector<Tensor> contiguous;
      std::vector<TensorView> v;
      for (const auto& x : host) {
        contiguous.push_back(Tensor::copy_of(x.view));
        v.push_back(contiguous.back().view());
      }
      try {
        p.run(v, {.level = Determinism::portable});
        canon = contiguous.back();
        have_canon = true;
      } catch (const std::exception& e) {
        fail(c, "cpu portable (the reference bits)", std::string("threw: ") + e.what());
        return;
      }
    }
    const std::vector<Entry> es = entries(op);
    for (const Config& cfg : configs_) {
      const auto restore = cfg.enter();
      for (const Entry& e : es) {
        const std::string where = cfg.name + ", " + (e.variant.empty() ? "selected" : e.variant) +
                                  " at " + std::string(to_string(e.level));
        if (e.variant.empty() && !preview_selection(op, target_.type, e.level).runs) {
          ++mine.refused;
          ++total_.refused;
          continue;
        }
        const Options o{.level = e.level, .variant = e.variant};
        Tensor got;
        try {
          got = run_once(c, p, o, where);
        } catch (const std::exception& ex) {
          const std::string m = ex.what();
          if (m.find("no variant takes these arguments") != std::string::npos ||
              m.find("no variant guarantees") != std::string::npos) {
            ++mine.skipped;
            ++total_.skipped;
            continue;
          }
          fail(c, where, "threw: " + m);
          continue;
        }
        ++mine.runs;
        ++total_.runs;
        if (const std::string w = check_reference(got, ref, p.terms); !w.empty())
          fail(c, where, "against the float64 reference: " + w);
        if (e.level == Determinism::portable && have_canon)
          if (const std::string w = first_bit_difference(got, canon); !w.empty())
            fail(c, where, "not bitwise equal to the CPU's portable result: " + w);
        if (e.level != Determinism::not_guaranteed) {
          const Tensor again = run_once(c, p, o, where + " (repeat)");
          if (const std::string w = first_bit_difference(again, got); !w.empty())
            fail(c, where, "a repeat gave other bits: " + w);
        }
      }
    }
  }

  Device target_;
  std::vector<Config> configs_;
  std::uint64_t seed_ = 0;
  Totals total_;
  std::map<std::string, Totals> per_op_;
};

} // namespace samebits::harness
