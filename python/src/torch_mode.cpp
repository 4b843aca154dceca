// samebits._torch_mode: the drop-in mode's kernels for torch's scatters (index_add, scatter_add,
// scatter_reduce, functional and in place) and for index_put_ with accumulate=True, in C++. While
// the mode is on they are the aten kernels of those ops on the CPU and CUDA dispatch keys, so a
// covered call costs what torch's own kernel costs on the host plus samebits' work, with no Python
// in between. They do what the mode's Python kernels (python/samebits/torch/mode.py) do, and hand a
// call to them whenever it is not the plain case:
// - arguments samebits does not take (another dtype or device, a sparse tensor) run torch's own
//   kernel, which the override keeps, as there;
// - a call samebits refuses with NondeterministicError runs the Python kernel, which falls back to
//   torch's deterministic kernel at run_to_run with its warning, or raises;
// - any other error is raised as the samebits exception it is (samebits._core._raise_pending).
// Each op reaches the library through samebits._core's table (torch_mode_api.hpp). The module
// also holds samebits.torch.trace's C++ recorder (trace_recorder.cpp).
#include "torch_mode_api.hpp"
#include "torch_tensors.hpp"
#include "trace_recorder.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <array>
#include <atomic>
#include <c10/util/Exception.h>
#include <limits>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <string>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>
#include <vector>

namespace nb = nanobind;

namespace samebits::python {

namespace {

// --- the covered ops --------------------------------------------------------------------------

enum class Op : int {
  index_add,
  index_add_,
  scatter_add,
  scatter_add_,
  scatter_reduce,
  scatter_reduce_,
  index_put_impl_,
};
constexpr std::size_t kOps = 7;
// aten names, as the mode's calls() counts them.
constexpr std::array<const char*, kOps> kNames = {
    "index_add",          "index_add_",          "scatter_add",     "scatter_add_",
    "scatter_reduce.two", "scatter_reduce_.two", "_index_put_impl_"};
constexpr bool in_place(Op op) {
  return op == Op::index_add_ || op == Op::scatter_add_ || op == Op::scatter_reduce_ ||
         op == Op::index_put_impl_;
}

enum Key : int { kCpu = 0, kCuda = 1 };
constexpr std::size_t kKeys = 2;

// What install() set up: the kernels it overrode, the Python kernel of each op and key, and the
// registrations (dropping them gives torch's kernels back).
struct Installed {
  std::array<std::array<std::optional<c10::SafeKernelFunction>, kKeys>, kOps> torch_kernels;
  std::array<std::array<nb::object, kKeys>, kOps> python_kernels;
  std::vector<std::unique_ptr<torch::Library>> libraries;
};

const TorchModeApi* api = nullptr;
nb::handle raise_pending; // samebits._core._raise_pending (kept for the life of the process)
// What is installed, shared with the calls in flight: uninstall() may run while another thread is
// inside a kernel, which keeps what it uses until it returns. Never destroyed at exit (after
// Python has ended, the Python kernels could not be released).
auto* const installed = new std::atomic<std::shared_ptr<Installed>>();

std::shared_ptr<Installed> current() {
  return installed->load();
}

// Releases an Installed with the GIL held (it holds Python objects); the last call in flight may
// drop it on a thread without the GIL.
void release(Installed* state) {
  pybind11::gil_scoped_acquire gil;
  delete state;
}
std::atomic<int> level{1};                         // a Determinism value
std::array<std::atomic<std::int64_t>, kOps> calls; // samebits' calls per op
thread_local bool torch_kernel = false;   // inside a fallback to torch's kernel: torch's all down
std::atomic<bool> refuse_for_test{false}; // every call as if samebits had no variant for it

// --- tensors as views ---------------------------------------------------------------------------

bool value_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// A view of t, or none past samebits' dims (the Python kernel then says so).
std::optional<TensorView> view_of(const at::Tensor& t) {
  const std::optional<DType> dt = dtype_of(t.scalar_type());
  if (!dt || t.dim() > kMaxDims)
    return std::nullopt;
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = *dt;
  v.device = t.is_cuda() ? Device::cuda(t.get_device()) : Device::cpu();
  v.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[static_cast<std::size_t>(d)] = t.size(d);
    v.strides[static_cast<std::size_t>(d)] = t.stride(d);
  }
  return v;
}

// v with dimension `dim` moved first (torch's movedim(dim, 0)).
TensorView moved_first(TensorView v, int dim) {
  const auto at = static_cast<std::size_t>(dim);
  const std::int64_t size = v.shape[at], stride = v.strides[at];
  for (std::size_t d = at; d > 0; --d) {
    v.shape[d] = v.shape[d - 1];
    v.strides[d] = v.strides[d - 1];
  }
  v.shape[0] = size;
  v.strides[0] = stride;
  return v;
}

TensorView one_element(TensorView v) {
  v.ndim = 1;
  v.shape[0] = 1;
  v.strides[0] = 1;
  return v;
}

// The tensors samebits takes: strided CPU or CUDA tensors of one value dtype (float32, float64,
// bfloat16, float16) on one device, the index there too, strided, of `index_dtype` or (for
// at::kLong) int64 or int32.
bool takes(const at::Tensor& self, const at::Tensor& src, const at::Tensor& index,
           at::ScalarType index_dtype = at::kLong) {
  if (!self.defined() || !src.defined() || !index.defined())
    return false;
  const at::ScalarType dt = self.scalar_type();
  const at::ScalarType it = index.scalar_type();
  if (!value_dtype(dt) || src.scalar_type() != dt ||
      !(it == index_dtype || (index_dtype == at::kLong && it == at::kInt)))
    return false;
  if (self.layout() != at::kStrided || src.layout() != at::kStrided ||
      index.layout() != at::kStrided)
    return false;
  if (!(self.is_cpu() || self.is_cuda()) || src.device() != self.device() ||
      index.device() != self.device())
    return false;
  return true;
}

// --- the ops, as the Python kernels run them ----------------------------------------------------

// samebits index_add along `dim` (moved first); false when the call is not the plain case.
std::optional<ApiResult> index_add_into(const at::Tensor& out, std::int64_t dim,
                                        const at::Tensor& index, const at::Tensor& src,
                                        double alpha) {
  std::optional<TensorView> o = view_of(out), i = view_of(index), s = view_of(src);
  if (!o || !i || !s)
    return std::nullopt;
  const int nd = o->ndim;
  if (dim < 0)
    dim += std::max(nd, 1);
  if (nd == 0) {
    if (src.numel() != 1)
      return std::nullopt;
    o = one_element(*o);
    s = one_element(*s);
  } else if (dim != 0) {
    if (dim < 0 || dim >= nd || dim >= s->ndim)
      return std::nullopt;
    o = moved_first(*o, static_cast<int>(dim));
    s = moved_first(*s, static_cast<int>(dim));
  }
  if (i->ndim == 0)
    i = one_element(*i);
  return api->index_add(*o, *i, *s, alpha, level.load(std::memory_order_relaxed), stream_of(out));
}

// PyG's scatter passes index.view(-1, 1).expand_as(src): a vector repeated (stride 0) along every
// dim but `dim`. Then scatter_add along dim is an index_add of whole slices (a row scatter).
std::optional<TensorView> row_index(int dim, const at::Tensor& index, const at::Tensor& src) {
  if (index.dim() < 2 || index.sizes() != src.sizes())
    return std::nullopt;
  for (int d = 0; d < index.dim(); ++d)
    if (index.stride(d) != 0 && d != dim && index.size(d) != 1)
      return std::nullopt;
  std::optional<TensorView> v = view_of(index);
  if (!v)
    return std::nullopt;
  const auto at = static_cast<std::size_t>(dim);
  v->ndim = 1;
  v->shape[0] = v->shape[at];
  v->strides[0] = v->strides[at];
  return v;
}

// dim modulo out's dims (at least 1), as Python's % wraps it: the scatters' dim rule in the mode.
std::int64_t wrapped_dim(std::int64_t dim, const at::Tensor& out) {
  const std::int64_t nd = std::max<std::int64_t>(out.dim(), 1);
  return ((dim % nd) + nd) % nd;
}

std::optional<ApiResult> scatter_add_into(const at::Tensor& out, std::int64_t dim,
                                          const at::Tensor& index, const at::Tensor& src) {
  dim = wrapped_dim(dim, out);
  if (const std::optional<TensorView> rows = row_index(static_cast<int>(dim), index, src)) {
    bool slices = src.dim() == out.dim();
    for (std::int64_t d = 0; slices && d < out.dim(); ++d)
      slices = d == dim || out.size(d) == src.size(d);
    if (slices) {
      std::optional<TensorView> o = view_of(out), s = view_of(src);
      if (!o || !s)
        return std::nullopt;
      if (dim != 0) {
        o = moved_first(*o, static_cast<int>(dim));
        s = moved_first(*s, static_cast<int>(dim));
      }
      return api->index_add(*o, *rows, *s, 1.0, level.load(std::memory_order_relaxed),
                            stream_of(out));
    }
  }
  std::optional<TensorView> o = view_of(out), i = view_of(index), s = view_of(src);
  if (!o || !i || !s)
    return std::nullopt;
  return api->scatter_add(*o, static_cast<int>(dim), *i, *s, level.load(std::memory_order_relaxed),
                          stream_of(out));
}

std::optional<ApiResult> scatter_reduce_into(const at::Tensor& out, std::int64_t dim,
                                             const at::Tensor& index, const at::Tensor& src,
                                             int reduce, bool include_self) {
  std::optional<TensorView> o = view_of(out), i = view_of(index), s = view_of(src);
  if (!o || !i || !s)
    return std::nullopt;
  dim = wrapped_dim(dim, out);
  return api->scatter_reduce(*o, static_cast<int>(dim), *i, *s, reduce, include_self,
                             level.load(std::memory_order_relaxed), stream_of(out));
}

// Whether a CPU index vector (int64 or int32, any stride) holds a negative value.
bool has_negative(const at::Tensor& index) {
  const std::int64_t n = index.size(0), step = index.stride(0);
  auto any_below_zero = [&](const auto* p) {
    for (std::int64_t i = 0; i < n; ++i)
      if (p[i * step] < 0)
        return true;
    return false;
  };
  return index.scalar_type() == at::kLong ? any_below_zero(index.const_data_ptr<std::int64_t>())
                                          : any_below_zero(index.const_data_ptr<std::int32_t>());
}

// The positions of a CPU mask's set elements (row-major) as int64, read here; undefined unless
// there are exactly n (torch's kernel then raises its error).
at::Tensor set_positions(const at::Tensor& mask, std::int64_t n) {
  const at::Tensor flat = mask.reshape({-1}).contiguous();
  at::Tensor rows = flat.new_empty({n}, flat.options().dtype(at::kLong));
  const bool* set = flat.const_data_ptr<bool>();
  std::int64_t* out = rows.mutable_data_ptr<std::int64_t>();
  std::int64_t count = 0;
  for (std::int64_t i = 0, m = flat.numel(); i < m; ++i)
    if (set[i]) {
      if (count == n)
        return {};
      out[count++] = i;
    }
  return count == n ? rows : at::Tensor();
}

// index_put_(self, (index,), values, accumulate=True) when it is an index_add of rows along
// dim 0: one index, values of exactly the indexing result's shape (no broadcast). The index is
// - a vector of int64 or int32 row numbers into self, negative ones counting from the end (as
//   torch's), or
// - a bool mask over self's leading dims (self contiguous) with unsafe=true: what autograd passes
//   for the backward of x[mask], whose values have a row for each set element by construction.
//   On CUDA its rows come from nonzero_static, sized by values' rows, so unlike torch's nonzero
//   the host does not wait for the device to count them. Should a caller pass fewer set elements
//   than values has rows, the padding rows (self's row count) are out of range and samebits'
//   index check reports them; more are not detected (torch's caller vouches for the shapes with
//   unsafe). One value row is left to torch's kernel on CUDA: it may be broadcast over several
//   set elements. A CPU mask is read here, and a count that differs goes to torch's kernel.
// Anything else: none (the Python kernel serves it). The caller has checked that samebits takes
// the tensors (takes()).
std::optional<ApiResult> index_put_into(const at::Tensor& self, const at::Tensor& index,
                                        const at::Tensor& values, bool unsafe) {
  const bool mask = index.scalar_type() == at::kBool;
  const std::int64_t k = mask ? index.dim() : 1; // self's dims the index covers
  if (self.dim() < std::max<std::int64_t>(k, 1) || values.dim() != self.dim() - k + 1 ||
      values.sizes().slice(1) != self.sizes().slice(static_cast<std::size_t>(k)))
    return std::nullopt;
  at::Tensor target = self, rows;
  if (mask) {
    // (nonzero_static counts in int: a mask or row count past that is torch's.)
    const std::int64_t n = values.size(0), m = index.numel();
    constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
    if (!unsafe || k < 1 || !self.is_contiguous() || n > kIntMax || m > kIntMax ||
        index.sizes() != self.sizes().slice(0, static_cast<std::size_t>(k)))
      return std::nullopt;
    if (index.is_cuda() && n == 1)
      return std::nullopt;
    std::vector<std::int64_t> shape{m};
    shape.insert(shape.end(), self.sizes().begin() + k, self.sizes().end());
    target = self.view(shape);
    rows = index.is_cpu() ? set_positions(index, n)
                          : index.reshape({-1}).nonzero_static(n, m).view({-1});
    if (!rows.defined())
      return std::nullopt;
  } else {
    if (index.dim() != 1 || values.size(0) != index.size(0))
      return std::nullopt;
    // Negative row numbers count from the end. A CPU index is read here: without negatives (the
    // common case) it is used as it is, with no new tensor.
    rows = index.is_cpu() && !has_negative(index)
               ? index
               : index.add(self.size(0)).where(index.lt(0), index);
  }
  std::optional<TensorView> o = view_of(target), i = view_of(rows), s = view_of(values);
  if (!o || !i || !s)
    return std::nullopt;
  return api->index_add(*o, *i, *s, 1.0, level.load(std::memory_order_relaxed), stream_of(self));
}

// --- Python: the mode's kernels and samebits' errors ------------------------------------------

// The Python error now set, thrown so that torch raises it unchanged in Python.
[[noreturn]] void throw_python_error() {
  python_error e;
  e.persist();
  throw e;
}

nb::object as_python(const c10::IValue& v) {
  if (v.isTensor())
    return nb::steal(THPVariable_Wrap(v.toTensor()));
  if (v.isInt())
    return nb::int_(v.toInt());
  if (v.isDouble())
    return nb::float_(v.toDouble());
  if (v.isBool())
    return nb::bool_(v.toBool());
  if (v.isString())
    return nb::str(v.toStringRef().c_str());
  if (v.isScalar()) {
    const c10::Scalar s = v.toScalar();
    if (s.isBoolean())
      return nb::bool_(s.toBool());
    if (s.isIntegral(false))
      return nb::int_(s.toLong());
    return nb::float_(s.toDouble());
  }
  if (v.isNone())
    return nb::none();
  if (v.isList()) { // index_put_'s indices: tensors and Nones
    nb::list items;
    for (const c10::IValue& item : v.toListRef())
      items.append(as_python(item));
    return items;
  }
  throw std::runtime_error("samebits._torch_mode: an argument of unexpected kind " + v.tagKind());
}

// Runs the op's Python kernel on the call's arguments (the last n on the stack; from `first_kw`
// on they are keyword-only, named kw_names) and leaves its result there in their place.
void run_python_kernel(const Installed& state, Op op, Key key, torch::jit::Stack* stack,
                       std::size_t n, std::size_t first_kw,
                       const std::vector<const char*>& kw_names) {
  pybind11::gil_scoped_acquire gil;
  auto args = torch::jit::last(*stack, n);
  nb::object fn = state.python_kernels[static_cast<std::size_t>(op)][key];
  nb::object result;
  try {
    nb::list positional;
    nb::dict keywords;
    for (std::size_t a = 0; a < n; ++a) {
      if (a < first_kw)
        positional.append(as_python(args[a]));
      else
        keywords[kw_names[a - first_kw]] = as_python(args[a]);
    }
    result = fn(*nb::tuple(positional), **keywords);
  } catch (nb::python_error& e) {
    e.restore();
    throw_python_error();
  }
  if (!THPVariable_Check(result.ptr()))
    throw std::runtime_error("samebits._torch_mode: the Python kernel of aten::" +
                             std::string(kNames[static_cast<std::size_t>(op)]) +
                             " returned something other than a tensor");
  at::Tensor out = THPVariable_Unpack(result.ptr());
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out));
}

// Raises samebits' exception for the call that failed (its class and message).
[[noreturn]] void raise_samebits_error() {
  pybind11::gil_scoped_acquire gil;
  PyObject* r = PyObject_CallNoArgs(raise_pending.ptr());
  Py_XDECREF(r);
  throw_python_error();
}

// --- the kernels
// ----------------------------------------------------------------------------------

struct Call {
  std::size_t n;                     // arguments on the stack
  std::size_t first_kw;              // the first keyword-only one
  std::vector<const char*> kw_names; // their names
};

const Call& call_of(Op op) {
  static const Call index_add{5, 4, {"alpha"}};
  static const Call scatter_add{4, 4, {}};
  static const Call scatter_reduce{6, 5, {"include_self"}};
  static const Call index_put{5, 5, {}};
  switch (op) {
  case Op::index_add:
  case Op::index_add_:
    return index_add;
  case Op::scatter_add:
  case Op::scatter_add_:
    return scatter_add;
  case Op::index_put_impl_:
    return index_put;
  default:
    return scatter_reduce;
  }
}

// index_put_ with accumulate=True and one index (index_put_into), the call on the stack.
std::optional<ApiResult> run_index_put(c10::ArrayRef<c10::IValue> args, at::Tensor& result) {
  if (!args[3].toBool()) // no accumulation: torch's kernel
    return std::nullopt;
  // Other calls with accumulate=True (several indices, broadcast values): the Python kernel.
  constexpr std::optional<ApiResult> python = ApiResult::nondeterministic;
  const at::Tensor& self = args[0].toTensor();
  const c10::List<std::optional<at::Tensor>> indices = args[1].toOptionalTensorList();
  if (indices.size() != 1)
    return python;
  const std::optional<at::Tensor> index = indices.get(0);
  if (!index || !index->defined())
    return python;
  const at::Tensor& values = args[2].toTensor();
  if (!takes(self, values, *index, index->scalar_type() == at::kBool ? at::kBool : at::kLong))
    return python;
  if (refuse_for_test.load(std::memory_order_relaxed))
    return ApiResult::nondeterministic;
  constexpr auto op = static_cast<std::size_t>(Op::index_put_impl_);
  calls[op].fetch_add(1, std::memory_order_relaxed);
  const std::optional<ApiResult> r = index_put_into(self, *index, values, args[4].toBool());
  if (r == ApiResult::ok)
    result = self;
  else
    calls[op].fetch_sub(1, std::memory_order_relaxed);
  return r ? r : python; // not the plain case
}

// samebits' run of the call on the stack: its result, or none when the call is not samebits'
// (torch's kernel runs it).
std::optional<ApiResult> run_samebits(Op op, c10::ArrayRef<c10::IValue> args, at::Tensor& result) {
  if (op == Op::index_put_impl_)
    return run_index_put(args, result);
  const at::Tensor& self = args[0].toTensor();
  const std::int64_t dim = args[1].toInt();
  const at::Tensor& index = args[2].toTensor();
  const at::Tensor& src = args[3].toTensor();
  if (!takes(self, src, index))
    return std::nullopt;
  int reduce = 0;
  bool include_self = true;
  double alpha = 1.0;
  if (op == Op::index_add || op == Op::index_add_) {
    const c10::Scalar a = args[4].toScalar();
    if (a.isComplex())
      return std::nullopt;
    alpha = a.toDouble();
  } else if (op == Op::scatter_reduce || op == Op::scatter_reduce_) {
    // torch's names only (parse_reduce also takes samebits' "max" and "min")
    const std::string& name = args[4].toStringRef();
    if (!(name == "sum" || name == "prod" || name == "mean" || name == "amax" || name == "amin"))
      return std::nullopt;
    reduce = api->parse_reduce(name.c_str());
    include_self = args[5].toBool();
  }
  if (refuse_for_test.load(std::memory_order_relaxed))
    return ApiResult::nondeterministic;
  calls[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  result = in_place(op) ? self : self.clone(at::MemoryFormat::Contiguous);
  std::optional<ApiResult> r;
  if (op == Op::index_add || op == Op::index_add_)
    r = index_add_into(result, dim, index, src, alpha);
  else if (op == Op::scatter_add || op == Op::scatter_add_)
    r = scatter_add_into(result, dim, index, src);
  else
    r = scatter_reduce_into(result, dim, index, src, reduce, include_self);
  if (!r || *r != ApiResult::ok)
    calls[static_cast<std::size_t>(op)].fetch_sub(1, std::memory_order_relaxed);
  return r ? r : std::optional<ApiResult>(ApiResult::nondeterministic); // not plain: Python's
}

template <Op op, Key key>
void kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const Call& call = call_of(op);
  std::optional<ApiResult> r;
  if (!torch_kernel) {
    at::Tensor result;
    r = run_samebits(op, torch::jit::last(*stack, call.n), result);
    if (r == ApiResult::ok) {
      torch::jit::drop(*stack, call.n);
      torch::jit::push(*stack, std::move(result));
      return;
    }
    if (r == ApiResult::other)
      raise_samebits_error();
  }
  // Another kernel runs the call: what install() kept (samebits' run above needs none of it).
  const std::shared_ptr<Installed> state = current();
  if (!state) // the mode ended as this call began: torch's kernel, now back, runs it
    return handle.redispatchBoxed(keys, stack);
  if (r == ApiResult::nondeterministic) // also what the C++ side leaves to Python
    return run_python_kernel(*state, op, key, stack, call.n, call.first_kw, call.kw_names);
  state->torch_kernels[static_cast<std::size_t>(op)][key]->callBoxed(handle, keys, stack);
}

template <Op op> void register_op(torch::Library& lib, Key key) {
  if (key == kCpu)
    lib.impl(kNames[static_cast<std::size_t>(op)],
             torch::CppFunction::makeFromBoxedFunction<&kernel<op, kCpu>>());
  else
    lib.impl(kNames[static_cast<std::size_t>(op)],
             torch::CppFunction::makeFromBoxedFunction<&kernel<op, kCuda>>());
}

void register_kernel(torch::Library& lib, Op op, Key key) {
  switch (op) {
  case Op::index_add:
    return register_op<Op::index_add>(lib, key);
  case Op::index_add_:
    return register_op<Op::index_add_>(lib, key);
  case Op::scatter_add:
    return register_op<Op::scatter_add>(lib, key);
  case Op::scatter_add_:
    return register_op<Op::scatter_add_>(lib, key);
  case Op::scatter_reduce:
    return register_op<Op::scatter_reduce>(lib, key);
  case Op::scatter_reduce_:
    return register_op<Op::scatter_reduce_>(lib, key);
  case Op::index_put_impl_:
    return register_op<Op::index_put_impl_>(lib, key);
  }
}

// torch warns when an aten kernel is overridden: that is what the mode does.
struct Silent : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// Overrides the covered ops named in python_kernels ({name: {"CPU": fn, "CUDA": fn}}, the mode's
// Python kernel of each, with its key set bound) on the keys that have a kernel for them; returns
// what it overrode, as "name:KEY".
std::vector<std::string> install(const std::string& level_name, nb::dict python_kernels) {
  if (current())
    throw std::runtime_error("samebits._torch_mode.install: already installed");
  const int lv = api->parse_level(level_name.c_str());
  if (lv < 0)
    throw std::invalid_argument("samebits._torch_mode.install: unknown level " + level_name);
  level.store(lv);
  auto state = std::make_unique<Installed>();
  Silent silent;
  c10::WarningUtils::WarningHandlerGuard quiet(&silent);
  std::vector<std::string> done;
  constexpr std::array<std::pair<Key, c10::DispatchKey>, kKeys> keys = {
      std::pair{kCpu, c10::DispatchKey::CPU}, std::pair{kCuda, c10::DispatchKey::CUDA}};
  for (auto [key, dispatch_key] : keys) {
#if !SAMEBITS_TORCH_MODE_CUDA
    if (key == kCuda)
      continue;
#endif
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", dispatch_key,
                                                __FILE__, __LINE__);
    const char* key_name = key == kCpu ? "CPU" : "CUDA";
    for (std::size_t o = 0; o < kOps; ++o) {
      const std::string name = kNames[o];
      if (!python_kernels.contains(name.c_str()))
        continue;
      nb::dict per_key = nb::cast<nb::dict>(python_kernels[name.c_str()]);
      if (!per_key.contains(key_name))
        continue;
      const auto dot = name.find('.');
      const std::string base = "aten::" + name.substr(0, dot);
      const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
      const c10::OperatorHandle handle =
          c10::Dispatcher::singleton().findSchemaOrThrow(base.c_str(), overload.c_str());
      if (!handle.hasKernelForDispatchKey(dispatch_key))
        continue;
      state->torch_kernels[o][key] = handle.getComputedKernelForDispatchKey(dispatch_key);
      state->python_kernels[o][key] = per_key[key_name];
      register_kernel(*lib, static_cast<Op>(o), key);
      done.push_back(name + ":" + key_name);
    }
    state->libraries.push_back(std::move(lib));
  }
  installed->store(std::shared_ptr<Installed>(state.release(), release));
  return done;
}

void uninstall() {
  const std::shared_ptr<Installed> state = current();
  if (!state)
    return;
  state->libraries.clear(); // torch's kernels are back from here on: no call starts in ours
  installed->store(nullptr);
}

} // namespace

} // namespace samebits::python

using namespace samebits::python;

NB_MODULE(_torch_mode, m) {
  m.doc() = "the drop-in mode's C++ kernels (samebits.torch.mode installs them)";
  nb::module_ core = nb::module_::import_("samebits._core");
  api = static_cast<const TorchModeApi*>(
      PyCapsule_GetPointer(core.attr("_torch_mode_api").ptr(), kTorchModeApiName));
  if (!api)
    throw nb::python_error();
  if (api->version != kTorchModeApiVersion)
    throw std::runtime_error("samebits._torch_mode: samebits._core is of another build");
  raise_pending = nb::object(core.attr("_raise_pending")).release();

  m.def("install", &install, nb::arg("level"), nb::arg("python_kernels"));
  m.def("uninstall", &uninstall);
  m.def("set_level", [](const std::string& name) {
    const int lv = api->parse_level(name.c_str());
    if (lv < 0)
      throw std::invalid_argument("samebits._torch_mode.set_level: unknown level " + name);
    level.store(lv);
  });
  m.def("set_torch_kernel", [](bool on) { torch_kernel = on; });
  // Tests: every covered call goes on as if samebits had refused it (NondeterministicError).
  m.def("_refuse_for_test", [](bool on) { refuse_for_test.store(on); });
  // samebits' calls per covered op since the last reset, as {name: count} (nonzero ones).
  m.def("calls", [] {
    nb::dict d;
    for (std::size_t o = 0; o < kOps; ++o)
      if (const std::int64_t c = calls[o].load())
        d[kNames[o]] = c;
    return d;
  });
  m.def("reset_calls", [] {
    for (auto& c : calls)
      c.store(0);
  });
  bind_trace_recorder(m, api);
  m.attr("cuda") = bool(SAMEBITS_TORCH_MODE_CUDA);
  m.attr("torch_version") = SAMEBITS_TORCH_VERSION; // the torch it was built against
}
