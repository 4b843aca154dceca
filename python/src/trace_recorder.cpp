// samebits.torch.trace's C++ recorder: the entries that the Python recorder (a TorchDispatchMode,
// python/samebits/torch/tracing.py) writes, taken from torch's RecordFunction callbacks instead,
// so that an op costs no trip through Python unless it needs its source line.
//
// Which ops: the callbacks see every call into the dispatcher, composite ones and their callees
// alike. An op is recorded as the dispatch mode sees it: the outermost call on a thread that is not
// CompositeImplicitAutograd (those decompose above the mode; their callees are the ops), with
// everything it calls inside left out (the mode runs an op's kernel with itself switched off).
// The callbacks are thread-local: torch hands them to the autograd threads that run this thread's
// backward, as it hands over the dispatch mode.
//
// What an op records, as the Python recorder does (it answers the per-op questions that need
// torch's Python objects once per op, through `describe` and `classify`):
// - views and ops that make no values record nothing; a view's output keeps its base's producer;
// - every other tensor output (or, for an op that returns nothing, every tensor it writes) is an
//   entry: op, dtype, shape, the entries that produced its inputs, the step and, in the forward
//   pass, the source line of the innermost frame outside torch and samebits and the user's line
//   (frames read with the GIL, which the callback takes for that alone); in the backward pass
//   the forward op's lines and module (by the autograd node's sequence number) and the node;
// - the digest (the sum64 hash and the statistics) goes through samebits._core's table: on the
//   CPU trace::digest; on CUDA trace::digest_on_device into a ring of records per device, read
//   back at each flush (every kRing entries) with one synchronization. Tensors of other dtypes get
//   the hash of their bytes alone.
// Entries are written as JSON lines at each flush into the file the Python side opened.
#include "trace_recorder.hpp"

#include "torch_tensors.hpp"

#include <ATen/Context.h>
#include <ATen/SequenceNumber.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/function.h>
#if SAMEBITS_TORCH_MODE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nanobind/stl/string.h>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace samebits::python {

namespace {

constexpr std::size_t kRing = 512;               // records per device; a flush at least as often
constexpr std::int64_t kStatsElements = 1 << 16; // as tracing._STATS_ELEMENTS
constexpr std::uint64_t kForwardKept = 1 << 20;  // forward sites kept for the backward pass
constexpr std::size_t kRecordWords = sizeof(trace::DeviceDigest) / 8;

static_assert(offsetof(trace::DeviceDigest, sum_hash) == offsetof(TraceValues, sum_hash) &&
                  offsetof(trace::DeviceDigest, samples) == offsetof(TraceValues, samples),
              "TraceValues must be the leading fields of trace::DeviceDigest");

// What describe() said of an op (one aten overload).
struct OpInfo {
  std::string qualified, overload; // the cache key's strings
  bool decomposes = false;         // CompositeImplicitAutograd: its callees are the ops
  bool passive = false;            // a view, or an op that makes no values
  std::string name;                // "aten.add.Tensor"
  bool returns_nothing = false;
  std::vector<std::size_t> written; // such an op's entries: the arguments it writes
};

// Where a forward op ran: its source line, the user's line behind it, its module path.
struct Where {
  std::string source, caller, layer;
};

struct Entry {
  std::int64_t index = 0, step = 0;
  std::string op, dtype, grad_fn;
  Where where;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> inputs;
  bool deterministic = false;
  bool digested = false; // samebits' digest (hash and statistics); otherwise the bytes' hash
  int device = -1;       // >= 0: the values wait in that device's ring at `slot`
  std::size_t slot = 0;
  TraceValues values;
};

// An op in flight between its start and end callbacks.
struct OpenOp : at::ObserverContext {
  const OpInfo* info = nullptr;
  std::int64_t view_producer = -1;
  std::vector<std::int64_t> inputs;
  std::vector<c10::IValue> written;
};

template <class F> void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined())
      f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector())
      if (t.defined())
        f(t);
  } else if (v.isList()) {
    for (const c10::IValue& x : v.toListRef())
      if (x.isTensor() && x.toTensor().defined())
        f(x.toTensor());
  }
}

// A contiguous one-dimensional view (the module does not link the library: no
// TensorView::contiguous).
TensorView flat_view(void* data, DType dtype, Device device, std::int64_t n) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = 1;
  v.shape[0] = n;
  v.strides[0] = 1;
  return v;
}

// --- JSON ---------------------------------------------------------------------------------------

void put_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// As the Python recorder writes a float: the shortest text that reads back as it, "nan", "inf"
// and "-inf" as strings.
void put_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"nan\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"inf\"" : "\"-inf\"";
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    const std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
    out += text;
    if (text.find_first_of(".e") == std::string_view::npos)
      out += ".0";
  }
}

void put_key(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}

template <class T> void put_ints(std::string& out, const std::vector<T>& xs) {
  out += '[';
  for (std::size_t k = 0; k < xs.size(); ++k) {
    if (k)
      out += ',';
    out += std::to_string(xs[k]);
  }
  out += ']';
}

std::string hex16(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// --- the recorder -------------------------------------------------------------------------------

class Recorder;
std::atomic<Recorder*> active{nullptr}; // at most one records at a time
thread_local int open_ops = 0;          // recorded ops in flight on this thread

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn);
void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx);

// A process forked while a trace records (a DataLoader worker, say) records nothing: its entries
// would land in the parent's file, between the parent's.
void forget_in_child() {
  active.store(nullptr);
}

class Recorder {
public:
  Recorder(const TorchModeApi* api, std::string path, bool stats, std::string context,
           nb::object describe, nb::object classify)
      : api_(api), path_(std::move(path)), stats_(stats), context_(std::move(context)),
        describe_(std::move(describe)), classify_(std::move(classify)) {}

  ~Recorder() {
    if (active.load() == this)
      stop_callbacks();
    if (file_)
      std::fclose(file_);
    for (auto& [code, kind] : code_kinds_)
      Py_DECREF(code);
  }

  void start() {
    Recorder* none = nullptr;
    if (!active.compare_exchange_strong(none, this))
      throw std::runtime_error("samebits.torch.trace: another trace is recording with the C++ "
                               "recorder; nest traces with recorder=\"python\"");
    file_ = std::fopen(path_.c_str(), "a");
    if (!file_) {
      active.store(nullptr);
      throw std::runtime_error("samebits.torch.trace: cannot append to " + path_);
    }
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  }

  // Stops recording on this thread (the one that started), then writes what is pending.
  void stop() {
    if (active.load() == this)
      stop_callbacks();
    flush();
    if (file_) {
      const bool closed = std::fclose(file_) == 0;
      file_ = nullptr;
      if (!closed)
        fail("cannot write " + path_);
    }
    raise_failure();
  }

  void flush() {
    {
      std::lock_guard lock(mutex_);
      flush_locked();
    }
    raise_failure();
  }

  std::int64_t step() {
    std::lock_guard lock(mutex_);
    return step_;
  }
  void set_step(std::int64_t s) {
    std::lock_guard lock(mutex_);
    step_ = s;
  }
  void set_layer(std::string layer) {
    std::lock_guard lock(mutex_);
    layer_ = std::move(layer);
  }
  std::int64_t entries() {
    std::lock_guard lock(mutex_);
    return written_;
  }

  // The start callback's work: the op's description and the producers of its inputs. Inside a
  // recorded op (`nested`) only views are followed: the autograd layer of an op saves its
  // tensors through detach() within the op's callbacks, where the dispatch mode sees it as an op
  // of its own.
  std::unique_ptr<at::ObserverContext> open(const at::RecordFunction& fn, bool nested) {
    const OpInfo* info = info_of(fn);
    if (info == nullptr || info->decomposes || (nested && !info->passive))
      return nullptr;
    auto op = std::make_unique<OpenOp>();
    op->info = info;
    const c10::ArrayRef<const c10::IValue> in = fn.inputs();
    std::lock_guard lock(mutex_);
    if (info->passive) {
      if (!in.empty() && in[0].isTensor() && in[0].toTensor().defined())
        op->view_producer = producer(in[0].toTensor());
      return op;
    }
    for (const c10::IValue& v : in)
      for_each_tensor(v, [&](const at::Tensor& t) {
        if (const std::int64_t p = producer(t); p >= 0)
          op->inputs.push_back(p);
      });
    std::sort(op->inputs.begin(), op->inputs.end());
    op->inputs.erase(std::unique(op->inputs.begin(), op->inputs.end()), op->inputs.end());
    if (info->returns_nothing)
      for (const std::size_t at : info->written)
        if (at < in.size())
          op->written.push_back(in[at]);
    return op;
  }

  // The end callback's work: the op's entries.
  void close(const at::RecordFunction& fn, const OpenOp& op) {
    const OpInfo& info = *op.info;
    const std::vector<c10::IValue>& outputs = fn.outputs();
    if (info.passive) {
      if (op.view_producer >= 0 && outputs.size() == 1 && outputs[0].isTensor() &&
          outputs[0].toTensor().defined()) {
        std::lock_guard lock(mutex_);
        set_producer(outputs[0].toTensor(), op.view_producer);
      }
      return;
    }
    std::vector<at::Tensor> tensors;
    for (const c10::IValue& v : info.returns_nothing ? op.written : outputs)
      for_each_tensor(v, [&](const at::Tensor& t) { tensors.push_back(t); });
    if (tensors.empty())
      return;
    Where where;
    std::string grad_fn;
    const std::shared_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
    const bool forward = node == nullptr;
    if (forward)
      python_where(where); // takes the GIL: before the recorder's lock
    std::vector<std::string> dtype_names;
    dtype_names.reserve(tensors.size());
    for (const at::Tensor& t : tensors)
      dtype_names.push_back(dtype_name(t.scalar_type()));
    const bool deterministic = at::globalContext().deterministicAlgorithms();
    std::lock_guard lock(mutex_);
    if (forward) {
      where.layer = layer_;
      // The node this op made (if any) has the newest sequence number; the first op to claim a
      // number is the one that made it.
      const std::uint64_t newest = at::sequence_number::peek();
      forward_where_.try_emplace(newest - 1, where);
      if (forward_where_.size() > 2 * kForwardKept)
        std::erase_if(forward_where_,
                      [&](const auto& kv) { return kv.first + kForwardKept <= newest; });
    } else {
      const auto it = forward_where_.find(node->sequence_nr());
      if (it != forward_where_.end())
        where = it->second;
      grad_fn = node->name();
    }
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const at::Tensor& t = tensors[k];
      if (t.is_meta() || t.key_set().has(c10::DispatchKey::Python) || t.layout() != at::kStrided ||
          !(t.is_cpu() || t.is_cuda()))
        continue; // fake, subclass and sparse tensors: no values of their own to hash here
      Entry e;
      e.index = next_;
      e.step = step_;
      e.op = tensors.size() == 1 ? info.name : info.name + "[" + std::to_string(k) + "]";
      e.dtype = dtype_names[k];
      e.grad_fn = grad_fn;
      e.where = where;
      e.shape.assign(t.sizes().begin(), t.sizes().end());
      e.inputs = op.inputs;
      e.deterministic = deterministic;
      set_producer(t, next_);
      ++next_;
      digest_locked(e, t);
      pending_.push_back(std::move(e));
      if (pending_.size() >= kRing)
        flush_locked();
    }
  }

  void fail(std::string what) {
    std::lock_guard lock(failure_mutex_);
    if (failure_.empty())
      failure_ = std::move(what);
  }

private:
  void stop_callbacks() {
    at::removeCallback(handle_);
    active.store(nullptr);
  }

  void raise_failure() {
    std::string what;
    {
      std::lock_guard lock(failure_mutex_);
      what.swap(failure_);
    }
    if (!what.empty())
      throw std::runtime_error("samebits.torch.trace: " + what);
  }

  // --- per-op descriptions (cached; describe() in Python at the first call of an op) ---
  const OpInfo* info_of(const at::RecordFunction& fn) {
    const char* name = fn.name();
    const char* overload = fn.overload_name();
    {
      std::lock_guard lock(info_mutex_);
      const auto range = infos_.equal_range(std::string_view(name));
      for (auto it = range.first; it != range.second; ++it)
        if (it->second->qualified == name && it->second->overload == overload)
          return it->second.get();
    }
    auto info = std::make_unique<OpInfo>();
    info->qualified = name;
    info->overload = overload;
    if (!fn.operator_name()) {
      info->decomposes = true; // not an operator: what it calls is
    } else {
      nb::gil_scoped_acquire gil;
      try {
        const nb::tuple d = nb::cast<nb::tuple>(describe_(info->qualified, info->overload));
        info->decomposes = nb::cast<bool>(d[0]);
        info->passive = nb::cast<bool>(d[1]);
        info->name = nb::cast<std::string>(d[2]);
        if (!d[3].is_none()) {
          info->returns_nothing = true;
          for (nb::handle at : nb::cast<nb::list>(d[3]))
            info->written.push_back(nb::cast<std::size_t>(at));
        }
      } catch (const std::exception& e) {
        fail("describing " + info->qualified + ": " + e.what());
        info->decomposes = true;
      }
    }
    std::lock_guard lock(info_mutex_);
    const OpInfo* kept = info.get();
    infos_.emplace(std::string_view(kept->qualified), std::move(info));
    return kept;
  }

  // --- where an op was called from (the GIL held) ---
  struct CodeKind {
    std::string file;
    bool internal = false, library = false;
  };

  const CodeKind& code_kind(PyObject* code) {
    const auto it = code_kinds_.find(code);
    if (it != code_kinds_.end())
      return it->second;
    CodeKind k;
    nb::handle h(code);
    k.file = nb::cast<std::string>(h.attr("co_filename"));
    const nb::tuple c = nb::cast<nb::tuple>(classify_(h));
    k.internal = nb::cast<bool>(c[0]);
    k.library = nb::cast<bool>(c[1]);
    Py_INCREF(code); // kept with its entry: no other code object takes its address
    return code_kinds_.emplace(code, std::move(k)).first->second;
  }

  void python_where(Where& w) {
    nb::gil_scoped_acquire gil;
    try {
      nb::object f =
          nb::steal(reinterpret_cast<PyObject*>(PyThreadState_GetFrame(PyThreadState_Get())));
      while (f.is_valid()) {
        auto* frame = reinterpret_cast<PyFrameObject*>(f.ptr());
        const nb::object code = nb::steal(reinterpret_cast<PyObject*>(PyFrame_GetCode(frame)));
        const CodeKind& k = code_kind(code.ptr());
        const bool user = !k.library;
        if ((!k.internal && w.source.empty()) || user) {
          std::string at = k.file + ":" + std::to_string(PyFrame_GetLineNumber(frame));
          if (!k.internal && w.source.empty())
            w.source = at;
          if (user) {
            w.caller = std::move(at);
            break;
          }
        }
        f = nb::steal(reinterpret_cast<PyObject*>(PyFrame_GetBack(frame)));
      }
    } catch (const std::exception& e) {
      fail(std::string("reading the Python stack: ") + e.what());
    }
    if (w.source.empty())
      w.source = w.caller;
    if (w.caller == w.source)
      w.caller.clear();
  }

  std::string dtype_name(at::ScalarType t) {
    const auto at = static_cast<std::size_t>(t);
    {
      std::lock_guard lock(info_mutex_);
      if (at < dtype_names_.size() && !dtype_names_[at].empty())
        return dtype_names_[at];
    }
    std::string name;
    {
      nb::gil_scoped_acquire gil;
      nb::handle dtype(reinterpret_cast<PyObject*>(torch::getTHPDtype(t)));
      name = nb::cast<std::string>(nb::str(dtype));
    }
    if (name.starts_with("torch."))
      name.erase(0, 6);
    std::lock_guard lock(info_mutex_);
    if (at >= dtype_names_.size())
      throw std::out_of_range("samebits.torch.trace: scalar type out of range");
    dtype_names_[at] = std::move(name);
    return dtype_names_[at];
  }

  // --- producers (the recorder's lock held) ---
  // By the bytes a tensor starts at (its storage and offset), not by the tensor object: autograd
  // saves an op's output as a new tensor over the same storage, which the backward reads.
  static bool keyed(const at::Tensor& t) {
    return t.has_storage() && t.storage().unsafeGetStorageImpl() != nullptr;
  }

  std::int64_t producer(const at::Tensor& t) const {
    if (!keyed(t))
      return -1;
    const auto it =
        producers_.find(StartKey{t.storage().unsafeGetStorageImpl(), t.storage_offset()});
    if (it == producers_.end() || it->second.first.expired())
      return -1;
    return it->second.second;
  }

  void set_producer(const at::Tensor& t, std::int64_t index) {
    if (!keyed(t))
      return;
    producers_.insert_or_assign(StartKey{t.storage().unsafeGetStorageImpl(), t.storage_offset()},
                                std::pair{t.storage().getWeakStorageImpl(), index});
    if (producers_.size() > 2 * producers_kept_ + 4096) { // drop the storages that are gone
      std::erase_if(producers_, [](const auto& kv) { return kv.second.first.expired(); });
      producers_kept_ = producers_.size();
    }
  }

  // --- digests (the recorder's lock held) ---
  void digest_locked(Entry& e, const at::Tensor& t) {
    at::DisableRecordFunctionGuard no_callbacks; // our own ops are not the user's
    at::Tensor x = t.detach();
    if (!x.is_contiguous())
      x = x.contiguous();
    const std::optional<DType> dt = dtype_of(x.scalar_type());
    e.digested = dt.has_value() && stats_;
    const std::int64_t stats_elements = e.digested ? kStatsElements : 0;
    ApiResult r = ApiResult::ok;
    if (x.is_cpu()) {
      if (dt) {
        const TensorView v = flat_view(x.data_ptr(), *dt, Device::cpu(), x.numel());
        r = api_->trace_digest_host(v, stats_elements, &e.values);
      } else {
        e.values.sum_hash = api_->sum_hash_bytes(x.data_ptr(), x.nbytes());
      }
    } else {
      DType as = dt.value_or(DType::i64);
      std::int64_t n = x.numel();
      if (!dt) { // the bytes' hash: as 64-bit words, the last one padded with zero bytes
        const std::size_t bytes = x.nbytes();
        n = static_cast<std::int64_t>((bytes + 7) / 8);
        if (bytes % 8 != 0) {
          at::Tensor padded = at::zeros({n}, x.options().dtype(at::kLong));
          padded.view(at::kByte)
              .narrow(0, 0, static_cast<std::int64_t>(bytes))
              .copy_(x.reshape(-1).view(at::kByte));
          x = padded;
        }
      }
      const int dev = x.get_device();
      const TensorView v = flat_view(x.data_ptr(), as, Device::cuda(dev), n);
      Ring& ring = ring_of(x);
      if (ring.used == kRing)
        flush_locked();
      e.device = dev;
      e.slot = ring.used++;
      auto* record = reinterpret_cast<trace::DeviceDigest*>(ring.records.data_ptr<std::int64_t>() +
                                                            e.slot * kRecordWords);
      r = api_->trace_digest_device(v, stats_elements, record, stream_of(x));
    }
    if (r != ApiResult::ok)
      fail("the digest of an output of " + e.op + " failed");
  }

  struct Ring {
    at::Tensor records; // kRing zeroed trace::DeviceDigest records on one device
    std::size_t used = 0;
  };

  Ring& ring_of(const at::Tensor& x) {
    Ring& ring = rings_[x.get_device()];
    if (!ring.records.defined())
      ring.records = at::zeros({static_cast<std::int64_t>(kRing * kRecordWords)},
                               x.options().dtype(at::kLong));
    return ring;
  }

  void flush_locked() {
    at::DisableRecordFunctionGuard no_callbacks;
    for (auto& [dev, ring] : rings_) {
      if (ring.used == 0)
        continue;
#if SAMEBITS_TORCH_MODE_CUDA
      const c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(dev));
      c10::cuda::device_synchronize(); // a digest may have run on any of the device's streams
#endif
      const at::Tensor host =
          ring.records.narrow(0, 0, static_cast<std::int64_t>(ring.used * kRecordWords)).cpu();
      const auto* words = host.data_ptr<std::int64_t>();
      for (Entry& e : pending_)
        if (e.device == dev)
          std::memcpy(static_cast<void*>(&e.values), words + e.slot * kRecordWords,
                      sizeof(TraceValues));
      ring.used = 0;
    }
    if (pending_.empty())
      return;
    std::string text;
    for (const Entry& e : pending_)
      write_entry(text, e);
    if (file_ && std::fwrite(text.data(), 1, text.size(), file_) != text.size())
      fail("cannot write " + path_);
    if (file_)
      std::fflush(file_);
    written_ += static_cast<std::int64_t>(pending_.size());
    pending_.clear();
  }

  void write_entry(std::string& out, const Entry& e) const {
    out += "{\"i\":";
    out += std::to_string(e.index);
    put_key(out, "step");
    out += std::to_string(e.step);
    put_key(out, "layer");
    put_string(out, e.where.layer);
    put_key(out, "op");
    put_string(out, e.op);
    put_key(out, "dtype");
    put_string(out, e.dtype);
    put_key(out, "shape");
    put_ints(out, e.shape);
    put_key(out, "source");
    put_string(out, e.where.source);
    if (!e.where.caller.empty()) {
      put_key(out, "caller");
      put_string(out, e.where.caller);
    }
    if (!e.grad_fn.empty()) {
      put_key(out, "grad_fn");
      put_string(out, e.grad_fn);
    }
    if (e.deterministic)
      out += ",\"deterministic_algorithms\":true";
    if (!context_.empty()) {
      put_key(out, "context");
      put_string(out, context_);
    }
    put_key(out, "inputs");
    put_ints(out, e.inputs);
    std::int64_t n = 1;
    for (const std::int64_t s : e.shape)
      n *= s;
    const TraceValues& v = e.values;
    if (e.digested && n > 0 && v.stride > 1) {
      put_key(out, "stats_stride");
      out += std::to_string(v.stride);
    }
    put_key(out, "sum_hash");
    put_string(out, hex16(v.sum_hash));
    if (e.digested && n > 0) {
      const std::int64_t part = (n + v.stride - 1) / v.stride; // the elements the statistics saw
      put_key(out, "min");
      put_number(out, v.min);
      put_key(out, "max");
      put_number(out, v.max);
      put_key(out, "mean");
      put_number(out, v.sum / static_cast<double>(part));
      put_key(out, "l2");
      put_number(out, v.l2 * std::sqrt(static_cast<double>(n) / static_cast<double>(part)));
      put_key(out, "nan");
      out += std::to_string(v.nan_count);
      put_key(out, "samples");
      out += '[';
      for (std::int64_t k = 0; k < v.samples_taken; ++k) {
        if (k)
          out += ',';
        put_number(out, v.samples[k]);
      }
      out += ']';
    } else if (n > 0 && !e.shape.empty()) { // not computed (stats=False, or not samebits' dtype)
      out += ",\"min\":\"nan\",\"max\":\"nan\",\"mean\":\"nan\",\"l2\":\"nan\",\"nan\":-1,"
             "\"samples\":[]";
    } else {
      out += ",\"min\":0.0,\"max\":0.0,\"mean\":0.0,\"l2\":0.0,\"nan\":0,\"samples\":[]";
    }
    out += "}\n";
  }

  struct StartKey {
    const c10::StorageImpl* storage;
    std::int64_t offset;
    bool operator==(const StartKey&) const = default;
  };
  struct StartHash {
    std::size_t operator()(const StartKey& k) const noexcept {
      return std::hash<const void*>()(k.storage) ^
             (static_cast<std::size_t>(k.offset) * 0x9E3779B97F4A7C15ull);
    }
  };

  const TorchModeApi* api_;
  std::string path_;
  bool stats_;
  std::string context_;
  nb::object describe_, classify_;
  at::CallbackHandle handle_ = 0;
  std::FILE* file_ = nullptr;

  std::mutex info_mutex_; // infos_, dtype_names_ (taken after the GIL, never before it)
  std::unordered_multimap<std::string_view, std::unique_ptr<OpInfo>> infos_;
  std::array<std::string, 64> dtype_names_;
  std::unordered_map<PyObject*, CodeKind> code_kinds_; // the GIL guards it

  std::mutex mutex_; // everything below (taken after the GIL, never before it)
  std::int64_t step_ = 0, next_ = 0, written_ = 0;
  std::string layer_;
  std::unordered_map<StartKey, std::pair<c10::weak_intrusive_ptr<c10::StorageImpl>, std::int64_t>,
                     StartHash>
      producers_;
  std::size_t producers_kept_ = 0;
  std::unordered_map<std::uint64_t, Where> forward_where_;
  std::vector<Entry> pending_;
  std::map<int, Ring> rings_;

  std::mutex failure_mutex_;
  std::string failure_; // the first thing that went wrong, raised by flush() and stop()
};

// torch calls these for every op of the thread; what they catch is raised at the next flush.
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  Recorder* r = active.load(std::memory_order_acquire);
  if (r == nullptr)
    return nullptr;
  try {
    std::unique_ptr<at::ObserverContext> op = r->open(fn, open_ops > 0);
    if (op)
      ++open_ops;
    return op;
  } catch (const std::exception& e) {
    r->fail(std::string("recording an op: ") + e.what());
    return nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx == nullptr)
    return;
  --open_ops;
  Recorder* r = active.load(std::memory_order_acquire);
  if (r == nullptr)
    return;
  try {
    r->close(fn, static_cast<const OpenOp&>(*ctx));
  } catch (const std::exception& e) {
    r->fail(std::string("recording an op: ") + e.what());
  }
}

} // namespace

void bind_trace_recorder(nb::module_& m, const TorchModeApi* api) {
  static const bool fork_handler = pthread_atfork(nullptr, nullptr, &forget_in_child) == 0;
  (void)fork_handler;
  nb::class_<Recorder>(m, "TraceRecorder",
                       "samebits.torch.trace's C++ recorder (python/src/trace_recorder.cpp)")
      .def(
          "__init__",
          [api](Recorder* self, std::string path, bool stats, std::string context,
                nb::object describe, nb::object classify) {
            new (self) Recorder(api, std::move(path), stats, std::move(context),
                                std::move(describe), std::move(classify));
          },
          nb::arg("path"), nb::arg("stats"), nb::arg("context"), nb::arg("describe"),
          nb::arg("classify"))
      .def("start", &Recorder::start)
      .def("stop", &Recorder::stop, nb::call_guard<nb::gil_scoped_release>())
      .def("flush", &Recorder::flush, nb::call_guard<nb::gil_scoped_release>())
      .def("set_layer", &Recorder::set_layer)
      .def_prop_rw("step", &Recorder::step, &Recorder::set_step)
      .def_prop_ro("entries", &Recorder::entries);
}

} // namespace samebits::python
