// The CUDA benchmark program's shared parts: event timing (median of many runs after warm-up),
// the bytes-moved accounting, and the report every family adds rows to.
#pragma once
#include "samebits/samebits.hpp"

#include <cuda_runtime.h>
#include <functional>
#include <string>
#include <vector>

namespace samebits::bench {

// A pair of CUDA events on the default stream: start(), then stop_ms() waits for the second and
// returns the milliseconds between them.
class EventTimer {
public:
  EventTimer() {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start() { cudaEventRecord(start_); }
  double stop_ms() {
    cudaEventRecord(stop_);
    cudaEventSynchronize(stop_);
    float ms = 0;
    cudaEventElapsedTime(&ms, start_, stop_);
    return ms;
  }

private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Automatic plan reuse (a 1 GiB limit) for its lifetime, then the limit it found: the benchmarks
// otherwise time the sort on every call, with it off.
class AutomaticPlanReuse {
public:
  AutomaticPlanReuse() : previous_(plan_cache_stats().limit_bytes) {
    set_plan_cache_limit(std::size_t{1} << 30);
  }
  ~AutomaticPlanReuse() { set_plan_cache_limit(previous_); }
  AutomaticPlanReuse(const AutomaticPlanReuse&) = delete;
  AutomaticPlanReuse& operator=(const AutomaticPlanReuse&) = delete;

private:
  std::size_t previous_;
};

// Median milliseconds of fn() over `reps` runs after `warmup` runs, timed with CUDA events on the
// default stream. Throws CudaError if a CUDA call fails.
double time_ms(const std::function<void()>& fn, int reps = 50, int warmup = 5);

struct Row {
  std::string family;  // "scatter", "reduce", ...
  std::string op;      // "index_add"
  std::string shape;   // "E=10M N=1M F=1"
  std::string variant; // "cuda.atomic" or "torch default"
  std::string level;   // not_guaranteed / run_to_run / portable
  double ms = 0;
  double bytes = 0; // bytes that must move: inputs once, outputs once
  std::string note;
};

class Report {
public:
  void add(Row r) { rows_.push_back(std::move(r)); }
  const std::vector<Row>& rows() const { return rows_; }
  double ceiling_tbps = 0; // measured device-to-device copy (read + write)
  bool quick = false;      // smaller shapes and fewer repetitions

private:
  std::vector<Row> rows_;
};

// Random device tensors for benchmarks (never zeros).
Tensor gpu_normal(const Shape& shape, DType dtype = DType::f32, std::uint64_t seed = 1);
Tensor gpu_index(std::int64_t n, std::int64_t hi, DType dtype = DType::i64, std::uint64_t seed = 2);

// One function per op family (bench/gpu_<family>.cpp), called in order by gpu_main.cpp.
void bench_reduce(Report& r);
void bench_scan(Report& r);      // gpu_scan.cpp
void bench_histogram(Report& r); // gpu_histogram.cpp
void bench_gemm(Report& r);
void bench_segment(Report& r);
void bench_indexing(Report& r);
void bench_scatter(Report& r);    // gpu_scatter.cpp
void bench_half(Report& r);       // gpu_half.cpp: bfloat16/float16 (the MoE token combine)
void bench_overhead(Report& r);   // gpu_overhead.cpp: the host's cost of one call on tiny inputs
void bench_short(Report& r);      // gpu_short.cpp: GPU time of a Cora training's short scatters
void bench_dmma_probe(Report& r); // gpu_dmma.cu: FP64 tensor cores against the fma chain

} // namespace samebits::bench
