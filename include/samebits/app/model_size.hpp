// How big the GraphSAGE model of a data set is before it is built: parameters, the memory its
// training takes, and whether the data set declares far more feature columns or classes than it
// uses (one stray index of 16777215 in nodes.tsv makes a 16.7M-feature model). The experiment and
// `calibrate --experiment` print the size, warn of such data, and refuse a model that cannot fit
// in memory before allocating any of it.
#pragma once
#include "samebits/app/cora.hpp"
#include "samebits/app/graphsage.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace samebits::nn {

struct ModelSize {
  std::int64_t features = 0, hidden = 0, classes = 0; // declared: largest index / label + 1
  std::int64_t used_features = 0, used_classes = 0;   // columns and labels that occur
  std::int64_t parameters = 0;
  double device_bytes = 0; // the model's tensors on its device (weights, Adam, activations, graph)
  double host_bytes = 0;   // copies on the host: initialisation, and the experiment's snapshots
  Device device;
};

// `snapshots`: parameter vectors the caller keeps on the host in float64 (the experiment keeps
// epochs + 3 for the run it compares the others with).
ModelSize model_size(const Dataset& data, const SageConfig& cfg, std::int64_t snapshots = 0);
// One line: "model: F features -> H hidden -> C classes, P parameters; training needs about X".
std::string describe(const ModelSize& s);
// Warnings for declared feature columns or classes far beyond those used (empty when none).
std::vector<std::string> size_warnings(const ModelSize& s);
// Throws Error, before anything is allocated, when the model needs more memory than the host has
// available (MemAvailable, and the cgroup limit where there is one).
void check_fits(const ModelSize& s);
// The host memory available to this process in bytes; 0 when unknown.
double available_host_bytes();
// "1.5 GiB", "820 MiB", ...
std::string bytes_text(double bytes);

} // namespace samebits::nn
