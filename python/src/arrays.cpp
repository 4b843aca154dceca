// Python arrays as TensorViews (see arrays.hpp), and samebits tensors back as DLPack arrays.
#include "arrays.hpp"

#include <array>
#include <memory>

namespace samebits::python {

namespace {

// The dtypes samebits takes, in DType order (DType's value is the index), as torch names them.
constexpr std::array<const char*, 6> kDTypeNames = {"float32", "float64",  "int32",
                                                    "int64",   "bfloat16", "float16"};
constexpr const char* kDTypeList = "float32, float64, bfloat16, float16, int32 or int64";

// torch's Tensor type and its dtypes, looked up once torch has been imported (the package imports
// it first where it is installed; without it, no argument can be a torch tensor).
struct TorchTypes {
  PyObject* tensor = nullptr;
  std::array<PyObject*, kDTypeNames.size()> dtypes{}; // DType order
};

const TorchTypes* torch_types() {
  static TorchTypes types;
  static bool ready = false;
  if (ready)
    return types.tensor ? &types : nullptr;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* torch = PyDict_GetItemString(modules, "torch"); // borrowed
  if (!torch)
    return nullptr; // not imported yet: look again next time
  nb::handle t(torch);
  types.tensor = nb::object(t.attr("Tensor")).release().ptr();
  for (std::size_t i = 0; i < kDTypeNames.size(); ++i)
    types.dtypes[i] = nb::object(t.attr(kDTypeNames[i])).release().ptr();
  ready = true;
  return &types;
}

[[noreturn]] void too_many_dims(const char* what, std::size_t ndim) {
  throw InvalidArgument(std::string(what) + ": " + std::to_string(ndim) +
                        " dimensions; samebits takes at most " + std::to_string(kMaxDims));
}

// The attribute and method names torch_view reads, interned once: a lookup by a C string would
// build a Python string on every call, and torch_view runs for every tensor of every call.
struct TorchNames {
  nb::object dtype, shape, stride, get_device, is_cpu, device, data_ptr;
};
const TorchNames& torch_names() {
  static const TorchNames names = [] {
    auto intern = [](const char* s) { return nb::steal(PyUnicode_InternFromString(s)); };
    return TorchNames{intern("dtype"),  intern("shape"),  intern("stride"),  intern("get_device"),
                      intern("is_cpu"), intern("device"), intern("data_ptr")};
  }();
  return names;
}

// obj.name() for an interned name, without a bound method object in between.
nb::object call_method(nb::handle obj, const nb::object& name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj.ptr(), name.ptr());
  if (r == nullptr)
    throw nb::python_error();
  return nb::steal(r);
}

TensorView torch_view(nb::handle obj, const TorchTypes& types, const char* what) {
  const TorchNames& n = torch_names();
  TensorView v;
  nb::object dtype = obj.attr(n.dtype);
  int code = -1;
  for (std::size_t i = 0; i < types.dtypes.size(); ++i)
    if (dtype.ptr() == types.dtypes[i])
      code = static_cast<int>(i);
  if (code < 0)
    throw InvalidArgument(std::string(what) + ": dtype " + nb::str(dtype).c_str() +
                          " is not supported (" + kDTypeList + ")");
  v.dtype = static_cast<DType>(code);
  nb::tuple shape = nb::borrow<nb::tuple>(obj.attr(n.shape));
  nb::tuple strides = nb::borrow<nb::tuple>(call_method(obj, n.stride));
  std::size_t ndim = shape.size();
  if (ndim > static_cast<std::size_t>(kMaxDims))
    too_many_dims(what, ndim);
  v.ndim = static_cast<int>(ndim);
  for (std::size_t d = 0; d < ndim; ++d) {
    v.shape[d] = nb::cast<std::int64_t>(shape[d]);
    v.strides[d] = nb::cast<std::int64_t>(strides[d]);
  }
  int index = nb::cast<int>(call_method(obj, n.get_device));
  if (index >= 0)
    v.device = Device::cuda(index);
  else if (!nb::cast<bool>(obj.attr(n.is_cpu)))
    throw InvalidArgument(std::string(what) + ": device " + nb::str(obj.attr(n.device)).c_str() +
                          " is not supported (cpu or cuda)");
  v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(call_method(obj, n.data_ptr)));
  return v;
}

// DLPack's element types of bfloat16 and float16 (nanobind names no C++ type for them).
constexpr nb::dlpack::dtype kDLBfloat16{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat),
                                        16, 1};
constexpr nb::dlpack::dtype kDLFloat16{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16,
                                       1};

nb::dlpack::dtype dlpack_dtype(DType t) {
  switch (t) {
  case DType::f32:
    return nb::dtype<float>();
  case DType::f64:
    return nb::dtype<double>();
  case DType::i32:
    return nb::dtype<std::int32_t>();
  case DType::i64:
    return nb::dtype<std::int64_t>();
  case DType::bf16:
    return kDLBfloat16;
  case DType::f16:
    return kDLFloat16;
  }
  throw InvalidArgument("to_array: unknown dtype");
}

TensorView dlpack_view(nb::handle obj, const char* what) {
  nb::ndarray<> a;
  if (!nb::try_cast(obj, a, false))
    throw InvalidArgument(
        std::string(what) + ": expected an array (a torch tensor, or any object " +
        "with __dlpack__ or the buffer protocol), got " + nb::type_name(obj.type()).c_str());
  TensorView v;
  nb::dlpack::dtype t = a.dtype();
  if (t == nb::dtype<float>())
    v.dtype = DType::f32;
  else if (t == nb::dtype<double>())
    v.dtype = DType::f64;
  else if (t == nb::dtype<std::int32_t>())
    v.dtype = DType::i32;
  else if (t == nb::dtype<std::int64_t>())
    v.dtype = DType::i64;
  else if (t == kDLBfloat16)
    v.dtype = DType::bf16;
  else if (t == kDLFloat16)
    v.dtype = DType::f16;
  else
    throw InvalidArgument(std::string(what) + ": element type (DLPack code " +
                          std::to_string(t.code) + ", " + std::to_string(t.bits) +
                          " bits) is not supported (" + kDTypeList + ")");
  if (a.ndim() > static_cast<std::size_t>(kMaxDims))
    too_many_dims(what, a.ndim());
  v.ndim = static_cast<int>(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    v.shape[d] = static_cast<std::int64_t>(a.shape(d));
    v.strides[d] = a.stride(d);
  }
  if (a.device_type() == nb::device::cuda::value)
    v.device = Device::cuda(a.device_id());
  else if (a.device_type() != nb::device::cpu::value)
    throw InvalidArgument(std::string(what) + ": DLPack device type " +
                          std::to_string(a.device_type()) + " is not supported (cpu or cuda)");
  v.data = a.data();
  return v;
}

} // namespace

TensorView to_view(nb::handle obj, const char* what) {
  if (const TorchTypes* types = torch_types())
    if (PyObject_IsInstance(obj.ptr(), types->tensor) == 1)
      return torch_view(obj, *types, what);
  return dlpack_view(obj, what);
}

nb::object to_array(const Tensor& t) {
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const TensorView& v = t.view();
  std::array<std::size_t, kMaxDims> shape{};
  for (int d = 0; d < v.ndim; ++d)
    shape[static_cast<std::size_t>(d)] =
        static_cast<std::size_t>(v.shape[static_cast<std::size_t>(d)]);
  nb::dlpack::dtype dt = dlpack_dtype(v.dtype);
  int device = v.device.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
  nb::ndarray<nb::array_api> a(v.data, static_cast<std::size_t>(v.ndim), shape.data(), owner,
                               v.strides.data(), dt, device,
                               v.device.is_cuda() ? v.device.index : 0);
  return nb::cast(a);
}

Options options(const std::optional<std::string>& level, std::uintptr_t stream) {
  Options o;
  if (level)
    o.level = parse_determinism(*level);
  o.stream.handle = reinterpret_cast<void*>(stream);
  return o;
}

} // namespace samebits::python
