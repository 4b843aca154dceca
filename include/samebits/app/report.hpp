// The HTML report of the GraphSAGE experiment: one self-contained file (inline CSS and SVG, no
// scripts, no network) with the results table, the cross-device check, charts of distinct
// weight sets per level, weight drift per epoch (log scale), the accuracy distribution and
// timings, and the environment. Built from the experiment's JSON (nn::to_json).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace samebits::nn {

std::string render_report(const nlohmann::json& results);
// Writes render_report(results) to `path`; throws Error if the file cannot be written.
void write_report(const std::filesystem::path& path, const nlohmann::json& results);
// Before the work: creates the report's directories, as write_report does, and checks that the
// file can be written there (throws Error otherwise).
void check_report_path(const std::filesystem::path& path);

} // namespace samebits::nn
