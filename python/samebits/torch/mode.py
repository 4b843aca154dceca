"""The drop-in mode: torch's own accumulating ops run through samebits while the mode is on.

    with samebits.torch.deterministic(level="run_to_run"):
        train(model)            # unchanged PyTorch / PyG code

While the mode is active, the aten kernels of the ops in `covered_ops()` are overridden on the
CPU and CUDA dispatch keys (torch.library, as the batch-invariant libraries do): a covered call
on float32/float64 tensors runs the samebits kernel at the mode's level; any other call (another
dtype, a layout samebits does not take) runs torch's own kernel, which the override keeps. Autograd
is torch's: the backward formulas call aten ops, so a backward that accumulates (gather's is a
scatter_add, index_select's an index_add, embedding's embedding_dense_backward) is covered too.

Beyond the accumulating ops, the mode replaces what torch refuses under its deterministic mode
on CUDA: the interpolate and pooling backwards (_separable.py), embedding_bag's backward (with
scale_grad_by_freq as documented: divided by each index's count in the batch, as torch's CUDA
kernel does; torch 2.11's CPU kernel reads another index's count), nll_loss2d's forward with a
reduction (its CUDA kernel adds with atomics) and grid_sampler_2d's backward (bilinear, nearest
and bicubic, _grid_sample.py; torch's cuDNN sampler, which it takes on CUDA for bilinear, zeros
padding and align_corners=True, is not replaced, nor the 3-D sampler).

bfloat16 and float16 are covered where the samebits kernel takes them (HALF_OPS): index_add,
scatter_add, scatter_reduce, index_put_(accumulate=True), the embedding and embedding_bag
backwards, cumsum, segment_reduce, bincount with half weights, nll_loss2d, grid_sampler_2d's
backward and the interpolate and pooling backwards. These accumulate in float32
in the kernel's canonical order and round once to the output dtype (torch's own kernels round
every atomic add on CUDA, and many CPU kernels every add); bincount widens half weights to
float64, as torch does, and returns float64. The interpolate and pooling backwards contract a
half gradient in float32 and round once. histc, whose samebits kernel takes float32/float64 only,
leaves half calls to torch.
A call whose tensors disagree in dtype (bfloat16 values into a float16 target, say) goes to
torch's kernel too, which raises its own error, as without the mode.

The mode also sets torch.use_deterministic_algorithms(True) (with torch's fill of uninitialized
memory off unless asked: see enable()) and restores the previous settings when it ends, so an op
samebits does not replace either runs torch's deterministic kernel or throws; inside
`with deterministic():` such an error carries a note saying that samebits has no replacement for
it.

Where the package was built against this torch (samebits._torch_mode), the scatters (index_add,
scatter_add, scatter_reduce; functional and in place) and index_put_ with accumulate=True are C++
kernels: the same work without the Python kernel's host time per call. The backward of x[mask]
(index_put_ with a bool mask, which autograd calls with unsafe=True) then finds the mask's rows
on CUDA without the host waiting for the device to count them (torch's nonzero waits). They hand
whatever is not their plain case to the Python kernel of the op (a refusal at run_to_run, an
argument to reshape) and raise samebits' errors as they are; SAMEBITS_TORCH_MODE=python in the
environment keeps the Python kernels for every op.

The overrides are process-wide (the dispatcher has no per-thread kernels): enable() and the
context manager affect every thread, and nest: the innermost level applies until it ends.
"""
import contextlib
import functools
import os
import threading
import warnings

import torch

import samebits as _sb

from .. import _level_name
from . import _grid_sample, _ops, _separable


def _load_cpp():
    """samebits._torch_mode, the C++ kernels of the scatters below (index_add, scatter_add,
    scatter_reduce, functional and in place) and of index_put_ with accumulate=True, where the
    package was built against this torch (the same version);
    None where it was not, or with SAMEBITS_TORCH_MODE=python in the environment (the Python
    kernels then serve every op: same bits, more host time per call)."""
    if os.environ.get("SAMEBITS_TORCH_MODE", "") == "python":
        return None
    try:
        from .. import _torch_mode
    except ImportError:
        return None
    # Built against another torch (one upgraded since): its C++ ABI may differ.
    return _torch_mode if _torch_mode.torch_version == torch.__version__ else None


_cpp = _load_cpp()

_FLOAT = (torch.float32, torch.float64)
_HALF = _ops.HALF
_INDEX = (torch.int64, torch.int32)
_FLOAT_HALF = _FLOAT + _HALF
# The aten ops whose override also takes bfloat16/float16 (see the module's docstring).
HALF_OPS = ("index_add", "index_add_", "index_add.out", "scatter_add", "scatter_add_",
            "scatter_add.out", "scatter_reduce.two", "scatter_reduce_.two",
            "scatter_reduce.two_out", "_index_put_impl_", "embedding_dense_backward",
            "_embedding_bag_dense_backward", "cumsum", "cumsum_", "cumsum.out", "segment_reduce",
            "bincount", "nll_loss2d_forward", "grid_sampler_2d_backward",
            "upsample_nearest2d_backward", "upsample_bilinear2d_backward",
            "upsample_bicubic2d_backward", "_adaptive_avg_pool2d_backward", "avg_pool3d_backward")

_lock = threading.Lock()
_stack = []          # (level, and the previous: deterministic flag, warn_only flag, CUDA index
                     # checks, fill of uninitialized memory)
_library = None      # the torch.library.Library holding the overrides while the mode is on
_state = {"level": None}
_calls = {}          # aten overload name -> calls that samebits ran (see calls())


def _supported(*tensors, index=None, half=False):
    """True when samebits takes these tensors: CPU or CUDA, float32/float64 values (with
    half=True also bfloat16/float16), all of one dtype, int64/int32 indices, no tensor subclass
    (those go through torch, which dispatches them further)."""
    # Plain attributes only (t.device builds a torch.device per access): this runs on every call
    # of a covered op.
    if _thread.torch_kernel:
        return False  # inside a fallback to torch's kernel (_samebits_or_torch): torch's all down
    dtype = tensors[0].dtype
    if dtype not in (_FLOAT_HALF if half else _FLOAT):
        return False
    for t in tensors:
        if (type(t) is not torch.Tensor or t.dtype is not dtype or t.is_sparse
                or not (t.is_cpu or t.is_cuda)):
            return False
    if index is not None:
        if type(index) is not torch.Tensor or index.dtype not in _INDEX or index.is_sparse:
            return False
    return True


def _count(name):
    _calls[name] = _calls.get(name, 0) + 1


def calls():
    """How many calls of each covered aten op samebits ran since the last reset_calls() (calls
    that fell back to torch's kernel are not counted): what a test or a user checks to see that
    the mode took effect."""
    merged = dict(_calls)
    if _cpp is not None:
        for name, n in _cpp.calls().items():
            merged[name] = merged.get(name, 0) + n
    return {name: n for name, n in merged.items() if n}


def reset_calls():
    _calls.clear()
    if _cpp is not None:
        _cpp.reset_calls()


def uses_cpp_kernels():
    """True when the mode's scatters and index_put_ run as C++ kernels (samebits._torch_mode),
    False when every covered op runs its Python kernel."""
    return _cpp is not None


_fell_back = set()  # ops that have warned that they ran torch's deterministic kernel
class _ThreadState(threading.local):
    torch_kernel = False  # this thread is inside such a fallback (a class default: no getattr)


_thread = _ThreadState()


def _samebits_or_torch(name, samebits_call, torch_call):
    """Runs samebits_call(); where samebits has no variant for the arguments at the mode's level
    (NondeterministicError, raised before anything is written: sizes past its kernels' limits),
    runs torch's own kernel at run_to_run, which the mode has made deterministic, and warns once
    per op; at portable, which torch cannot give, the error stands."""
    try:
        return samebits_call()
    except _sb.NondeterministicError as e:
        if _state["level"] != "run_to_run":
            raise
        if _calls.get(name):
            _calls[name] -= 1  # counted as samebits' on entry; torch's kernel runs it
        if name not in _fell_back:
            _fell_back.add(name)
            warnings.warn(f"samebits.torch.deterministic: aten::{name} ran torch's deterministic "
                          f"kernel (run to run, not portable), as samebits has none for these "
                          f"arguments: {str(e).splitlines()[0][:200]}", stacklevel=3)
        # torch's deterministic kernel may call other covered ops (index_add through
        # index_put_ on CUDA): those run torch's kernels too, not samebits' again.
        _thread.torch_kernel = True
        if _cpp is not None:
            _cpp.set_torch_kernel(True)
        try:
            return torch_call()
        finally:
            _thread.torch_kernel = False
            if _cpp is not None:
                _cpp.set_torch_kernel(False)


def _same_device(*tensors):
    d = tensors[0].get_device()  # -1 on the CPU
    for t in tensors:
        if t.get_device() != d:
            return False
    return True


# --- the covered ops -------------------------------------------------------------------------------
# Each entry: aten overload name -> function(original_kernel) returning the override, which takes
# (keyset, *args, **kwargs) as torch.library passes them with with_keyset=True. An override falls
# back to `original.call_boxed(keyset, ...)` for calls samebits does not take.

_OVERRIDES = {}


def _override(*names):
    def register(make):
        for n in names:
            _OVERRIDES[n] = make
        return make
    return register


def _row_index(dim, index, src):
    """The index vector when `index` is a vector expanded (stride 0) along every dim but `dim`,
    as PyG's scatter passes it: then scatter_add along dim is an index_add of whole slices, which
    samebits runs as a row scatter. None otherwise."""
    shape = index.shape
    if len(shape) < 2 or shape != src.shape:
        return None
    strides = index.stride()
    for d, step in enumerate(strides):
        if step != 0 and d != dim and shape[d] != 1:
            return None
    # This runs on every PyG aggregation: the vector that was expanded (index.view(-1, 1)
    # .expand_as(src) keeps it as _base) when it is that view exactly, else one as_strided.
    base = index._base
    if (base is not None and base.dim() == 1 and base.shape[0] == shape[dim]
            and base.stride(0) == strides[dim] and base.data_ptr() == index.data_ptr()):
        return base
    return index.as_strided((shape[dim],), (strides[dim],))


def _scatter_add_into(out, dim, index, src):
    level = _state["level"]
    ndim = out.dim()
    dim = dim % max(ndim, 1)
    rows = _row_index(dim, index, src)
    if rows is not None and (out.shape[1:] == src.shape[1:] if dim == 0 else
                             all(out.shape[d] == src.shape[d] for d in range(ndim) if d != dim)):
        _ops._index_add_into(out, dim, rows, src, 1.0, level)
    else:
        _ops._core.scatter_add(out, dim, index, src, level, _ops._stream(out))


@_override("index_add", "index_add_", "index_add.out")
def _index_add(original):
    def run(keyset, self, dim, index, source, *, alpha=1, out=None):
        kw = {"alpha": alpha} if out is None else {"alpha": alpha, "out": out}

        def torch_kernel():
            return original.call_boxed(keyset, self, dim, index, source, **kw)
        dest = out if out is not None else self
        if not (_supported(self, source, dest, index=index, half=True)
                and _same_device(self, source, dest) and not isinstance(alpha, complex)):
            return torch_kernel()
        _count(run.name)
        result = _into(run.name, self, out)

        def ours():
            _ops._index_add_into(result, dim, index, source, float(alpha), _state["level"])
            return result
        return _samebits_or_torch(run.name, ours, torch_kernel)
    return run


def _into(name, self, out):
    """Where the op writes: self for the in-place form, out for the out= form (after copying
    self there), a fresh copy of self for the functional form."""
    if name.endswith("_"):
        return self
    if out is not None:
        if out.data_ptr() != self.data_ptr():
            out.resize_(self.shape).copy_(self)
        return out
    return self.clone(memory_format=torch.contiguous_format)


@_override("scatter_add", "scatter_add_", "scatter_add.out")
def _scatter_add(original):
    def run(keyset, self, dim, index, src, *, out=None):
        kw = {} if out is None else {"out": out}

        def torch_kernel():
            return original.call_boxed(keyset, self, dim, index, src, **kw)
        dest = out if out is not None else self
        if not (_supported(self, src, dest, index=index, half=True)
                and _same_device(self, src, dest)):
            return torch_kernel()
        _count(run.name)
        result = _into(run.name, self, out)

        def ours():
            _scatter_add_into(result, dim, index, src)
            return result
        return _samebits_or_torch(run.name, ours, torch_kernel)
    return run


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


@_override("scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out")
def _scatter_reduce(original):
    def run(keyset, self, dim, index, src, reduce, *, include_self=True, out=None):
        kw = {"include_self": include_self} if out is None else {"include_self": include_self,
                                                                "out": out}

        def torch_kernel():
            return original.call_boxed(keyset, self, dim, index, src, reduce, **kw)
        dest = out if out is not None else self
        if not (reduce in _REDUCES and _supported(self, src, dest, index=index, half=True)
                and _same_device(self, src, dest)):
            return torch_kernel()
        _count(run.name)
        result = _into(run.name.split(".")[0], self, out)

        def ours():
            _ops._core.scatter_reduce(result, dim % max(result.dim(), 1), index, src, reduce,
                                      include_self, _state["level"], _ops._stream(result))
            return result
        return _samebits_or_torch(run.name, ours, torch_kernel)
    return run


def _flat_index(self, indices, values):
    """For index_put_(accumulate=True) with integer index tensors on the leading dims (no None,
    no masks): the linear index into self viewed as [prod(leading), rest...] and values shaped to
    match, or None when the call is another kind."""
    if len(indices) == 0 or len(indices) > self.dim() or not self.is_contiguous():
        return None
    if any(i is None or type(i) is not torch.Tensor or i.dtype not in _INDEX for i in indices):
        return None
    # torch moves CPU indices of a CUDA tensor (x_cuda[cpu_idx] and its backward): its kernel
    # serves those.
    device = self.get_device()
    if any(i.get_device() != device for i in indices):
        return None
    if len(indices) == 1 and indices[0].dim() == 1:
        # One index vector (the backward of x[mask] or x[idx]): self and values as they are when
        # values has the indexing result's shape (no broadcast, view or copy: this runs on every
        # such backward).
        i, size = indices[0], self.shape[0]
        rest = self.shape[1:]
        vals = values
        if values.shape != (i.shape[0],) + rest:
            vals = values.expand((i.shape[0],) + rest)
        return self, torch.where(i < 0, i + size, i), vals
    try:
        idx = torch.broadcast_tensors(*indices)
    except RuntimeError:
        return None
    lead = self.shape[:len(indices)]
    flat = None
    for i, size in zip(idx, lead):
        # Negative indices count from the end, as in torch; the range is checked by the op. One
        # index (the backward of x[mask] or x[idx]) is used as it is: no zeros, no products.
        i = torch.where(i < 0, i + size, i)
        flat = i if flat is None else flat.to(torch.int64) * size + i.to(torch.int64)
    rest = self.shape[len(indices):]
    target = self.view((-1,) + tuple(rest))
    vals = values.expand(tuple(idx[0].shape) + tuple(rest)).reshape((-1,) + tuple(rest))
    return target, flat.reshape(-1), vals


@_override("_index_put_impl_")
def _index_put(original):
    def run(keyset, self, indices, values, accumulate=False, unsafe=False):
        if accumulate and _supported(self, values, half=True) and _same_device(self, values):
            found = _flat_index(self, list(indices), values)
            if found is not None:
                target, flat, vals = found
                if target.shape[0] > 0 or flat.numel() == 0:
                    _count(run.name)
                    _ops._index_add_into(target, 0, flat, vals, 1.0, _state["level"])
                    return self
        return original.call_boxed(keyset, self, indices, values, accumulate, unsafe)
    return run


@_override("embedding_dense_backward")
def _embedding_backward(original):
    def run(keyset, grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
        if not (_supported(grad_output, index=indices, half=True)
                and _same_device(grad_output, indices)):
            return original.call_boxed(keyset, grad_output, indices, num_weights, padding_idx,
                                       scale_grad_by_freq)
        _count(run.name)
        width = grad_output.shape[-1]
        idx = indices.reshape(-1)
        rows = grad_output.reshape(-1, width)
        if padding_idx >= 0:
            rows = rows * (idx != padding_idx).to(rows.dtype).unsqueeze(1)   # exact
        if scale_grad_by_freq:
            counts = torch.bincount(idx, minlength=num_weights)   # integer counts: exact
            rows = _widened(rows)
            rows = rows / counts[idx].to(rows.dtype).unsqueeze(1)
        grad = rows.new_zeros((num_weights, width))
        _ops._index_add_into(grad, 0, idx, rows, 1.0, _state["level"])
        return grad.to(grad_output.dtype)
    return run


def _widened(t):
    """Half values as float32 (exact), for a backward that computes before it accumulates: the
    samebits sum of float32 terms is then rounded once to the half dtype, as a half kernel
    rounds its float32 sum once. Other dtypes unchanged."""
    return t.float() if t.dtype in _HALF else t


@_override("bincount")
def _bincount(original):
    def run(keyset, self, weights=None, minlength=0):
        if (weights is None or not _supported(weights, index=self, half=True)
                or self.dim() != 1 or not _same_device(self, weights)):
            return original.call_boxed(keyset, self, weights, minlength)
        _count(run.name)
        return _ops.bincount(self, weights, minlength, level=_state["level"])
    return run


@_override("histc")
def _histc(original):
    def run(keyset, self, bins=100, min=0, max=0):
        if not _supported(self):
            return original.call_boxed(keyset, self, bins, min, max)
        _count(run.name)
        return _ops.histc(self, bins, float(min), float(max), level=_state["level"])
    return run


@_override("cumsum", "cumsum_", "cumsum.out")
def _cumsum(original):
    def run(keyset, self, dim, *, dtype=None, out=None):
        # dtype= converts the input first (torch: self.to(dtype), then the scan in that dtype).
        target = self.dtype if dtype is None else dtype
        dest = out if out is not None else self
        if not (_supported(self, half=True) and target in _FLOAT + _HALF
                and (out is None or out.dtype == target) and _same_device(self, dest)
                and (run.name != "cumsum_" or target == self.dtype)
                and _supported(dest, half=True)):
            kw = {"dtype": dtype} if out is None else {"dtype": dtype, "out": out}
            return original.call_boxed(keyset, self, dim, **kw)
        _count(run.name)
        d = dim % max(self.dim(), 1)
        if run.name == "cumsum_":
            _ops._core.cumsum(self, d, self, _state["level"], _ops._stream(self))
            return self
        src = self.to(target)
        result = out if out is not None else torch.empty_like(
            src, memory_format=torch.contiguous_format)
        if out is not None:
            result.resize_(self.shape)
            if out.data_ptr() == src.data_ptr():
                src = src.clone()
        _ops._core.cumsum(src, d, result, _state["level"], _ops._stream(self))
        return result
    return run


@_override("segment_reduce")
def _segment_reduce(original):
    def run(keyset, data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
            unsafe=False, initial=None):
        ok = (axis == 0 and initial is None and indices is None and reduce in ("sum", "mean",
              "max", "min") and _supported(data, half=True)
              and ((lengths is None) != (offsets is None)))
        if ok:
            _count(run.name)
            return _ops.segment_reduce(data, reduce, lengths=lengths, offsets=offsets,
                                       level=_state["level"])
        return original.call_boxed(keyset, data, reduce, lengths=lengths, indices=indices,
                                   offsets=offsets, axis=axis, unsafe=unsafe, initial=initial)
    return run


@_override("_embedding_bag_dense_backward")
def _embedding_bag_backward(original):
    def run(keyset, grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
            scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1):
        args = (grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                scale_grad_by_freq, mode, per_sample_weights, padding_idx)
        extra = () if per_sample_weights is None else (per_sample_weights,)
        # (embedding_bag refuses max with scale_grad_by_freq; a direct call goes to torch.)
        if not (_supported(grad, *extra, index=indices, half=True) and grad.dim() == 2
                and mode in (0, 1, 2) and not (mode == 2 and scale_grad_by_freq)):
            return original.call_boxed(keyset, *args)
        _count(run.name)
        level = _state["level"]
        if mode == 2:
            # max: each bag's gradient goes to the row that held the maximum, per feature; an
            # empty bag (size 0) passes none.
            # CUDA marks an empty bag's maximum as -1: its gradient is zeroed and goes to row 0.
            g = grad * (bag_size > 0).to(grad.dtype).unsqueeze(1)
            out = grad.new_zeros((num_weights, grad.shape[1]))
            _ops._core.scatter_add(out, 0, maximum_indices.to(torch.int64).clamp_min(0), g, level,
                                   _ops._stream(out))
            return out
        rows = grad.index_select(0, offset2bag)          # a gather: no accumulation
        if mode == 1 or per_sample_weights is not None or scale_grad_by_freq:
            rows = _widened(rows)                        # half: scaled in float32, rounded once
        if scale_grad_by_freq:
            # Each index's rows divided by how often it occurs among all indices (torch's
            # counts; integer counts are exact).
            counts = torch.bincount(indices, minlength=num_weights)
            rows = rows / counts.index_select(0, indices).to(rows.dtype).unsqueeze(1)
        if mode == 1:
            rows = rows / bag_size.index_select(0, offset2bag).clamp_min(1).to(
                rows.dtype).unsqueeze(1)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.to(rows.dtype).unsqueeze(1)
        if padding_idx >= 0:
            rows = rows * (indices != padding_idx).to(rows.dtype).unsqueeze(1)
        out = rows.new_zeros((num_weights, grad.shape[1]))
        _ops._index_add_into(out, 0, indices, rows, 1.0, level)
        return out.to(grad.dtype)
    return run


@_override("nll_loss2d_forward")
def _nll_loss2d_forward(original):
    # torch's CUDA kernel adds per-block partial sums of the loss and of the weights with
    # atomics when it reduces (mean or sum) and throws under torch.use_deterministic_algorithms;
    # reduction "none" is elementwise and stays torch's. The backward (nll_loss2d_backward) is
    # elementwise: torch's, from the total weight returned here.
    def run(keyset, self, target, weight, reduction, ignore_index):
        extra = () if weight is None else (weight,)
        if not (reduction in (1, 2) and self.dim() == 4 and target.dim() == 3
                and _supported(self, *extra, index=target, half=True)
                and _same_device(self, target, *extra)):
            return original.call_boxed(keyset, self, target, weight, reduction, ignore_index)
        _count(run.name)
        level = _state["level"]
        keep = target != ignore_index
        t = torch.where(keep, target, torch.zeros_like(target))
        # samebits's gather checks every target against the classes (IndexError, as torch).
        picked = _ops.gather(self, 1, t.unsqueeze(1), level=level).squeeze(1)
        acc = _widened(self).dtype                 # half: summed in float32, rounded once
        if weight is None:
            w = keep.to(acc)
        else:
            w = torch.where(keep, weight.to(acc).index_select(0, t.reshape(-1)).reshape(t.shape),
                            torch.zeros((), dtype=acc, device=self.device))
        # Ignored positions contribute nothing (not 0 * x: x may be -inf there).
        terms = torch.where(keep, -(w * picked.to(acc)), torch.zeros((), dtype=acc,
                                                                    device=self.device))
        total_weight = _ops.sum(w, level=level)
        loss = _ops.sum(terms, level=level)
        if reduction == 1:
            loss = loss / total_weight
        return loss.to(self.dtype), total_weight.to(self.dtype)
    return run


@_override("grid_sampler_2d_backward")
def _grid_sampler_2d_backward(original):
    def run(keyset, grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
            output_mask):
        if not (interpolation_mode in (_grid_sample.BILINEAR, _grid_sample.NEAREST,
                                       _grid_sample.BICUBIC)
                and padding_mode in (_grid_sample.ZEROS, _grid_sample.BORDER,
                                     _grid_sample.REFLECTION)
                and _supported(grad_output, input, grid, half=True)
                and _same_device(grad_output, input, grid) and input.dim() == 4):
            return original.call_boxed(keyset, grad_output, input, grid, interpolation_mode,
                                       padding_mode, align_corners, output_mask)
        _count(run.name)
        return _grid_sample.backward(grad_output, input, grid, interpolation_mode, padding_mode,
                                     align_corners, output_mask, _state["level"])
    return run


# Backwards that torch computes by scattering (with atomics on CUDA) and refuses under
# torch.use_deterministic_algorithms: here products with per-axis weight matrices (_separable.py).

def _resample_override(kind, with_align):
    def make(original):
        def run(keyset, grad_output, output_size, input_size, *rest):
            align = rest[0] if with_align else False
            scales = rest[1:] if with_align else rest
            scales = tuple(scales) + (None,) * (2 - len(scales))
            if not _supported(grad_output, half=True) or grad_output.dim() != 4:
                return original.call_boxed(keyset, grad_output, output_size, input_size, *rest)
            _count(run.name)
            n, c, ih, iw = (int(v) for v in input_size)
            oh, ow = (int(v) for v in output_size)
            double = grad_output.dtype == torch.float64
            mats = [_separable._weights(kind, oh, ih, align, scales[0], double),
                    _separable._weights(kind, ow, iw, align, scales[1], double)]
            g = grad_output.reshape(n * c, oh, ow)
            return _separable.backward(g, mats, _state["level"]).reshape(n, c, ih, iw)
        return run
    return make


_OVERRIDES["upsample_nearest2d_backward"] = _resample_override("nearest", False)
_OVERRIDES["upsample_bilinear2d_backward"] = _resample_override("linear", True)
_OVERRIDES["upsample_bicubic2d_backward"] = _resample_override("cubic", True)


@_override("_adaptive_avg_pool2d_backward")
def _adaptive_avg_pool2d_backward(original):
    def run(keyset, grad_output, self):
        if not (_supported(grad_output, self, half=True) and self.dim() in (3, 4)):
            return original.call_boxed(keyset, grad_output, self)
        _count(run.name)
        ih, iw = self.shape[-2:]
        oh, ow = grad_output.shape[-2:]
        double = self.dtype == torch.float64
        mats = [_separable._weights("adaptive", oh, ih, False, None, double),
                _separable._weights("adaptive", ow, iw, False, None, double)]
        g = grad_output.reshape(-1, oh, ow)
        return _separable.backward(g, mats, _state["level"]).reshape(self.shape)
    return run


@_override("avg_pool3d_backward")
def _avg_pool3d_backward(original):
    def run(keyset, grad_output, self, kernel_size, stride, padding, ceil_mode,
            count_include_pad, divisor_override=None):
        if not (_supported(grad_output, self, half=True) and self.dim() in (4, 5)):
            return original.call_boxed(keyset, grad_output, self, kernel_size, stride, padding,
                                       ceil_mode, count_include_pad, divisor_override)
        _count(run.name)
        k = list(kernel_size) * (3 if len(kernel_size) == 1 else 1)
        st = list(stride) if len(stride) else k
        st = st * (3 if len(st) == 1 else 1)
        pad = list(padding) * (3 if len(padding) == 1 else 1)
        ins, outs = self.shape[-3:], grad_output.shape[-3:]
        mats = [_separable._pool_weights(outs[j], ins[j], k[j], st[j], pad[j], count_include_pad,
                                         divisor_override is None) for j in range(3)]
        g = grad_output.reshape((-1,) + tuple(outs))
        if divisor_override is not None:  # in float32 for half gradients, rounded once below
            g = (g.float() if g.dtype in _HALF else g) / divisor_override
        return _separable.backward(g, mats, _state["level"]).reshape(self.shape).to(self.dtype)
    return run


# --- the mode ----------------------------------------------------------------------------------------

def covered_ops(dtype=None):
    """The aten ops the mode replaces, as 'aten::name.overload' strings (sorted). With a dtype,
    those it replaces for tensors of that dtype: every one for float32 and float64, HALF_OPS for
    bfloat16 and float16 (the others leave half calls to torch), none for any other dtype."""
    if dtype is None or dtype in _FLOAT:
        names = _OVERRIDES
    elif dtype in _HALF:
        names = HALF_OPS
    else:
        names = ()
    return sorted("aten::" + n for n in names)


# The ops whose C++ kernel (samebits._torch_mode) replaces the Python one when it is there.
_CPP_OPS = ("index_add", "index_add_", "scatter_add", "scatter_add_", "scatter_reduce.two",
            "scatter_reduce_.two", "_index_put_impl_")


def _python_kernels():
    """{aten overload name: {key: its Python kernel}} for every covered op and dispatch key that
    has a kernel of torch's (the one each kernel falls back to)."""
    kernels = {}
    for name, make in _OVERRIDES.items():
        for key in ("CPU", "CUDA"):
            if not torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, key):
                continue
            kernel = make(torch.library.get_kernel("aten::" + name, key))
            kernel.name = name
            kernels.setdefault(name, {})[key] = kernel
    return kernels


def _install(level):
    global _library
    _state["level"] = level
    if _library is not None:
        if _cpp is not None:
            _cpp.set_level(level)
        return
    kernels = _python_kernels()
    in_cpp = set()
    if _cpp is not None:
        # The C++ kernels hand what is not their plain case to the Python kernel of their op and
        # key (with the key set torch would pass it bound).
        in_cpp = set(_cpp.install(level, {
            name: {key: functools.partial(k, torch._C.DispatchKeySet(getattr(
                torch._C.DispatchKey, key))) for key, k in kernels[name].items()}
            for name in _CPP_OPS if name in kernels}))
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch warns once that an aten kernel is overridden: that is the point of the mode.
        warnings.simplefilter("ignore", UserWarning)
        for name, per_key in kernels.items():
            for key, kernel in per_key.items():
                if f"{name}:{key}" not in in_cpp:
                    lib.impl(name, kernel, key, with_keyset=True)
    _library = lib


def _uninstall():
    global _library
    if _library is not None:
        _library._destroy()
        _library = None
        if _cpp is not None:
            _cpp.uninstall()
    _state["level"] = None


def enable(level="run_to_run", index_checks="deferred", fill_uninitialized_memory=False):
    """Turns the drop-in mode on at `level` (process-wide) until the matching disable().

    index_checks: how a bad index on CUDA is reported (samebits.set_cuda_index_checks).
    "deferred" (the default) is torch's own behaviour: the op does not wait for its check, and
    the error is raised by a later samebits call (samebits.check_index_errors() raises it at
    once); unlike torch's device-side assert, the output is untouched and the device stays
    usable. "wait" raises before the op returns, at one host round trip per op. Leaving
    `with deterministic(...)` raises an error of the current device still pending.

    fill_uninitialized_memory: torch.utils.deterministic.fill_uninitialized_memory while the mode
    is on. torch turns it on with its deterministic mode, so that every torch.empty is filled
    with NaN (a kernel launch per allocation: 2 ms of a 44 ms PyG training on Cora, H200). Only
    code that reads memory it never wrote needs it, and such a read is a bug the fill hides
    rather than fixes; the mode leaves it off unless asked. The previous setting comes back on
    exit.
    """
    name = _level_name(level)
    if name is None:
        raise _sb.InvalidArgument("the drop-in mode needs a level (not_guaranteed, run_to_run or "
                                  "portable), got None")
    if index_checks not in ("wait", "deferred"):
        raise ValueError(f'index_checks must be "wait" or "deferred", got {index_checks!r}')
    with _lock:
        _stack.append((name, torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled(),
                       _sb.cuda_index_checks(),
                       torch.utils.deterministic.fill_uninitialized_memory))
        try:
            _sb.set_cuda_index_checks(index_checks)
            torch.use_deterministic_algorithms(True)
            torch.utils.deterministic.fill_uninitialized_memory = bool(fill_uninitialized_memory)
            _install(name)
        except BaseException:  # nothing half on: the settings as they were before this call
            _pop_and_restore()
            raise


def disable():
    """Ends the innermost enable(): restores the previous level, or torch's own kernels and the
    previous torch.use_deterministic_algorithms setting when it was the outermost."""
    with _lock:
        if not _stack:
            raise RuntimeError("samebits.torch.disable(): the drop-in mode is not enabled")
        _pop_and_restore()


def _pop_and_restore():
    """Drops the innermost enable() and puts back what it changed (with _lock held)."""
    _, was_on, warn_only, checks, fill = _stack.pop()
    torch.use_deterministic_algorithms(was_on, warn_only=warn_only)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    _sb.set_cuda_index_checks(checks)
    if _stack:
        _state["level"] = _stack[-1][0]
        if _cpp is not None:
            _cpp.set_level(_state["level"])
    else:
        _uninstall()


def is_enabled():
    """True while the drop-in mode is on; `level()` says at which level."""
    return bool(_stack)


def level():
    """The drop-in mode's level, or None when it is off."""
    return _state["level"]


_NO_DETERMINISTIC = "does not have a deterministic implementation"


@contextlib.contextmanager
def deterministic(level="run_to_run", index_checks="deferred", fill_uninitialized_memory=False):
    """`with samebits.torch.deterministic(level):` runs the block in the drop-in mode (see
    enable() for index_checks and fill_uninitialized_memory)."""
    enable(level, index_checks, fill_uninitialized_memory)
    try:
        yield
        # Leaving the mode raises a deferred index error of the current device that no later
        # call has raised yet (one wait for the device).
        if index_checks == "deferred" and torch.cuda.is_initialized():
            _sb.check_index_errors()
    except RuntimeError as e:
        if _NO_DETERMINISTIC in str(e):
            e.add_note("samebits has no replacement for this op (samebits.torch.covered_ops() "
                       "lists the ops the drop-in mode replaces).")
        raise
    finally:
        disable()
