// samebits._core's side of torch_mode_api.hpp: the table of ops the drop-in mode's C++ kernels
// call, and _raise_pending, which raises the error an op of the table caught.
#include "torch_mode_api.hpp"

#include "arrays.hpp"

#include <algorithm>
#include <exception>

namespace samebits::python {

namespace {

thread_local std::exception_ptr pending; // the error the last failed table call caught

Options options_at(int level, void* stream) {
  Options o;
  o.level = static_cast<Determinism>(level);
  o.stream.handle = stream;
  return o;
}

template <class F> ApiResult guarded(F&& op) noexcept {
  try {
    op();
    return ApiResult::ok;
  } catch (const NondeterministicError&) {
    pending = std::current_exception();
    return ApiResult::nondeterministic;
  } catch (...) {
    pending = std::current_exception();
    return ApiResult::other;
  }
}

ApiResult api_index_add(const TensorView& out, const TensorView& index, const TensorView& src,
                        double alpha, int level, void* stream) {
  return guarded([&] { index_add(out, index, src, alpha, options_at(level, stream)); });
}

ApiResult api_scatter_add(const TensorView& out, int dim, const TensorView& index,
                          const TensorView& src, int level, void* stream) {
  return guarded([&] { scatter_add(out, dim, index, src, options_at(level, stream)); });
}

ApiResult api_scatter_reduce(const TensorView& out, int dim, const TensorView& index,
                             const TensorView& src, int reduce, bool include_self, int level,
                             void* stream) {
  return guarded([&] {
    scatter_reduce(out, dim, index, src, static_cast<Reduce>(reduce), include_self,
                   options_at(level, stream));
  });
}

int api_parse_level(const char* name) {
  try {
    return static_cast<int>(parse_determinism(name));
  } catch (const Error&) {
    return -1;
  }
}

int api_parse_reduce(const char* name) {
  try {
    return static_cast<int>(parse_reduce(name));
  } catch (const Error&) {
    return -1;
  }
}

ApiResult api_trace_digest_host(const TensorView& t, std::int64_t stats_elements,
                                TraceValues* out) {
  return guarded([&] {
    const trace::Digest d = trace::digest(t, stats_elements);
    *out = TraceValues{};
    out->sum_hash = d.sum_hash;
    out->min = d.min;
    out->max = d.max;
    out->sum = d.sum;
    out->l2 = d.l2;
    out->nan_count = d.nan_count;
    out->stride = d.stride;
    out->samples_taken = static_cast<std::int64_t>(d.samples.size());
    std::copy(d.samples.begin(), d.samples.end(), out->samples);
  });
}

ApiResult api_trace_digest_device(const TensorView& t, std::int64_t stats_elements,
                                  trace::DeviceDigest* record, void* stream) {
  return guarded([&] { trace::digest_on_device(t, stats_elements, record, Stream{stream}); });
}

std::uint64_t api_sum_hash_bytes(const void* data, std::size_t nbytes) {
  return trace::sum_hash_bytes(data, nbytes);
}

const TorchModeApi kApi{kTorchModeApiVersion,  api_index_add,           api_scatter_add,
                        api_scatter_reduce,    api_parse_level,         api_parse_reduce,
                        api_trace_digest_host, api_trace_digest_device, api_sum_hash_bytes};

} // namespace

void bind_torch_mode_api(nb::module_& m) {
  m.attr("_torch_mode_api") = nb::capsule(static_cast<const void*>(&kApi), kTorchModeApiName);
  // Raises (as its samebits class) the error the last failed table call on this thread caught.
  m.def("_raise_pending", [] {
    std::exception_ptr p = pending;
    pending = nullptr;
    if (!p)
      throw Error("samebits._core._raise_pending: no error is pending");
    std::rethrow_exception(p);
  });
}

} // namespace samebits::python
