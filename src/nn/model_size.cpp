// The GraphSAGE model's size from a data set, checked against the host's available memory.
#include "samebits/app/model_size.hpp"

#include "samebits/dtype.hpp"
#include "samebits/errors.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <string>

namespace samebits::nn {

namespace {

// Number of distinct values in `v`.
template <class T> std::int64_t distinct_count(const std::vector<T>& v) {
  return static_cast<std::int64_t>(std::set<T>(v.begin(), v.end()).size());
}

// A cgroup v2 limit of this process minus what it uses (0 when there is none).
double cgroup_room() {
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  double current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current))
    return 0;
  const double limit = std::stod(max_text);
  return limit > current ? limit - current : 1; // at the limit: room for nothing
}

// Declared far beyond used: more than 3 unused per used one, and at least 64 unused.
bool far_beyond(std::int64_t declared, std::int64_t used) {
  const std::int64_t unused = declared - used;
  return unused >= 64 && unused > 3 * used;
}

} // namespace

ModelSize model_size(const Dataset& d, const SageConfig& cfg, std::int64_t snapshots) {
  ModelSize s;
  s.features = d.num_features;
  s.hidden = cfg.hidden;
  s.classes = d.num_classes;
  s.device = cfg.device;
  s.used_features = d.dense_features.empty() ? distinct_count(d.features.cols) : d.num_features;
  s.used_classes = distinct_count(d.labels);
  const double f = static_cast<double>(s.features), h = static_cast<double>(s.hidden),
               c = static_cast<double>(s.classes), n = static_cast<double>(d.num_nodes),
               e = static_cast<double>(d.num_edges()), nnz = static_cast<double>(d.features.nnz());
  const double p = 2 * f * h + h + 2 * h * c + c; // as ParamLayout lays them out
  s.parameters = static_cast<std::int64_t>(p);
  const double bytes = static_cast<double>(size_of(cfg.dtype));
  // Parameters, gradients and Adam's two moments; 9 [N, H] and 8 [N, C] activations and their
  // gradients, loss and degrees; the features and their transpose (CSR, or dense); the adjacency
  // and its transpose; the training targets.
  const double features =
      d.dense_features.empty()
          ? 2 * nnz * (4 + (d.binary_features ? 0 : bytes)) + 8 * (n + 1) + 8 * (f + 1)
          : n * f * bytes;
  s.device_bytes = 4 * p * bytes + (9 * n * h + 8 * n * c + 2 * n) * bytes + features +
                   2 * (4 * e + 8 * (n + 1)) + 4 * n;
  s.host_bytes = p * bytes + static_cast<double>(snapshots) * p * 8;
  return s;
}

std::string bytes_text(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6)
    b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} bytes", b) : fmt::format("{:.1f} {}", b, units[u]);
}

std::string describe(const ModelSize& s) {
  const bool cpu = s.device.is_cpu();
  return fmt::format("model: {} features -> {} hidden -> {} classes, {} parameters; training "
                     "needs about {}{}",
                     s.features, s.hidden, s.classes, s.parameters,
                     bytes_text(cpu ? s.device_bytes + s.host_bytes : s.device_bytes),
                     cpu ? ""
                         : fmt::format(" on {} and {} on the host", to_string(s.device),
                                       bytes_text(s.host_bytes)));
}

std::vector<std::string> size_warnings(const ModelSize& s) {
  std::vector<std::string> w;
  if (far_beyond(s.features, s.used_features))
    w.push_back(fmt::format(
        "the data set declares {} feature columns (its largest feature index + 1) but uses only "
        "{}: the model holds weights for every declared column. A stray large index in nodes.tsv "
        "is the usual cause.",
        s.features, s.used_features));
  if (far_beyond(s.classes, s.used_classes))
    w.push_back(fmt::format("the data set declares {} classes (its largest label + 1) but uses "
                            "only {}: the model has an output for every declared class. A stray "
                            "large label in nodes.tsv is the usual cause.",
                            s.classes, s.used_classes));
  return w;
}

double available_host_bytes() {
  double avail = 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  const double room = cgroup_room();
  if (room > 0)
    avail = avail > 0 ? std::min(avail, room) : room;
  return avail;
}

void check_fits(const ModelSize& s) {
  const double host = s.host_bytes + (s.device.is_cpu() ? s.device_bytes : 0);
  const double avail = available_host_bytes();
  if (avail <= 0 || host <= avail)
    return;
  throw Error(fmt::format(
      "the model does not fit in memory: {} features x {} hidden x {} classes ({} parameters) "
      "need about {} on the host, and {} is available. Check the data set's largest feature "
      "index and label (it declares {} feature columns and uses {}; {} classes and uses {}), or "
      "lower --hidden.",
      s.features, s.hidden, s.classes, s.parameters, bytes_text(host), bytes_text(avail),
      s.features, s.used_features, s.classes, s.used_classes));
}

} // namespace samebits::nn
