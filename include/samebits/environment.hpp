// The environment report: everything about the build, the machine and the settings that decides
// whether a result will reproduce, and one sentence saying where it will. `samebits doctor` prints
// it; every JSON report samebits writes embeds environment_json().
#pragma once
#include "samebits/determinism.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

struct GpuInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0; // compute capability
  std::uint64_t memory_bytes = 0;
  std::string pci_bus_id;
};

struct Environment {
  // Build.
  std::string version, git_revision, build_type;
  std::string cxx_compiler, cxx_flags;   // flags: the floating-point flags plus the build type's
  std::string cuda_compiler, cuda_flags; // empty without CUDA
  bool fast_math = false;                // the library was compiled with fast-math
  bool fp_contract_off = false;          // CPU code compiled with -ffp-contract=off
  // CPU, at run time (MXCSR of the calling thread on x86-64; FPCR on AArch64).
  std::string cpu_model, os;
  int hardware_threads = 0;
  int samebits_threads = 0; // samebits::num_threads() (0, with a warning, when
                            // SAMEBITS_NUM_THREADS is malformed)
  bool fp_flags_known = false;
  bool ftz = false, daz = false; // flush-to-zero / denormals-are-zero set
  // CUDA.
  bool cuda_compiled = false;
  int cuda_driver_version = 0; // e.g. 13000 for 13.0; 0 when unknown
  int cuda_runtime_version = 0;
  std::string cublas_version; // "major.minor.patch"; empty when unknown
  std::string cuda_error;     // why CUDA information is missing, if it is
  std::vector<GpuInfo> gpus;
  // Settings.
  std::vector<std::pair<std::string, std::string>> env_vars; // name -> value ("" if unset)
  Determinism level = Determinism::run_to_run;               // the process-wide mode
  bool warn_only = false;
  std::string promise;               // one sentence: which results reproduce where
  std::vector<std::string> warnings; // settings that weaken the promise
};

// Collects the report now (cheap: no kernels run; CUDA is queried only if a device is present).
Environment environment();
std::string to_json(const Environment& e); // a JSON object, one line
std::string to_text(const Environment& e); // a multi-line, human-readable report
inline std::string environment_json() {
  return to_json(environment());
}
inline std::string environment_text() {
  return to_text(environment());
}

// The variables that change results (read at report time): CUBLAS_WORKSPACE_CONFIG,
// NVIDIA_TF32_OVERRIDE, CUDA_LAUNCH_BLOCKING, OMP_NUM_THREADS, SAMEBITS_NUM_THREADS, and more.
// Every SAMEBITS_* variable that is set is reported as well.
const std::vector<std::string>& result_affecting_variables();

} // namespace samebits
