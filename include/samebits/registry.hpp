// What ops and variants exist, and what selection would pick: the public face of the registry,
// used by `samebits ops` and by anyone who wants to know before calling.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace samebits {

struct VariantInfo {
  std::string op;
  std::string name; // e.g. "cpu.sorted_segments"
  DeviceType backend = DeviceType::cpu;
  Determinism level = Determinism::not_guaranteed; // the strongest level it guarantees
  std::string technique; // one line: how it works and why it is (or is not) deterministic
};

// All ops samebits knows, in a fixed order.
std::vector<std::string> op_names();
// Variants of one op (all ops when `op` is empty), in preference order per backend.
std::vector<VariantInfo> list_variants(std::string_view op = {});

struct SelectionPreview {
  bool runs = false;     // false: the call would throw NondeterministicError
  bool degraded = false; // true: warn-only mode would run a weaker variant
  std::string variant;   // the variant that would run
  std::string explain;   // why
};
// What a call of `op` on `backend` would run at `level`, for arguments every variant accepts.
SelectionPreview preview_selection(std::string_view op, DeviceType backend, Determinism level,
                                   bool warn_only = false);

// The kernel each CUDA variant of an op launches for one shape, and the variant each backend
// runs at every level: the families' kernel choice is a pure function of the shape and the launch
// tuning, so this needs no GPU. `shape` is the op's main input (src, x, the index of bincount);
// `rows` the output rows (scatter targets, segments, bins; 0: shape[0]); `dim` the dim of cumsum
// and sum_dim (negative: from the end). It assumes the default tuning and contiguous, aligned
// tensors, and says so (and names any device property it assumes) in its last line.
struct KernelQuery {
  std::string op;
  std::vector<std::int64_t> shape;
  std::int64_t rows = 0;
  int dim = -1;
  DType dtype = DType::f32;
};
std::string explain_kernel_choice(const KernelQuery& q);

} // namespace samebits
