"""Backward formulas of the samebits custom ops (torch.library.register_autograd).

Every backward is deterministic at the level its forward ran at (recorded when the forward ran:
the level= argument, else the thread's mode then): accumulations go through samebits ops
(index_add, scatter_add, aggregate), the rest are gathers and elementwise torch ops, which are
deterministic. Formulas follow torch's, including its rules for ties (amax/amin split the gradient
evenly among the elements equal to the result) and zeros (prod).
"""
import torch

from .. import _core
from . import _ops
from ._dispatch import register_autograd


def _count_dtype(dtype):
    """The dtype counts (hits, ties, segment lengths) are kept in: float32 for half values, whose
    integers are exact only up to 256 (bfloat16) or 2048 (float16), else the values' dtype."""
    return torch.float32 if dtype in _ops.HALF else dtype


def _divide(grad, count):
    """grad / count, in float32 for half gradients (rounded once), else in grad's dtype."""
    if grad.dtype in _ops.HALF:
        return (grad.float() / count.float()).to(grad.dtype)
    return grad / count.to(grad.dtype)


def _level(ctx_level):
    return ctx_level if ctx_level is not None else _core.effective_mode(None)[0]


def _save_level(ctx, level):
    ctx.level = _level(level)


def _unscatter(grad_src_full, src_shape):
    """A gradient shaped like index, placed into zeros shaped like src (index may be smaller)."""
    if tuple(grad_src_full.shape) == tuple(src_shape):
        return grad_src_full
    out = grad_src_full.new_zeros(src_shape)
    view = out
    for d, n in enumerate(grad_src_full.shape):
        view = view.narrow(d, 0, n)
    view.copy_(grad_src_full)
    return out


# --- index_add, scatter_add --------------------------------------------------------------------

def _index_add_setup(ctx, inputs, keyword_only_inputs, output):
    input, dim, index, source = inputs
    ctx.dim, ctx.alpha = dim, keyword_only_inputs.get("alpha", 1.0)
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(index)


def _index_add_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    g_source = None
    if ctx.needs_input_grad[3]:
        g_source = _ops.index_select(grad, ctx.dim, index, level=ctx.level)
        if ctx.alpha != 1.0:
            g_source = g_source * ctx.alpha
    return grad, None, None, g_source


register_autograd("index_add", _index_add_backward,
                  setup_context=_index_add_setup)


def _scatter_add_setup(ctx, inputs, keyword_only_inputs, output):
    input, dim, index, src = inputs
    ctx.dim, ctx.src_shape = dim, src.shape
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(index)


def _scatter_add_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    g_src = None
    if ctx.needs_input_grad[3]:
        g_src = _unscatter(_ops.gather(grad, ctx.dim, index, level=ctx.level), ctx.src_shape)
    return grad, None, None, g_src


register_autograd("scatter_add", _scatter_add_backward,
                  setup_context=_scatter_add_setup)


# --- scatter_reduce --------------------------------------------------------------------------

def _scatter_reduce_setup(ctx, inputs, keyword_only_inputs, output):
    input, dim, index, src, reduce = inputs
    ctx.dim, ctx.reduce = dim, reduce
    ctx.include_self = keyword_only_inputs.get("include_self", True)
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.src_shape = src.shape
    ctx.save_for_backward(input, index, src, output)


def _scatter_reduce_backward(ctx, grad):
    input, index, src, result = ctx.saved_tensors
    dim, reduce, include_self, level = ctx.dim, ctx.reduce, ctx.include_self, ctx.level
    # Trim src to index's shape: only those elements contribute.
    for d, n in enumerate(index.shape):
        src = src.narrow(d, 0, n)
    counts = _count_dtype(input.dtype)
    ones = torch.ones_like(src, dtype=counts)
    # Targets that receive at least one contribution (counts are exact in any order).
    hits = _ops.scatter_add(torch.zeros_like(input, dtype=counts), dim, index, ones, level=level)
    hit = hits > 0
    if reduce == "sum":
        g_input = grad if include_self else grad.masked_fill(hit, 0)
        g_src = _ops.gather(grad, dim, index, level=level)
    elif reduce == "mean":
        count = hits + 1 if include_self else hits.clamp(min=1)
        g_input = _divide(grad, count) if include_self else grad.masked_fill(hit, 0)
        g_src = _ops.gather(_divide(grad, count), dim, index, level=level)
    elif reduce in ("amax", "amin"):
        value = _ops.gather(result, dim, index, level=level)
        self_is = (input == result).to(counts)
        if not include_self:
            self_is = self_is.masked_fill(hit, 0)
        src_is = (src == value).to(counts)
        ties = _ops.scatter_add(self_is, dim, index, src_is, level=level)
        share = _divide(grad, ties.masked_fill(ties == 0, 1))
        g_input = self_is.to(grad.dtype) * share
        g_src = src_is.to(grad.dtype) * _ops.gather(share, dim, index, level=level)
    elif reduce == "prod":
        # The product of the others: result / x where x != 0; where x == 0, the product of the
        # non-zero others if x is the only zero of its target, else 0.
        src_zero = (src == 0)
        zeros = _ops.scatter_add(torch.zeros_like(input, dtype=counts), dim, index,
                                 src_zero.to(counts), level=level)
        self_zero = (input == 0)
        if include_self:
            zeros = zeros + self_zero.to(counts)
        prod_nonzero = _ops.scatter_reduce(
            torch.where(self_zero, torch.ones_like(input), input) if include_self
            else torch.ones_like(input), dim, index,
            torch.where(src_zero, torch.ones_like(src), src), "prod", include_self=True,
            level=level)
        g_src_res = _ops.gather(grad * result, dim, index, level=level)
        g_src_nz = _ops.gather(grad * prod_nonzero, dim, index, level=level)
        zeros_at_src = _ops.gather(zeros, dim, index, level=level)
        safe_src = torch.where(src_zero, torch.ones_like(src), src)
        g_src = torch.where(src_zero, torch.where(zeros_at_src == 1, g_src_nz,
                                                  torch.zeros_like(g_src_nz)),
                            g_src_res / safe_src)
        if include_self:
            safe_in = torch.where(self_zero, torch.ones_like(input), input)
            g_input = torch.where(self_zero, torch.where(zeros == 1, grad * prod_nonzero,
                                                         torch.zeros_like(grad)),
                                  grad * result / safe_in)
        else:
            g_input = grad.masked_fill(hit, 0)
    else:
        raise ValueError(f"scatter_reduce backward: reduce {reduce!r}")
    g_src = _unscatter(g_src, ctx.src_shape) if ctx.needs_input_grad[3] else None
    return (g_input if ctx.needs_input_grad[0] else None), None, None, g_src, None


register_autograd("scatter_reduce", _scatter_reduce_backward,
                  setup_context=_scatter_reduce_setup)


# --- segment reductions and aggregation ---------------------------------------------------------

_segment_ids = _ops._segment_ids


def _segment_backward_common(grad, data, out, offsets, reduce, level):
    ids = _segment_ids(offsets, data.shape[0])
    counts = _count_dtype(grad.dtype)
    lengths = (offsets[1:] - offsets[:-1]).to(counts)
    lengths = lengths.reshape((-1,) + (1,) * (grad.dim() - 1))
    if reduce == "sum":
        return _ops.index_select(grad, 0, ids, level=level)
    if reduce == "mean":
        return _ops.index_select(_divide(grad, lengths.clamp(min=1)), 0, ids, level=level)
    # max/min: split evenly among the elements equal to their segment's result.
    is_result = (data == _ops.index_select(out, 0, ids, level=level)).to(counts)
    ties = _ops.segment_csr(is_result, offsets, "sum", level=level)
    share = _divide(grad, ties.masked_fill(ties == 0, 1))
    return is_result.to(grad.dtype) * _ops.index_select(share, 0, ids, level=level)


def _segment_reduce_setup(ctx, inputs, keyword_only_inputs, output):
    data, reduce, lengths, offsets = inputs
    ctx.reduce = reduce
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(data, output, _ops._offsets(lengths, offsets, "segment_reduce"))


def _segment_reduce_backward(ctx, grad):
    data, out, offsets = ctx.saved_tensors
    g = _segment_backward_common(grad, data, out, offsets, ctx.reduce, ctx.level)
    return g, None, None, None


register_autograd("segment_reduce", _segment_reduce_backward,
                  setup_context=_segment_reduce_setup)


def _segment_csr_setup(ctx, inputs, keyword_only_inputs, output):
    src, indptr, ctx.reduce = inputs
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(src, output, indptr)


def _segment_csr_backward(ctx, grad):
    src, out, indptr = ctx.saved_tensors
    g = _segment_backward_common(grad, src, out, indptr, ctx.reduce, ctx.level)
    return g, None, None


register_autograd("segment_csr", _segment_csr_backward,
                  setup_context=_segment_csr_setup)


csr_transpose = _ops.csr_transpose


def _aggregate_setup(ctx, inputs, keyword_only_inputs, output):
    x, rowptr, col, ctx.reduce, rowptr_t, col_t = inputs
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.has_t = rowptr_t is not None and col_t is not None
    ctx.num_sources = x.shape[0]
    saved = [x, output, rowptr, col]
    if ctx.has_t:
        saved += [rowptr_t, col_t]
    ctx.save_for_backward(*saved)


def _aggregate_backward(ctx, grad):
    saved = ctx.saved_tensors
    x, out, rowptr, col = saved[:4]
    level = ctx.level
    if ctx.reduce in ("max",):
        # Edge-level: the gradient of out[i] goes to the neighbours equal to it, split evenly;
        # accumulated into x's rows by samebits index_add (deterministic).
        rows = _segment_ids(rowptr, col.shape[0])
        xe = _ops.index_select(x, 0, col, level=level)
        is_result = (xe == _ops.index_select(out, 0, rows, level=level)).to(
            _count_dtype(grad.dtype))
        ties = _ops.segment_csr(is_result, rowptr, "sum", level=level)
        share = _divide(grad, ties.masked_fill(ties == 0, 1))
        ge = is_result.to(grad.dtype) * _ops.index_select(share, 0, rows, level=level)
        g = _ops.index_add(torch.zeros_like(x), 0, col, ge, level=level)
        return g, None, None, None, None, None
    if ctx.has_t:
        rowptr_t, col_t = saved[4:6]
    else:
        rowptr_t, col_t = csr_transpose(rowptr, col, ctx.num_sources)
    if ctx.reduce == "mean":
        deg = (rowptr[1:] - rowptr[:-1]).to(_count_dtype(grad.dtype)).clamp(min=1)
        grad = _divide(grad, deg.reshape((-1,) + (1,) * (grad.dim() - 1)))
    g = _ops.aggregate(grad.contiguous(), rowptr_t, col_t, "sum", level=level)
    return g, None, None, None, None, None


register_autograd("aggregate", _aggregate_backward,
                  setup_context=_aggregate_setup)


# --- gathers --------------------------------------------------------------------------------------

def _gather_like_setup(ctx, inputs, keyword_only_inputs, output):
    """index_select and gather: (input, dim, index) and the level; the backward scatters."""
    input, dim, index = inputs
    ctx.dim = dim
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(input, index)


def _index_select_backward(ctx, grad):
    input, index = ctx.saved_tensors
    g = _ops.index_add(torch.zeros_like(input), ctx.dim, index, grad, level=ctx.level)
    return g, None, None


register_autograd("index_select", _index_select_backward,
                  setup_context=_gather_like_setup)


def _gather_backward(ctx, grad):
    input, index = ctx.saved_tensors
    g = _ops.scatter_add(torch.zeros_like(input), ctx.dim, index, grad, level=ctx.level)
    return g, None, None


register_autograd("gather", _gather_backward, setup_context=_gather_like_setup)


# --- scans, counts, sums, products ----------------------------------------------------------------

def _cumsum_setup(ctx, inputs, keyword_only_inputs, output):
    ctx.dim = inputs[1]
    _save_level(ctx, keyword_only_inputs.get("level"))


def _cumsum_backward(ctx, grad):
    # d out[j] / d x[i] = 1 for j >= i: the reversed cumulative sum of the gradient.
    g = _ops.cumsum(grad.flip(ctx.dim), ctx.dim, level=ctx.level).flip(ctx.dim)
    return g, None


register_autograd("cumsum", _cumsum_backward, setup_context=_cumsum_setup)


def _bincount_setup(ctx, inputs, keyword_only_inputs, output):
    ctx.has_weights = inputs[1] is not None
    ctx.weights_dtype = inputs[1].dtype if ctx.has_weights else None
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(inputs[0])


def _bincount_backward(ctx, grad):
    (input,) = ctx.saved_tensors
    if not ctx.has_weights:
        return None, None, None
    # Half weights have a float64 output (torch's rule): their gradient is rounded back once.
    g = _ops.index_select(grad, 0, input, level=ctx.level).to(ctx.weights_dtype)
    return None, g, None


register_autograd("bincount", _bincount_backward,
                  setup_context=_bincount_setup)


def _sum_setup(ctx, inputs, keyword_only_inputs, output):
    input = inputs[0]
    ctx.dim, ctx.keepdim = inputs[1], inputs[2]
    ctx.shape = input.shape
    _save_level(ctx, keyword_only_inputs.get("level"))


def _sum_backward(ctx, grad):
    if ctx.dim is not None and not ctx.keepdim:
        grad = grad.unsqueeze(ctx.dim)
    elif ctx.dim is None:
        grad = grad.reshape((1,) * len(ctx.shape))
    return grad.expand(ctx.shape).contiguous(), None, None


register_autograd("sum", _sum_backward, setup_context=_sum_setup)


def _mm_setup(ctx, inputs, keyword_only_inputs, output):
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(inputs[0], inputs[1])


def _mm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = _ops.mm(grad, b.t(), level=ctx.level) if ctx.needs_input_grad[0] else None
    gb = _ops.mm(a.t(), grad, level=ctx.level) if ctx.needs_input_grad[1] else None
    return ga, gb


register_autograd("mm", _mm_backward, setup_context=_mm_setup)


def _addmm_setup(ctx, inputs, keyword_only_inputs, output):
    input, mat1, mat2 = inputs
    ctx.beta = keyword_only_inputs.get("beta", 1.0)
    ctx.alpha = keyword_only_inputs.get("alpha", 1.0)
    ctx.input_shape = input.shape
    _save_level(ctx, keyword_only_inputs.get("level"))
    ctx.save_for_backward(mat1, mat2)


def _reduce_to(grad, shape, level):
    """Sums a broadcast gradient back to `shape` (samebits sums: the same bits every run)."""
    while grad.dim() > len(shape):
        grad = _ops.sum(grad, 0, level=level)
    for d, n in enumerate(shape):
        if n == 1 and grad.shape[d] != 1:
            grad = _ops.sum(grad, d, True, level=level)
    return grad


def _addmm_backward(ctx, grad):
    mat1, mat2 = ctx.saved_tensors
    level, alpha = ctx.level, ctx.alpha
    g_in = g1 = g2 = None
    if ctx.needs_input_grad[0]:
        g_in = _reduce_to(grad if ctx.beta == 1.0 else grad * ctx.beta, ctx.input_shape, level)
    if ctx.needs_input_grad[1]:
        g1 = _ops.mm(grad, mat2.t(), level=level)
        g1 = g1 if alpha == 1.0 else g1 * alpha
    if ctx.needs_input_grad[2]:
        g2 = _ops.mm(mat1.t(), grad, level=level)
        g2 = g2 if alpha == 1.0 else g2 * alpha
    return g_in, g1, g2


register_autograd("addmm", _addmm_backward, setup_context=_addmm_setup)
