"""samebits.torch: samebits ops as PyTorch custom ops, with autograd and torch.compile support.

Every op is a torch.library.custom_op in the `samebits` namespace (torch.ops.samebits.index_add,
...) with torch's own signature and semantics and a `level=` keyword ("not_guaranteed",
"run_to_run", "portable" or samebits.Level; None: the thread's mode, see samebits.determinism).
Backwards are deterministic at the level the forward ran at; fake kernels let
torch.compile(fullgraph=True) trace them.

    import torch, samebits.torch as st
    out = st.index_add(x, 0, index, src, level="portable")
    st.index_add_(x, 0, index, src)          # in place, as Tensor.index_add_
"""
import importlib as _importlib
from typing import Optional as _Optional

import torch as _torch

from . import _autograd, _ops
from ._autograd import csr_transpose
from ._ops import (addmm, aggregate, bincount, cumsum, gather, histc, index_add, index_select, mm,
                   scatter_add, scatter_reduce, segment_csr, segment_reduce, sum)

__all__ = [
    "index_add", "index_add_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
    "segment_reduce", "segment_csr", "aggregate", "csr_transpose", "index_select", "gather",
    "cumsum", "cumsum_", "bincount", "histc", "sum", "mm", "addmm", "addmm_", "IndexPlan",
]


def _needs_grad(*tensors):
    return _torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


# In-place forms, as torch's Tensor methods: they write into input and return it. With autograd
# recording, they are the functional op and a copy_, so the graph sees an ordinary in-place op.

def index_add_(input, dim, index, source, *, alpha=1.0, level: _Optional[str] = None):
    """Tensor.index_add_: adds alpha * source[i] into input at index[i] along dim; returns input."""
    if _needs_grad(input, source):
        return input.copy_(index_add(input, dim, index, source, alpha=alpha, level=level))
    _ops._index_add_inplace(input, dim, index, source, alpha=alpha, level=level)
    return input


def scatter_add_(input, dim, index, src, *, level: _Optional[str] = None):
    """Tensor.scatter_add_; returns input."""
    if _needs_grad(input, src):
        return input.copy_(scatter_add(input, dim, index, src, level=level))
    _ops._scatter_add_inplace(input, dim, index, src, level=level)
    return input


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True,
                    level: _Optional[str] = None):
    """Tensor.scatter_reduce_; returns input."""
    if _needs_grad(input, src):
        return input.copy_(scatter_reduce(input, dim, index, src, reduce,
                                          include_self=include_self, level=level))
    _ops._scatter_reduce_inplace(input, dim, index, src, reduce, include_self=include_self,
                                 level=level)
    return input


def cumsum_(input, dim, *, level: _Optional[str] = None):
    """Tensor.cumsum_; returns input."""
    if _needs_grad(input):
        return input.copy_(cumsum(input, dim, level=level))
    _ops._cumsum_inplace(input, dim, level=level)
    return input


def addmm_(input, mat1, mat2, *, beta=1.0, alpha=1.0, level: _Optional[str] = None):
    """Tensor.addmm_: input = beta * input + alpha * (mat1 @ mat2); returns input."""
    return input.copy_(addmm(input, mat1, mat2, beta=beta, alpha=alpha, level=level))


class IndexPlan:
    """A reusable index plan for a static index (a graph's edges): built once, then every
    index_add through it skips the sort. Wraps samebits.IndexPlan with torch tensors.

        plan = st.IndexPlan(dst, num_nodes)
        out = plan.index_add(torch.zeros(num_nodes, f), messages)
    """

    def __init__(self, index, num_targets):
        self.index = index
        self._plan = _core_plan(index, num_targets)
        self.order = _torch.from_dlpack(self._plan.order)      # int64[n]
        self.offsets = _torch.from_dlpack(self._plan.offsets)  # int64[num_targets + 1]
        self.num_targets = num_targets

    def index_add_(self, out, src, *, alpha=1.0, level: _Optional[str] = None):
        """out[index[i]] += alpha * src[i] (along dim 0), in place; returns out. Not recorded by
        autograd: use index_add for that."""
        self._plan.index_add(out, src, alpha, level, _ops._stream(out))
        return out

    def index_add(self, out, src, *, alpha=1.0, level: _Optional[str] = None):
        """The functional form: a copy of out with src added through the plan."""
        return self.index_add_(_ops._fresh(out), src, alpha=alpha, level=level)


def _core_plan(index, num_targets):
    from .. import _core
    return _core.IndexPlan(index, num_targets, _ops._stream(index))


# The nondeterminism finder and the calibration live in modules of their own, imported when one
# of their names is first used (`import samebits.torch` stays light). Only these names import
# anything: any other missing attribute raises AttributeError at once, so that a probe such as
# hasattr() never imports `check` behind `python -m samebits.torch.check`'s back.
_LAZY_NAMES = {
    "trace": "tracing",
    "find_nondeterminism": "finder",
    "compare_traces": "finder",
    "calibrate": "calibration",
}


def __getattr__(name):
    module_name = _LAZY_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY_NAMES))


# The drop-in mode: torch's own accumulating ops through samebits (mode.py).
from .mode import covered_ops, deterministic, disable, enable, is_enabled, level  # noqa: E402
