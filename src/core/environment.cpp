// The environment report: build identity and flags, CPU floating-point state, CUDA devices and
// versions, result-affecting environment variables, the determinism mode and what it promises.
#include "samebits/environment.hpp"

#include "core/environment_cuda.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/excerpt.hpp"
#include "samebits/util/json_text.hpp"
#include "samebits/util/num_threads_env.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/utsname.h>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#define SAMEBITS_X86 1
#endif

#ifndef SAMEBITS_BUILD_TYPE
#define SAMEBITS_BUILD_TYPE "unknown"
#endif
#ifndef SAMEBITS_CXX_BUILD_FLAGS
#define SAMEBITS_CXX_BUILD_FLAGS ""
#endif
#ifndef SAMEBITS_CUDA_COMPILER
#define SAMEBITS_CUDA_COMPILER ""
#endif

extern char** environ;

namespace samebits {

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "model name" on x86-64; AArch64 kernels report no name, only part numbers.
    for (const char* key : {"model name", "Model", "Hardware"}) {
      if (line.rfind(key, 0) == 0) {
        const auto colon = line.find(':');
        if (colon != std::string::npos)
          return trim(line.substr(colon + 1));
      }
    }
  }
  return "unknown";
}

std::string os_name() {
  utsname u{};
  if (uname(&u) != 0)
    return "unknown";
  return fmt::format("{} {} {}", u.sysname, u.release, u.machine);
}

// FTZ/DAZ of the calling thread. Both break agreement with the GPU (which samebits runs with
// denormals preserved) on any input that produces a denormal.
void read_fp_flags(Environment& e) {
#if defined(SAMEBITS_X86)
  const unsigned csr = _mm_getcsr();
  e.fp_flags_known = true;
  e.ftz = (csr & 0x8000u) != 0; // MXCSR bit 15
  e.daz = (csr & 0x0040u) != 0; // MXCSR bit 6
#elif defined(__aarch64__)
  std::uint64_t fpcr = 0;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  e.fp_flags_known = true;
  e.ftz = e.daz = (fpcr & (1ull << 24)) != 0; // FZ flushes inputs and outputs alike
#else
  e.fp_flags_known = false;
#endif
}

std::string promise_for(const Environment& e) {
  std::string s;
  switch (e.level) {
  case Determinism::portable:
    s = "samebits ops give the same bits for the same inputs and the same samebits build on "
        "every run, thread count, block size, GPU model and GPU count, and on the CPU";
    break;
  case Determinism::run_to_run:
    s = "samebits ops give the same bits for the same inputs on every run of this build on the "
        "same device model and configuration, but may differ on another GPU model or between "
        "CPU and GPU";
    break;
  case Determinism::not_guaranteed:
    s = "samebits ops are correct to rounding but may change in the last bits from run to run "
        "(atomic variants are allowed)";
    break;
  }
  if (e.warn_only && e.level != Determinism::not_guaranteed)
    s += ", except for ops that print a warning (warn-only mode runs a weaker variant where none "
         "meets the level)";
  if ((e.ftz || e.daz || e.fast_math) && e.level == Determinism::portable)
    s += ", though not between CPU and GPU while the warnings below apply";
  return s + ".";
}

std::string version_text(int v) { // CUDA encodes 13.0 as 13000
  if (v <= 0)
    return "unknown";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

} // namespace

namespace detail {

std::optional<int> num_threads_from_environment() {
  const char* e = std::getenv("SAMEBITS_NUM_THREADS");
  if (e == nullptr || *e == '\0')
    return std::nullopt;
  const std::string_view text(e);
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 1024)
    throw InvalidArgument(
        fmt::format("SAMEBITS_NUM_THREADS='{}' is not a thread count: set it to a whole number "
                    "from 1 to 1024, or unset it to use every core",
                    printable_excerpt(text)));
  return n;
}

} // namespace detail

const std::vector<std::string>& result_affecting_variables() {
  static const std::vector<std::string> names = {
      "SAMEBITS_NUM_THREADS", // CPU thread count (deterministic variants do not care)
      "OMP_NUM_THREADS",      // thread count of OpenMP code linked next to samebits
      "MKL_NUM_THREADS",         "OPENBLAS_NUM_THREADS",
      "CUBLAS_WORKSPACE_CONFIG", // cuBLAS is run-to-run deterministic only with ":4096:8"/":16:8"
      "NVIDIA_TF32_OVERRIDE",    // 0 forbids TF32 in cuBLAS/cuDNN; unset lets libraries choose
      "CUDA_LAUNCH_BLOCKING",    // serializes launches: hides races, changes timing
      "CUDA_VISIBLE_DEVICES",    // which GPU (and model) device 0 is
      "CUDA_DEVICE_ORDER",       "CUBLASLT_WORKSPACE_SIZE", "CUDNN_DETERMINISTIC",
      "TF_DETERMINISTIC_OPS",    "PYTHONHASHSEED",
  };
  return names;
}

Environment environment() {
  Environment e;
  e.version = std::string(version());
  e.git_revision = std::string(git_revision());
  e.build_type = SAMEBITS_BUILD_TYPE;
  e.cxx_compiler = SAMEBITS_CXX_COMPILER;
  e.cxx_flags = trim(fmt::format("{} {}", SAMEBITS_CXX_BUILD_FLAGS, SAMEBITS_CXX_FLAGS));
  e.cuda_compiler = trim(SAMEBITS_CUDA_COMPILER);
#if defined(SAMEBITS_HAS_CUDA)
  e.cuda_flags = SAMEBITS_CUDA_FLAGS;
#endif
#if defined(__FAST_MATH__)
  e.fast_math = true;
#endif
  e.fp_contract_off = e.cxx_flags.find("-ffp-contract=off") != std::string::npos;
  e.cpu_model = cpu_model();
  e.os = os_name();
  e.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string threads_refused; // a malformed SAMEBITS_NUM_THREADS: reported, not thrown
  try {
    e.samebits_threads = num_threads();
  } catch (const InvalidArgument& err) {
    threads_refused = err.what();
  }
  read_fp_flags(e);
  detail::fill_cuda_environment(e);

  for (const auto& name : result_affecting_variables()) {
    const char* v = std::getenv(name.c_str());
    e.env_vars.emplace_back(name, v ? v : "");
  }
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string kv = *p;
    const auto eq = kv.find('=');
    if (kv.rfind("SAMEBITS_", 0) != 0 || eq == std::string::npos)
      continue;
    const std::string name = kv.substr(0, eq);
    if (name == "SAMEBITS_NUM_THREADS")
      continue;
    e.env_vars.emplace_back(name, kv.substr(eq + 1));
  }

  const Mode m = mode();
  e.level = m.level;
  e.warn_only = m.warn_only;
  if (e.ftz || e.daz)
    e.warnings.push_back(
        "FTZ/DAZ is set on this thread: CPU results that involve denormals differ from the GPU's "
        "and from processes without it (something in the process, often a library built with "
        "fast-math, set it)");
  if (!threads_refused.empty())
    e.warnings.push_back(threads_refused + " (CPU ops refuse to start until it is fixed)");
  if (e.fast_math)
    e.warnings.push_back("the samebits library was compiled with fast-math: rebuild without it");
  if (!e.fp_contract_off)
    e.warnings.push_back("the CPU code was not compiled with -ffp-contract=off: a*b+c may be "
                         "fused on the CPU and not on the GPU");
  for (const auto& [name, value] : e.env_vars) {
    if (name == "NVIDIA_TF32_OVERRIDE" && !value.empty() && value != "0")
      e.warnings.push_back("NVIDIA_TF32_OVERRIDE=" + value +
                           " lets cuBLAS/cuDNN use TF32 (10-bit mantissa products)");
    if (name == "CUBLAS_WORKSPACE_CONFIG" && !value.empty() && value != ":4096:8" &&
        value != ":16:8")
      e.warnings.push_back("CUBLAS_WORKSPACE_CONFIG=" + value +
                           " is not one of the settings cuBLAS documents as deterministic "
                           "(:4096:8 or :16:8)");
  }
  e.promise = promise_for(e);
  return e;
}

std::string to_json(const Environment& e) {
  using json = nlohmann::json;
  json gpus = json::array();
  for (const auto& g : e.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"sm_count", g.sm_count},
                    {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                    {"memory_bytes", g.memory_bytes},
                    {"pci_bus_id", g.pci_bus_id}});
  json vars = json::object();
  for (const auto& [k, v] : e.env_vars)
    vars[k] = v.empty() ? json(nullptr) : json(v);
  json j = {
      {"samebits_version", e.version},
      {"git_revision", e.git_revision},
      {"build_type", e.build_type},
      {"cxx_compiler", e.cxx_compiler},
      {"cxx_flags", e.cxx_flags},
      {"cuda_compiler", e.cuda_compiler},
      {"cuda_flags", e.cuda_flags},
      {"fast_math", e.fast_math},
      {"fp_contract_off", e.fp_contract_off},
      {"cpu_model", e.cpu_model},
      {"os", e.os},
      {"hardware_threads", e.hardware_threads},
      {"samebits_threads", e.samebits_threads},
      {"ftz", e.fp_flags_known ? json(e.ftz) : json(nullptr)},
      {"daz", e.fp_flags_known ? json(e.daz) : json(nullptr)},
      {"cuda_compiled", e.cuda_compiled},
      {"cuda_driver",
       e.cuda_driver_version ? json(version_text(e.cuda_driver_version)) : json(nullptr)},
      {"cuda_runtime",
       e.cuda_runtime_version ? json(version_text(e.cuda_runtime_version)) : json(nullptr)},
      {"cublas", e.cublas_version.empty() ? json(nullptr) : json(e.cublas_version)},
      {"cuda_error", e.cuda_error.empty() ? json(nullptr) : json(e.cuda_error)},
      {"gpus", gpus},
      {"env", vars},
      {"determinism", std::string(to_string(e.level))},
      {"warn_only", e.warn_only},
      {"promise", e.promise},
      {"warnings", e.warnings},
  };
  return detail::json_text(j);
}

std::string to_text(const Environment& e) {
  std::string s;
  auto row = [&](std::string_view k, const std::string& v) {
    s += fmt::format("  {:<26}{}\n", k, v);
  };
  s += fmt::format("samebits {} (git {}), {} build\n", e.version, e.git_revision, e.build_type);
  row("C++ compiler", e.cxx_compiler);
  row("C++ flags", e.cxx_flags);
  if (e.cuda_compiled) {
    row("CUDA compiler", e.cuda_compiler);
    row("CUDA flags", e.cuda_flags);
  }
  row("fast-math", e.fast_math ? "ON (breaks reproducibility)" : "off");
  row("FP contraction (CPU)", e.fp_contract_off ? "off" : "not disabled");
  s += "CPU\n";
  row("model", e.cpu_model);
  row("threads",
      e.samebits_threads > 0
          ? fmt::format("{} hardware, {} used by samebits", e.hardware_threads, e.samebits_threads)
          : fmt::format("{} hardware; CPU ops refuse to start (see the warning below)",
                        e.hardware_threads));
  row("FTZ / DAZ", e.fp_flags_known
                       ? fmt::format("{} / {}", e.ftz ? "ON" : "off", e.daz ? "ON" : "off")
                       : "unknown on this architecture");
  row("OS", e.os);
  s += "CUDA\n";
  if (!e.cuda_compiled) {
    row("backend", "not compiled in");
  } else {
    row("driver / runtime", fmt::format("{} / {}", version_text(e.cuda_driver_version),
                                        version_text(e.cuda_runtime_version)));
    row("cuBLAS", e.cublas_version.empty() ? "unknown" : e.cublas_version);
    for (const auto& g : e.gpus)
      row(fmt::format("GPU {}", g.index),
          fmt::format("{}, {} SMs, compute capability {}.{}, {:.1f} GiB, PCI {}", g.name,
                      g.sm_count, g.cc_major, g.cc_minor,
                      static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                      g.pci_bus_id));
    if (!e.cuda_error.empty())
      row("note", e.cuda_error);
  }
  s += "Environment variables that change results\n";
  for (const auto& [k, v] : e.env_vars)
    row(k, v.empty() ? "(unset)" : v);
  s += "Determinism\n";
  row("level", fmt::format("{}{}", to_string(e.level),
                           e.warn_only ? " (warn-only: weaker variants run with a warning)"
                                       : " (an op with no variant at this level throws)"));
  row("promise", e.promise);
  for (const auto& w : e.warnings)
    row("WARNING", w);
  return s;
}

} // namespace samebits
