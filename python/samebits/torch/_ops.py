"""samebits ops as torch.library custom ops (namespace `samebits`): forward and fake kernels.

Each op has torch's signature and semantics plus a `level=` keyword (a level name; None: the
thread's mode, see samebits.determinism). Outputs come from torch's allocator; the C++ op writes
into them through zero-copy views, on CUDA on torch's current stream. Nothing here adds numerics of
its own: every value is the C++ op's. The backward formulas are in _autograd.py.

Dtypes: float32 and float64 everywhere; bfloat16 and float16 (HALF) in every op but histc
(samebits's histc takes float32/float64 only: a half tensor there raises
samebits.InvalidArgument). A half op accumulates in float32 in the op's canonical order and rounds
once to the output dtype (round to nearest even): within half a unit in the last place of the
half dtype of the float32 result, and the same bits on the CPU and CUDA at portable; gathers
(index_select, gather) and amax/amin are exact. The output dtype is torch's: the input's, and
float64 for bincount with half weights (as torch, which accumulates those in float64). Values and
their target must have one dtype (index_add's input and source, ...), as in torch; otherwise
samebits.InvalidArgument names both, before anything is written.
"""
from typing import Optional

import torch
from torch import Tensor
from torch.library import register_fake

from .. import _core
from ._dispatch import op as _op

_NS = "samebits::"
HALF = (torch.bfloat16, torch.float16)


def _stream(t: Tensor) -> int:
    """torch's current stream on t's device (0, the default stream, on the CPU)."""
    return torch._C._cuda_getCurrentRawStream(t.get_device()) if t.is_cuda else 0


def _dim(dim: int, ndim: int) -> int:
    return dim + max(ndim, 1) if dim < 0 else dim


def _fresh(input: Tensor) -> Tensor:
    """A contiguous copy of input from torch's allocator (the output of an accumulating op)."""
    return input.clone(memory_format=torch.contiguous_format)


def _empty_like(input: Tensor) -> Tensor:
    return torch.empty_like(input, memory_format=torch.contiguous_format)


# --- index_add ------------------------------------------------------------------------------------

def _index_add_into(out, dim, index, source, alpha, level):
    # The C++ op adds along dim 0; other dims are the same op on views with `dim` moved first.
    if dim != 0 or out.dim() == 0 or index.dim() == 0:  # (dim 0 of a tensor: as it is)
        dim = _dim(dim, out.dim())
        if out.dim() == 0:
            out, source = out.reshape(1), source.reshape(1)
        elif dim != 0:
            out, source = out.movedim(dim, 0), source.movedim(dim, 0)
        if index.dim() == 0:
            index = index.reshape(-1)
    _core.index_add(out, index, source, alpha, level, _stream(out))


@_op("index_add", mutates_args=())
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1.0,
              level: Optional[str] = None) -> Tensor:
    """torch.index_add: out = input with alpha * source[i] added at index[i] along dim."""
    out = _fresh(input)
    _index_add_into(out, dim, index, source, alpha, level)
    return out


@_op("index_add_", mutates_args=("input",))
def _index_add_inplace(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
                       alpha: float = 1.0, level: Optional[str] = None) -> None:
    _index_add_into(input, dim, index, source, alpha, level)


@register_fake(_NS + "index_add")
def _(input, dim, index, source, *, alpha=1.0, level=None):
    return _empty_like(input)


@register_fake(_NS + "index_add_")
def _(input, dim, index, source, *, alpha=1.0, level=None):
    return None


# --- scatter_add and scatter_reduce --------------------------------------------------------------

@_op("scatter_add", mutates_args=())
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor, *,
                level: Optional[str] = None) -> Tensor:
    """torch.scatter_add: out[index[p] along dim] += src[p]."""
    out = _fresh(input)
    _core.scatter_add(out, _dim(dim, out.dim()), index, src, level, _stream(out))
    return out


@_op("scatter_add_", mutates_args=("input",))
def _scatter_add_inplace(input: Tensor, dim: int, index: Tensor, src: Tensor, *,
                         level: Optional[str] = None) -> None:
    _core.scatter_add(input, _dim(dim, input.dim()), index, src, level, _stream(input))


@_op("scatter_reduce", mutates_args=())
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True, level: Optional[str] = None) -> Tensor:
    """torch.scatter_reduce with reduce "sum", "prod", "mean", "amax" or "amin"."""
    out = _fresh(input)
    _core.scatter_reduce(out, _dim(dim, out.dim()), index, src, _reduce_name(reduce),
                         include_self, level, _stream(out))
    return out


@_op("scatter_reduce_", mutates_args=("input",))
def _scatter_reduce_inplace(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                            include_self: bool = True, level: Optional[str] = None) -> None:
    _core.scatter_reduce(input, _dim(dim, input.dim()), index, src, _reduce_name(reduce),
                         include_self, level, _stream(input))


def _reduce_name(reduce):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ValueError(f"scatter_reduce: reduce {reduce!r} is not one of sum, prod, mean, "
                         "amax, amin")
    return reduce


for _name in ("scatter_add", "scatter_reduce"):
    register_fake(_NS + _name, lambda input, *args, **kwargs: _empty_like(input))
    register_fake(_NS + _name + "_", lambda input, *args, **kwargs: None)


# --- segment reductions and graph aggregation ----------------------------------------------------

_SEGMENT_REDUCE = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}


def _segment_reduce_name(reduce):
    if reduce not in _SEGMENT_REDUCE:
        raise ValueError(f"segment_reduce: reduce {reduce!r} is not one of sum, mean, max, min")
    return _SEGMENT_REDUCE[reduce]


def _segment_into(src, offsets, reduce, level):
    out = src.new_empty((offsets.shape[0] - 1,) + tuple(src.shape[1:]))
    _core.segment_reduce(src, offsets, out, _segment_reduce_name(reduce), level, _stream(src))
    return out


def _offsets(lengths: Optional[Tensor], offsets: Optional[Tensor], what: str) -> Tensor:
    if (lengths is None) == (offsets is None):
        raise ValueError(f"{what}: give exactly one of lengths and offsets")
    if offsets is not None:
        return offsets.to(torch.int64)
    # Integer prefix sums are exact: the same offsets on every device.
    return torch.nn.functional.pad(torch.cumsum(lengths, 0), (1, 0))


@_op("segment_reduce", mutates_args=())
def segment_reduce(data: Tensor, reduce: str, lengths: Optional[Tensor] = None,
                   offsets: Optional[Tensor] = None, *, axis: int = 0,
                   level: Optional[str] = None) -> Tensor:
    """torch.segment_reduce along axis 0, reduce "sum", "mean", "max" or "min". An empty segment
    gives what torch gives: 0 (sum), NaN (mean), -inf (max), +inf (min)."""
    if axis != 0:
        raise ValueError(f"segment_reduce: axis {axis}: only axis 0 is supported")
    offsets = _offsets(lengths, offsets, "segment_reduce")
    out = _segment_into(data, offsets, reduce, level)
    if reduce != "sum":
        empty = (offsets[1:] == offsets[:-1]).reshape((-1,) + (1,) * (data.dim() - 1))
        fill = {"mean": float("nan"), "max": float("-inf"), "min": float("inf")}[reduce]
        out.masked_fill_(empty, fill)
    return out


@_op("segment_csr", mutates_args=())
def segment_csr(src: Tensor, indptr: Tensor, reduce: str = "sum", *,
                level: Optional[str] = None) -> Tensor:
    """PyG's torch_scatter.segment_csr along dim 0: reduce "sum", "mean", "max" or "min" of
    src[indptr[s]:indptr[s+1]]; an empty segment gives 0."""
    return _segment_into(src, indptr, reduce, level)


@register_fake(_NS + "segment_reduce")
def _(data, reduce, lengths=None, offsets=None, *, axis=0, level=None):
    n = lengths.shape[0] if lengths is not None else offsets.shape[0] - 1
    return data.new_empty((n,) + tuple(data.shape[1:]))


@register_fake(_NS + "segment_csr")
def _(src, indptr, reduce="sum", *, level=None):
    return src.new_empty((indptr.shape[0] - 1,) + tuple(src.shape[1:]))


def _segment_ids(offsets, num_rows):
    """The segment of every row (int64[num_rows]), without a read back to the host."""
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device), lengths,
                                   output_size=num_rows)


@_op("csr_transpose", mutates_args=())
def csr_transpose(rowptr: Tensor, col: Tensor, num_sources: int) -> tuple[Tensor, Tensor]:
    """The transposed CSR graph (rowptr_t, col_t): row j lists, in ascending order, every node i
    whose row contains j. Built with a samebits IndexPlan (a stable sort), so it is the same on
    every device; aggregating over it is the backward of aggregate(sum). Keep it for a static
    graph and pass it to aggregate(rowptr_t=, col_t=)."""
    rows = _segment_ids(rowptr, col.shape[0])
    plan = _core.IndexPlan(col, num_sources, _stream(col))
    order = torch.from_dlpack(plan.order)
    return torch.from_dlpack(plan.offsets).clone(), rows[order].to(col.dtype)


@register_fake(_NS + "csr_transpose")
def _(rowptr, col, num_sources):
    return rowptr.new_empty(num_sources + 1), col.new_empty(col.shape[0])


@_op("aggregate", mutates_args=())
def aggregate(x: Tensor, rowptr: Tensor, col: Tensor, reduce: str = "sum",
              rowptr_t: Optional[Tensor] = None, col_t: Optional[Tensor] = None, *,
              level: Optional[str] = None) -> Tensor:
    """CSR graph aggregation (PyG's spmm(adj_t, x, reduce)): out[i] = reduce of x[col[e]] over
    e in rowptr[i]:rowptr[i+1], reduce "sum", "mean" or "max"; a node without neighbours gets 0.
    rowptr_t, col_t: the transposed graph (csr_transpose), if already known, for the backward."""
    out = x.new_empty((rowptr.shape[0] - 1,) + tuple(x.shape[1:]))
    _core.aggregate(rowptr, col, x, out, _aggregate_reduce_name(reduce), -1, level, _stream(x))
    return out


def _aggregate_reduce_name(reduce):
    names = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax"}
    if reduce not in names:
        raise ValueError(f"aggregate: reduce {reduce!r} is not one of sum, mean, max")
    return names[reduce]


@register_fake(_NS + "aggregate")
def _(x, rowptr, col, reduce="sum", rowptr_t=None, col_t=None, *, level=None):
    return x.new_empty((rowptr.shape[0] - 1,) + tuple(x.shape[1:]))


# --- gathers --------------------------------------------------------------------------------------

@_op("index_select", mutates_args=())
def index_select(input: Tensor, dim: int, index: Tensor, *, level: Optional[str] = None) -> Tensor:
    """torch.index_select: the slices input[..., index[i], ...] along dim."""
    dim = _dim(dim, input.dim())
    if input.dim() == 0:
        out = input.new_empty(())
        _core.index_select(input.reshape(1), 0, index.reshape(-1), out.reshape(1), level,
                           _stream(input))
        return out
    shape = list(input.shape)
    shape[dim] = index.numel()
    out = input.new_empty(shape)
    _core.index_select(input, dim, index.reshape(-1) if index.dim() == 0 else index, out, level,
                       _stream(input))
    return out


@register_fake(_NS + "index_select")
def _(input, dim, index, *, level=None):
    if input.dim() == 0:
        return input.new_empty(())
    shape = list(input.shape)
    shape[_dim(dim, input.dim())] = index.numel()
    return input.new_empty(shape)


@_op("gather", mutates_args=())
def gather(input: Tensor, dim: int, index: Tensor, *, level: Optional[str] = None) -> Tensor:
    """torch.gather: out[p] = input[p with p[dim] = index[p]]."""
    out = input.new_empty(index.shape)
    _core.gather(input, _dim(dim, input.dim()), index, out, level, _stream(input))
    return out


@register_fake(_NS + "gather")
def _(input, dim, index, *, level=None):
    return input.new_empty(index.shape)


# --- scans, counts, sums, products ----------------------------------------------------------------

@_op("cumsum", mutates_args=())
def cumsum(input: Tensor, dim: int, *, level: Optional[str] = None) -> Tensor:
    """torch.cumsum (inclusive prefix sums along dim): float32, float64, bfloat16 or float16 (a
    half line is summed in float32, each prefix rounded once)."""
    out = _empty_like(input)
    _core.cumsum(input, _dim(dim, input.dim()), out, level, _stream(input))
    return out


@_op("cumsum_", mutates_args=("input",))
def _cumsum_inplace(input: Tensor, dim: int, *, level: Optional[str] = None) -> None:
    _core.cumsum(input, _dim(dim, input.dim()), input, level, _stream(input))


register_fake(_NS + "cumsum", lambda input, dim, *, level=None: _empty_like(input))
register_fake(_NS + "cumsum_", lambda input, dim, *, level=None: None)


@_op("bincount", mutates_args=())
def bincount(input: Tensor, weights: Optional[Tensor] = None, minlength: int = 0, *,
             level: Optional[str] = None) -> Tensor:
    """torch.bincount: counts (int64) or sums of weights per value of a 1-d int32/int64 input.
    The output's length is max(input) + 1 (at least minlength), which, as in torch, reads the
    maximum back to the host. The output dtype is torch's: the weights' for float32/float64,
    float64 for bfloat16/float16 weights (widened exactly, then summed as float64 weights)."""
    if input.dim() != 1:
        raise ValueError(f"bincount: input must be 1-d, got {input.dim()} dimensions")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    n = minlength
    if input.numel() > 0:
        n = max(n, int(input.max()) + 1)
    if weights is not None and weights.dtype in HALF:
        weights = weights.to(torch.float64)
    out = input.new_empty(max(n, 0), dtype=_bincount_dtype(weights))
    _core.bincount(input, weights, out, level, _stream(input))
    return out


def _bincount_dtype(weights):
    """torch's output dtype of bincount: int64 counts, else the weights' dtype, float64 for half
    weights."""
    if weights is None:
        return torch.int64
    return torch.float64 if weights.dtype in HALF else weights.dtype


@register_fake(_NS + "bincount")
def _(input, weights=None, minlength=0, *, level=None):
    n = torch.library.get_ctx().new_dynamic_size()
    return input.new_empty(n, dtype=_bincount_dtype(weights))


@_op("histc", mutates_args=())
def histc(input: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0, *,
          level: Optional[str] = None) -> Tensor:
    """torch.histc: counts in `bins` equal bins over [min, max] (as input's dtype); values outside
    are ignored. min == max takes the data's range (read back to the host, as torch does).
    float32/float64 only."""
    lo, hi = float(min), float(max)
    if lo == hi and input.numel() > 0:
        lo, hi = float(input.min()), float(input.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    out = input.new_empty(bins)
    _core.histc(input, lo, hi, out, level, _stream(input))
    return out


@register_fake(_NS + "histc")
def _(input, bins=100, min=0.0, max=0.0, *, level=None):
    return input.new_empty(bins)


@_op("sum", mutates_args=())
def sum(input: Tensor, dim: Optional[int] = None, keepdim: bool = False, *,
        level: Optional[str] = None) -> Tensor:
    """torch.sum over all elements (dim None) or over one dim, in samebits's canonical order (half
    inputs: summed in float32, rounded once to the input's dtype, as torch's output dtype)."""
    out = input.new_empty(_sum_shape(input, dim, keepdim))
    if dim is None:
        _core.sum(input, out, level, _stream(input))
    else:
        d = _dim(dim, input.dim())
        _core.sum_dim(input, d, out.squeeze(d) if keepdim else out, level, _stream(input))
    return out


def _sum_shape(input, dim, keepdim):
    if dim is None:
        return (1,) * input.dim() if keepdim else ()
    d = _dim(dim, input.dim())
    shape = list(input.shape)
    if keepdim:
        shape[d] = 1
    else:
        del shape[d]
    return shape


@register_fake(_NS + "sum")
def _(input, dim=None, keepdim=False, *, level=None):
    return input.new_empty(_sum_shape(input, dim, keepdim))


@_op("mm", mutates_args=())
def mm(input: Tensor, mat2: Tensor, *, level: Optional[str] = None) -> Tensor:
    """torch.mm: [m, k] @ [k, n], no TF32; bfloat16/float16 as the float32 product of their
    values, each output rounded once."""
    out = input.new_empty((input.shape[0], mat2.shape[1]))
    _core.gemm(False, False, 1.0, input, mat2, 0.0, out, level, _stream(input))
    return out


@register_fake(_NS + "mm")
def _(input, mat2, *, level=None):
    return input.new_empty((input.shape[0], mat2.shape[1]))


@_op("addmm", mutates_args=())
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0, alpha: float = 1.0,
          level: Optional[str] = None) -> Tensor:
    """torch.addmm: beta * input + alpha * (mat1 @ mat2), input broadcast to [m, n]. beta == 0
    ignores input (NaN there too), as torch does. Half dtypes as in mm."""
    out = input.expand(mat1.shape[0], mat2.shape[1]).contiguous()
    if out.data_ptr() == input.data_ptr() and out.numel() > 0:
        out = out.clone()
    _core.gemm(False, False, alpha, mat1, mat2, beta, out, level, _stream(mat1))
    return out


@register_fake(_NS + "addmm")
def _(input, mat1, mat2, *, beta=1.0, alpha=1.0, level=None):
    return mat1.new_empty((mat1.shape[0], mat2.shape[1]))
