// Run-to-run variability of an op (`samebits variability`): the op runs N times on the same
// inputs and the outputs are compared with the metrics of Shanmugavelu et al.,
// arXiv:2408.05148:
//   - distinct outputs: number of distinct output bit patterns (content hashes) over the N runs;
//   - elements that vary: positions i where some run differs from the reference (bitwise);
//   - elementwise relative variability: |x_r[i] - ref[i]| / max(|ref[i]|, guard), mean over all
//     compared runs and elements, and max;
//   - scalar variability: the same for the float64 sum of the whole output (summed in a fixed
//     order, so the sum itself adds no variability).
// The reference is the first run, or (reference = deterministic) one run of the op at the
// portable level, as in the paper; the compared runs are then all N.
//
// The ops are a table (variability_ops()): each entry makes fixed random inputs from a seed and
// a shape and runs the op into a fixed output. Calibration (tolerance.hpp) uses the same table.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace samebits {

// Shape options; 0 (or empty) means the op's default.
struct OpShape {
  std::int64_t n = 0;        // elements, sources or edges
  std::int64_t rows = 0;     // output rows / targets / segments / nodes
  std::int64_t features = 0; // per-row features (-1: none, 1-d tensors)
  int dim = 0;               // sum_dim: the reduced dimension
  std::string reduce{};      // scatter_reduce / segment_reduce / aggregate: sum, mean, amax, amin
};

// An op on fixed inputs; run() overwrites `output` completely (resetting what it accumulates into).
struct PreparedOp {
  std::string op;
  std::string description; // inputs and output, e.g. "src float32[1000000] -> out float32[1000]"
  Tensor output;
  std::function<void(const Options&)> run;
};

// The shape options an op reads (OpEntry::reads), as bits.
enum ShapeOption : unsigned {
  kReadsN = 1,
  kReadsRows = 2,
  kReadsFeatures = 4,  // 1 or more
  kOneDimensional = 8, // features -1 (1-d tensors) too
  kReadsDim = 16,
  kReadsReduce = 32,
};
// The command-line flag of each shape option, in the order --help lists them.
struct ShapeFlag {
  ShapeOption bit;
  const char* flag;
};
inline constexpr ShapeFlag kShapeFlags[] = {{kReadsN, "--n"},
                                            {kReadsRows, "--rows"},
                                            {kReadsFeatures, "--features"},
                                            {kReadsDim, "--dim"},
                                            {kReadsReduce, "--reduce"}};

struct OpEntry {
  std::string name;
  std::string help; // what it computes and which shape options it reads
  OpShape defaults;
  std::function<PreparedOp(const OpShape& shape, Device device, std::uint64_t seed)> prepare;
  unsigned reads = 0; // ShapeOption bits
};

// Every op `samebits variability` and `samebits calibrate` know, in a fixed order.
const std::vector<OpEntry>& variability_ops();
// The shape with the op's defaults filled in where `shape` says 0.
OpShape with_defaults(const OpEntry& entry, const OpShape& shape);
// The op named `op`; throws InvalidArgument listing the known ops when there is none.
const OpEntry& find_op(const std::string& op);
// The value `shape` holds for the option `bit` of kShapeFlags, as text ("0" or "" where not set).
std::string shape_value(const OpShape& shape, ShapeOption bit);
// Throws InvalidArgument when `shape` sets an option the op does not read (a non-zero --n, --rows,
// --features or --dim, a non-empty --reduce), or --features -1 for an op without 1-d tensors:
// options given in vain would otherwise be ignored without a word.
void check_shape(const OpEntry& entry, const OpShape& shape);
// Looks up an op (find_op), checks the shape against it (check_shape) and prepares it.
PreparedOp prepare_op(const std::string& op, const OpShape& shape, Device device,
                      std::uint64_t seed);

struct VariabilityOptions {
  int runs = 100;
  Determinism level = Determinism::not_guaranteed;
  Device device = Device::cpu();
  std::uint64_t seed = 1;
  bool reference_deterministic = false; // compare with a portable run instead of run 1
  double guard = 0; // denominator floor; 0: the smallest normal number of the output dtype
};

struct VariabilityReport {
  std::string op, description, device, level, variant;
  int runs = 0;
  std::string reference; // "first run" or "portable run"
  int distinct = 0;      // distinct outputs among the N runs
  std::int64_t elements = 0;
  std::int64_t varying = 0; // elements that differ from the reference in at least one run
  double mean_rel = 0, max_rel = 0, max_abs = 0;
  double scalar_mean_rel = 0, scalar_max_rel = 0;
  double guard = 0;
  double median_ms = 0; // one run, including a device synchronization
};

VariabilityReport measure_variability(const std::string& op, const OpShape& shape,
                                      const VariabilityOptions& options);
std::string format_report(const VariabilityReport& r);
// One JSON object with the report and the environment (environment_json()).
std::string to_json(const VariabilityReport& r);

} // namespace samebits
