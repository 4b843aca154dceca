"""The drop-in mode (samebits.torch.deterministic): torch's own ops, unchanged user code.

Every covered aten op, called the way user code calls it, must (a) run samebits (the mode's call
counter), (b) give torch's values (float64 reference, exact where the op is exact), (c) give the
bits of the samebits.torch op at the same level, and (d) leave torch as it was when the mode ends.
Cases are generated from a seeded generator over dtype x device x level x layout.
"""
import contextlib
import itertools
import os

import pytest
import torch

import samebits
import samebits.torch as st
from samebits.torch import mode as sbmode
from conftest import grid_sample_grads

SEED = int(os.environ.get("SAMEBITS_TEST_SEED", "20261201"))
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
LEVELS = ["run_to_run", "portable"]
DTYPES = [torch.float32, torch.float64]


def gen(case):
    return torch.Generator().manual_seed(SEED + case)


def rand(g, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).to(device)


def ints(g, hi, *shape, device="cpu"):
    return torch.randint(0, hi, shape, generator=g).to(device)


def check_close(actual, expected, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(actual.double().cpu(), expected.double().cpu(), rtol=tol, atol=tol)


# Each case: (name, aten op the mode must take, function(g, dtype, device) -> (run, reference)).
# run() is called under the mode; reference() computes the float64 result with torch, mode off.

def case_index_add(g, dtype, device):
    x, s, i = rand(g, 7, 5, dtype=dtype, device=device), rand(g, 40, 5, dtype=dtype,
                                                                 device=device), ints(g, 7, 40,
                                                                                      device=device)
    return ("index_add", lambda: torch.index_add(x, 0, i, s, alpha=0.5),
            lambda: torch.index_add(x.double(), 0, i, s.double(), alpha=0.5))


def case_index_add_inplace_dim1(g, dtype, device):
    x, s, i = rand(g, 4, 9, dtype=dtype, device=device), rand(g, 4, 30, dtype=dtype,
                                                                 device=device), ints(g, 9, 30,
                                                                                      device=device)
    return ("index_add_", lambda: x.clone().index_add_(1, i, s),
            lambda: x.double().index_add_(1, i, s.double()))


def case_scatter_add_pyg(g, dtype, device):
    # PyG's scatter: a vector index expanded along the features (stride 0).
    s, i = rand(g, 50, 6, dtype=dtype, device=device), ints(g, 11, 50, device=device)
    idx = i.view(-1, 1).expand_as(s)
    return ("scatter_add_", lambda: s.new_zeros(11, 6).scatter_add_(0, idx, s),
            lambda: s.double().new_zeros(11, 6).scatter_add_(0, idx, s.double()))


def case_scatter_add_general(g, dtype, device):
    s, i = rand(g, 8, 6, dtype=dtype, device=device), ints(g, 5, 8, 6, device=device)
    x = rand(g, 5, 6, dtype=dtype, device=device)
    return ("scatter_add", lambda: torch.scatter_add(x, 0, i, s),
            lambda: torch.scatter_add(x.double(), 0, i, s.double()))


def make_scatter_reduce(reduce, include_self):
    def case(g, dtype, device):
        s, i = rand(g, 30, 4, dtype=dtype, device=device), ints(g, 6, 30, 4, device=device)
        x = rand(g, 6, 4, dtype=dtype, device=device)
        return ("scatter_reduce.two",
                lambda: torch.scatter_reduce(x, 0, i, s, reduce, include_self=include_self),
                lambda: torch.scatter_reduce(x.double(), 0, i, s.double(), reduce,
                                             include_self=include_self))
    case.__name__ = f"case_scatter_reduce_{reduce}_{include_self}"
    return case


def case_index_put_accumulate(g, dtype, device):
    x, v, i = rand(g, 9, 3, dtype=dtype, device=device), rand(g, 25, 3, dtype=dtype,
                                                                 device=device), ints(g, 9, 25,
                                                                                      device=device)
    return ("_index_put_impl_", lambda: x.clone().index_put_((i,), v, accumulate=True),
            lambda: x.double().index_put_((i,), v.double(), accumulate=True))


def case_index_put_negative_int32(g, dtype, device):
    x, v = rand(g, 9, 3, dtype=dtype, device=device), rand(g, 25, 3, dtype=dtype, device=device)
    i = (ints(g, 9, 25, device=device) - 4).to(torch.int32)                  # -4 .. 4
    return ("_index_put_impl_", lambda: x.clone().index_put_((i,), v, accumulate=True),
            lambda: x.double().index_put_((i,), v.double(), accumulate=True))


def case_index_put_broadcast_values(g, dtype, device):
    # One index vector with values broadcast over the indexing result ([3] and [1, 3]).
    x, v = rand(g, 9, 3, dtype=dtype, device=device), rand(g, 1, 3, dtype=dtype, device=device)
    i = ints(g, 9, 25, device=device) - 3
    return ("_index_put_impl_",
            lambda: torch.cat([x.clone().index_put_((i,), v, accumulate=True),
                               x.clone().index_put_((i,), v[0], accumulate=True)]),
            lambda: torch.cat([x.double().clone().index_put_((i,), v.double(), accumulate=True),
                               x.double().clone().index_put_((i,), v[0].double(),
                                                             accumulate=True)]))


def case_index_put_two_indices(g, dtype, device):
    x, v = rand(g, 4, 5, 3, dtype=dtype, device=device), rand(g, 20, 3, dtype=dtype,
                                                                 device=device)
    i, j = ints(g, 4, 20, device=device), ints(g, 5, 20, device=device) - 5   # negative too
    return ("_index_put_impl_", lambda: x.clone().index_put_((i, j), v, accumulate=True),
            lambda: x.double().index_put_((i, j), v.double(), accumulate=True))


def case_embedding_backward(g, dtype, device):
    w = rand(g, 10, 4, dtype=dtype, device=device)
    i = ints(g, 10, 3, 7, device=device)
    go = rand(g, 3, 7, 4, dtype=dtype, device=device)

    def grad(weight, padding_idx, freq):
        weight = weight.detach().requires_grad_()
        torch.nn.functional.embedding(i, weight, padding_idx=padding_idx,
                                      scale_grad_by_freq=freq).backward(go.to(weight.dtype))
        return weight.grad
    return ("embedding_dense_backward", lambda: torch.cat([grad(w, 2, False), grad(w, -1, True)]),
            lambda: torch.cat([grad(w.double(), 2, False), grad(w.double(), -1, True)]))


def case_gather_backward(g, dtype, device):
    x = rand(g, 6, 5, dtype=dtype, device=device)
    i = ints(g, 6, 12, 5, device=device)

    def grad(t):
        t = t.detach().requires_grad_()
        torch.gather(t, 0, i).pow(2).sum().backward()
        return t.grad
    return ("scatter_add", lambda: grad(x), lambda: grad(x.double()))


def case_index_select_backward(g, dtype, device):
    x = rand(g, 6, 5, dtype=dtype, device=device)
    i = ints(g, 6, 20, device=device)

    def grad(t):
        t = t.detach().requires_grad_()
        torch.index_select(t, 0, i).pow(2).sum().backward()
        return t.grad
    return ("index_add", lambda: grad(x), lambda: grad(x.double()))


def case_bincount_weights(g, dtype, device):
    i, w = ints(g, 12, 100, device=device), rand(g, 100, dtype=dtype, device=device)
    return ("bincount", lambda: torch.bincount(i, w, minlength=15),
            lambda: torch.bincount(i, w.double(), minlength=15))


def case_histc(g, dtype, device):
    x = rand(g, 500, dtype=dtype, device=device)
    return ("histc", lambda: torch.histc(x, 16, -2, 2), lambda: torch.histc(x.double(), 16, -2, 2))


def case_cumsum(g, dtype, device):
    x = rand(g, 5, 33, dtype=dtype, device=device)
    return ("cumsum", lambda: torch.cumsum(x, 1), lambda: torch.cumsum(x.double(), 1))


def case_segment_reduce(g, dtype, device):
    x = rand(g, 12, 3, dtype=dtype, device=device)
    lengths = torch.tensor([3, 0, 5, 4], device=device)
    return ("segment_reduce", lambda: torch.segment_reduce(x, "sum", lengths=lengths),
            lambda: torch.segment_reduce(x.double(), "sum", lengths=lengths))


CASES = [case_index_add, case_index_add_inplace_dim1, case_scatter_add_pyg,
         case_scatter_add_general, case_index_put_accumulate, case_index_put_negative_int32,
         case_index_put_broadcast_values,
         case_index_put_two_indices,
         case_embedding_backward, case_gather_backward, case_index_select_backward,
         case_bincount_weights, case_histc, case_cumsum, case_segment_reduce] + [
    make_scatter_reduce(r, s) for r, s in itertools.product(
        ["sum", "prod", "mean", "amax", "amin"], [True, False])]
EXACT = {"case_histc"}  # counts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[5:])
def test_covered_op_runs_samebits_with_torch_values(case, dtype, level, device):
    k = CASES.index(case) * 1000 + DTYPES.index(dtype) * 10 + LEVELS.index(level)
    op, run, reference = case(gen(k), dtype, device)
    sbmode.reset_calls()
    with st.deterministic(level):
        first = run()
        again = run()
    # The in-place or out= overload of the op counts too (a backward calls index_add_, say).
    ran = {k: v for k, v in sbmode.calls().items() 
           if k.split(".")[0].rstrip("_") == op.split(".")[0].rstrip("_")}
    assert ran, f"{op} did not run through samebits: {sbmode.calls()}"
    assert torch.equal(first, again), "the same call gave other bits"
    if case.__name__ in EXACT:
        assert torch.equal(first.double().cpu(), reference().double().cpu())
    else:
        check_close(first, reference(), dtype)


@pytest.mark.parametrize("level", LEVELS)
def test_same_bits_as_the_samebits_op(level):
    g = gen(7)
    x, s, i = rand(g, 30, 8), rand(g, 500, 8), ints(g, 30, 500)
    with st.deterministic(level):
        a = torch.index_add(x, 0, i, s)
        b = torch.zeros(30, 8).scatter_add_(0, i.view(-1, 1).expand_as(s), s)
    assert torch.equal(a, st.index_add(x, 0, i, s, level=level))
    assert torch.equal(b, st.scatter_add(torch.zeros(30, 8), 0, i.view(-1, 1).expand(500, 8).
                                         contiguous(), s, level=level))


@pytest.mark.parametrize("device", DEVICES)
def test_expanded_index_views_of_other_vectors_scatter_their_own_values(device):
    # The row scatter takes the expanded vector itself when the index is exactly its expand
    # (index._base), else a strided view: slices, steps and a transposed expand.
    g = gen(8)
    base = ints(g, 12, 240, device=device)
    s = rand(g, 60, 5, device=device, dtype=torch.float64)
    forms = {"whole": base[:60], "offset": base[100:160], "step": base[::4],
             "contiguous copy": base[7:67].clone()}
    for name, vec in forms.items():
        idx = vec.view(-1, 1).expand_as(s)
        with st.deterministic("portable"):
            got = s.new_zeros(12, 5).scatter_add_(0, idx, s)
        want = s.new_zeros(12, 5).scatter_add_(0, idx.contiguous(), s)
        check_close(got, want, torch.float64)
        with st.deterministic("portable"):
            got_t = s.t().new_zeros(5, 12).scatter_add_(1, vec.view(1, -1).expand(5, 60), s.t())
        check_close(got_t, want.t(), torch.float64)


def test_mode_restores_torch_on_exit():
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        with st.deterministic("portable"):
            assert torch.are_deterministic_algorithms_enabled()
            assert st.mode.level() == "portable"
            with st.deterministic("run_to_run"):           # nesting: the inner level applies
                assert st.mode.level() == "run_to_run"
            assert st.mode.level() == "portable"
        assert not torch.are_deterministic_algorithms_enabled()
        assert not st.mode.is_enabled() and st.mode.level() is None
        sbmode.reset_calls()
        torch.index_add(torch.zeros(3), 0, torch.tensor([0, 1]), torch.ones(2))
        assert sbmode.calls() == {}, "an override outlived the mode"
        with pytest.raises(RuntimeError, match="not enabled"):
            st.disable()
    finally:
        torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize("outer", [None, "portable"])
@pytest.mark.parametrize("bad", [None, "fast", 3])
def test_a_refused_enable_leaves_everything_as_it_was(bad, outer):
    # A level the mode refuses changes nothing: not torch's setting, not the mode's stack, not an
    # enclosing mode's level.
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        with contextlib.ExitStack() as stack:
            if outer:
                stack.enter_context(st.deterministic(outer))
            flag = torch.are_deterministic_algorithms_enabled()
            with pytest.raises(samebits.InvalidArgument, match="level"):
                with st.deterministic(bad):
                    pass
            assert st.is_enabled() == bool(outer) and st.level() == outer
            assert torch.are_deterministic_algorithms_enabled() == flag
        assert not st.is_enabled() and not torch.are_deterministic_algorithms_enabled()
        sbmode.reset_calls()
        torch.index_add(torch.zeros(3), 0, torch.tensor([0, 1]), torch.ones(2))
        assert sbmode.calls() == {}, "an override outlived the mode"
    finally:
        torch.use_deterministic_algorithms(was)


def test_enable_undoes_its_changes_when_installing_fails(monkeypatch):
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    fill = torch.utils.deterministic.fill_uninitialized_memory
    checks = samebits.cuda_index_checks()

    def broken(level):
        raise RuntimeError("install failed")
    monkeypatch.setattr(sbmode, "_install", broken)
    try:
        with pytest.raises(RuntimeError, match="install failed"):
            st.enable("run_to_run", index_checks="wait" if checks == "deferred" else "deferred",
                      fill_uninitialized_memory=not fill)
        assert not st.is_enabled()
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.utils.deterministic.fill_uninitialized_memory == fill
        assert samebits.cuda_index_checks() == checks
    finally:
        torch.use_deterministic_algorithms(was)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_index_put_with_cpu_indices_into_cuda_runs_torch_kernel(gen):
    x = torch.randn(9, 3, generator=gen).cuda()
    v = torch.randn(25, 3, generator=gen).cuda()
    i = torch.randint(0, 9, (25,), generator=gen)                    # stays on the CPU
    with st.deterministic("run_to_run"):
        sbmode.reset_calls()
        got = x.clone().index_put_((i,), v, accumulate=True)
        assert sbmode.calls().get("_index_put_impl_", 0) == 0
    want = x.double().index_put_((i.cuda(),), v.double(), accumulate=True)
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


def test_scatter_add_with_an_index_of_size_one_dims_is_a_row_scatter():
    src = torch.randn(40, 1)
    index = torch.randint(0, 6, (40, 1))                            # strides (1, 1), not (1, 0)
    with st.deterministic("portable"):
        sbmode.reset_calls()
        got = torch.zeros(6, 1).scatter_add_(0, index, src)
        ran = samebits.explain()
    assert sbmode.calls() == {"scatter_add_": 1}
    assert ran.startswith("index_add on cpu"), ran                 # the row scatter, not the general
    assert torch.equal(got, st.index_add(torch.zeros(6, 1), 0, index[:, 0], src,
                                         level="portable"))


def test_mode_leaves_torch_fill_of_uninitialized_memory_off_unless_asked():
    det = torch.utils.deterministic
    was = det.fill_uninitialized_memory
    try:
        for before in (True, False):
            det.fill_uninitialized_memory = before
            with st.deterministic("run_to_run"):
                assert det.fill_uninitialized_memory is False
                # torch.empty is not filled: its bits are whatever the allocator held.
                with st.deterministic("run_to_run", fill_uninitialized_memory=True):
                    assert det.fill_uninitialized_memory is True
                    assert torch.empty(64).isnan().all()          # torch filled it with NaN
                assert det.fill_uninitialized_memory is False
            assert det.fill_uninitialized_memory is before
    finally:
        det.fill_uninitialized_memory = was


def test_unsupported_dtypes_fall_back_to_torch():
    sbmode.reset_calls()
    with st.deterministic("run_to_run"):
        out = torch.index_add(torch.zeros(4, dtype=torch.int64), 0, torch.tensor([1, 1]),
                              torch.tensor([2, 3]))
    assert out.tolist() == [0, 5, 0, 0]
    assert sbmode.calls() == {}


def test_out_of_range_index_raises_index_error_and_leaves_the_input():
    x = torch.randn(4, 3)
    before = x.clone()
    with st.deterministic("portable"):
        with pytest.raises(IndexError):
            x.index_add_(0, torch.tensor([0, 9]), torch.randn(2, 3))
    assert torch.equal(x, before)


def test_an_error_without_replacement_says_so():
    with pytest.raises(RuntimeError) as info:
        with st.deterministic("run_to_run"):
            raise RuntimeError("foo_cuda does not have a deterministic implementation, but you "
                               "set 'torch.use_deterministic_algorithms(True)'")
    assert any("samebits has no replacement" in n for n in info.value.__notes__)


def test_covered_ops_lists_the_replaced_ops():
    ops = st.covered_ops()
    for name in ["aten::index_add", "aten::scatter_add_", "aten::scatter_reduce.two",
                 "aten::_index_put_impl_", "aten::embedding_dense_backward", "aten::bincount",
                 "aten::histc", "aten::cumsum", "aten::segment_reduce",
                 "aten::nll_loss2d_forward", "aten::grid_sampler_2d_backward",
                 "aten::_embedding_bag_dense_backward"]:
        assert name in ops


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_atomic_index_add_becomes_one_result():
    g = gen(99)
    x = rand(g, 1000, 16, device="cuda")
    s, i = rand(g, 200000, 16, device="cuda"), ints(g, 1000, 200000, device="cuda")
    with st.deterministic("run_to_run"):
        outs = {torch.index_add(x, 0, i, s).cpu().numpy().tobytes() for _ in range(20)}
    assert len(outs) == 1


# --- backwards torch refuses in deterministic mode: interpolate, adaptive and 3-D pooling --------

def _grad_of(fn, x, go):
    x = x.detach().requires_grad_()
    fn(x).backward(go)
    return x.grad


RESAMPLE = [
    ("upsample_nearest2d_backward", dict(mode="nearest", size=(11, 7))),
    ("upsample_nearest2d_backward", dict(mode="nearest", scale_factor=2.5)),
    ("upsample_bilinear2d_backward", dict(mode="bilinear", size=(13, 9), align_corners=False)),
    ("upsample_bilinear2d_backward", dict(mode="bilinear", size=(13, 9), align_corners=True)),
    ("upsample_bilinear2d_backward", dict(mode="bilinear", scale_factor=1.7)),
    ("upsample_bicubic2d_backward", dict(mode="bicubic", size=(12, 10), align_corners=False)),
    ("upsample_bicubic2d_backward", dict(mode="bicubic", size=(3, 4), align_corners=True)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("op,kwargs", RESAMPLE, ids=lambda v: str(v))
def test_interpolate_backward(op, kwargs, dtype, level, device):
    if device == "cuda" and op == "upsample_bilinear2d_backward":
        # On CUDA torch computes bilinear's backward through another kernel than this aten op,
        # which the mode does not replace yet (seen on an H200 with torch 2.11).
        pytest.skip("bilinear backward on CUDA is not replaced by the mode")
    g = gen(len(str(kwargs)))
    x = rand(g, 2, 3, 5, 6, dtype=dtype, device=device)
    fn = lambda t: torch.nn.functional.interpolate(t, **kwargs)  # noqa: E731
    go = rand(g, *fn(x).shape, dtype=dtype, device=device)
    sbmode.reset_calls()
    with st.deterministic(level):
        a, b = _grad_of(fn, x, go), _grad_of(fn, x, go)
    assert sbmode.calls().get(op, 0) == 2
    assert torch.equal(a, b)
    check_close(a, _grad_of(fn, x.double(), go.double()), dtype)


def _pool3d_of_copies(depth, *args, **kwargs):
    # A 4-d input as `depth` copies along a new axis, average-pooled in 3-d; .pool is the pooling
    # alone, for a test that needs the op's own gradient (the expand's backward sums over copies).
    def pool(t):
        return torch.nn.functional.avg_pool3d(t, *args, **kwargs)

    def fn(t):
        return pool(t.unsqueeze(2).expand(-1, -1, depth, -1, -1))

    fn.pool, fn.depth = pool, depth
    return fn


POOLS = [
    ("_adaptive_avg_pool2d_backward", lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (4, 3))),
    ("_adaptive_avg_pool2d_backward", lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (7, 9))),
    ("avg_pool3d_backward", _pool3d_of_copies(5, 2)),
    ("avg_pool3d_backward", _pool3d_of_copies(4, (3, 2, 3), stride=(2, 1, 2), padding=1,
                                              ceil_mode=True, count_include_pad=False)),
    ("avg_pool3d_backward", _pool3d_of_copies(4, 3, stride=2, padding=1, ceil_mode=True,
                                              count_include_pad=True)),
    ("avg_pool3d_backward", _pool3d_of_copies(4, 2, divisor_override=3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", range(len(POOLS)))
def test_pooling_backward(case, dtype, device):
    op, fn = POOLS[case]
    g = gen(500 + case)
    x = rand(g, 2, 3, 7, 9, dtype=dtype, device=device)
    go = rand(g, *fn(x).shape, dtype=dtype, device=device)
    sbmode.reset_calls()
    with st.deterministic("portable"):
        a, b = _grad_of(fn, x, go), _grad_of(fn, x, go)
    assert sbmode.calls().get(op, 0) == 2
    assert torch.equal(a, b)
    check_close(a, _grad_of(fn, x.double(), go.double()), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("case", range(len(RESAMPLE) + len(POOLS)))
def test_half_resampling_backward_is_the_float32_one_rounded_once(case, dtype, device):
    # A half gradient under the mode: the float32 contraction of the same values, rounded once,
    # and close to the float64 gradient.
    if case < len(RESAMPLE):
        op, kwargs = RESAMPLE[case]
        if device == "cuda" and op == "upsample_bilinear2d_backward":
            pytest.skip("bilinear backward on CUDA is not replaced by the mode")
        fn = lambda t: torch.nn.functional.interpolate(t, **kwargs)  # noqa: E731
    else:
        op, fn = POOLS[case - len(RESAMPLE)]
    g = gen(900 + case)
    x = rand(g, 2, 3, 7, 9, dtype=torch.float32, device=device).to(dtype)
    if hasattr(fn, "pool"):
        # the expand's backward would sum the op's half gradient over the copies in half, a second
        # rounding: take the gradient at the pooling's own (5-d) input
        x, fn = x.unsqueeze(2).expand(-1, -1, fn.depth, -1, -1).contiguous(), fn.pool
    try:
        fn(x)
    except NotImplementedError as e:  # torch's CPU avg_pool3d has no half forward
        pytest.skip(str(e))
    go = rand(g, *fn(x.float()).shape, dtype=torch.float32, device=device).to(dtype)
    sbmode.reset_calls()
    with st.deterministic("portable"):
        a, b = _grad_of(fn, x, go), _grad_of(fn, x, go)
        want = _grad_of(fn, x.float(), go.float()).to(dtype)
    assert sbmode.calls().get(op, 0) == 3
    assert a.dtype == dtype
    assert torch.equal(a, b)
    assert torch.equal(a, want)
    ref = _grad_of(fn, x.double(), go.double())
    unit = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    assert bool(((a.double() - ref).abs() <= unit * ref.abs() + 1e-5 * ref.abs().max()).all())


BAGS = [dict(mode="sum"), dict(mode="sum", per_sample_weights=True), dict(mode="mean"),
        dict(mode="max"), dict(mode="sum", padding_idx=3), dict(mode="mean", padding_idx=3)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", range(len(BAGS)))
def test_embedding_bag_backward(case, dtype, device):
    kw = dict(BAGS[case])
    g = gen(700 + case)
    w = rand(g, 12, 5, dtype=dtype, device=device)
    i = ints(g, 12, 40, device=device)
    off = torch.tensor([0, 7, 7, 19, 30], device=device)          # one empty bag
    psw = rand(g, 40, dtype=dtype, device=device) if kw.pop("per_sample_weights", False) else None

    def fn(t):
        p = None if psw is None else psw.to(t.dtype)
        return torch.nn.functional.embedding_bag(i, t, off, per_sample_weights=p, **kw)
    go = rand(g, 5, 5, dtype=dtype, device=device)
    sbmode.reset_calls()
    with st.deterministic("run_to_run"):
        a, b = _grad_of(fn, w, go), _grad_of(fn, w, go)
    assert sbmode.calls().get("_embedding_bag_dense_backward", 0) == 2
    assert torch.equal(a, b)
    check_close(a, _grad_of(fn, w.double(), go.double()), dtype)


def _bag_reference(i, w, off, go, mode, padding_idx, psw):
    """embedding_bag's weight gradient with scale_grad_by_freq as documented (each index's share
    divided by how often it occurs in the batch), from embedding's own scale_grad_by_freq and a
    sum per bag: what torch's CUDA kernel computes. (torch 2.11's CPU kernel divides by the count
    of another index: it reads its counts at the position among the distinct indices.)"""
    w = w.detach().double().requires_grad_()
    e = torch.nn.functional.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=True)
    if psw is not None:
        e = e * psw.double().unsqueeze(1)
    keep = (i != padding_idx).double() if padding_idx is not None else torch.ones_like(
        i, dtype=torch.float64)
    sizes = torch.diff(torch.cat([off, off.new_tensor([i.numel()])]))
    bag = torch.repeat_interleave(torch.arange(off.numel(), device=i.device), sizes)
    out = torch.zeros(off.numel(), w.shape[1], dtype=torch.float64, device=i.device).index_add(
        0, bag, e * keep.unsqueeze(1))
    if mode == "mean":
        count = torch.zeros(off.numel(), dtype=torch.float64, device=i.device).index_add(
            0, bag, keep)
        out = out / count.clamp(min=1).unsqueeze(1)
    out.backward(go.double())
    return w.grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", [dict(mode="sum"), dict(mode="mean"), dict(mode="sum", psw=True),
                                  dict(mode="sum", padding_idx=3),
                                  dict(mode="mean", padding_idx=3)], ids=str)
def test_embedding_bag_backward_scale_grad_by_freq(case, dtype, device):
    kw = dict(case)
    g = gen(800 + len(str(kw)))
    w = rand(g, 12, 5, dtype=dtype, device=device)
    i = ints(g, 12, 40, device=device)
    off = torch.tensor([0, 7, 7, 19, 30], device=device)
    psw = rand(g, 40, dtype=dtype, device=device) if kw.pop("psw", False) else None
    go = rand(g, 5, 5, dtype=dtype, device=device)

    def fn(t):
        return torch.nn.functional.embedding_bag(i, t, off, per_sample_weights=psw,
                                                 scale_grad_by_freq=True, **kw)
    sbmode.reset_calls()
    with st.deterministic("portable"):
        a, b = _grad_of(fn, w, go), _grad_of(fn, w, go)
    assert sbmode.calls().get("_embedding_bag_dense_backward", 0) == 2
    assert torch.equal(a, b)
    check_close(a, _bag_reference(i, w, off, go, kw["mode"], kw.get("padding_idx"), psw), dtype)


# --- nll_loss2d (NLLLoss / cross_entropy on images): torch's CUDA reduction adds with atomics ----

NLL = [dict(reduction="mean"), dict(reduction="sum"), dict(reduction="mean", weight=True),
       dict(reduction="sum", weight=True, ignore_index=1), dict(reduction="mean", ignore_index=2)]


def _nll_inputs(g, kw, dtype, device):
    x = torch.log_softmax(rand(g, 3, 4, 6, 5, dtype=torch.float64), 1).to(dtype).to(device)
    t = ints(g, 4, 3, 6, 5, device=device)
    t[0, 0, :3] = kw.get("ignore_index", -100)                    # ignored (-100: torch's default)
    weight = rand(g, 4, dtype=dtype, device=device).abs() + 0.1 if kw.get("weight") else None
    args = dict(reduction=kw["reduction"], weight=weight)
    if "ignore_index" in kw:
        args["ignore_index"] = kw["ignore_index"]
    return x, t, args


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", range(len(NLL)))
def test_nll_loss2d_forward_and_backward(case, dtype, level, device):
    g = gen(900 + case)
    x, t, kw = _nll_inputs(g, NLL[case], dtype, device)
    fn = lambda y: torch.nn.functional.nll_loss(y, t, **kw)  # noqa: E731

    def loss_and_grad(y):
        y = y.detach().requires_grad_()
        loss = fn(y)
        loss.backward()
        return loss.detach(), y.grad
    sbmode.reset_calls()
    with st.deterministic(level):
        (la, ga), (lb, gb) = loss_and_grad(x), loss_and_grad(x)
    assert sbmode.calls().get("nll_loss2d_forward", 0) == 2
    assert torch.equal(la, lb) and torch.equal(ga, gb)
    kw64 = dict(kw, weight=None if kw["weight"] is None else kw["weight"].double())
    l64, g64 = loss_and_grad_ref(x.double(), t, kw64)
    check_close(la, l64, dtype)
    check_close(ga, g64, dtype)


def loss_and_grad_ref(x, t, kw):
    y = x.detach().requires_grad_()
    loss = torch.nn.functional.nll_loss(y, t, **kw)
    loss.backward()
    return loss.detach(), y.grad


def test_nll_loss2d_gradcheck_cross_entropy_and_fallbacks():
    g = gen(950)
    x, t, kw = _nll_inputs(g, dict(reduction="mean", weight=True), torch.float64, "cpu")
    with st.deterministic("portable"):
        assert torch.autograd.gradcheck(
            lambda y: torch.nn.functional.nll_loss(y, t, **kw), (x.clone().requires_grad_(),))
        sbmode.reset_calls()
        logits = rand(g, 2, 4, 3, 3, dtype=torch.float64)
        loss = torch.nn.functional.cross_entropy(logits, ints(g, 4, 2, 3, 3))
        assert sbmode.calls().get("nll_loss2d_forward", 0) == 1
        sbmode.reset_calls()
        torch.nn.functional.nll_loss(x, t, reduction="none")       # elementwise: torch's own
        assert sbmode.calls() == {}
        bad = t.clone()
        bad[1, 2, 3] = 7
        with pytest.raises(IndexError):
            torch.nn.functional.nll_loss(x, bad)
    assert torch.isfinite(loss)


def test_nll_loss2d_all_ignored_mean_is_nan_as_torch():
    x = torch.randn(1, 3, 2, 2)
    t = torch.full((1, 2, 2), -100)
    with st.deterministic("portable"):
        out = torch.nn.functional.nll_loss(x, t)
    assert torch.isnan(out) and torch.isnan(torch.nn.functional.nll_loss(x, t))


# --- grid_sampler_2d backward (F.grid_sample): torch's CUDA input gradient adds with atomics -----

GRID = [(mode, pad, align) for mode in ("bilinear", "nearest", "bicubic")
        for pad in ("zeros", "border", "reflection") for align in (False, True)]


def _grid_inputs(g, dtype, device):
    x = rand(g, 2, 3, 5, 7, dtype=dtype, device=device)
    # Beyond [-1, 1] too, so that padding and out-of-bounds corners are exercised.
    grid = (torch.rand(2, 4, 6, 2, generator=g, dtype=torch.float64) * 2.6 - 1.3).to(dtype).to(
        device)
    return x, grid


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("mode,pad,align", GRID, ids=lambda v: str(v))
def test_grid_sampler_2d_backward(mode, pad, align, dtype, level, device):
    g = gen(1000 + GRID.index((mode, pad, align)))
    x, grid = _grid_inputs(g, dtype, device)
    go = rand(g, 2, 3, 4, 6, dtype=dtype, device=device)

    def grads(x, grid, go):
        return grid_sample_grads(x, grid, go, mode=mode, padding_mode=pad, align_corners=align)
    sbmode.reset_calls()
    with st.deterministic(level):
        a, b = grads(x, grid, go), grads(x, grid, go)
    ran = sbmode.calls().get("grid_sampler_2d_backward", 0)
    if ran == 0 and device == "cuda" and mode == "bilinear" and pad == "zeros" and align:
        # torch takes cuDNN's grid sampler there (cudnn_grid_sampler), which the mode leaves.
        pytest.skip("CUDA bilinear/zeros/align_corners=True ran cuDNN's sampler")
    assert ran == 2
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    ref = grads(x.double(), grid.double(), go.double())      # torch's own kernel, mode off
    own = grads(x, grid, go)                                  # and in the test's dtype
    for got, r, t in zip(a, ref, own):
        # As close to the float64 gradient as torch's own kernel in this dtype is (the grid
        # gradient sums terms that cancel: torch's float32 error reaches 4e-5 for bicubic).
        tol = 2 * float((t.double() - r).abs().max()) + (1e-5 if dtype == torch.float32
                                                          else 1e-12)
        torch.testing.assert_close(got.double().cpu(), r.cpu(), rtol=0, atol=tol)


@pytest.mark.parametrize("mode,pad,align", GRID, ids=lambda v: str(v))
def test_grid_sampler_2d_backward_gradcheck(mode, pad, align):
    g = gen(1100 + GRID.index((mode, pad, align)))
    x, grid = _grid_inputs(g, torch.float64, "cpu")
    inputs = (x.requires_grad_(), grid.requires_grad_()) if mode != "nearest" else (
        x.requires_grad_(),)

    def fn(*t):
        return torch.nn.functional.grid_sample(t[0], t[1] if len(t) > 1 else grid, mode=mode,
                                               padding_mode=pad, align_corners=align)
    sbmode.reset_calls()
    with st.deterministic("portable"):
        assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)
    assert sbmode.calls().get("grid_sampler_2d_backward", 0) > 0


def test_grid_sampler_2d_backward_only_what_is_asked_and_fallbacks():
    g = gen(1200)
    x, grid = _grid_inputs(g, torch.float32, "cpu")
    with st.deterministic("portable"):
        gg = grid.clone().requires_grad_()
        torch.nn.functional.grid_sample(x, gg, align_corners=False).sum().backward()
        assert gg.grad.shape == grid.shape
        xx = x.clone().requires_grad_()
        torch.nn.functional.grid_sample(xx, grid, align_corners=False).sum().backward()
        assert xx.grad.shape == x.shape
        sbmode.reset_calls()
        x5 = rand(g, 1, 2, 3, 4, 5).requires_grad_()
        grid5 = torch.rand(1, 2, 2, 2, 3, generator=g) * 2 - 1
        torch.nn.functional.grid_sample(x5, grid5, align_corners=False).sum().backward()
        assert sbmode.calls() == {}                                # 3-D (5-D input): torch's


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_grid_sample_and_nll_loss2d_are_portable():
    g = gen(1300)
    x, grid = _grid_inputs(g, torch.float32, "cpu")
    go = rand(g, 2, 3, 4, 6)
    nll_x, nll_t, nll_kw = _nll_inputs(g, dict(reduction="mean", weight=True), torch.float32,
                                       "cpu")

    def run(device):
        out = []
        for mode in ("bilinear", "nearest", "bicubic"):
            out += grid_sample_grads(x.to(device), grid.to(device), go.to(device), mode=mode,
                                     padding_mode="border", align_corners=False)
        y = nll_x.detach().to(device).requires_grad_()
        w = None if nll_kw["weight"] is None else nll_kw["weight"].to(device)
        loss = torch.nn.functional.nll_loss(y, nll_t.to(device), weight=w)
        loss.backward()
        return [t.detach().cpu() for t in out + [loss, y.grad]]
    with st.deterministic("portable"):
        cpu, cuda = run("cpu"), run("cuda")
    for a, b in zip(cpu, cuda):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kernels", ["python", "cpp"])
def test_where_samebits_has_no_variant_run_to_run_falls_back_to_torch_and_portable_refuses(
        monkeypatch, request, kernels):
    # As for SAGEConv on a 20M-edge graph of 128 features on CUDA (2.56e9 gathered values, past
    # the 32-bit keys of the sort): samebits raises NondeterministicError before writing. The
    # C++ kernels hand such a call to the Python kernel, which falls back or raises.
    import warnings

    import samebits
    from samebits.torch import _ops as ops
    from samebits.torch import mode as sbmode

    def refuse(*args, **kwargs):
        raise samebits.NondeterministicError("index_add on cuda at run_to_run: no variant")

    if kernels == "python":
        monkeypatch.setattr(sbmode, "_cpp", None)
    elif sbmode._cpp is None:
        pytest.skip("samebits was built without the mode's C++ kernels")
    else:
        sbmode._cpp._refuse_for_test(True)
        request.addfinalizer(lambda: sbmode._cpp._refuse_for_test(False))
    monkeypatch.setattr(ops, "_index_add_into", refuse)
    monkeypatch.setattr(sbmode, "_fell_back", set())
    g = torch.Generator().manual_seed(11)
    x, idx = torch.randn(40, 3, generator=g), torch.randint(0, 7, (40,), generator=g)
    want = torch.zeros(7, 3).index_add_(0, idx, x)
    with st.deterministic("run_to_run"):
        sbmode.reset_calls()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = torch.zeros(7, 3).index_add_(0, idx, x)
            again = torch.zeros(7, 3).index_add(0, idx, x)
        assert torch.equal(got, want) and torch.equal(again, want)
        ops_warned = [str(w.message).split()[1] for w in seen
                      if "deterministic kernel" in str(w.message)]
        assert ops_warned and len(ops_warned) == len(set(ops_warned)), ops_warned  # once per op
        assert sbmode.calls().get("index_add_", 0) == 0  # not counted as samebits'
    with st.deterministic("portable"):
        with pytest.raises(samebits.NondeterministicError):
            torch.zeros(7, 3).index_add_(0, idx, x)


def test_inside_a_fallback_to_torch_covered_ops_run_torch_kernels_too():
    # torch's deterministic CUDA index_add calls index_put_(accumulate=True), which the mode also
    # covers: within the fallback that must run torch's kernel, not samebits' (which refused).
    import samebits
    from samebits.torch import mode as sbmode

    def refuse():
        raise samebits.NondeterministicError("no variant")

    g = torch.Generator().manual_seed(12)
    x, idx = torch.randn(30, 2, generator=g), torch.randint(0, 5, (30,), generator=g)
    with st.deterministic("run_to_run"):
        sbmode.reset_calls()
        nested = sbmode._samebits_or_torch(
            "index_add_", refuse, lambda: torch.zeros(5, 2).index_put_((idx,), x, accumulate=True))
        assert sbmode.calls().get("_index_put_impl_", 0) == 0, sbmode.calls()
        assert torch.equal(nested, torch.zeros(5, 2).index_add_(0, idx, x)) or torch.allclose(
            nested, torch.zeros(5, 2).index_add_(0, idx, x))
        # Afterwards the mode runs samebits again.
        torch.zeros(5, 2).index_put_((idx,), x, accumulate=True)
        assert sbmode.calls().get("_index_put_impl_", 0) == 1, sbmode.calls()
