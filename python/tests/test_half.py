"""bfloat16 and float16 through samebits.torch, the core binding and the drop-in mode.

A half op accumulates in float32 in the op's canonical order and rounds once to the output dtype.
Generated over op x {bfloat16, float16} x level x device, on fresh random inputs (never zero):
- values against float64 (torch's op on the exactly widened inputs): within one unit in the last
  place of the half dtype of that reference rounded once (plus the float32 chain's own error
  bound, far below it at these sizes), exactly equal for gathers and amax/amin;
- at portable: the same bits as the float32 op on the widened inputs rounded once (what the
  staging promises) and as the C++ library through samebits._core on the same tensors, read
  through DLPack;
- the same bits on every repeat and every CPU thread count at run_to_run and portable, and on
  the CPU and CUDA at portable (where a GPU is present);
- backwards: half gradients at the forward's level, the same bits every run, close to the
  float64 backward;
- the drop-in mode on half tensors runs samebits (calls()) with the same bits as the
  samebits.torch op, and ops samebits does not take in half fall through to torch;
- mismatched dtypes raise and leave the output untouched.
"""
import os

import numpy as np
import pytest
import torch
from torch.library import opcheck

import samebits
import samebits.torch as st
from samebits import _core
from samebits.torch import mode as sbmode
from conftest import DEVICES, grid_sample_grads, needs_cuda
from test_torch_ops import _aggregate_ref, _csr

HALF = [torch.bfloat16, torch.float16]
HALF_IDS = ["bf16", "f16"]
LEVELS = ["not_guaranteed", "run_to_run", "portable"]
F64 = torch.float64
# (bits of precision including the implicit bit, exponent of the smallest normal number)
_FORMAT = {torch.bfloat16: (8, -126), torch.float16: (11, -14)}


def _seed(*labels):
    """A fresh seed per test (SAMEBITS_TEST_SEED replays one), printed for replay."""
    seed = int(os.environ.get("SAMEBITS_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"seed {seed} (SAMEBITS_TEST_SEED={seed} replays it) for {labels}")
    return torch.Generator().manual_seed(seed)


def _values(g, dtype, *shape, positive=False):
    """Random values rounded to dtype, never zero (normal, or in [0.5, 1.5) for products)."""
    shape = tuple(shape)
    x = torch.rand(shape, generator=g, dtype=F64) + 0.5 if positive else torch.randn(
        shape, generator=g, dtype=F64)
    x = x.to(dtype)
    return torch.where(x == 0, torch.ones_like(x), x)


def _ints(g, high, *shape):
    return torch.randint(0, high, shape, generator=g)


def _cap(t):
    """A DLPack capsule of t: the raw C++ calls read every tensor through DLPack."""
    return torch.utils.dlpack.to_dlpack(t)


def ulp(mag, dtype):
    """The spacing of dtype's numbers at magnitude mag (float64 tensor), subnormals included."""
    p, emin = _FORMAT[dtype]
    _, e = torch.frexp(mag)                  # mag = m * 2^e, m in [0.5, 1)
    e = torch.clamp(e - 1, min=emin)
    return torch.ldexp(torch.ones_like(mag), e - (p - 1))


def round_once(x, dtype):
    """float64 -> dtype, correctly rounded in one step (as samebits rounds a float64 result):
    torch's .to() goes through float32, which can round twice. Float32 rounded to odd, then to
    nearest even, is one correct rounding."""
    r = x.float()
    inexact = r.double() != x
    toward_zero = torch.where(r.double().abs() > x.abs(), torch.nextafter(r, torch.zeros_like(r)),
                              r)
    odd = (toward_zero.view(torch.int32) | 1).view(torch.float32)
    return torch.where(inexact, odd, r).to(dtype)


def assert_within_ulps(out, ref, dtype, ulps=1, slack=None):
    """|out - round(ref)| <= ulps units in the last place of dtype (at the larger magnitude of the
    two), plus `slack` (float64, per element: the float32 chain's error bound)."""
    o, r = out.double().cpu(), ref.to(dtype).double().cpu()
    allowed = ulps * ulp(torch.maximum(o.abs(), r.abs()), dtype)
    if slack is not None:
        allowed = allowed + slack.cpu()
    err = (o - r).abs()
    bad = ~(err <= allowed)
    if bool(bad.any()):
        k = int(torch.argmax((err - allowed).reshape(-1)))
        raise AssertionError(
            f"{int(bad.sum())} of {o.numel()} elements more than {ulps} ulp from the float64 "
            f"reference rounded to {dtype}; worst at flat {k}: got {o.reshape(-1)[k].item()!r}, "
            f"reference {ref.reshape(-1)[k].item()!r} -> {r.reshape(-1)[k].item()!r}, allowed "
            f"{allowed.reshape(-1)[k].item():.3g}")


# --- the cases ------------------------------------------------------------------------------------
# A case: op (a samebits.torch function), args, kwargs, ref (torch on float64 arguments), exact,
# terms (longest float32 chain, for the slack), diff (differentiable argument positions), raw
# (the C++ op through _core at portable: a function of the args returning its output, or None)
# and wide (the dtype the staging check widens to: float32, or float64 for bincount).

class Case:
    def __init__(self, op, args, ref, *, kwargs=None, exact=False, terms=1, diff=(), raw=None,
                 wide=torch.float32, magnitude=None):
        self.op, self.args, self.ref, self.kwargs = op, args, ref, kwargs or {}
        self.exact, self.terms, self.diff, self.raw, self.wide = exact, terms, diff, raw, wide
        # The sum of the magnitudes the result adds, per element, from float64 arguments:
        # ref on their absolute values, unless a negative factor (alpha) needs its own.
        self.magnitude = magnitude or (lambda *a: ref(*_abs(a)).abs())

    def to(self, device):
        self.args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in self.args)
        return self


def _clone_out(x):
    return x.clone(memory_format=torch.contiguous_format)


def case_index_add(g, dtype, n):
    m, f, k = 7 * n, 5, 40 * n
    x, i, s = _values(g, dtype, m, f), _ints(g, m, k), _values(g, dtype, k, f)

    def raw(x, dim, i, s):
        out = _clone_out(x)
        _core.index_add(_cap(out), _cap(i), _cap(s), 1.0, "portable")
        return out
    return Case(st.index_add, (x, 0, i, s), lambda x, d, i, s: x.index_add(0, i, s), terms=k,
                diff=(0, 3), raw=raw)


def case_index_add_alpha_dim1(g, dtype, n):
    m, k = 6 * n, 30 * n
    x, i, s = _values(g, dtype, 3, m), _ints(g, m, k), _values(g, dtype, 3, k)

    def raw(x, dim, i, s):
        out = _clone_out(x)
        _core.index_add(_cap(out.movedim(1, 0)), _cap(i), _cap(s.movedim(1, 0)), -0.75,
                        "portable")
        return out
    return Case(st.index_add, (x, 1, i, s),
                lambda x, d, i, s: x.index_add(1, i, s, alpha=-0.75), kwargs={"alpha": -0.75},
                terms=k, diff=(0, 3), raw=raw,
                magnitude=lambda x, d, i, s: x.abs().index_add(1, i, s.abs(), alpha=0.75))


def case_scatter_add(g, dtype, n):
    m, k = 5 * n, 30 * n
    x, i, s = _values(g, dtype, m, 4), _ints(g, m, k, 3), _values(g, dtype, k + 2, 4)

    def raw(x, dim, i, s):
        out = _clone_out(x)
        _core.scatter_add(_cap(out), 0, _cap(i), _cap(s), "portable")
        return out
    return Case(st.scatter_add, (x, 0, i, s), lambda x, d, i, s: x.scatter_add(0, i, s),
                terms=k, diff=(0, 3), raw=raw)


def _case_scatter_reduce(reduce, include_self):
    def case(g, dtype, n):
        m, k = 6 * n, (12 if reduce == "prod" else 30) * n
        positive = reduce == "prod"
        x = _values(g, dtype, m, 3, positive=positive)
        i, s = _ints(g, m, k, 3), _values(g, dtype, k, 3, positive=positive)

        def raw(x, dim, i, s, r):
            out = _clone_out(x)
            _core.scatter_reduce(_cap(out), 0, _cap(i), _cap(s), r, include_self, "portable")
            return out
        return Case(st.scatter_reduce, (x, 0, i, s, reduce),
                    lambda x, d, i, s, r: x.scatter_reduce(0, i, s, r, include_self=include_self),
                    kwargs={"include_self": include_self}, exact=reduce in ("amax", "amin"),
                    terms=k, diff=(0, 3), raw=raw)
    return case


_SEGMENT_NAMES = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}


def _case_segment(reduce):
    def case(g, dtype, n):
        lengths = _ints(g, 6, 8 * n) + 1
        data = _values(g, dtype, int(lengths.sum()), 3)
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])

        def raw(data, r, lengths):
            out = data.new_empty((lengths.numel(), 3))
            _core.segment_reduce(_cap(data), _cap(offsets.to(data.device)), _cap(out),
                                 _SEGMENT_NAMES[reduce], "portable")
            return out
        return Case(st.segment_reduce, (data, reduce, lengths),
                    lambda d, r, L: torch.segment_reduce(d, r, lengths=L),
                    exact=reduce in ("max", "min"), terms=6, diff=(0,), raw=raw)
    return case


def _case_segment_csr(reduce):
    def case(g, dtype, n):
        lengths = _ints(g, 5, 7 * n)                    # empty segments give 0, as in PyG
        data = _values(g, dtype, int(lengths.sum()), 2)
        indptr = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])

        def ref(d, ptr, r):
            L = ptr[1:] - ptr[:-1]
            return torch.segment_reduce(d, r, lengths=L).masked_fill((L == 0)[:, None], 0.0)
        return Case(st.segment_csr, (data, indptr, reduce), ref,
                    exact=reduce in ("max", "min"), terms=5, diff=(0,))
    return case


def _case_aggregate(reduce):
    def case(g, dtype, n):
        x = _values(g, dtype, 9 * n, 3)
        rowptr, col = _csr(g, 6 * n, 9 * n, max_degree=6)

        def raw(x, rowptr, col, r):
            out = x.new_empty((rowptr.numel() - 1, 3))
            _core.aggregate(_cap(rowptr), _cap(col), _cap(x), _cap(out),
                            {"max": "amax"}.get(r, r), -1, "portable")
            return out
        return Case(st.aggregate, (x, rowptr, col, reduce),
                    lambda x, rowptr, col, r: _aggregate_ref(x, rowptr, col, r),
                    exact=reduce == "max", terms=6, diff=(0,), raw=raw)
    return case


def case_index_select(g, dtype, n):
    x, i = _values(g, dtype, 5, 6 * n), _ints(g, 6 * n, 8 * n)

    def raw(x, dim, i):
        out = x.new_empty((5, i.numel()))
        _core.index_select(_cap(x), 1, _cap(i), _cap(out), "portable")
        return out
    return Case(st.index_select, (x, 1, i), lambda x, d, i: x.index_select(1, i), exact=True,
                diff=(0,), raw=raw)


def case_gather(g, dtype, n):
    x, i = _values(g, dtype, 5, 6 * n), _ints(g, 6 * n, 4, 7 * n)

    def raw(x, dim, i):
        out = x.new_empty(i.shape)
        _core.gather(_cap(x), 1, _cap(i), _cap(out), "portable")
        return out
    return Case(st.gather, (x, 1, i), lambda x, d, i: x.gather(1, i), exact=True, diff=(0,),
                raw=raw)


def case_cumsum(g, dtype, n):
    x = _values(g, dtype, 4, 300 * n)

    def raw(x, dim):
        out = torch.empty_like(x)
        _core.cumsum(_cap(x), 1, _cap(out), "portable")
        return out
    return Case(st.cumsum, (x, 1), lambda x, d: x.cumsum(1), terms=64, diff=(0,), raw=raw)


def case_cumsum_dim0(g, dtype, n):
    x = _values(g, dtype, 70 * n, 3)
    return Case(st.cumsum, (x, 0), lambda x, d: x.cumsum(0), terms=64, diff=(0,))


def case_sum(g, dtype, n):
    x = _values(g, dtype, 70, 90 * n)

    def raw(x):
        out = x.new_empty(())
        _core.sum(_cap(x), _cap(out), "portable")
        return out
    # The canonical tree's longest rounding chain: 16 per lane, 8 in the lane tree, per level.
    return Case(st.sum, (x,), lambda x: x.sum(), terms=64, diff=(0,), raw=raw)


def case_sum_dim(g, dtype, n):
    x = _values(g, dtype, 5, 70 * n, 3)

    def raw(x, dim, keepdim):
        out = x.new_empty((5, 3))
        _core.sum_dim(_cap(x), 1, _cap(out), "portable")
        return out.reshape(5, 1, 3)
    return Case(st.sum, (x, 1, True), lambda x, d, k: x.sum(1, keepdim=True), terms=70 * n,
                diff=(0,), raw=raw)


def case_bincount_weights(g, dtype, n):
    # torch's output dtype for half weights is float64: the raw C++ call with a half output
    # rounds that float64 result once, so the samebits.torch result rounded to dtype equals it.
    i, w = _ints(g, 9 * n, 30 * n), _values(g, dtype, 30 * n)
    m = 9 * n + 3

    def raw(i, w, minlength):
        out = torch.empty(m, dtype=w.dtype, device=w.device)
        _core.bincount(_cap(i), _cap(w), _cap(out), "portable")
        return out
    return Case(st.bincount, (i, w, m), lambda i, w, m: torch.bincount(i, w, m), terms=30 * n,
                diff=(1,), raw=raw, wide=F64)


CASES = {f.__name__[5:]: f for f in (
    case_index_add, case_index_add_alpha_dim1, case_scatter_add, case_index_select, case_gather,
    case_cumsum, case_cumsum_dim0, case_sum, case_sum_dim, case_bincount_weights)}
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        CASES[f"scatter_reduce_{_r}_{'self' if _inc else 'noself'}"] = \
            _case_scatter_reduce(_r, _inc)
for _r in ("sum", "mean", "max", "min"):
    CASES[f"segment_reduce_{_r}"] = _case_segment(_r)
    CASES[f"segment_csr_{_r}"] = _case_segment_csr(_r)
for _r in ("sum", "mean", "max"):
    CASES[f"aggregate_{_r}"] = _case_aggregate(_r)
NAMES = sorted(CASES)


def _widen(args, dtype):
    return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args)


def _abs(args):
    return tuple(a.abs() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args)


def _hash(t):
    return samebits.content_hash(t)


# --- values -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_values_within_one_ulp_of_float64(name, dtype, level, device):
    c = CASES[name](_seed(name, dtype, level, device), dtype, 1).to(device)
    out = c.op(*c.args, **c.kwargs, level=level)
    wide = _widen(c.args, F64)
    ref = c.ref(*wide)
    if c.wide == F64:                                  # bincount: float64 out, as torch
        assert out.dtype == F64
        scale = c.ref(*_abs(wide))
        torch.testing.assert_close(out.cpu(), ref.cpu(), rtol=0,
                                   atol=float(scale.max()) * c.terms * 2.0**-52)
        return
    assert out.dtype == dtype and out.shape == ref.shape
    if c.exact:
        assert torch.equal(out.double().cpu(), ref.cpu())
        return
    # CUDA index_add at not_guaranteed is PyTorch's 16-bit atomicAdd: one rounding per add, each
    # at the magnitude of the partial sum, so the bound is that of a sum rounded at every step in
    # the 16-bit format: terms units of its roundoff (2^-p) times the sum of magnitudes.
    atomic = level == "not_guaranteed" and device == "cuda" and c.op is st.index_add
    magnitudes = c.magnitude(*wide)
    slack = magnitudes * (2 * c.terms * 2.0**-24)
    if atomic:
        slack = slack + magnitudes * ((c.terms + 1) * 2.0**-_FORMAT[dtype][0])
    assert_within_ulps(out, ref, dtype, 1, slack)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_portable_is_the_float32_op_rounded_once_and_the_cpp_library(name, dtype, device):
    c = CASES[name](_seed(name, dtype, device), dtype, 1).to(device)
    out = c.op(*c.args, **c.kwargs, level="portable")
    wide = c.op(*_widen(c.args, c.wide), **c.kwargs, level="portable")
    assert _hash(out) == _hash(wide.to(out.dtype))
    if c.raw is not None:
        raw = c.raw(*c.args)
        assert raw.dtype == dtype
        assert _hash(round_once(out, dtype) if out.dtype == F64 else out) == _hash(raw)


@pytest.mark.parametrize("level", ["run_to_run", "portable"])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_same_bits_on_every_repeat_and_thread_count(name, dtype, level):
    c = CASES[name](_seed(name, dtype, level), dtype, 40)          # large enough to split
    before = _core.num_threads()
    hashes = set()
    try:
        for threads in (1, 2, 3, 4):
            _core.set_num_threads(threads)
            for _ in range(2):
                hashes.add(_hash(c.op(*c.args, **c.kwargs, level=level)))
    finally:
        _core.set_num_threads(before)
    assert len(hashes) == 1, f"{len(hashes)} different results"


@needs_cuda
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_cuda_bitwise_equal_to_cpu_at_portable(name, dtype):
    for n in (1, 40):
        c = CASES[name](_seed(name, dtype, n), dtype, n)
        cpu = c.op(*c.args, **c.kwargs, level="portable")
        cuda = c.op(*c.to("cuda").args, **c.kwargs, level="portable")
        assert _hash(cpu) == _hash(cuda)
        for _ in range(3):
            assert _hash(c.op(*c.args, **c.kwargs, level="run_to_run").cpu()) == _hash(
                c.op(*c.args, **c.kwargs, level="run_to_run").cpu())


# --- backwards ------------------------------------------------------------------------------------

def _grads(c, level, go, dtype=None):
    args = list(_widen(c.args, dtype) if dtype else c.args)
    leaves = []
    for i in c.diff:
        args[i] = args[i].detach().requires_grad_()
        leaves.append(args[i])
    out = c.op(*args, **c.kwargs, level=level)
    out.backward(go.to(out.dtype))
    return [t.grad for t in leaves]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", ["run_to_run", "portable"])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n](torch.Generator(), HALF[1], 1).diff])
def test_backward_in_half(name, dtype, level, device):
    g = _seed(name, dtype, level, device)
    c = CASES[name](g, dtype, 1).to(device)
    shape = c.op(*c.args, **c.kwargs, level=level).shape
    out_dtype = F64 if c.wide == F64 else dtype
    go = _values(g, out_dtype, *shape).to(device)
    first = _grads(c, level, go)
    again = _grads(c, level, go)
    ref = _grads(c, level, go.double(), F64)     # the same formulas in float64 (gradchecked)
    # A backward is linear in the output gradient: with |go| it sums the terms' magnitudes.
    scale = _grads(c, level, go.double().abs(), F64)
    for a, b, r, m, i in zip(first, again, ref, scale, c.diff):
        assert a.dtype == c.args[i].dtype == dtype
        assert _hash(a) == _hash(b), "the backward gave other bits on a second run"
        # A few roundings in the formula (mean, prod, ties: 4 ulps), and half terms rounded once
        # before they are summed (mean's grad / count): 2 ulps of the terms' magnitude.
        assert_within_ulps(a, r, dtype, 4, 2 * ulp(m.abs().cpu(), dtype))


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_opcheck_half(name, dtype):
    # Fake kernels give torch's dtypes (float64 for bincount with half weights), autograd and
    # the dispatcher agree with the kernel.
    c = CASES[name](_seed(name, dtype), dtype, 1)
    args = list(c.args)
    for i in c.diff:
        args[i] = args[i].requires_grad_()
    results = opcheck(c.op.op, tuple(args), c.kwargs)
    assert all(v == "SUCCESS" for v in results.values()), results


# --- dtypes that do not go together, ops without half ---------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("target,values", [(torch.bfloat16, torch.float16),
                                           (torch.float16, torch.bfloat16),
                                           (torch.bfloat16, torch.float32),
                                           (torch.float32, torch.float16)])
def test_mismatched_dtypes_raise_and_leave_the_output(target, values, device):
    g = _seed(target, values, device)
    x = _values(g, target, 6, 4).to(device)
    s = _values(g, values, 9, 4).to(device)
    i = _ints(g, 6, 9).to(device)
    gi = _ints(g, 6, 9, 4).to(device)
    calls = [lambda y: st.index_add_(y, 0, i, s), lambda y: st.scatter_add_(y, 0, gi, s),
             lambda y: st.scatter_reduce_(y, 0, gi, s, "amax"),
             lambda y: st.scatter_reduce_(y, 0, gi, s, "mean", include_self=False),
             lambda y: st.index_add(y, 0, i, s), lambda y: st.scatter_add(y, 0, gi, s)]
    for call in calls:
        y = x.clone()
        with pytest.raises(samebits.InvalidArgument, match="dtypes differ") as e:
            call(y)
        assert str(target).split(".")[-1].replace("half", "float16") in str(e.value)
        assert torch.equal(y, x)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_ops_without_half_raise(dtype):
    a = torch.randn(4, 3).to(dtype)
    with pytest.raises(samebits.InvalidArgument, match="histc.*float32 or float64"):
        st.histc(a, 5, -1.0, 1.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_mm_and_addmm_are_the_float32_product_rounded_once(dtype, device):
    g = _seed(dtype, device)
    a = _values(g, dtype, 37, 300).to(device)
    b = _values(g, dtype, 300, 21).to(device)
    bias = _values(g, dtype, 21).to(device)
    for level in ("run_to_run", "portable"):
        got = st.mm(a, b, level=level)
        assert got.dtype == dtype
        assert torch.equal(got, st.mm(a.float(), b.float(), level=level).to(dtype))
        got = st.addmm(bias, a, b, beta=0.5, alpha=2.0, level=level)
        assert torch.equal(got, st.addmm(bias.float(), a.float(), b.float(), beta=0.5, alpha=2.0,
                                         level=level).to(dtype))
    # against float64: the float32 error of 300 terms plus half an ulp of the dtype
    ref = a.double() @ b.double()
    err = (st.mm(a, b).double() - ref).abs()
    scale = a.double().abs() @ b.double().abs()
    unit = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    assert bool((err <= 2 * 302 * 2.0 ** -24 * scale + unit * ref.abs()).all())


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_mm_half_backward_is_mm_of_the_gradients(dtype):
    g = _seed(dtype)
    a = _values(g, dtype, 6, 40).requires_grad_()
    b = _values(g, dtype, 40, 5).requires_grad_()
    out = st.mm(a, b, level="portable")
    grad = _values(g, dtype, 6, 5)
    out.backward(grad)
    assert torch.equal(a.grad, st.mm(grad, b.detach().t(), level="portable"))
    assert torch.equal(b.grad, st.mm(a.detach().t(), grad, level="portable"))


# --- the core binding: DLPack, NumPy float16, arrays back out -------------------------------------

@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_torch_half_through_dlpack_and_back(dtype):
    g = _seed(dtype)
    x = _values(g, dtype, 5, 3)
    assert samebits.content_hash(_cap(x)) == samebits.content_hash(x)
    assert samebits.content_hash(x) != samebits.content_hash(x.float())
    back = torch.from_dlpack(_core._copy_for_test(x.t()))     # a samebits tensor as an array
    assert back.dtype == dtype and torch.equal(back.view(torch.int16), x.t().view(torch.int16))


def test_numpy_float16_through_the_core_binding():
    g = _seed("numpy")
    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=g)))
    src = rng.standard_normal((50, 4)).astype(np.float16)
    src[src == 0] = 1
    index = rng.integers(0, 7, 50)
    out = np.zeros((7, 8), np.float16)
    view = out[:, ::2]                                         # strided, written in place
    _core.index_add(view, index, src, 1.0, "portable")
    assert np.all(out[:, 1::2] == 0)
    # The same bits as a torch float16 tensor through torch's accessors, and within one ulp of
    # the float64 sum rounded once.
    t = torch.zeros(7, 4, dtype=torch.float16)
    _core.index_add(t, torch.from_numpy(index), torch.from_numpy(src), 1.0, "portable")
    assert samebits.content_hash(np.ascontiguousarray(view)) == samebits.content_hash(t)
    expected = np.zeros((7, 4))
    np.add.at(expected, index, src.astype(np.float64))
    assert_within_ulps(torch.from_numpy(np.ascontiguousarray(view)), torch.from_numpy(expected),
                       torch.float16, 1, torch.full((7, 4), 50 * 2.0**-22))
    total = np.zeros((), np.float16)
    _core.sum(src, total, "portable")
    assert_within_ulps(torch.from_numpy(total.reshape(1)),
                       torch.tensor([src.astype(np.float64).sum()]), torch.float16, 1,
                       torch.tensor([np.abs(src.astype(np.float64)).sum() * 64 * 2.0**-23]))
    back = np.from_dlpack(_core._copy_for_test(src[::3]))
    assert back.dtype == np.float16 and np.array_equal(back.view(np.int16),
                                                       src[::3].view(np.int16))


def test_unsupported_dtypes_name_the_supported_ones():
    with pytest.raises(ValueError, match="bfloat16, float16"):
        _core.sum(torch.zeros(3, dtype=torch.int16), torch.zeros((), dtype=torch.int16))
    with pytest.raises(ValueError, match="DLPack code 0, 16 bits.*bfloat16, float16"):
        _core.sum(np.zeros(3, np.int16), np.zeros((), np.int16))


# --- the drop-in mode on half tensors -------------------------------------------------------------

def _mode_cases():
    """The drop-in mode's cases (test_mode.py) that take half, and extra half ones."""
    import test_mode
    return [c for c in test_mode.CASES if c.__name__ != "case_histc"]


def _mode_case_cumsum_to_float32(g, dtype, device):
    x = _values(g, dtype, 5, 40).to(device)
    return ("cumsum", lambda: torch.cumsum(x, 1, dtype=torch.float32),
            lambda: torch.cumsum(x.double(), 1))


MODE_CASES = _mode_cases() + [_mode_case_cumsum_to_float32]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", ["run_to_run", "portable"])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("case", MODE_CASES, ids=lambda c: c.__name__.split("case_")[-1])
def test_mode_runs_samebits_on_half(case, dtype, level, device):
    op, run, reference = case(_seed(case.__name__, dtype, level, device), dtype, device)
    assert "aten::" + op in st.covered_ops(dtype)
    sbmode.reset_calls()
    with st.deterministic(level):
        first = run()
        again = run()
    base = op.split(".")[0].rstrip("_")
    assert any(k.split(".")[0].rstrip("_") == base for k in sbmode.calls()), \
        f"{op} did not run through samebits: {sbmode.calls()}"
    assert _hash(first) == _hash(again), "the same call gave other bits"
    expected = reference()
    if first.dtype in (torch.float32, F64):        # bincount (float64), cumsum(dtype=float32)
        tol = 1e-12 if first.dtype == F64 else 1e-5
        torch.testing.assert_close(first.double().cpu(), expected.double().cpu(), rtol=tol,
                                   atol=tol)
        return
    assert first.dtype == dtype
    # One rounding of a float32 sum of a few tens of terms (slack: that sum's error).
    assert_within_ulps(first, expected, dtype, 1, expected.abs().max().cpu() * 2.0**-16)


def _run_mode(level, fn):
    sbmode.reset_calls()
    with st.deterministic(level):
        out = fn()
    return out, sbmode.calls()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", ["run_to_run", "portable"])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_mode_gives_the_samebits_ops_bits_on_half(dtype, level, device):
    g = _seed(dtype, level, device)
    x, s = _values(g, dtype, 30, 8).to(device), _values(g, dtype, 500, 8).to(device)
    i = _ints(g, 30, 500).to(device)
    gi = _ints(g, 30, 500, 8).to(device)
    lengths = (_ints(g, 5, 200) + 1).to(device)
    data = _values(g, dtype, int(lengths.sum()), 3).to(device)
    w = _values(g, dtype, 500).to(device)
    pairs = [
        ("index_add", lambda: torch.index_add(x, 0, i, s, alpha=0.5),
         lambda: st.index_add(x, 0, i, s, alpha=0.5, level=level)),
        ("scatter_add", lambda: torch.scatter_add(x, 0, gi, s),
         lambda: st.scatter_add(x, 0, gi, s, level=level)),
        ("scatter_reduce.two", lambda: torch.scatter_reduce(x, 0, gi, s, "mean"),
         lambda: st.scatter_reduce(x, 0, gi, s, "mean", level=level)),
        ("cumsum", lambda: torch.cumsum(s, 0), lambda: st.cumsum(s, 0, level=level)),
        ("segment_reduce", lambda: torch.segment_reduce(data, "max", lengths=lengths),
         lambda: st.segment_reduce(data, "max", lengths, level=level)),
        ("bincount", lambda: torch.bincount(i, w), lambda: st.bincount(i, w, level=level)),
        ("_index_put_impl_", lambda: x.clone().index_put_((i,), s, accumulate=True),
         lambda: st.index_add(x, 0, i, s, level=level)),
    ]
    for op, torch_call, samebits_call in pairs:
        out, calls = _run_mode(level, torch_call)
        assert calls.get(op, 0) == 1, (op, calls)
        assert _hash(out) == _hash(samebits_call()), op

    # embedding's backward is index_add of the output gradient's rows
    weight = _values(g, dtype, 30, 8).to(device).requires_grad_()
    go = _values(g, dtype, 500, 8).to(device)
    _, calls = _run_mode(level, lambda: torch.nn.functional.embedding(i, weight).backward(go))
    assert calls.get("embedding_dense_backward", 0) == 1
    assert weight.grad.dtype == dtype
    assert _hash(weight.grad) == _hash(st.index_add(torch.zeros_like(x), 0, i, go, level=level))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("kw", [dict(mode="sum"), dict(mode="mean"), dict(mode="max"),
                                dict(mode="sum", per_sample_weights=True),
                                dict(mode="mean", padding_idx=3)], ids=str)
def test_mode_embedding_bag_backward_on_half(kw, dtype, device):
    kw = dict(kw)
    g = _seed(kw, dtype, device)
    w = _values(g, dtype, 12, 5).to(device)
    i = _ints(g, 12, 40).to(device)
    off = torch.tensor([0, 7, 7, 19, 30], device=device)          # one empty bag
    psw = _values(g, dtype, 40).to(device) if kw.pop("per_sample_weights", False) else None
    go = _values(g, dtype, 5, 5).to(device)

    def grad(weight):
        weight = weight.detach().requires_grad_()
        p = None if psw is None else psw.to(weight.dtype)
        torch.nn.functional.embedding_bag(i, weight, off, per_sample_weights=p,
                                          **kw).backward(go.to(weight.dtype))
        return weight.grad
    sbmode.reset_calls()
    with st.deterministic("portable"):
        a, b = grad(w), grad(w)
    assert sbmode.calls().get("_embedding_bag_dense_backward", 0) == 2
    assert a.dtype == dtype and _hash(a) == _hash(b)
    ref = grad(w.double())
    assert_within_ulps(a, ref, dtype, 1, ref.abs().max().cpu() * 2.0**-16)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_mode_leaves_half_to_torch_where_samebits_has_no_half_kernel(dtype):
    g = _seed(dtype)
    x = _values(g, dtype, 500)
    out, calls = _run_mode("portable", lambda: torch.histc(x, 16, -2, 2))
    assert "histc" not in calls and torch.equal(out, torch.histc(x, 16, -2, 2))
    assert "aten::histc" in st.covered_ops() and "aten::histc" not in st.covered_ops(dtype)
    # the interpolate and pooling backwards take half gradients (test_mode.py checks their values)
    for name in ("aten::upsample_nearest2d_backward", "aten::avg_pool3d_backward"):
        assert name in st.covered_ops(dtype)
    assert st.covered_ops(torch.int64) == []


@pytest.mark.parametrize("device", DEVICES)
def test_mode_leaves_mismatched_dtypes_to_torch(device):
    g = _seed(device)
    x = _values(g, torch.bfloat16, 6, 4).to(device)
    s = _values(g, torch.float16, 9, 4).to(device)
    i = _ints(g, 6, 9).to(device)
    before = x.clone()
    sbmode.reset_calls()
    with st.deterministic("portable"):
        with pytest.raises(RuntimeError, match="same scalar type|dtype"):
            x.index_add_(0, i, s)
        with pytest.raises(RuntimeError, match="dtype"):
            x.scatter_add_(0, i[:, None].expand(9, 4), s)
    assert torch.equal(x, before) and sbmode.calls() == {}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_mode_in_place_and_out_forms_on_half(dtype, device):
    g = _seed(dtype, device)
    x, s = _values(g, dtype, 9, 4).to(device), _values(g, dtype, 60, 4).to(device)
    i, gi = _ints(g, 9, 60).to(device), _ints(g, 9, 60, 4).to(device)
    level = "portable"

    def out_of(fn):
        o = torch.empty(0, dtype=dtype, device=device)
        fn(o)
        return o
    forms = [
        ("index_add.out", lambda: out_of(lambda o: torch.index_add(x, 0, i, s, out=o)),
         lambda: st.index_add(x, 0, i, s, level=level)),
        ("scatter_add.out", lambda: out_of(lambda o: torch.scatter_add(x, 0, gi, s, out=o)),
         lambda: st.scatter_add(x, 0, gi, s, level=level)),
        ("scatter_reduce_.two", lambda: x.clone().scatter_reduce_(0, gi, s, "amin"),
         lambda: st.scatter_reduce(x, 0, gi, s, "amin", level=level)),
        ("scatter_reduce.two_out",
         lambda: out_of(lambda o: torch.scatter_reduce(x, 0, gi, s, "prod", out=o)),
         lambda: st.scatter_reduce(x, 0, gi, s, "prod", level=level)),
        ("cumsum_", lambda: s.clone().cumsum_(0), lambda: st.cumsum(s, 0, level=level)),
        ("cumsum.out", lambda: out_of(lambda o: torch.cumsum(s, 0, out=o)),
         lambda: st.cumsum(s, 0, level=level)),
    ]
    for op, torch_call, samebits_call in forms:
        out, calls = _run_mode(level, torch_call)
        assert calls.get(op, 0) == 1, (op, calls)
        assert out.dtype == dtype and _hash(out) == _hash(samebits_call()), op
    # Every half op the mode lists is one it replaces.
    assert set(st.covered_ops(dtype)) <= set(st.covered_ops())
    assert set(st.covered_ops(dtype)) == {"aten::" + n for n in sbmode.HALF_OPS}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("mode,pad", [("bilinear", "zeros"), ("bilinear", "reflection"),
                                      ("nearest", "border"), ("bicubic", "border")])
def test_mode_grid_sample_backward_on_half(mode, pad, dtype, device):
    g = _seed(mode, pad, dtype, device)
    x = _values(g, dtype, 2, 3, 5, 7).to(device)
    grid = (torch.rand(2, 4, 6, 2, generator=g, dtype=F64) * 2.6 - 1.3).to(dtype).to(device)
    go = _values(g, dtype, 2, 3, 4, 6).to(device)

    def grads(x, grid, go):
        return grid_sample_grads(x, grid, go, mode=mode, padding_mode=pad, align_corners=False)
    sbmode.reset_calls()
    with st.deterministic("portable"):
        a, b = grads(x, grid, go), grads(x, grid, go)
    assert sbmode.calls().get("grid_sampler_2d_backward", 0) == 2
    ref = grads(x.double(), grid.double(), go.double())
    for got, again, r in zip(a, b, ref):
        assert got.dtype == dtype and _hash(got) == _hash(again)
        # float32 sums rounded once (grid: coordinates in float32 instead of float64).
        assert_within_ulps(got, r, dtype, 1, r.abs().max().cpu() * 2.0**-14)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mode_nll_loss2d_on_half(reduction, dtype, device):
    g = _seed(reduction, dtype, device)
    x = torch.log_softmax(torch.randn(3, 4, 6, 5, generator=g, dtype=F64), 1).to(dtype).to(device)
    t = _ints(g, 4, 3, 6, 5).to(device)
    t[0, 0, :3] = -100
    weight = (torch.rand(4, generator=g, dtype=F64) + 0.1).to(dtype).to(device)

    def loss_and_grad(y, w):
        y = y.detach().requires_grad_()
        loss = torch.nn.functional.nll_loss(y, t, weight=w, reduction=reduction)
        loss.backward()
        return loss.detach(), y.grad
    sbmode.reset_calls()
    with st.deterministic("portable"):
        (la, ga), (lb, gb) = loss_and_grad(x, weight), loss_and_grad(x, weight)
    assert sbmode.calls().get("nll_loss2d_forward", 0) == 2
    assert la.dtype == dtype and _hash(la) == _hash(lb) and _hash(ga) == _hash(gb)
    l64, g64 = loss_and_grad(x.double(), weight.double())
    # The loss: a float32 sum (and division) rounded once.
    assert_within_ulps(la.reshape(1), l64.reshape(1), dtype, 1, l64.abs().reshape(1) * 2.0**-16)
    # The gradient: torch's elementwise backward in the half dtype, from the half total weight.
    assert_within_ulps(ga, g64, dtype, 2)
