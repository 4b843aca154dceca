// samebits._core: the nanobind module. This file holds the core bindings (mode and levels, the
// environment report, errors, hashes); ops.cpp binds the ops. The Python package (samebits/)
// wraps these in its public API; nothing here is meant to be called by users directly.
#include "arrays.hpp"
#include "samebits/environment.hpp"
#include "samebits/stream.hpp"
#include "samebits/threads.hpp"
#include "samebits/trace.hpp"

#include <memory>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace samebits;

namespace samebits::python {
void bind_ops(nb::module_& m);
void bind_distributed(nb::module_& m);    // distributed.cpp
void bind_torch_mode_api(nb::module_& m); // torch_mode_api.cpp
} // namespace samebits::python

namespace {

// C++ exceptions become the classes of samebits._errors (defined in Python, where a class can
// have two bases: IndexOutOfRange is both an InvalidArgument and an IndexError). Messages are
// passed through unchanged.
void translate(const std::exception_ptr& p, void*) {
  auto raise = [](const char* name, const char* what) {
    nb::object cls = nb::module_::import_("samebits._errors").attr(name);
    PyErr_SetString(cls.ptr(), what);
  };
  try {
    std::rethrow_exception(p);
  } catch (const IndexOutOfRange& e) {
    raise("IndexOutOfRange", e.what());
  } catch (const InvalidArgument& e) {
    raise("InvalidArgument", e.what());
  } catch (const NondeterministicError& e) {
    raise("NondeterministicError", e.what());
  } catch (const BackendUnavailable& e) {
    raise("BackendUnavailable", e.what());
  } catch (const CudaError& e) {
    raise("CudaError", e.what());
  } catch (const OverflowError& e) {
    raise("OverflowError", e.what());
  } catch (const DataError& e) {
    raise("DataError", e.what());
  } catch (const Error& e) {
    raise("Error", e.what());
  }
}

// `with samebits.determinism(level):` holds one of these between __enter__ and __exit__; the C++
// guard is thread-local, as the Python context is.
struct Guard {
  Determinism level;
  std::optional<bool> warn_only;
  std::unique_ptr<DeterminismGuard> active;
};

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "samebits C++ bindings (use the samebits package, not this module)";
  nb::register_exception_translator(translate);

  m.def("version", [] { return std::string(version()); });
  m.def("git_revision", [] { return std::string(git_revision()); });
  m.def("cuda_available", &cuda_available);
  m.def("num_threads", &num_threads);
  m.def("set_num_threads", &set_num_threads);

  // Levels travel as their names; samebits.Level is a str enum of the same names.
  m.def("set_determinism", [](const std::string& level, bool warn_only) {
    set_mode({parse_determinism(level), warn_only});
  });
  m.def("mode", [] {
    Mode md = mode();
    return std::make_pair(std::string(to_string(md.level)), md.warn_only);
  });
  // The mode a call on this thread gets: the per-call level if given, else the innermost guard,
  // else the process-wide mode.
  m.def("effective_mode", [](const std::optional<std::string>& level) {
    Mode md = effective_mode(python::options(level, 0));
    return std::make_pair(std::string(to_string(md.level)), md.warn_only);
  });
  // How CUDA ops report a bad index (samebits/stream.hpp: CudaIndexChecks), as "wait"/"deferred".
  m.def("set_cuda_index_checks", [](const std::string& how) {
    if (how != "wait" && how != "deferred")
      throw InvalidArgument("index checks must be \"wait\" or \"deferred\", got \"" + how + "\"");
    set_cuda_index_checks(how == "wait" ? CudaIndexChecks::wait : CudaIndexChecks::deferred);
  });
  m.def("cuda_index_checks", [] {
    return std::string(cuda_index_checks() == CudaIndexChecks::wait ? "wait" : "deferred");
  });
  m.def("current_cuda_device", [] { return current_cuda_device(); });
  m.def("check_index_errors", [](int cuda_device) {
    nb::gil_scoped_release unlocked;
    check_index_errors(Device::cuda(cuda_device));
  });
  m.def("last_explain", [] { return last_explain(); });
  m.def("environment_json", [] { return environment_json(); });
  m.def("environment_text", [] { return environment_text(); });
  m.def("set_warning_handler", [](nb::object handler) {
    if (handler.is_none()) {
      set_warning_handler(nullptr);
      return;
    }
    // The handler is kept for the life of the process (a warning can come from any op).
    auto* keep = new nb::object(handler);
    set_warning_handler([keep](const std::string& text) {
      nb::gil_scoped_acquire gil;
      (*keep)(text);
    });
  });

  nb::class_<Guard>(m, "_Guard")
      .def(
          "__init__",
          [](Guard* g, const std::string& level, std::optional<bool> warn_only) {
            new (g) Guard{parse_determinism(level), warn_only, nullptr};
          },
          nb::arg("level"), nb::arg("warn_only").none() = nb::none())
      .def("__enter__",
           [](Guard& g) {
             if (g.active)
               throw InvalidArgument("samebits.determinism: this guard is already active");
             g.active = std::make_unique<DeterminismGuard>(g.level, g.warn_only);
             return std::string(to_string(g.level));
           })
      .def("__exit__", [](Guard& g, nb::args) { g.active.reset(); });

  m.def("content_hash",
        [](nb::handle x) { return content_hash(python::to_view(x, "content_hash")); });
  m.def("hash_hex", &hash_hex);
  // samebits.torch.trace's record of a host tensor (trace::digest): (sum_hash as an unsigned
  // 64-bit integer, min, max, sum, l2, NaN count, stride, samples); stats_elements 0 gives the
  // hash alone. The GIL is released while it reads the tensor.
  m.def("trace_digest", [](nb::handle x, std::int64_t stats_elements) {
    const TensorView v = python::to_view(x, "trace_digest");
    trace::Digest d;
    {
      nb::gil_scoped_release release;
      d = trace::digest(v, stats_elements);
    }
    return nb::make_tuple(d.sum_hash, d.min, d.max, d.sum, d.l2, d.nan_count, d.stride, d.samples);
  });
  // The same record of a contiguous CUDA tensor (trace::digest_on_device), queued on `stream`
  // with nothing read back: the tensor as its address, element count, dtype (the DType's value:
  // trace_dtype_code gives it) and device index; `record` is the address of a zeroed
  // trace::DeviceDigest on that device (trace_record_bytes long). Plain integers, so that a call
  // costs what nanobind's argument conversion costs (once per traced op).
  m.def("trace_digest_cuda", [](std::uintptr_t data, std::int64_t numel, int dtype, int device,
                                std::int64_t stats_elements, std::uintptr_t record,
                                std::uintptr_t stream) {
    if (dtype < 0 || dtype > static_cast<int>(DType::f16))
      throw InvalidArgument("trace_digest_cuda: " + std::to_string(dtype) + " is no dtype code");
    const TensorView v = TensorView::contiguous(
        reinterpret_cast<void*>(data), static_cast<DType>(dtype), Device::cuda(device), {numel});
    trace::digest_on_device(v, stats_elements, reinterpret_cast<trace::DeviceDigest*>(record),
                            Stream{reinterpret_cast<void*>(stream)});
  });
  m.def("trace_dtype_code",
        [](std::string_view name) { return static_cast<int>(parse_dtype(name)); });
  m.attr("trace_record_bytes") = sizeof(trace::DeviceDigest);
  m.def("bitwise_equal", [](nb::handle a, nb::handle b) {
    return bitwise_equal(python::to_view(a, "bitwise_equal: a"),
                         python::to_view(b, "bitwise_equal: b"));
  });

  // A contiguous samebits-owned copy of an array, returned through to_array: lets the tests check
  // every dtype's way back out (torch.from_dlpack, numpy.from_dlpack).
  m.def("_copy_for_test", [](nb::handle x) {
    return python::to_array(Tensor::copy_of(python::to_view(x, "_copy_for_test")));
  });

  // Throws the C++ exception named `kind` with `message`: lets the tests check every translation.
  m.def("_throw_for_test", [](const std::string& kind, const std::string& message) {
    if (kind == "IndexOutOfRange")
      throw IndexOutOfRange(message);
    if (kind == "InvalidArgument")
      throw InvalidArgument(message);
    if (kind == "NondeterministicError")
      throw NondeterministicError(message);
    if (kind == "BackendUnavailable")
      throw BackendUnavailable(message);
    if (kind == "CudaError")
      throw CudaError(message);
    if (kind == "OverflowError")
      throw OverflowError(message);
    if (kind == "DataError")
      throw DataError(message);
    throw Error(message);
  });

  python::bind_ops(m);
  python::bind_distributed(m);
  python::bind_torch_mode_api(m);
}
