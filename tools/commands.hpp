// The subcommands of the `samebits` program; each file tools/cmd_*.cpp adds one.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"
#include "samebits/util/files.hpp" // write_whole_file, check_writable: every file a subcommand writes

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace samebits {
struct OpShape; // samebits/variability.hpp
} // namespace samebits

namespace samebits::cli {

// A floating-point option that must be a finite number of at least `lo` (NaN and infinities are
// refused, which CLI::Range lets through).
CLI::Validator finite_at_least(double lo);
// An integer option that must be at least `lo`, with a message that says so.
CLI::Validator integer_at_least(std::int64_t lo);
// The items of a comma-separated list (devices, graphs); an empty item or list is an
// InvalidArgument naming `what`.
std::vector<std::string> comma_items(const std::string& text, const char* what);
// A comma-separated list of devices ("cpu", "cuda", "cuda:1", ...); "auto" stands for the CPU and,
// where one is present, the first CUDA device.
std::vector<Device> device_list(const std::string& text);
// Throws BackendUnavailable, naming `command`, when a device of the list is a CUDA device and
// samebits has no CUDA backend or no device is present.
void require_present(const std::vector<Device>& devices, const char* command);
// A comma-separated list of determinism levels, or "all" where `all_allowed` (the three levels):
// an empty or unknown level, or one listed twice (under one name or two), is an InvalidArgument.
std::vector<Determinism> parse_level_list(const std::string& text, bool all_allowed);
// The same rules as validators, so that a bad list is refused before the work starts:
// level_list for levels (one_level: exactly one), device_names for devices (a list where
// `list_allowed`, "auto" included; else one device).
CLI::Validator level_list(bool all_allowed);
CLI::Validator one_level();
CLI::Validator device_names(bool list_allowed);
// A comma-separated list of names from `known`, each at most once (bench graphsage --graphs).
CLI::Validator name_list(std::vector<std::string> known, const char* what);
// A seed: a whole number in [0, 2^64 - 1], written without sign or leading zeros (CLI11 alone
// would take -1 as 2^64 - 1).
CLI::Validator seed_value();
// An op that `samebits variability` and `calibrate` know (find_op).
CLI::Validator known_op();
// The shape options of the op table (--n, --rows, --features, --dim, --reduce), shared by
// `samebits variability` and `samebits calibrate`. Once parsing ends, an option that the op named
// by `op` does not read is a usage error (check_shape), as is --features -1 for an op without 1-d
// tensors. Returns the options.
std::vector<CLI::Option*> add_shape_options(CLI::App& cmd, OpShape& shape, const std::string& op);

void add_ops_command(CLI::App& app);    // cmd_ops.cpp: the op x backend x level coverage matrix
void add_demo_command(CLI::App& app);   // cmd_demo.cpp: atomics vs deterministic, in bits
void add_doctor_command(CLI::App& app); // cmd_doctor.cpp: the environment report
void add_diff_command(CLI::App& app);   // cmd_diff.cpp: where two traces diverge
void add_variability_command(CLI::App& app);     // cmd_variability.cpp: run-to-run variability
void add_calibrate_command(CLI::App& app);       // cmd_calibrate.cpp: tolerances from spread
void add_experiment_command(CLI::App& app);      // cmd_experiment.cpp: GraphSAGE reproducibility
void add_bench_graphsage_command(CLI::App& app); // cmd_bench_graphsage.cpp: inference timing

} // namespace samebits::cli
