# samebits.torch.trace(path) (this module is samebits.torch.tracing, so that the module never
# shadows the function): records every aten op that runs (op, shapes, dtype, a hash and
# statistics of each output, the user's source line, the nn.Module path) into samebits' trace
# format, so `samebits diff A B` compares two runs from different processes, machines or devices.
#
# The hash ("sum64") is computed on the tensor's device with no host synchronization per op:
# the tensor's bytes read as 64-bit words (two float32 values a word), each XORed with a
# position-dependent odd multiplier and then multiplied by it (the XOR keeps values with many
# trailing zero bits, such as 0.5, from leaving the low bits of the sum empty), summed modulo
# 2^64. Integer addition is associative,
# so the sum is the same in any order the device reduces it, and the C++ recorder computes the
# same value from host bytes (samebits::trace::sum_hash). Any change of one element changes it.
# The per-op hash and statistics stay on the device and are read in batches. A tensor of one of
# samebits' dtypes takes one call into the C++ library: on the CPU samebits::trace::digest (the
# hash and the statistics in one pass, the long ones on samebits' CPU threads, the same values),
# on CUDA samebits::trace::digest_on_device (one launch into a record of a ring on the device,
# read back at each flush). Other dtypes take torch's ops (sum_hash below and _stats).
#
# Imports torch, the standard library and samebits' extension.
from __future__ import annotations

import json
import math
import os
import platform
import sys
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _core, _files
from ._sumhash import SUM_HASH_ROW, _MULTIPLIERS, hash_hex, sum_hash, sum_hash_reference

__all__ = ["trace", "Tracer", "sum_hash", "sum_hash_reference", "SUM_HASH_ROW"]

# --- where an op was called from ----------------------------------------------------------------

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SAMEBITS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
# Code that libraries generate at run time and load from a temporary folder, named after the
# library's module (PyG 2.8 writes each conv's propagate as /tmp/torch_geometric.nn.conv.*.py).
_GENERATED_PREFIXES = ("torch_geometric.",)

# file name -> (is inside torch or samebits, is inside any installed package or the stdlib). By
# name, not by code object: equal code objects from two files compare equal.
_code_kind: dict[str, tuple[bool, bool]] = {}


def _classify(code: Any) -> tuple[bool, bool]:
    f = code.co_filename
    k = _code_kind.get(f)
    if k is None:
        internal = f.startswith((_TORCH_DIR, _SAMEBITS_DIR, "<frozen"))
        library = (internal or f.startswith(_STDLIB_DIR) or any(m in f for m in _LIBRARY_MARKERS)
                   or os.path.basename(f).startswith(_GENERATED_PREFIXES))
        k = (internal, library)
        _code_kind[f] = k
    return k


def _where(frame: Any) -> tuple[str, str]:
    """(source, caller): the innermost frame outside torch and samebits (which may be in a
    library such as PyG), and the innermost one outside every installed package (the user's)."""
    source = caller = ""
    f = frame
    while f is not None:
        internal, library = _classify(f.f_code)
        if not internal and not source:
            source = f"{f.f_code.co_filename}:{f.f_lineno}"
        if not library:
            caller = f"{f.f_code.co_filename}:{f.f_lineno}"
            break
        f = f.f_back
    if not source:
        source = caller
    return source, (caller if caller != source else "")


# --- module paths --------------------------------------------------------------------------------


class _ModuleStack:
    """The path of nn.Module calls ("GraphSAGE.conv1.lin_l") kept by global module hooks."""

    def __init__(self, changed: Any = None) -> None:
        self.stack: list[str] = []
        self._changed = changed  # called with the new current path after every push and pop
        self._names: dict[int, str] = {}
        self._root: Any = None
        self._handles: list[Any] = []

    def install(self) -> None:
        from torch.nn.modules import module as m

        self._handles = [
            m.register_module_forward_pre_hook(self._pre),
            m.register_module_forward_hook(self._post, always_call=True),
        ]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _pre(self, module: Any, args: Any) -> None:
        if not self.stack:
            if self._root is not module:
                self._root = module
                root = type(module).__name__
                self._names = {
                    id(sub): (root + "." + name if name else root)
                    for name, sub in module.named_modules()
                }
        name = self._names.get(id(module))
        if name is None:
            name = (self.stack[-1] + "." if self.stack else "") + type(module).__name__
        self.stack.append(name)
        if self._changed is not None:
            self._changed(name)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if self.stack:
            self.stack.pop()
            if self._changed is not None:
                self._changed(self.current())

    def current(self) -> str:
        return self.stack[-1] if self.stack else ""


# --- the recorder --------------------------------------------------------------------------------

_SAMPLES = 8  # as samebits::trace::kSamples: positions floor(k * n / 8)
# What json.dumps(obj, separators=(",", ":")) writes, without building an encoder for every line.
_JSON = json.JSONEncoder(separators=(",", ":"))
# Larger tensors get their min, max, mean, L2 norm and NaN count from every k-th element
# ("stats_stride": k in the entry; the L2 norm scaled to the whole tensor): the statistics only
# measure how far two runs are apart, the hash (over every byte) says whether they are, and a
# full pass per statistic would cost more than the op on the CPU.
_STATS_ELEMENTS = 1 << 16
_FLUSH_EVERY = 512
_FORWARD_KEPT = 1 << 20  # autograd nodes whose forward source is remembered
_aten = torch.ops.aten
# Ops that make no values (their output is uninitialised memory, or a copy of a scalar).
_SKIP = {
    _aten.detach.default,
    _aten.detach_.default,
    _aten.lift_fresh.default,
    _aten._local_scalar_dense.default,
    _aten.empty.memory_format,
    _aten.empty_strided.default,
    _aten.empty_like.default,
    _aten.new_empty.default,
    _aten.new_empty_strided.default,
    _aten.resize_.default,
}
# Ops whose output is a function of their (non-tensor) arguments alone: constants, nothing to
# compare, and hashing them is pure cost (a training step makes zero tensors of its largest size).
for _name in ("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros",
              "new_ones", "new_full", "scalar_tensor"):
    _packet = getattr(_aten, _name)
    _SKIP.update(getattr(_packet, o) for o in _packet.overloads())


_written_cache: dict[Any, Any] = {}


def _written_args(func: Any) -> Any:
    """For an op that returns nothing, the positions and names of the arguments it writes to;
    None for every other op."""
    w = _written_cache.get(func, False)
    if w is False:
        schema = func._schema
        w = None
        if not schema.returns:
            w = [
                (i, a.name)
                for i, a in enumerate(schema.arguments)
                if a.alias_info is not None and a.alias_info.is_write
            ] or None
        _written_cache[func] = w
    return w


# func -> (a view or an op in _SKIP, its name, _written_args): one lookup a call.
_func_info: dict[Any, tuple[bool, str, Any]] = {}


def _info(func: Any) -> tuple[bool, str, Any]:
    i = _func_info.get(func)
    if i is None:
        i = (func.is_view or func in _SKIP, str(func), _written_args(func))
        _func_info[func] = i
    return i


_dtype_names: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    n = _dtype_names.get(dtype)
    if n is None:
        n = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return n


class _Producers:
    """tensor -> the index of the entry that last wrote it. By id, with a weak reference that
    drops the key when the tensor dies: a lookup is one dict get (torch's WeakIdKeyDictionary
    builds a reference for every lookup), a store builds one reference per new tensor."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, int]] = {}
        selfref = weakref.ref(self)  # the references' callback keeps no cycle through self

        def gone(ref: Any) -> None:
            p = selfref()
            if p is not None:
                r = p._by_id.get(ref.key)
                if r is not None and r[0] is ref:  # not a newer tensor that took the same id
                    del p._by_id[ref.key]

        self._gone = gone

    def get(self, t: torch.Tensor) -> int | None:
        r = self._by_id.get(id(t))
        if r is not None and r[0]() is t:
            return r[1]
        return None

    def set(self, t: torch.Tensor, index: int) -> None:
        key = id(t)
        r = self._by_id.get(key)
        if r is not None and r[0]() is t:
            self._by_id[key] = (r[0], index)
        else:
            self._by_id[key] = (weakref.KeyedRef(t, self._gone, key), index)

    def __len__(self) -> int:
        return len(self._by_id)


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)

# True in a process forked while a trace records (a DataLoader worker, say): it records nothing,
# since its entries would land in the parent's file, between the parent's.
_forked_child = False


def _in_child() -> None:
    global _forked_child
    _forked_child = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)


def _tensors_in(obj: Any) -> list[torch.Tensor]:
    """The tensors of an op's arguments or results: a tensor, or a list or tuple of tensors and
    other values (aten schemas nest no deeper)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        out = []
        for x in obj:
            if isinstance(x, torch.Tensor):
                out.append(x)
            elif isinstance(x, (list, tuple)):
                out.extend(t for t in x if isinstance(t, torch.Tensor))
        return out
    return []


def _pick(func: Any, written: list[tuple[int, str]], args: Any, kwargs: Any) -> list[Any]:
    kwargs = kwargs or {}
    return [args[i] if i < len(args) else kwargs.get(name) for i, name in written]


class Tracer(TorchDispatchMode):
    """The mode behind trace(); `step` is the trace's step field (advanced by every optimizer
    step, or set by hand), `context` labels the entries (a run number, say)."""

    def __init__(self, path: str, *, stats: bool = True, context: str = "") -> None:
        super().__init__()
        self.path = path
        self.stats = stats
        self.context = context
        self.step = 0
        self.entries = 0  # written so far
        self._next = 0  # the index of the next entry
        self._producer = _Producers()  # tensor -> index of the entry that last wrote it
        self._pending: list[tuple[dict[str, Any], torch.Tensor, Any]] = []
        self._forward_where: dict[int, tuple[str, str, str]] = {}  # autograd sequence nr -> where
        self._modules = _ModuleStack()
        self._file: Any = None
        self._step_hooks: list[Any] = []
        self._optimizer = ""  # "optimizer.SGD" while an optimizer steps
        self._sample_index: dict[tuple[int, torch.device], torch.Tensor] = {}
        self._rings = _DigestRings()

    # -- lifetime --
    def __enter__(self) -> "Tracer":
        self._file = open(self.path + ".partial", "w", encoding="utf-8")
        self._file.write(_JSON.encode(_header()) + "\n")
        self._modules.install()
        from torch.optim import optimizer

        self._step_hooks = [
            optimizer.register_optimizer_step_pre_hook(self._optimizer_enter),
            optimizer.register_optimizer_step_post_hook(self._advance),
        ]
        return super().__enter__()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self._modules.remove()
            for h in self._step_hooks:
                h.remove()
            try:
                self.flush()
            finally:
                self._file.close()
        if exc_type is None:
            _files.commit(self.path)  # a failed run leaves only .partial

    def _optimizer_enter(self, opt: Any, *args: Any) -> None:
        self._optimizer = "optimizer." + type(opt).__name__

    def _advance(self, *args: Any) -> None:
        self._optimizer = ""
        self.step += 1

    # -- recording --
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if _forked_child:
            return out
        passive, name, written = _info(func)
        if passive:  # no new values: a view's values are its base's
            if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                p = self._producer.get(args[0])
                if p is not None:
                    self._producer.set(out, p)
            return out
        if written is None:
            tensors = _tensors_in(out)
        else:  # returns nothing (the _foreach_*_ ops): what it wrote into its arguments
            tensors = _tensors_in(_pick(func, written, args, kwargs))
        if not tensors:
            return out
        node = torch._C._current_autograd_node()
        if node is not None:  # backward: attribute to the forward op that made the node
            source, caller, layer = self._forward_where.get(node._sequence_nr(), ("", "", ""))
            grad_fn = node.name()
        else:
            source, caller = _where(sys._getframe(1))
            layer = self._optimizer or self._modules.current()
            grad_fn = ""
            # The node this op made (if any) has the newest sequence number; the first op to
            # claim a number is the one that made it.
            seq = torch._C._autograd._get_sequence_nr() - 1
            self._forward_where.setdefault(seq, (source, caller, layer))
        if len(self._forward_where) > 2 * _FORWARD_KEPT:  # bound it: old steps' nodes are gone
            newest = torch._C._autograd._get_sequence_nr()
            self._forward_where = {
                k: v for k, v in self._forward_where.items() if k > newest - _FORWARD_KEPT
            }
        # The entries that produced this op's tensor inputs: an output that differs while all of
        # these agree comes from the op itself, not from what it was given.
        inputs = sorted(
            {
                p
                for a in _tensors_in(args) + _tensors_in(list((kwargs or {}).values()))
                if (p := self._producer.get(a)) is not None
            }
        )
        det = torch.are_deterministic_algorithms_enabled()
        for k, t in enumerate(tensors):
            if t.is_meta or type(t) not in _PLAIN_TENSORS:
                continue  # fake and subclass tensors (compile-time tracing) hold no values
            entry = {
                "step": self.step,
                "layer": layer,
                "op": name if len(tensors) == 1 else f"{name}[{k}]",
                "dtype": _dtype_name(t.dtype),
                "shape": list(t.shape),
                "source": source,
            }
            if caller:
                entry["caller"] = caller
            if grad_fn:
                entry["grad_fn"] = grad_fn
            if det:
                entry["deterministic_algorithms"] = True
            if self.context:
                entry["context"] = self.context
            entry["inputs"] = inputs
            self._producer.set(t, self._next)
            self._record(entry, t)
        return out

    def _record(self, entry: dict[str, Any], t: torch.Tensor) -> None:
        x = t.detach()
        if x.is_cpu and x.dtype in _DIGEST_DTYPES:
            h, stats = _host_digest(x, self.stats)
        elif x.is_cuda and x.dtype in _DEVICE_DIGEST_CODES:
            h = self._rings.digest(x, _STATS_ELEMENTS if self.stats else 0)
            stats = _RING_STATS if self.stats and x.numel() > 0 else None  # stride: at flush
        else:
            h = sum_hash(x)
            stats = self._stats(x) if self.stats else None
        if stats is not None and stats is not _RING_STATS and stats[4] > 1:
            entry["stats_stride"] = stats[4]
        entry["i"] = self._next
        self._next += 1
        self._pending.append((entry, h, stats))
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def _stats(self, x: torch.Tensor) -> Any:
        """min, max, sum, L2 norm, NaN count and the sampled values, all left on x's device.
        The sums accumulate in x's own precision (float32 for the half types) and so cost one
        read of x each; they only measure how far apart two runs are, the hash says whether."""
        n = x.numel()
        if n == 0:
            return None
        if x.is_complex():
            x = torch.view_as_real(x)
        if not x.is_floating_point():
            x = x.to(torch.float64)
        flat = x.reshape(-1)
        key = (n, flat.device)
        idx = self._sample_index.get(key)
        if idx is None:
            k = min(_SAMPLES, n)
            idx = torch.tensor([j * n // k for j in range(k)], device=flat.device)
            self._sample_index[key] = idx
        acc = torch.float32 if flat.element_size() < 4 else None
        samples = flat[idx]
        stride = -(-n // _STATS_ELEMENTS)
        if stride > 1:  # large: the statistics of every stride-th element (a strided view)
            flat = flat[::stride]
        lo, hi = torch.aminmax(flat)
        return (
            (lo, hi, samples),
            torch.sum(flat, dtype=acc),
            torch.linalg.vector_norm(flat, dtype=acc),
            _MULTIPLIERS.nan_count(flat),
            stride,
        )

    def flush(self) -> None:
        """Reads the pending hashes and statistics back (one synchronization) and writes them."""
        pending, self._pending = self._pending, []
        if _forked_child:
            return
        records = self._rings.read()  # (device, slot) -> (hash, statistics) of the digests
        if not pending or self._file is None:
            return
        for k, (entry, h, st) in enumerate(pending):
            if isinstance(h, _RingSlot):
                rh, rst = records[h]
                if st is _RING_STATS and rst[4] > 1:
                    entry["stats_stride"] = rst[4]
                pending[k] = (entry, rh, rst if st is _RING_STATS else None)
        hashes = _read_back([h for _, h, _ in pending])
        has = [s is not None for _, _, s in pending]
        got = [s for _, _, s in pending if s is not None]
        lows = _read_back([s[0][0] for s in got])
        highs = _read_back([s[0][1] for s in got])
        samples = _read_back([s[0][2] for s in got])
        extremes = [[lo, hi] + sm for lo, hi, sm in zip(lows, highs, samples)]
        sums, norms, nans = (_read_back([s[j] for s in got]) for j in (1, 2, 3))
        it = iter(zip(extremes, sums, norms, nans))
        values = [next(it) if h else None for h in has]
        lines = []
        for (entry, _, _), h, v in zip(pending, hashes, values):
            e = {"i": entry["i"], **entry}
            e["sum_hash"] = hash_hex(h)
            if v is None:
                e.update({"min": 0.0, "max": 0.0, "mean": 0.0, "l2": 0.0, "nan": 0, "samples": []})
                if not self.stats and entry["shape"] and 0 not in entry["shape"]:
                    e.update({"min": "nan", "max": "nan", "mean": "nan", "l2": "nan", "nan": -1})
            else:
                mm_samples, total, l2, nan = v
                n = 1
                for s in entry["shape"]:
                    n *= s
                stride = entry.get("stats_stride", 1)
                part = -(-n // stride)  # elements the statistics saw
                l2 = l2 * math.sqrt(n / part)
                n = part
                e.update(
                    {
                        "min": _number(mm_samples[0]),
                        "max": _number(mm_samples[1]),
                        "mean": _number(total / n),
                        "l2": _number(l2),
                        "nan": int(nan),
                        "samples": [_number(s) for s in mm_samples[2:]],
                    }
                )
            self.entries += 1
            lines.append(_JSON.encode(e))
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()


# The dtypes samebits::trace::digest reads (a CPU tensor of another dtype takes the torch path).
_DIGEST_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                  torch.int64)


# CUDA tensors of these dtypes take one call into the C++ library (trace::digest_on_device): the
# hash and the statistics in one launch, written into a ring of records on the device.
_DEVICE_DIGEST_CODES = {
    d: _core.trace_dtype_code(str(d).removeprefix("torch.")) for d in _DIGEST_DTYPES
}
_RECORD_WORDS = _core.trace_record_bytes // 8
_RING_STATS = ("ring",)  # a pending entry's statistics are in its ring record


class _RingSlot(tuple):
    """(device index, record index) of a digest waiting in a ring."""


class _DigestRings:
    """Per CUDA device, _FLUSH_EVERY zeroed trace::DeviceDigest records (a flush comes at least
    that often); each digest takes the next one, and read() brings every used record to the host
    with one copy per device after waiting for the device, then starts the rings over. A record
    comes back from each digest zeroed where the next one needs it."""

    def __init__(self) -> None:
        self._rings: dict[int, torch.Tensor] = {}
        self._used: dict[int, int] = {}

    def digest(self, x: torch.Tensor, stats_elements: int) -> _RingSlot:
        if not x.is_contiguous():
            x = x.contiguous()
        dev = x.get_device()
        ring = self._rings.get(dev)
        if ring is None:
            ring = torch.zeros(_FLUSH_EVERY * _RECORD_WORDS, dtype=torch.int64, device=x.device)
            self._rings[dev] = ring
            self._used[dev] = 0
        k = self._used[dev]
        self._used[dev] = k + 1
        _core.trace_digest_cuda(
            x.data_ptr(), x.numel(), _DEVICE_DIGEST_CODES[x.dtype], dev, stats_elements,
            ring.data_ptr() + 8 * _RECORD_WORDS * k, torch._C._cuda_getCurrentRawStream(dev),
        )
        return _RingSlot((dev, k))

    def read(self) -> dict[Any, tuple[int, Any]]:
        out: dict[Any, tuple[int, Any]] = {}
        for dev, used in self._used.items():
            if used == 0:
                continue
            torch.cuda.synchronize(dev)  # a digest may have run on any of the device's streams
            host = self._rings[dev][: used * _RECORD_WORDS].cpu().view(used, _RECORD_WORDS)
            ints = host[:, :8].tolist()
            floats = host.view(torch.float64)[:, :16].tolist()
            for k in range(used):
                w, f = ints[k], floats[k]
                taken = w[7]
                # hash, then (min, max, samples), sum, l2, NaN count as _stats gives them
                out[_RingSlot((dev, k))] = (
                    w[0] & ((1 << 64) - 1),
                    ([f[1], f[2], f[8 : 8 + taken]], f[3], f[4], w[5], w[6]),
                )
            self._used[dev] = 0
        return out


def _host_digest(x: torch.Tensor, stats: bool) -> tuple[int, Any]:
    """The hash and (with `stats`) the statistics of a CPU tensor, as _record keeps them, from one
    call into the C++ library: numbers where the device path keeps 0-d tensors."""
    h, lo, hi, total, l2, nan, stride, samples = _core.trace_digest(
        x.reshape(-1), _STATS_ELEMENTS if stats else 0
    )
    if not stats or x.numel() == 0:
        return h, None
    return h, ((lo, hi, samples), total, l2, nan, stride)


def _read_back(tensors: list[Any]) -> list[Any]:
    """The values of many small device tensors with one copy per (device, dtype) group: each
    tensor's values as a list (or a number for a 0-d tensor), in order. Entries that are already
    numbers or lists (from _host_digest) are passed through."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    result: list[Any] = [None] * len(tensors)
    for i, t in enumerate(tensors):
        if isinstance(t, torch.Tensor):
            groups.setdefault((t.device, t.dtype), []).append(i)
        else:
            result[i] = t
    for idx in groups.values():
        parts = [tensors[i].reshape(-1) for i in idx]
        flat = torch.cat(parts).cpu()
        if flat.is_floating_point():
            flat = flat.double()
        values = flat.tolist()
        at = 0
        for i, p in zip(idx, parts):
            n = p.numel()
            result[i] = values[at] if tensors[i].dim() == 0 else values[at : at + n]
            at += n
    return result


def _number(v: float) -> Any:
    if math.isfinite(v):
        return v
    if v != v:
        return "nan"
    return "inf" if v > 0 else "-inf"


def _header() -> dict[str, Any]:
    devices = []
    if torch.cuda.is_available():
        devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "samebits_trace": 1,
        "version": "python",
        "git": "",
        "writer": "samebits.torch.trace",
        "hash_kinds": ["sum64"],
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
            "cuda_devices": devices,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        },
    }


def trace(path: str | os.PathLike, *, stats: bool = True, context: str = "",
          recorder: str = "auto") -> Any:
    """Records every aten op run inside the `with` block into the trace file `path`:

        with samebits.torch.trace("run1.trace"):
            train_step()

    The file is written to `path`.partial and renamed to `path` when the block ends without an
    exception. `stats=False` records the hash only (cheaper; `samebits diff` then still finds the
    first difference but cannot say how large it is).

    `recorder` picks who records: "cpp" (torch's RecordFunction callbacks in samebits._torch_mode:
    no Python per op except for its source line), "python" (a TorchDispatchMode, Tracer), or
    "auto": the C++ one where samebits._torch_mode was built against this torch and no other C++
    trace is recording, the Python one otherwise. Both write the same entries; the C++ one gives
    tensors of dtypes outside samebits' (bool, int8, complex, ...) the hash of their bytes without
    statistics."""
    if recorder not in ("auto", "cpp", "python"):
        raise ValueError(
            f"samebits.torch.trace: recorder is 'auto', 'cpp' or 'python', not {recorder!r}"
        )
    if not isinstance(stats, bool):
        raise TypeError(f"samebits.torch.trace: stats is True or False, not {stats!r}")
    if not isinstance(context, str):
        raise TypeError(f"samebits.torch.trace: context is a str, not {type(context).__name__}")
    # Refused now, before the block runs, rather than when the run is over.
    path = _files.output_target(path, "samebits.torch.trace")
    if recorder != "python":
        from . import _trace_cpp

        if recorder == "cpp" or _trace_cpp.available():
            return _trace_cpp.CppTracer(path, stats=stats, context=context)
    return Tracer(path, stats=stats, context=context)
