# samebits.torch.trace: the device-side sum64 hash against its pure-Python definition and the C++
# constants (tests/test_trace_sum_hash.cpp), what an entry records (op, shape, source line, module
# path, step, inputs) with either recorder (the C++ one where samebits._torch_mode is built: the
# `recorder` fixture), the file's life cycle, and two traces from two processes compared by the
# C++ `samebits diff` where the binary is built. test_trace_cpp.py checks the C++ recorder against
# the Python one.
import json
import os
import shutil
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
import torch

from samebits.torch import _sumhash as sh
from samebits.torch import tracing as tr

REPO = Path(__file__).resolve().parents[2]
N = 5000


def _cpp_recorder_built():
    from samebits.torch import _trace_cpp

    return _trace_cpp._cpp is not None and hasattr(_trace_cpp._cpp, "TraceRecorder")


RECORDERS = [
    "python",
    pytest.param("cpp", marks=pytest.mark.skipif(
        not _cpp_recorder_built(), reason="samebits._torch_mode is not built against this torch")),
]


@pytest.fixture(params=RECORDERS)
def recorder(request):
    return request.param


def known():
    """The tensors of tests/test_trace_sum_hash.cpp's KnownValuesMatchThePythonSide."""
    i = range(N)
    return {
        "2737283b20127cc0": torch.tensor([((k * 37) % 1001 - 500) / 64.0 for k in range(2 * N)]),
        "a244966fba26fcc0": torch.tensor(
            [((k * 53) % 2001 - 1000) / 1024.0 for k in i], dtype=torch.float64
        ).view(50, 100),
        "29b2e7b9a0d92e0a": torch.tensor(
            [(k * 7919) % 100003 - 50000 for k in i], dtype=torch.int32
        ),
        "c3ef43f9fcc8395e": torch.tensor([k * k * 7919 - 3000000000 for k in i]),
        "576eaf781d18da49": torch.tensor([((k * 37) % 1001 - 500) / 64.0 for k in range(4097)]),
    }


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def test_sum_hash_matches_the_cpp_constants():
    for expected, t in known().items():
        assert tr.hash_hex(int(tr.sum_hash(t))) == expected, t.dtype
        assert tr.hash_hex(tr.sum_hash_reference(raw(t))) == expected, t.dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 3, 5, 2 * 4096 + 17])
def test_sum_hash_of_random_tensors_matches_the_definition(dtype, n):
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    x = torch.randn(n, generator=g).to(dtype)
    assert int(tr.sum_hash(x)) & (2**64 - 1) == tr.sum_hash_reference(raw(x))
    b = torch.randint(0, 2, (n,), generator=g).bool()
    assert int(tr.sum_hash(b)) & (2**64 - 1) == tr.sum_hash_reference(raw(b))


def test_sum_hash_sees_every_one_element_change_and_the_chunked_path_agrees(monkeypatch):
    x = torch.randn(4 * 4096 + 5, dtype=torch.float32)
    h = int(tr.sum_hash(x))
    for i in (0, 1, 8191, 8192, x.numel() - 1):
        y = x.clone()
        y[i] = torch.nextafter(y[i], torch.tensor(1e9))
        assert int(tr.sum_hash(y)) != h, i
    # Strided input: hashed by its row-major contents.
    m = torch.randn(70, 90, dtype=torch.float64)
    assert int(tr.sum_hash(m.t())) == int(tr.sum_hash(m.t().contiguous()))
    # Tensors longer than the cached multipliers take the chunked path: same value.
    monkeypatch.setattr(sh._Multipliers, "_FULL_LIMIT", 4096)
    assert int(tr.sum_hash(x)) == h
    assert int(tr.sum_hash(x[:-1])) == tr.sum_hash_reference(raw(x[:-1])) - (1 << 64) * (
        tr.sum_hash_reference(raw(x[:-1])) >> 63
    )


def test_the_cuda_code_path_computes_the_same_hash(monkeypatch):
    # On CUDA the hash takes fresh buffers and multiplies then sums (there is no int64 dot):
    # forced here on the CPU, it must give the definition's value.
    monkeypatch.setattr(sh, "_has_int_dot", lambda device: False)
    monkeypatch.setattr(sh, "_reuse_scratch", lambda device: False)
    for n in (1, 7, 3 * 4096 + 1):
        x = torch.randn(n)
        assert int(tr.sum_hash(x)) & (2**64 - 1) == tr.sum_hash_reference(raw(x))
    monkeypatch.setattr(sh._Multipliers, "_FULL_LIMIT", 4096)
    x = torch.randn(5 * 4096 + 3, dtype=torch.float64)
    assert int(tr.sum_hash(x)) & (2**64 - 1) == tr.sum_hash_reference(raw(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(8, 6)
        self.lin2 = torch.nn.Linear(6, 3)

    def forward(self, x):
        h = torch.relu(self.lin1(x))  # RELU_LINE
        return self.lin2(h)


def line_of(marker):
    for n, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if marker in text and "def line_of" not in text and "line_of(" not in text:
            return f"{__file__}:{n}"
    raise AssertionError(marker)


def read(path):
    lines = Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def train(steps=2, seed=0):
    torch.manual_seed(seed)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        loss = net(torch.randn(5, 8)).square().mean()  # LOSS_LINE
        loss.backward()
        opt.step()
        opt.zero_grad()
    return net


def test_trace_records_ops_sources_modules_steps_and_inputs(tmp_path, recorder):
    path = tmp_path / "a.trace"
    with tr.trace(str(path), recorder=recorder) as t:
        train(steps=2)
    assert not Path(str(path) + ".partial").exists()
    header, entries = read(path)
    assert header["samebits_trace"] == 1 and header["hash_kinds"] == ["sum64"]
    assert [e["i"] for e in entries] == list(range(len(entries))) and t.entries == len(entries)
    relu = [e for e in entries if e["op"] == "aten.relu.default"]
    assert len(relu) == 2 and relu[0]["source"] == line_of("# RELU_LINE")
    assert relu[0]["layer"] == "Net" and relu[1]["step"] == 1
    addmm = [e for e in entries if e["op"] == "aten.addmm.default"]
    assert [e["layer"] for e in addmm[:2]] == ["Net.lin1", "Net.lin2"]
    assert addmm[0]["shape"] == [5, 6] and addmm[0]["dtype"] == "float32"
    # Backward ops carry the forward op's line and module, and their autograd node.
    back = [e for e in entries if e.get("grad_fn") == "ReluBackward0"]
    assert back and back[0]["source"] == line_of("# RELU_LINE") and back[0]["layer"] == "Net"
    # The optimizer's updates are recorded under its name; its step advances the trace's step.
    upd = [e for e in entries if e["layer"] == "optimizer.SGD"]
    assert len(upd) == 2 * 4 and {e["step"] for e in upd} == {0, 1}
    # Inputs name the entries that produced them: relu reads lin1's addmm.
    assert relu[0]["inputs"] == [addmm[0]["i"]]
    # The statistics are the tensor's.
    assert all(len(e["samples"]) == min(8, _numel(e["shape"])) for e in entries)


def test_producers_forget_dead_tensors_and_never_lend_an_id_to_a_new_one():
    import gc

    prod = tr._Producers()
    kept = [torch.randn(3) for _ in range(50)]
    for i, t in enumerate(kept):
        prod.set(t, i)
    prod.set(kept[7], 99)  # a second write to a live tensor replaces its entry
    assert [prod.get(t) for t in kept[:8]] == [0, 1, 2, 3, 4, 5, 6, 99] and len(prod) == 50
    ids = {id(t) for t in kept[25:]}
    del t
    del kept[25:]
    gc.collect()
    assert len(prod) == 25
    assert all(i not in prod._by_id for i in ids)
    assert [prod.get(t) for t in kept] == [*range(7), 99, *range(8, 25)]
    # A tensor whose id an entry still names (a dead tensor's, before its callback ran) does not
    # read that entry, and writing it takes the id over.
    other, fresh = torch.randn(3), torch.randn(3)
    prod._by_id[id(fresh)] = (weakref.ref(other), 5)
    assert prod.get(fresh) is None
    prod.set(fresh, 6)
    assert prod.get(fresh) == 6 and prod.get(other) is None
    # The map holds no strong cycle through itself: it goes when its owner drops it, and a tensor
    # that dies afterwards calls back into nothing.
    gone = weakref.ref(prod)
    del prod
    assert gone() is None
    del kept
    gc.collect()


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_trace_hashes_equal_the_tensors_own(tmp_path, recorder):
    x = torch.randn(300, 7)
    with tr.trace(str(tmp_path / "b.trace"), stats=False, recorder=recorder):
        y = torch.sin(x)
    _, entries = read(tmp_path / "b.trace")
    (e,) = [e for e in entries if e["op"] == "aten.sin.default"]
    assert e["sum_hash"] == tr.hash_hex(int(tr.sum_hash(y)))
    assert e["nan"] == -1 and e["min"] == "nan"  # not computed with stats=False


def test_statistics_of_large_outputs_come_from_a_strided_sample(tmp_path, recorder):
    x = torch.rand(300, 1000) + 1.0  # 300000 elements: every 5th
    small = torch.randn(40, 50)
    with tr.trace(str(tmp_path / "s.trace"), recorder=recorder):
        y = x * 2.0
        z = small * 2.0
    _, entries = read(tmp_path / "s.trace")
    big = next(e for e in entries if e["shape"] == [300, 1000])
    assert big["stats_stride"] == 5 and big["sum_hash"] == tr.hash_hex(int(tr.sum_hash(y)))
    assert big["mean"] == pytest.approx(float(y.double().mean()), rel=1e-2)
    assert big["l2"] == pytest.approx(float(y.double().norm()), rel=1e-2)
    assert big["min"] >= float(y.min()) and big["max"] <= float(y.max())
    flat = y.reshape(-1)
    assert big["samples"] == [float(flat[k * flat.numel() // 8]) for k in range(8)]
    exact = next(e for e in entries if e["shape"] == [40, 50])
    assert "stats_stride" not in exact
    assert exact["min"] == float(z.min()) and exact["max"] == float(z.max())
    assert exact["mean"] == pytest.approx(float(z.double().mean()), rel=1e-5, abs=1e-6)
    assert exact["l2"] == pytest.approx(float(z.double().norm()), rel=1e-5)


def _entries_of(path, make, recorder="auto"):
    with tr.trace(str(path), recorder=recorder):
        make()
    _, entries = read(path)
    return [e for e in entries if e["op"] == "aten.clone.default"]


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
_DEVICES = ["cpu", pytest.param("cuda", marks=_CUDA)]
_DIGEST_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                  torch.int64]


def _digest_sources(dtype, device):
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    sources = [
        torch.randn(3, generator=g),  # an odd number of 32-bit values: a padded word
        torch.randn(40, 50, generator=g),
        torch.randn(300, 1001, generator=g),  # strided statistics
        torch.randn(600, 7, generator=g).t(),  # cloned with its transposed strides
        torch.randn(1 << 21, generator=g),  # more hash words than one grid pass on CUDA
        torch.tensor([1.0, float("nan"), -2.0, float("inf")]),
        torch.empty(0, 4),
    ]
    if not dtype.is_floating_point:
        sources = [(s.nan_to_num(0.0, 9.0, -9.0) * 1000).to(dtype) for s in sources]
    else:
        sources = [s.to(dtype) for s in sources]
    return [s.to(device) for s in sources]


def _assert_same_entries(fast, slow, n):
    assert len(fast) == len(slow) == n
    for a, b in zip(fast, slow):
        assert a["sum_hash"] == b["sum_hash"], a["shape"]
        for key in ("min", "max", "nan", "samples", "shape", "dtype"):
            assert a[key] == b[key], (key, a["shape"])
        assert a.get("stats_stride") == b.get("stats_stride")
        for key in ("mean", "l2"):
            if isinstance(b[key], str):
                assert a[key] == b[key], (key, a["shape"])
            else:
                assert a[key] == pytest.approx(b[key], rel=2e-3, abs=1e-6), (key, a["shape"])


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("dtype", _DIGEST_DTYPES)
def test_the_digest_records_what_the_torch_path_records(tmp_path, monkeypatch, dtype, device,
                                                        recorder):
    """Tensors of samebits' dtypes take one call into the C++ library (trace_digest on the CPU,
    trace_digest_cuda on CUDA; the C++ recorder calls the same functions); with that path switched
    off the Python recorder's trace comes from torch's ops: the same hash, extremes, NaN count
    and samples, and the same sums to rounding."""
    sources = _digest_sources(dtype, device)

    def make():
        for s in sources:
            s.clone()

    fast = _entries_of(tmp_path / "fast.trace", make, recorder)
    monkeypatch.setattr(tr, "_DIGEST_DTYPES", ())
    monkeypatch.setattr(tr, "_DEVICE_DIGEST_CODES", {})
    slow = _entries_of(tmp_path / "slow.trace", make, "python")
    _assert_same_entries(fast, slow, len(sources))


@_CUDA
@pytest.mark.parametrize("dtype", _DIGEST_DTYPES)
def test_cuda_traces_hash_as_the_cpu_and_repeat_bit_for_bit(tmp_path, dtype, recorder):
    """The device digest's hash is the CPU's; its statistics (a fixed tree of float64 sums) are
    the same bits on every run; records are reused across flushes (more entries than a ring)."""
    sources = _digest_sources(dtype, "cuda")

    def make():
        for _ in range(3 * tr._FLUSH_EVERY // len(sources) + 1):
            for s in sources:
                s.clone()

    first = _entries_of(tmp_path / "a.trace", make, recorder)
    again = _entries_of(tmp_path / "b.trace", make, recorder)
    assert len(first) > 3 * tr._FLUSH_EVERY
    def strip(e):
        return {k: v for k, v in e.items() if k != "source"}

    assert [strip(e) for e in first] == [strip(e) for e in again]
    cpu = [s.cpu() for s in sources]
    on_cpu = _entries_of(tmp_path / "c.trace", lambda: [s.clone() for s in cpu], recorder)
    for a, b in zip(first, on_cpu):
        assert a["sum_hash"] == b["sum_hash"], a["shape"]


@_CUDA
def test_the_device_digest_reads_unaligned_views_and_refuses_bad_calls():
    from samebits import _core

    base = torch.randn(4099, device="cuda")
    rings = tr._DigestRings()
    slots = [rings.digest(v, tr._STATS_ELEMENTS) for v in (base[1:], base[3:10], base[:0])]
    got = rings.read()
    for v, slot in zip((base[1:], base[3:10], base[:0]), slots):
        h, _ = got[slot]
        assert h == tr.sum_hash_reference(raw(v.cpu()))
    assert rings.read() == {}  # read starts the rings over
    with pytest.raises(Exception, match="no dtype code"):
        _core.trace_digest_cuda(base.data_ptr(), 4, 99, 0, 0, base.data_ptr(), 0)


def test_the_cpu_digest_hashes_every_thread_count_alike(tmp_path):
    from samebits import _core

    x = torch.randn(3 * 64 * 4096 + 11)  # more than two of the C++ hash's 2 MiB tasks
    want = tr.sum_hash_reference(raw(x))
    before = _core.num_threads()
    try:
        for n in (1, 2, 3):
            _core.set_num_threads(n)
            h, stats = tr._host_digest(x, True)
            assert h == want, n
            assert stats[4] == -(-x.numel() // tr._STATS_ELEMENTS)
    finally:
        _core.set_num_threads(before)


def test_a_failed_run_leaves_only_the_partial_file(tmp_path, recorder):
    path = tmp_path / "c.trace"
    with pytest.raises(RuntimeError, match="planted"):
        with tr.trace(str(path), recorder=recorder):
            torch.ones(3).add(1)
            raise RuntimeError("planted")
    assert not path.exists() and Path(str(path) + ".partial").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_forked_while_tracing_writes_nothing_into_the_trace(tmp_path, recorder):
    """A child forked inside the block (a DataLoader worker) runs more ops than one flush takes,
    and exits without a word in the parent's file."""
    path = tmp_path / "f.trace"
    with tr.trace(str(path), recorder=recorder):
        torch.ones(3).add(1.0)
        pid = os.fork()
        if pid == 0:  # the child: its ops, then out without running the parent's exit handlers
            code = 0
            try:
                for _ in range(tr._FLUSH_EVERY + 100):
                    torch.ones(3).mul(2.0)
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        torch.ones(3).neg()
    assert os.waitstatus_to_exitcode(status) == 0
    _, entries = read(path)
    assert [e["op"] for e in entries] == ["aten.add.Tensor", "aten.neg.default"]


def samebits_binary():
    for p in (os.environ.get("SAMEBITS_BIN", ""), REPO / "build" / "samebits"):
        if p and Path(p).is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which("samebits")


CHILD = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {tests!r})
    from test_trace import train
    from samebits.torch import tracing as tr
    with tr.trace(sys.argv[1]):
        train(steps=3, seed=int(sys.argv[2]))
    """
)


def run_child(path, seed):
    # samebits from where this process imported it (the installed package, not the source tree).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    code = CHILD.format(tests=str(Path(__file__).parent))
    subprocess.run([sys.executable, "-c", code, str(path), str(seed)], check=True, env=env)


@pytest.mark.skipif(samebits_binary() is None, reason="the samebits binary is not built")
def test_two_processes_compared_by_the_cpp_diff(tmp_path):
    a, b, c = tmp_path / "a.trace", tmp_path / "b.trace", tmp_path / "c.trace"
    run_child(a, 0)
    run_child(b, 0)
    run_child(c, 1)
    same = subprocess.run([samebits_binary(), "diff", str(a), str(b)], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "no difference" in same.stdout
    other = subprocess.run([samebits_binary(), "diff", str(a), str(c)], capture_output=True, text=True)
    assert other.returncode == 1, other.stdout + other.stderr
    assert "first difference: entry 0" in other.stdout  # the parameters' initialisation
    assert "source   A: " in other.stdout


def test_code_a_library_generates_at_run_time_is_not_the_users():
    # PyG 2.8 writes each conv's propagate into /tmp as torch_geometric.nn.conv.*.py: the caller
    # the finder names is the user's line behind it, not that file.
    generated = compile("x = 1", "/tmp/torch_geometric.nn.conv.sage_conv_propagate_ab12.py", "exec")
    user = compile("x = 1", "/tmp/train_model.py", "exec")
    assert tr._classify(generated) == (False, True)
    assert tr._classify(user) == (False, False)
