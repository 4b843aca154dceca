// samebits_bench_gpu: every op and variant on the shape set of the anchors plus large shapes,
// timed with CUDA events. Writes a JSON file and a Markdown table (ms, effective bandwidth
// against the measured copy ceiling, ratio to our atomic variant).
#include "gpu_common.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

namespace samebits::bench {

double time_ms(const std::function<void()>& fn, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i)
    fn();
  cudaDeviceSynchronize();
  std::vector<double> ts;
  EventTimer timer;
  for (int i = 0; i < reps; ++i) {
    timer.start();
    fn();
    ts.push_back(timer.stop_ms());
  }
  if (cudaGetLastError() != cudaSuccess)
    throw CudaError("benchmark: a CUDA call failed while timing");
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

Tensor gpu_normal(const Shape& shape, DType dtype, std::uint64_t seed) {
  // bfloat16 and float16: the float32 values rounded once (convert).
  const DType fill = dtype == DType::f64 ? DType::f64 : DType::f32;
  Tensor h = Tensor::empty(shape, fill);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d;
  for (std::int64_t i = 0; i < h.numel(); ++i) {
    if (fill == DType::f32)
      h.data<float>()[i] = static_cast<float>(d(gen));
    else
      h.data<double>()[i] = d(gen);
  }
  if (fill == dtype)
    return h.to(Device::cuda());
  Tensor r = Tensor::empty(shape, dtype);
  convert(h.view(), r.view());
  return r.to(Device::cuda());
}

Tensor gpu_index(std::int64_t n, std::int64_t hi, DType dtype, std::uint64_t seed) {
  Tensor h = Tensor::empty({n}, dtype);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> d(0, hi - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    if (dtype == DType::i64)
      h.data<std::int64_t>()[i] = d(gen);
    else
      h.data<std::int32_t>()[i] = static_cast<std::int32_t>(d(gen));
  }
  return h.to(Device::cuda());
}

namespace {

double measure_copy_ceiling() {
  const std::int64_t n = std::int64_t{1} << 29; // 2 GiB of float32
  void *src = nullptr, *dst = nullptr;
  cudaMalloc(&src, n * 4);
  cudaMalloc(&dst, n * 4);
  cudaMemset(src, 1, n * 4);
  const double ms = time_ms([&] { cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToDevice); }, 20, 3);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * n * 4 / (ms * 1e-3) / 1e12;
}

} // namespace
} // namespace samebits::bench

int main(int argc, char** argv) {
  using namespace samebits::bench;
  std::string out_dir = ".";
  Report report;
  std::string only; // ",family,..." or empty for all
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc)
      out_dir = argv[++i];
    else if (a == "--quick")
      report.quick = true;
    else if (a == "--only" && i + 1 < argc)
      only = std::string(",").append(argv[++i]).append(",");
    else {
      std::cerr << "usage: samebits_bench_gpu [--out DIR] [--quick] [--only FAMILIES]\n"
                   "  --only  comma-separated families to run (reduce, scan, histogram, gemm,\n"
                   "          segment, indexing, scatter, half, overhead, short, probe); default:\n"
                   "          all\n";
      return 2;
    }
  }
  if (!samebits::cuda_available()) {
    std::cerr << "samebits_bench_gpu: no CUDA device\n";
    return 1;
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  report.ceiling_tbps = measure_copy_ceiling();
  fmt::print("GPU {} ({} SMs); copy ceiling {:.2f} TB/s\n", p.name, p.multiProcessorCount,
             report.ceiling_tbps);
  const auto run = [&](const char* family, void (*bench)(Report&)) {
    if (only.empty() || only.find("," + std::string(family) + ",") != std::string::npos)
      bench(report);
  };
  run("reduce", bench_reduce);
  run("scan", bench_scan);
  run("histogram", bench_histogram);
  run("gemm", bench_gemm);
  run("segment", bench_segment);
  run("indexing", bench_indexing);
  run("scatter", bench_scatter);
  run("half", bench_half);
  run("overhead", bench_overhead);
  run("short", bench_short);
  run("probe", bench_dmma_probe);

  // The ratio to our own atomic (not_guaranteed) variant of the same op and shape.
  std::map<std::string, double> atomic_ms;
  for (const auto& r : report.rows())
    if (r.level == "not_guaranteed" && r.variant.rfind("cuda.", 0) == 0)
      atomic_ms.emplace(r.op + "|" + r.shape, r.ms);
  nlohmann::json j;
  j["gpu"] = p.name;
  j["sms"] = p.multiProcessorCount;
  j["copy_ceiling_tbps"] = report.ceiling_tbps;
  std::string md = "| op | shape | variant | level | ms | TB/s | % of copy ceiling | x atomic |\n"
                   "|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : report.rows()) {
    const double tbps = r.bytes / (r.ms * 1e-3) / 1e12;
    auto it = atomic_ms.find(r.op + "|" + r.shape);
    const double ratio = it == atomic_ms.end() ? 0 : r.ms / it->second;
    j["rows"].push_back({{"family", r.family},
                         {"op", r.op},
                         {"shape", r.shape},
                         {"variant", r.variant},
                         {"level", r.level},
                         {"ms", r.ms},
                         {"bytes", r.bytes},
                         {"tbps", tbps},
                         {"ratio_to_atomic", ratio},
                         {"note", r.note}});
    md += fmt::format("| {} | {} | {} | {} | {:.4f} | {:.2f} | {:.0f}% | {} |\n", r.op, r.shape,
                      r.variant, r.level, r.ms, tbps, 100 * tbps / report.ceiling_tbps,
                      ratio > 0 ? fmt::format("{:.2f}", ratio) : "-");
  }
  std::ofstream(out_dir + "/gpu_bench.json") << j.dump(2) << '\n';
  std::ofstream(out_dir + "/gpu_bench.md") << md;
  std::cout << md;
  return 0;
}
