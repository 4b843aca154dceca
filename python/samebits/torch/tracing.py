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
# The per-op hash and statistics stay on the device and are read in batches.
#
# Imports only torch and the standard library.
from __future__ import annotations

import json
import math
import os
import platform
import sys
import threading
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["trace", "Tracer", "sum_hash", "sum_hash_reference", "SUM_HASH_ROW"]

# --- the sum64 hash ------------------------------------------------------------------------------

SUM_HASH_ROW = 4096  # multiplier of word i: A[i % ROW] * B[i // ROW] (mod 2^64)
_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _col_multiplier(k: int) -> int:
    return _splitmix64(2 * k) | 1


def _row_multiplier(j: int) -> int:
    return _splitmix64(2 * j + 1) | 1


def _signed(u: int) -> int:
    return u - (1 << 64) if u >> 63 else u


def sum_hash_reference(data: bytes) -> int:
    """The sum64 hash of a tensor's bytes (row-major, little-endian) in pure Python: the
    definition that the device code and the C++ side must match."""
    data = bytes(data) + b"\0" * (-len(data) % 8)
    h = 0
    for i in range(len(data) // 8):
        w = int.from_bytes(data[8 * i : 8 * i + 8], "little")
        m = (_col_multiplier(i % SUM_HASH_ROW) * _row_multiplier(i // SUM_HASH_ROW)) & _MASK
        h = (h + (w ^ m) * m) & _MASK
    return h


def _has_int_dot(device: torch.device) -> bool:
    return device.type == "cpu"


def _reuse_scratch(device: torch.device) -> bool:
    # Elsewhere a reused buffer could be written by a hash on one stream while another stream's
    # hash still reads it.
    return device.type == "cpu"


class _Multipliers:
    """Per device, the multiplier vector m[i] = A[i % ROW] * B[i // ROW] (as int64, wrapped) up
    to the longest tensor seen, grown by doubling; tensors longer than _FULL_LIMIT words are hashed
    chunk by chunk with multipliers made on the fly, to bound the memory. On the CPU the hash's
    temporary lives in a reused scratch buffer: a fresh large allocation there costs more than
    the hash itself (the pages are faulted in anew each time)."""

    _FULL_LIMIT = 1 << 23

    def __init__(self) -> None:
        self._full: dict[torch.device, torch.Tensor] = {}
        self._cols: dict[torch.device, torch.Tensor] = {}
        self._rows: dict[torch.device, torch.Tensor] = {}
        self._scratch: dict[Any, torch.Tensor] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _vector(values: list[int], device: torch.device) -> torch.Tensor:
        return torch.tensor([_signed(v) for v in values], dtype=torch.int64, device=device)

    def cols(self, device: torch.device) -> torch.Tensor:
        c = self._cols.get(device)
        if c is None:
            c = self._vector([_col_multiplier(k) for k in range(SUM_HASH_ROW)], device)
            self._cols[device] = c
        return c

    def rows(self, n_rows: int, device: torch.device) -> torch.Tensor:
        r = self._rows.get(device)
        if r is None or r.numel() < n_rows:
            size = max(n_rows, 2 * (0 if r is None else r.numel()), 64)
            r = self._vector([_row_multiplier(j) for j in range(size)], device)
            self._rows[device] = r
        return r[:n_rows]

    def full(self, n: int, device: torch.device) -> torch.Tensor:
        f = self._full.get(device)
        if f is None or f.numel() < n:
            size = max(n, 2 * (0 if f is None else f.numel()), SUM_HASH_ROW)
            size = (size + SUM_HASH_ROW - 1) // SUM_HASH_ROW * SUM_HASH_ROW
            rows = self.rows(size // SUM_HASH_ROW, device)
            # int64 products wrap modulo 2^64 on the CPU and on CUDA, as the definition wants.
            f = (rows.view(-1, 1) * self.cols(device).view(1, -1)).reshape(-1)
            self._full[device] = f
        return f[:n]

    def scratch(self, n_words: int, device: torch.device) -> torch.Tensor:
        """n_words of int64 temporary: reused on the CPU, fresh (from the stream-aware caching
        allocator) elsewhere."""
        if not _reuse_scratch(device):
            return torch.empty(n_words, dtype=torch.int64, device=device)
        b = self._scratch.get(device)
        if b is None or b.numel() < n_words:
            b = torch.empty(max(n_words, 1024), dtype=torch.int64, device=device)
            self._scratch[device] = b
        return b[:n_words]

    def nan_count(self, flat: torch.Tensor) -> torch.Tensor:
        """The number of NaNs in flat (0-d, on its device); the mask in a reused CPU buffer."""
        if flat.device.type != "cpu":
            return torch.count_nonzero(torch.isnan(flat))
        with self._lock:
            b = self._scratch.get("bool")
            if b is None or b.numel() < flat.numel():
                b = torch.empty(max(flat.numel(), 1024), dtype=torch.bool)
                self._scratch["bool"] = b
            return torch.count_nonzero(torch.ne(flat, flat, out=b[: flat.numel()]))

    def hash(self, t: torch.Tensor) -> torch.Tensor:
        """The sum64 hash of t's values as a 0-d int64 tensor on t's device; nothing is read back."""
        flat = t.reshape(-1)
        nbytes = flat.numel() * flat.element_size()
        n = (nbytes + 7) // 8
        if n == 0:
            return torch.zeros((), dtype=torch.int64, device=t.device)
        whole = n <= self._FULL_LIMIT
        with self._lock:  # the CPU scratch buffer is shared
            w = self.scratch(n, t.device)
            m = self.full(n, t.device) if whole else None
            if nbytes % 8 == 0:
                if whole:
                    torch.bitwise_xor(flat.view(torch.int64), m, out=w)
                else:
                    w.copy_(flat.view(torch.int64))
            else:  # the last word is padded with zero bytes
                b = w.view(torch.uint8)
                b[nbytes:].zero_()
                b[:nbytes].copy_(flat.view(torch.uint8))
                if whole:
                    w.bitwise_xor_(m)
            if whole:
                # The CPU's int64 dot product is one pass (and wraps like the sum); CUDA has none.
                return torch.dot(w, m) if _has_int_dot(t.device) else torch.sum(w.mul_(m))
            # Longer: the multipliers chunk by chunk (a chunk is a whole number of rows).
            h = torch.zeros((), dtype=torch.int64, device=t.device)
            cols = self.cols(t.device).view(1, -1)
            rows = self.rows((n + SUM_HASH_ROW - 1) // SUM_HASH_ROW, t.device)
            per_chunk = self._FULL_LIMIT // SUM_HASH_ROW
            for r0 in range(0, rows.numel(), per_chunk):
                part = w[r0 * SUM_HASH_ROW : (r0 + per_chunk) * SUM_HASH_ROW]
                m = (rows[r0 : r0 + per_chunk].view(-1, 1) * cols).reshape(-1)[: part.numel()]
                h = h + torch.sum(part.bitwise_xor_(m).mul_(m))
            return h


_MULTIPLIERS = _Multipliers()


def sum_hash(t: torch.Tensor) -> torch.Tensor:
    """The sum64 hash of t as a 0-d int64 tensor on t's device (no host synchronization)."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    return _MULTIPLIERS.hash(t)


def hash_hex(h: int) -> str:
    return f"{h & _MASK:016x}"


# --- where an op was called from ----------------------------------------------------------------

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SAMEBITS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep

# code object -> (is inside torch or samebits, is inside any installed package or the stdlib)
_code_kind: dict[Any, tuple[bool, bool]] = {}


def _classify(code: Any) -> tuple[bool, bool]:
    k = _code_kind.get(code)
    if k is None:
        f = code.co_filename
        internal = f.startswith((_TORCH_DIR, _SAMEBITS_DIR, "<frozen"))
        library = internal or f.startswith(_STDLIB_DIR) or any(m in f for m in _LIBRARY_MARKERS)
        k = (internal, library)
        _code_kind[code] = k
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

    def __init__(self) -> None:
        self.stack: list[str] = []
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

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if self.stack:
            self.stack.pop()

    def current(self) -> str:
        return self.stack[-1] if self.stack else ""


# --- the recorder --------------------------------------------------------------------------------

_SAMPLES = 8  # as samebits::trace::kSamples: positions floor(k * n / 8)
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
        self._producer = WeakIdKeyDictionary()  # tensor -> index of the entry that last wrote it
        self._pending: list[tuple[dict[str, Any], torch.Tensor, Any]] = []
        self._forward_where: dict[int, tuple[str, str, str]] = {}  # autograd sequence nr -> where
        self._modules = _ModuleStack()
        self._file: Any = None
        self._step_hooks: list[Any] = []
        self._optimizer = ""  # "optimizer.SGD" while an optimizer steps
        self._sample_index: dict[tuple[int, torch.device], torch.Tensor] = {}

    # -- lifetime --
    def __enter__(self) -> "Tracer":
        self._file = open(self.path + ".partial", "w", encoding="utf-8")
        self._file.write(json.dumps(_header(), separators=(",", ":")) + "\n")
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
            os.replace(self.path + ".partial", self.path)  # a failed run leaves only .partial

    def _optimizer_enter(self, opt: Any, *args: Any) -> None:
        self._optimizer = "optimizer." + type(opt).__name__

    def _advance(self, *args: Any) -> None:
        self._optimizer = ""
        self.step += 1

    # -- recording --
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.is_view or func in _SKIP:  # no new values: a view's values are its base's
            if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                p = self._producer.get(args[0])
                if p is not None:
                    self._producer[out] = p
            return out
        written = _written_args(func)
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
        name = str(func)
        for k, t in enumerate(tensors):
            if t.device.type == "meta" or type(t) not in (torch.Tensor, torch.nn.Parameter):
                continue  # fake and subclass tensors (compile-time tracing) hold no values
            entry = {
                "step": self.step,
                "layer": layer,
                "op": name if len(tensors) == 1 else f"{name}[{k}]",
                "dtype": str(t.dtype).removeprefix("torch."),
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
            self._producer[t] = self._next
            self._record(entry, t)
        return out

    def _record(self, entry: dict[str, Any], t: torch.Tensor) -> None:
        x = t.detach()
        h = sum_hash(x)
        stats = self._stats(x) if self.stats else None
        if stats is not None and stats[4] > 1:
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
        if not pending or self._file is None:
            return
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
            lines.append(json.dumps(e, separators=(",", ":")))
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()


def _read_back(tensors: list[torch.Tensor]) -> list[Any]:
    """The values of many small device tensors with one copy per (device, dtype) group: each
    tensor's values as a list (or a number for a 0-d tensor), in order."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    result: list[Any] = [None] * len(tensors)
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
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


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


def trace(path: str, *, stats: bool = True, context: str = "") -> Tracer:
    """Records every aten op run inside the `with` block into the trace file `path`:

        with samebits.torch.trace("run1.trace"):
            train_step()

    The file is written to `path`.partial and renamed to `path` when the block ends without an
    exception. `stats=False` records the hash only (cheaper; `samebits diff` then still finds the
    first difference but cannot say how large it is)."""
    return Tracer(path, stats=stats, context=context)
