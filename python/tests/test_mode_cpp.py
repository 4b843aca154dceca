"""The drop-in mode's C++ kernels (samebits._torch_mode) against its Python kernels.

Where the package was built against torch, the mode's scatters (index_add, scatter_add,
scatter_reduce; functional and in place) run as C++ kernels of the aten ops. They must give the
Python kernels' bits, counts and errors for every case: generated over op x value dtype x index
dtype x dim x index layout (a plain index, PyG's expanded vector) x src layout x level x device.
"""
import contextlib
import itertools
import os

import pytest
import torch

import samebits
import samebits.torch as st
from samebits.torch import mode as sbmode

pytestmark = pytest.mark.skipif(sbmode._cpp is None,
                                reason="samebits was built without the mode's C++ kernels")

SEED = int(os.environ.get("SAMEBITS_TEST_SEED", "20261201"))
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
VALUES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INDICES = [torch.int64, torch.int32]
REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@contextlib.contextmanager
def python_kernels():
    """The mode with its Python kernels for every op (as a build without the C++ ones)."""
    saved = sbmode._cpp
    sbmode._cpp = None
    try:
        yield
    finally:
        sbmode._cpp = saved


def bits(t):
    t = t.detach().cpu().contiguous()
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def run(fn, level, cpp):
    """fn() under the mode (C++ or Python kernels): its result, the calls samebits ran, and
    whether the C++ kernels counted any."""
    ctx = contextlib.nullcontext() if cpp else python_kernels()
    with ctx:
        with st.deterministic(level):
            sbmode.reset_calls()
            out = fn()
            counted = sbmode.calls()
            by_cpp = cpp and bool(sbmode._cpp.calls())
    return out, counted, by_cpp


def case_inputs(g, op, dim, nd, index_dtype, expanded, strided_src, dtype, device):
    """self, index and src of one generated call along `dim` of an nd-dimensional target."""
    shape = [int(s) for s in torch.randint(2, 6, (nd,), generator=g)]
    n = int(torch.randint(1, 12, (1,), generator=g))
    d = dim % nd
    rand = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype).to(device)
    target = rand(*shape)
    src_shape = list(shape)
    src_shape[d] = n
    if op.startswith("index_add"):
        index = torch.randint(0, shape[d], (n,), generator=g)
    elif expanded:  # PyG's index.view(...).expand_as(src): one vector along dim
        vec = torch.randint(0, shape[d], (n,), generator=g)
        view = [1] * nd
        view[d] = n
        index = vec.view(view).expand(src_shape)
    else:  # index.size(d) <= src.size(d), self.size(d) off dim: some one smaller
        src_shape = [max(1, s - int(torch.randint(0, 2, (1,), generator=g)))
                     if k != d else n for k, s in enumerate(shape)]
        index = torch.randint(0, shape[d], src_shape, generator=g)
    index = index.to(index_dtype).to(device)
    if strided_src:  # strides that are not row-major: a transposed tensor's view
        src = rand(*reversed(src_shape)).permute(*reversed(range(nd)))
    else:
        src = rand(*src_shape)
    return target, index, src


def call(op, target, dim, index, src, reduce=None, include_self=True):
    if op == "index_add":
        return lambda: torch.index_add(target, dim, index, src, alpha=0.5)
    if op == "index_add_":
        return lambda: target.clone().index_add_(dim, index, src)
    if op == "scatter_add":
        return lambda: torch.scatter_add(target, dim, index, src)
    if op == "scatter_add_":
        return lambda: target.clone().scatter_add_(dim, index, src)
    if op == "scatter_reduce":
        return lambda: torch.scatter_reduce(target, dim, index, src, reduce,
                                            include_self=include_self)
    return lambda: target.clone().scatter_reduce_(dim, index, src, reduce,
                                                  include_self=include_self)


OPS = ["index_add", "index_add_", "scatter_add", "scatter_add_", "scatter_reduce",
       "scatter_reduce_"]
# index_add takes an index vector: it has no expanded form.
CASES = [c for c in itertools.product(OPS, VALUES, INDICES, [0, 1, -1], [False, True],
                                      [False, True], ["run_to_run", "portable"], DEVICES)
         if not (c[4] and c[0].startswith("index_add"))]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_cpp_kernels_give_the_python_kernels_bits_and_counts(case):
    op, dtype, index_dtype, dim, expanded, strided_src, level, device = CASES[case]
    g = torch.Generator().manual_seed(SEED + case)
    nd = 2 + case % 2
    target, index, src = case_inputs(g, op, dim, nd, index_dtype, expanded, strided_src, dtype,
                                     device)
    reduce = REDUCES[case % len(REDUCES)]
    include_self = case % 3 != 0
    fn = call(op, target, dim, index, src, reduce, include_self)
    ours, counted, by_cpp = run(fn, level, cpp=True)
    theirs, counted_py, _ = run(fn, level, cpp=False)
    assert by_cpp, "the C++ kernel did not run"
    assert counted == counted_py
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert torch.equal(bits(ours), bits(theirs))


@pytest.mark.parametrize("device", DEVICES)
def test_a_zero_dim_target_and_index_take_the_same_path(device):
    x = torch.tensor(1.5, device=device)
    for fn in (lambda: torch.index_add(x, 0, torch.tensor(0, device=device),
                                       torch.tensor(2.25, device=device)),
               lambda: torch.index_add(torch.zeros(3, device=device), 0,
                                       torch.tensor(1, device=device),
                                       torch.tensor([4.0], device=device))):
        ours, counted, _ = run(fn, "run_to_run", cpp=True)
        theirs, counted_py, _ = run(fn, "run_to_run", cpp=False)
        assert torch.equal(ours, theirs) and counted == counted_py


def outcome(fn, level, cpp):
    """("ok", the result's bits, the calls samebits ran) or (the exception's class, its first
    line, None)."""
    try:
        out, counted, _ = run(fn, level, cpp)
        return "ok", bits(out).tolist(), counted
    except Exception as e:  # noqa: BLE001 - the kind and the message are what is compared
        return type(e), str(e).splitlines()[0], None


@pytest.mark.parametrize("device", DEVICES)
def test_bad_calls_raise_what_the_python_kernels_raise(device):
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(6, 3, generator=g).to(device)
    src = torch.randn(5, 3, generator=g).to(device)
    idx = torch.tensor([0, 2, 9, 1, 5], device=device)  # 9 is out of range
    ok = torch.tensor([0, 2, 3, 1, 5], device=device)
    five = torch.randn(2, 2, 2, 2, 2, generator=g).to(device)
    cases = {
        "index out of range": lambda: torch.index_add(x, 0, idx, src),
        "negative index": lambda: x.clone().index_add_(0, ok - 3, src),
        "scatter out of range": lambda: torch.scatter_add(x, 0, idx[:, None].expand(5, 3), src),
        "mixed dtypes": lambda: torch.index_add(x, 0, ok, src.double()),
        "integer values": lambda: torch.index_add(x.long(), 0, ok, src.long()),
        "five dims": lambda: torch.scatter_add(five, 0, torch.zeros_like(five, dtype=torch.long),
                                               five),
        "dim out of range": lambda: torch.index_add(x, 2, ok, src),
        "source of another shape": lambda: torch.index_add(x, 0, ok, src[:, :2]),
        "complex alpha": lambda: torch.index_add(x.cfloat(), 0, ok, src.cfloat(), alpha=1j),
    }
    for name, fn in cases.items():
        with samebits.index_checks("wait"):
            ours = outcome(fn, "run_to_run", cpp=True)
            theirs = outcome(fn, "run_to_run", cpp=False)
        assert ours == theirs, (name, ours, theirs)


def test_an_out_of_range_index_writes_nothing():
    x = torch.arange(12.0).view(4, 3)
    before = x.clone()
    with st.deterministic("run_to_run"):
        with pytest.raises(samebits.IndexOutOfRange):
            x.index_add_(0, torch.tensor([0, 4]), torch.ones(2, 3))
        with pytest.raises(IndexError):
            x.scatter_add_(0, torch.tensor([[5, 0, 0]]), torch.ones(1, 3))
    assert torch.equal(x, before)


def test_the_mode_restores_torchs_kernels_and_the_level_follows_nesting():
    x = torch.zeros(4, 2)
    idx, src = torch.tensor([0, 1, 1, 3]), torch.randn(4, 2)
    with st.deterministic("run_to_run"):
        with st.deterministic("portable"):
            sbmode.reset_calls()
            a = torch.index_add(x, 0, idx, src)
            assert sbmode._cpp.calls() == {"index_add": 1}
        b = torch.index_add(x, 0, idx, src)
        assert torch.equal(a, st.index_add(x, 0, idx, src, level="portable"))
        assert torch.equal(b, st.index_add(x, 0, idx, src, level="run_to_run"))
    sbmode.reset_calls()
    torch.index_add(x, 0, idx, src)
    assert sbmode._cpp.calls() == {}  # torch's own kernel again


def test_an_environment_variable_keeps_the_python_kernels(monkeypatch):
    monkeypatch.setenv("SAMEBITS_TORCH_MODE", "python")
    assert sbmode._load_cpp() is None
    monkeypatch.delenv("SAMEBITS_TORCH_MODE")
    assert sbmode._load_cpp() is sbmode._cpp


def test_a_build_against_another_torch_is_left_alone(monkeypatch):
    monkeypatch.setattr(sbmode._cpp, "torch_version", "0.0.0")
    assert sbmode._load_cpp() is None


def test_the_mode_can_end_while_another_thread_runs_covered_calls():
    import threading

    g = torch.Generator().manual_seed(SEED)
    x, src = torch.randn(64, 8, generator=g), torch.randn(256, 8, generator=g)
    idx = torch.randint(0, 64, (256,), generator=g)
    want = torch.index_add(x, 0, idx, src).double()
    stop, errors = threading.Event(), []

    def calls():
        try:
            while not stop.is_set():
                torch.testing.assert_close(torch.index_add(x, 0, idx, src).double(), want)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=calls)
    t.start()
    try:
        for _ in range(40):
            with st.deterministic("run_to_run"):
                torch.index_add(x, 0, idx, src)
    finally:
        stop.set()
        t.join()
    assert not errors, errors


# index_put_ with accumulate=True: one index (int64/int32 row numbers, negative ones among them,
# or a bool mask over the leading dims as autograd passes it for x[mask]'s backward) x value dtype
# x the dims the mask covers x level x device.
# (Row numbers index the first dim only: a mask alone covers two.)
PUT_CASES = [c for c in itertools.product(["int64", "int32", "mask"], VALUES, [1, 2],
                                          ["run_to_run", "portable", "not_guaranteed"], DEVICES)
             if c[0] == "mask" or c[2] == 1]


def put_inputs(g, kind, dtype, covered, device):
    """self (3-D), the index and values of one index_put_ call, and the same call's row numbers
    into self viewed as [rows, rest] (for the mask: its set elements, in order)."""
    shape = [int(s) for s in torch.randint(2, 6, (3,), generator=g)]
    rand = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype).to(device)
    if kind == "mask":
        mask = torch.rand(shape[:covered], generator=g) < 0.6
        mask.view(-1)[:2] = True  # one set element (one value row) takes torch's kernel on CUDA
        rows = mask.reshape(-1).nonzero().squeeze(1)
        index, lead = mask, covered
    else:
        n = int(torch.randint(1, 12, (1,), generator=g))
        index = torch.randint(-shape[0], shape[0], (n,), generator=g).to(getattr(torch, kind))
        rows = torch.where(index < 0, index + shape[0], index).long()
        lead = 1
    values = rand(rows.numel(), *shape[lead:])
    return rand(*shape), index.to(device), values, rows.to(device), lead


@pytest.mark.parametrize("case", range(len(PUT_CASES)))
def test_index_put_with_one_index_runs_in_cpp_as_an_index_add_of_rows(case):
    kind, dtype, covered, level, device = PUT_CASES[case]
    g = torch.Generator().manual_seed(SEED + 7000 + case)
    x, index, values, rows, lead = put_inputs(g, kind, dtype, covered, device)
    put = lambda: torch.ops.aten._index_put_impl_(x.clone(), [index], values, True, True)
    ours, counted, by_cpp = run(put, level, cpp=True)
    assert by_cpp and counted == {"_index_put_impl_": 1}
    # The Python kernel's index_add of the same rows: the same samebits call, the same bits where
    # the level is deterministic.
    flat = lambda: torch.index_add(x.reshape((-1,) + x.shape[lead:]), 0, rows,
                                   values).view(x.shape)
    theirs, _, _ = run(flat, level, cpp=False)
    if level != "not_guaranteed":  # atomics: repeated rows add in any order
        assert torch.equal(bits(ours), bits(theirs))
    want = x.double().reshape((-1,) + x.shape[lead:]).index_add(0, rows, values.double())
    torch.testing.assert_close(ours.double(), want.view(x.shape), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_the_backward_of_a_masked_read_runs_in_cpp(device):
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(50, 4, generator=g, dtype=torch.float64).to(device).requires_grad_()
    mask = (torch.rand(50, generator=g) < 0.3).to(device)
    w = torch.randn(int(mask.sum()), 4, generator=g, dtype=torch.float64).to(device)
    with st.deterministic("run_to_run"):
        sbmode.reset_calls()
        (x[mask] * w).sum().backward()
        assert sbmode._cpp.calls().get("_index_put_impl_") == 1
    assert torch.equal(x.grad[mask], w) and not x.grad[~mask].any()


def test_the_masked_backward_does_not_wait_for_the_device():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    g = torch.Generator().manual_seed(SEED)
    mask = (torch.rand(2708, generator=g) < 0.05).cuda()
    values = torch.randn(int(mask.sum()), 7, generator=g).cuda()
    target = torch.zeros(2708, 7, device="cuda")
    with st.deterministic("run_to_run"), samebits.index_checks("deferred"):
        torch.cuda.set_sync_debug_mode("error")
        try:
            torch.ops.aten._index_put_impl_(target, [mask], values, True, True)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(target[mask], values)


@pytest.mark.parametrize("device", DEVICES)
def test_index_put_calls_the_cpp_kernel_does_not_take_go_where_they_went(device):
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(6, 3, generator=g).to(device)
    mask = torch.tensor([True, False, True, True, False, False], device=device)
    rows = torch.tensor([0, 2, 3], device=device)
    v = torch.randn(3, 3, generator=g).to(device)
    cases = {
        # a user's masked index_put_ (unsafe=False): torch's kernel, which checks the count
        "user mask": lambda: x.clone().index_put_((mask,), v, accumulate=True),
        "user mask, wrong count": lambda: x.clone().index_put_((mask,), v[:2], accumulate=True),
        "broadcast values": lambda: x.clone().index_put_((rows,), v[:1], accumulate=True),
        "two indices": lambda: x.clone().index_put_((rows, rows), v[:, 0], accumulate=True),
        "no accumulation": lambda: x.clone().index_put_((rows,), v),
        "out of range": lambda: x.clone().index_put_((rows + 4,), v, accumulate=True),
        "integer values": lambda: x.long().index_put_((rows,), v.long(), accumulate=True),
    }
    for name, fn in cases.items():
        with samebits.index_checks("wait"):
            ours = outcome(fn, "run_to_run", cpp=True)
            theirs = outcome(fn, "run_to_run", cpp=False)
        assert ours == theirs, (name, ours, theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_a_mask_with_fewer_elements_than_value_rows_writes_nothing(device):
    # The CPU kernel counts the mask and leaves a mismatch to torch's kernel, which raises its
    # shape error; on CUDA the count is not read (no wait): fewer set elements than rows leave
    # rows out of range, which samebits' index check reports.
    x = torch.arange(12.0, device=device).view(4, 3)
    before = x.clone()
    mask = torch.tensor([True, False, True, False], device=device)
    error = RuntimeError if device == "cpu" else samebits.IndexOutOfRange
    with st.deterministic("run_to_run"), samebits.index_checks("wait"):
        with pytest.raises(error):
            torch.ops.aten._index_put_impl_(x, [mask], torch.ones(3, 3, device=device), True,
                                            True)
    assert torch.equal(x, before)


@pytest.mark.parametrize("device", DEVICES)
def test_one_value_row_is_broadcast_over_every_set_element_as_in_torch(device):
    x = torch.arange(12.0, device=device).view(4, 3)
    mask = torch.tensor([True, False, True, True], device=device)
    row = torch.tensor([[0.5, 0.25, 2.0]], device=device)
    put = lambda: torch.ops.aten._index_put_impl_(x.clone(), [mask], row, True, True)
    with st.deterministic("run_to_run"):
        ours = put()
    assert torch.equal(ours, put())
