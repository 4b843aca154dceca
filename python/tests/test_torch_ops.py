"""samebits.torch ops, one table of cases: torch's semantics (against torch in float64, exact where
the op is exact), bitwise equality with the C++ library at portable (the raw binding on NumPy
copies of the same inputs), CPU/CUDA bitwise equality at portable, gradcheck of every backward,
torch.library.opcheck, and run-to-run repeatability."""
import numpy as np
import pytest
import torch
from torch.library import opcheck

import samebits
import samebits.torch as st
from samebits import _core
from conftest import DEVICES, needs_cuda

F64 = torch.float64


def _rand(g, *shape, dtype=F64):
    return torch.randn(*shape, generator=g, dtype=dtype)


def _ints(g, high, *shape):
    return torch.randint(0, high, shape, generator=g)


def _np(t):
    return t.detach().cpu().numpy().copy()


def _aggregate_ref(x, rowptr, col, reduce):
    out = torch.zeros((rowptr.numel() - 1,) + tuple(x.shape[1:]), dtype=x.dtype)
    for i in range(rowptr.numel() - 1):
        rows = x[col[rowptr[i]:rowptr[i + 1]]]
        if rows.shape[0]:
            out[i] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.amax(0)}[reduce]
    return out


def _csr(g, num_nodes, num_sources, max_degree=4):
    deg = _ints(g, max_degree + 1, num_nodes)
    rowptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
    return rowptr, _ints(g, num_sources, int(rowptr[-1]))


# Each case: (op, args, kwargs, torch reference or None, exact, indices of differentiable args,
# raw C++ call on NumPy copies returning the output, or None).
def case_index_add(g):
    x, idx, src = _rand(g, 6, 4), _ints(g, 6, 9), _rand(g, 9, 4)

    def raw(x, idx, src):
        out = x.copy()
        _core.index_add(out, idx, src, 2.0, "portable")
        return out
    return (st.index_add, (x, 0, idx, src), {"alpha": 2.0},
            lambda: x.index_add(0, idx, src, alpha=2.0), False, (0, 3), (raw, (x, idx, src)))


def case_index_add_dim1(g):
    x, idx, src = _rand(g, 3, 6, 2), _ints(g, 6, 5), _rand(g, 3, 5, 2)
    return (st.index_add, (x, 1, idx, src), {}, lambda: x.index_add(1, idx, src), False, (0, 3),
            None)


def case_scatter_add(g):
    x, idx, src = _rand(g, 5, 4), _ints(g, 5, 7, 3), _rand(g, 8, 4)  # src larger than index

    def raw(x, idx, src):
        out = x.copy()
        _core.scatter_add(out, 0, idx, src, "portable")
        return out
    return (st.scatter_add, (x, 0, idx, src), {}, lambda: x.scatter_add(0, idx, src), False,
            (0, 3), (raw, (x, idx, src)))


def _case_scatter_reduce(reduce, include_self):
    def case(g):
        x, idx, src = _rand(g, 5, 3), _ints(g, 5, 8, 3), _rand(g, 8, 3)
        if reduce in ("amax", "amin"):  # ties, to exercise the even split of the gradient
            src[1] = src[0]
            idx[1] = idx[0]
        if reduce == "prod":  # zeros, one and two per target
            src[0, 0] = 0.0
            x[idx[2, 1], 1] = 0.0

        def raw(x, idx, src):
            out = x.copy()
            _core.scatter_reduce(out, 0, idx, src, reduce, include_self, "portable")
            return out
        exact = reduce in ("amax", "amin")
        return (st.scatter_reduce, (x, 0, idx, src, reduce), {"include_self": include_self},
                lambda: x.scatter_reduce(0, idx, src, reduce, include_self=include_self), exact,
                (0, 3), (raw, (x, idx, src)))
    return case


def _case_segment(reduce, empty):
    def case(g):
        lengths = _ints(g, 4, 6) + (0 if empty else 1)
        data = _rand(g, int(lengths.sum()), 3)

        def raw(data, offsets):
            out = np.zeros((offsets.size - 1, 3), data.dtype)
            _core.segment_reduce(data, offsets, out, {"max": "amax", "min": "amin"}.get(reduce,
                                                                                     reduce),
                                 "portable")
            return out
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        return (st.segment_reduce, (data, reduce, lengths), {},
                lambda: torch.segment_reduce(data, reduce, lengths=lengths),
                reduce in ("max", "min"), () if empty else (0,),
                None if empty else (raw, (data, offsets)))
    return case


def _case_segment_csr(reduce):
    def case(g):
        lengths = _ints(g, 4, 6)  # empty segments give 0, as in PyG
        data = _rand(g, int(lengths.sum()), 2)
        indptr = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])

        def ref():
            out = torch.segment_reduce(data, reduce, lengths=lengths)
            return out.masked_fill((lengths == 0)[:, None], 0.0)
        return (st.segment_csr, (data, indptr, reduce), {}, ref, reduce != "mean", (0,), None)
    return case


def _case_aggregate(reduce):
    def case(g):
        x = _rand(g, 7, 3)
        rowptr, col = _csr(g, 5, 7)

        def raw(x, rowptr, col):
            out = np.zeros((rowptr.size - 1, 3), x.dtype)
            _core.aggregate(rowptr, col, x, out, {"max": "amax"}.get(reduce, reduce), -1,
                            "portable")
            return out
        return (st.aggregate, (x, rowptr, col, reduce), {},
                lambda: _aggregate_ref(x, rowptr, col, reduce), reduce == "max", (0,),
                (raw, (x, rowptr, col)))
    return case


def case_index_select(g):
    x, idx = _rand(g, 5, 6), _ints(g, 6, 8)

    def raw(x, idx):
        out = np.zeros((5, 8), x.dtype)
        _core.index_select(x, 1, idx, out, "portable")
        return out
    return (st.index_select, (x, 1, idx), {}, lambda: x.index_select(1, idx), True, (0,),
            (raw, (x, idx)))


def case_gather(g):
    x, idx = _rand(g, 5, 6), _ints(g, 6, 4, 7)

    def raw(x, idx):
        out = np.zeros(idx.shape, x.dtype)
        _core.gather(x, 1, idx, out, "portable")
        return out
    return (st.gather, (x, 1, idx), {}, lambda: x.gather(1, idx), True, (0,), (raw, (x, idx)))


def case_cumsum(g):
    x = _rand(g, 4, 300)

    def raw(x):
        out = np.zeros_like(x)
        _core.cumsum(x, 1, out, "portable")
        return out
    return (st.cumsum, (x, 1), {}, lambda: x.cumsum(1), False, (0,), (raw, (x,)))


def case_bincount(g):
    idx = _ints(g, 9, 30)

    def raw(idx):
        out = np.zeros(int(idx.max()) + 1, np.int64)
        _core.bincount(idx, None, out, "portable")
        return out
    return (st.bincount, (idx,), {}, lambda: idx.bincount(), True, (), (raw, (idx,)))


def case_bincount_weights(g):
    idx, w = _ints(g, 9, 30), _rand(g, 30)

    def raw(idx, w):
        out = np.zeros(12, w.dtype)
        _core.bincount(idx, w, out, "portable")
        return out
    return (st.bincount, (idx, w, 12), {}, lambda: idx.bincount(w, 12), False, (1,),
            (raw, (idx, w)))


def case_histc(g):
    x = _rand(g, 200)

    def raw(x):
        out = np.zeros(13, x.dtype)
        _core.histc(x, -1.5, 2.0, out, "portable")
        return out
    return (st.histc, (x, 13, -1.5, 2.0), {}, lambda: x.histc(13, -1.5, 2.0), True, (),
            (raw, (x,)))


def case_sum(g):
    x = _rand(g, 70, 90)

    def raw(x):
        out = np.zeros((), x.dtype)
        _core.sum(x, out, "portable")
        return out
    return (st.sum, (x,), {}, lambda: x.sum(), False, (0,), (raw, (x,)))


def case_sum_dim(g):
    x = _rand(g, 5, 7, 3)

    def raw(x):
        out = np.zeros((5, 3), x.dtype)
        _core.sum_dim(x, 1, out, "portable")
        return out.reshape(5, 1, 3)
    return (st.sum, (x, 1, True), {}, lambda: x.sum(1, keepdim=True), False, (0,), (raw, (x,)))


def case_mm(g):
    a, b = _rand(g, 6, 5), _rand(g, 5, 4)

    def raw(a, b):
        out = np.zeros((6, 4), a.dtype)
        _core.gemm(False, False, 1.0, a, b, 0.0, out, "portable")
        return out
    return (st.mm, (a, b), {}, lambda: a @ b, False, (0, 1), (raw, (a, b)))


def case_addmm(g):
    bias, a, b = _rand(g, 4), _rand(g, 6, 5), _rand(g, 5, 4)

    def raw(bias, a, b):
        out = np.ascontiguousarray(np.broadcast_to(bias, (6, 4)))
        _core.gemm(False, False, 2.0, a, b, 0.5, out, "portable")
        return out
    return (st.addmm, (bias, a, b), {"beta": 0.5, "alpha": 2.0},
            lambda: torch.addmm(bias, a, b, beta=0.5, alpha=2.0), False, (0, 1, 2),
            (raw, (bias, a, b)))


CASES = {f.__name__[5:]: f for f in (case_index_add, case_index_add_dim1, case_scatter_add,
                                       case_index_select, case_gather, case_cumsum, case_bincount,
                                       case_bincount_weights, case_histc, case_sum, case_sum_dim,
                                       case_mm, case_addmm)}
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        CASES[f"scatter_reduce_{_r}_{'self' if _inc else 'noself'}"] = \
            _case_scatter_reduce(_r, _inc)
for _r in ("sum", "mean", "max", "min"):
    CASES[f"segment_reduce_{_r}"] = _case_segment(_r, False)
    CASES[f"segment_reduce_{_r}_empty"] = _case_segment(_r, True)
    CASES[f"segment_csr_{_r}"] = _case_segment_csr(_r)
for _r in ("sum", "mean", "max"):
    CASES[f"aggregate_{_r}"] = _case_aggregate(_r)


def _to(args, device):
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch_float64(name, device, gen):
    op, args, kwargs, ref, exact, _, _ = CASES[name](gen)
    out = op(*_to(args, device), **kwargs).cpu()
    expected = ref()
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if exact:
        assert torch.equal(out, expected) or torch.allclose(out, expected, equal_nan=True,
                                                            rtol=0, atol=0)
    else:
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bitwise_equal_to_cpp_at_portable(name, gen):
    op, args, kwargs, _, _, _, raw = CASES[name](gen)
    if raw is None:
        pytest.skip("covered by the same op's other cases")
    args32 = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                   for a in args)
    raw_fn, raw_args = raw
    raw_args32 = tuple(_np(a.float() if a.is_floating_point() else a) for a in raw_args)
    for dtype_args, dtype_raw in ((args, tuple(_np(a) for a in raw_args)), (args32, raw_args32)):
        out = op(*dtype_args, **kwargs, level="portable")
        expected = np.asarray(raw_fn(*dtype_raw))
        assert samebits.content_hash(out) == samebits.content_hash(expected)


@needs_cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_bitwise_equal_to_cpu_at_portable(name, gen):
    op, args, kwargs, _, _, _, _ = CASES[name](gen)
    cpu = op(*args, **kwargs, level="portable")
    cuda = op(*_to(args, "cuda"), **kwargs, level="portable")
    assert samebits.content_hash(cpu) == samebits.content_hash(cuda)


@pytest.mark.parametrize("path", ["eager", "dispatcher"])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(n for n in CASES))
def test_gradcheck_float64(name, device, path, gen):
    # eager: the public function (its autograd.Function path); dispatcher: the custom op itself
    # (register_autograd's path). Both run the same setup_context and backward.
    op, args, kwargs, _, _, diff, _ = CASES[name](gen)
    if not diff:
        pytest.skip("not differentiable (as in torch)")
    if path == "dispatcher":
        op = op.op
    args = list(_to(args, device))
    inputs = tuple(args[i].detach().clone().requires_grad_() for i in diff)

    def fn(*tensors):
        full = list(args)
        for i, t in zip(diff, tensors):
            full[i] = t
        return op(*full, **kwargs)
    # fast_mode checks random projections of the Jacobian: the same test at a fraction of the cost
    assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name, device, gen):
    if name == "segment_reduce_mean_empty":
        pytest.skip("NaN outputs (torch's value for an empty mean): opcheck compares them unequal")
    op, args, kwargs, _, _, diff, _ = CASES[name](gen)
    args = list(_to(args, device))
    for i in diff:
        args[i] = args[i].requires_grad_()
    results = opcheck(op.op, tuple(args), kwargs)
    assert all(v == "SUCCESS" for v in results.values()), results


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_run_to_run_repeats_bitwise_in_float32(name, device, gen):
    op, args, kwargs, _, _, _, _ = CASES[name](gen)
    args = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in _to(args, device))
    first = samebits.content_hash(op(*args, **kwargs, level="run_to_run"))
    for _ in range(5):
        assert samebits.content_hash(op(*args, **kwargs, level="run_to_run")) == first


def test_in_place_forms_match_functional(gen):
    x, idx, src = _rand(gen, 6, 4), _ints(gen, 6, 9), _rand(gen, 9, 4)
    y = x.clone()
    assert st.index_add_(y, 0, idx, src, alpha=3.0) is y
    assert torch.equal(y, st.index_add(x, 0, idx, src, alpha=3.0))
    gi = _ints(gen, 6, 9, 4)
    y = x.clone()
    st.scatter_add_(y, 0, gi, src)
    assert torch.equal(y, st.scatter_add(x, 0, gi, src))
    y = x.clone()
    st.scatter_reduce_(y, 0, gi, src, "amax", include_self=False)
    assert torch.equal(y, st.scatter_reduce(x, 0, gi, src, "amax", include_self=False))
    y = x.clone()
    st.cumsum_(y, 1)
    assert torch.equal(y, st.cumsum(x, 1))
    bias, a, b = _rand(gen, 6, 4), _rand(gen, 6, 5), _rand(gen, 5, 4)
    y = bias.clone()
    st.addmm_(y, a, b)
    assert torch.equal(y, st.addmm(bias, a, b))
    # With autograd recording, the in-place form still differentiates.
    leaf = src.clone().requires_grad_()
    y = x.clone()
    st.index_add_(y, 0, idx, leaf).sum().backward()
    assert torch.equal(leaf.grad, torch.ones_like(src))


def test_index_plan_in_torch(gen):
    idx, src = _ints(gen, 10, 50), _rand(gen, 50, 3)
    plan = st.IndexPlan(idx, 10)
    out = plan.index_add(torch.zeros(10, 3, dtype=F64), src, level="portable")
    assert torch.equal(out, st.index_add(torch.zeros(10, 3, dtype=F64), 0, idx, src,
                                         level="portable"))
    assert torch.equal(plan.order, torch.sort(idx, stable=True).indices)


def test_csr_transpose_is_the_backward_graph(gen):
    rowptr, col = _csr(gen, 6, 4)
    rowptr_t, col_t = st.csr_transpose(rowptr, col, 4)
    x = _rand(gen, 4, 2).requires_grad_()
    out = st.aggregate(x, rowptr, col, "sum", rowptr_t, col_t)
    grad = _rand(gen, 6, 2)
    out.backward(grad)
    expected = st.aggregate(grad, rowptr_t, col_t, "sum")
    assert torch.equal(x.grad, expected)
    torch.testing.assert_close(x.grad, _aggregate_ref(grad, rowptr_t, col_t, "sum"))


def test_level_keyword_and_guard_reach_the_op(gen):
    x, idx, src = _rand(gen, 6, 4), _ints(gen, 6, 9), _rand(gen, 9, 4)
    st.index_add(x, 0, idx, src, level=samebits.Level.portable)
    assert "at portable" in samebits.explain()
    with samebits.determinism("not_guaranteed"):
        st.index_add(x, 0, idx, src)
        assert "at not_guaranteed" in samebits.explain()
