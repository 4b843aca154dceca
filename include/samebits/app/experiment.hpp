// The GraphSAGE-on-Cora reproducibility experiment: train the same model with the same seed many
// times per device and determinism level, count the distinct weight sets (by content hash),
// measure how far the weights drift from the first run epoch by epoch, and set that next to the
// spread that different seeds cause. Used by `samebits experiment graphsage` and the report.
#pragma once
#include "samebits/app/graphsage.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace samebits::nn {

struct ExperimentConfig {
  std::filesystem::path data = "data/cora";
  bool check_cora = true; // check the counts of data/cora/README.md
  int runs = 100;
  int epochs = 10;
  std::vector<Device> devices{Device::cpu()};
  std::vector<Determinism> levels{Determinism::not_guaranteed, Determinism::run_to_run,
                                  Determinism::portable};
  int seeds = 0;          // K > 0: also train seeds seed .. seed+K-1 once each
  std::uint64_t seed = 0; // the seed of every repeated run
  int track_runs = 8;     // runs whose weights are compared with run 1 after every epoch
  SageConfig model;       // level and device are set per group
};

// One table row: `runs` trainings on one device at one level (or K seeds).
struct GroupResult {
  std::string kind; // "repeat": same seed every run; "seeds": a different seed per run
  Device device;
  Determinism level = Determinism::portable;
  int runs = 0;
  std::vector<std::uint64_t> hashes;  // per run: content_hash of all parameters
  std::vector<double> test_acc;       // per run
  std::vector<double> seconds;        // per run, wall clock, including evaluation
  double max_weight_diff = 0;         // max over runs and parameters of |w - w_run1|
  std::vector<double> diff_per_epoch; // [epochs + 1]: same, over the tracked runs, after epoch e
  std::vector<double> loss_run1;      // training loss of run 1 per epoch
  std::string variants;               // the variants selection picks for the model's ops

  int distinct() const;
};

struct ExperimentResult {
  ExperimentConfig config;
  std::string dataset;
  std::int64_t nodes = 0, edges = 0, features = 0, classes = 0, train = 0, test = 0;
  int threads = 0;
  std::vector<GroupResult> groups;
  nlohmann::json environment;
};

struct Progress {
  const GroupResult* group; // the group being run
  int done = 0, total = 0;
};

ExperimentResult run_experiment(const ExperimentConfig& cfg,
                                const std::function<void(const Progress&)>& progress = {});

// The portable hashes per device, and whether they agree (the cross-device check).
struct CrossDevice {
  bool applicable = false; // portable was run on two or more devices
  bool equal = false;
  bool cpu_and_gpu = false; // the devices compared include the CPU and a GPU
  std::vector<std::pair<std::string, std::string>> hashes; // device, first-run hash
};
CrossDevice cross_device_check(const ExperimentResult& r);

nlohmann::json to_json(const ExperimentResult& r);
// The table printed by the command (plain text, fixed width).
std::string format_table(const ExperimentResult& r);

} // namespace samebits::nn
