// Comparing two traces (`samebits diff`): the first entry whose output differs, how far apart
// the two runs are there, and how the difference grows afterwards. Part of the application
// library (samebits_app); recording and reading traces is samebits/trace.hpp.
#pragma once
#include "samebits/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace samebits::trace {

// How far apart two entries are: the largest relative difference over min, max, mean, L2 norm
// and the sampled values, each |a - b| / max(|a|, |b|, 1e-300); 0 when the hashes are equal,
// +inf when NaN appears on one side only.
double distance(const Entry& a, const Entry& b);

struct EntryDiff {
  std::int64_t index = 0; // position in both traces
  std::int64_t step = 0;
  std::string layer, op;
  std::string context; // trace A's context label
  bool same_hash = true;
  double distance = 0;
};

// Entries are grouped by trace A's (context, step): a trace of several runs has a row per run
// and step.
struct StepDiff {
  std::string context;
  std::int64_t step = 0;
  std::int64_t entries = 0;   // entries of this step present in both traces
  std::int64_t differing = 0; // of which the hashes differ
  double max_distance = 0;
};

struct DiffReport {
  std::int64_t entries_a = 0, entries_b = 0;
  std::int64_t compared = 0;    // entries compared (the common prefix of matching structure)
  std::int64_t first_diff = -1; // index of the first entry whose hash differs; -1: none
  // First index where step/layer/op/dtype/shape differ; -1: none. Context labels are shown but
  // not compared, so a CPU trace and a CUDA trace of the same portable runs can agree.
  std::int64_t structure_mismatch = -1;
  std::string structure_message;
  Entry first_a, first_b;         // the entries at first_diff (when there is one)
  std::vector<EntryDiff> entries; // every compared entry, in order
  std::vector<StepDiff> steps;    // per step, in order of first appearance

  // The two traces are the same: equal lengths and structure, and every output hash equal.
  bool agree() const { return first_diff < 0 && structure_mismatch < 0 && entries_a == entries_b; }
};

DiffReport diff(const TraceFile& a, const TraceFile& b);
// A human-readable report: the first difference, then the growth per step.
std::string format_diff(const DiffReport& r);
// An SVG chart of log10(distance) per entry (differing entries only; equal ones on the floor).
std::string diff_svg(const DiffReport& r);

} // namespace samebits::trace
