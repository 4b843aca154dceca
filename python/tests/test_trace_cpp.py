# samebits.torch.trace's C++ recorder (python/src/trace_recorder.cpp) against the Python one: the
# same entries field for field on generated trainings (models x dtypes x devices x stats), the
# hash of the bytes for dtypes outside samebits', producers across in-place writes and saved
# tensors, the recorder's choice and refusals. Skipped where samebits._torch_mode is not built
# against this torch.
import itertools
import json
import random
from pathlib import Path

import pytest
import torch

import samebits
from samebits.torch import _trace_cpp
from samebits.torch import tracing as tr

pytestmark = pytest.mark.skipif(
    _trace_cpp._cpp is None or not hasattr(_trace_cpp._cpp, "TraceRecorder"),
    reason="samebits._torch_mode is not built against this torch",
)
_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=_CUDA)]
# What both recorders write alike (the C++ one adds nothing, leaves nothing out).
FIELDS = ("i", "step", "layer", "op", "dtype", "shape", "source", "caller", "grad_fn", "inputs",
          "context", "deterministic_algorithms", "stats_stride", "sum_hash", "min", "max", "nan",
          "samples", "mean", "l2")


def read(path):
    lines = Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


class Mlp(torch.nn.Module):
    def __init__(self, widths, act, **factory):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b, **factory) for a, b in zip(widths, widths[1:])
        )
        self.norm = torch.nn.LayerNorm(widths[1], **factory)
        self.act = act

    def forward(self, x):
        for k, lin in enumerate(self.layers):
            x = lin(x)
            if k == 0:
                x = self.norm(x)
            if k + 1 < len(self.layers):
                x = self.act(x)
        return x


def training(widths, act, opt_name, dtype, device, steps, seed):
    """A few steps of an MLP (linear, layer norm, activation) with an optimizer: forward,
    loss, backward and update, on `device` in `dtype`."""

    def run():
        torch.manual_seed(seed)
        # Made where they live: Module.to() sets each parameter's .data to a converted copy, which
        # the C++ recorder follows (by storage) and the Python one does not (by tensor object).
        net = Mlp(widths, act, device=device, dtype=dtype)
        opt = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
               "adam": lambda p: torch.optim.Adam(p, lr=0.01)}[opt_name](net.parameters())
        x = torch.randn(7, widths[0], device=device, dtype=dtype)
        target = torch.randint(0, widths[-1], (7,), device=device)
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(net(x), target)
            loss.backward()
            opt.step()
            opt.zero_grad()
        return net

    return run


def both(tmp_path, make, **kw):
    out = []
    for rec in ("python", "cpp"):
        path = tmp_path / f"{rec}.trace"
        with tr.trace(str(path), recorder=rec, **kw) as t:
            make()
        header, entries = read(path)
        assert t.entries == len(entries)
        out.append(entries)
    return out


def assert_same(py, cpp):
    assert len(py) == len(cpp)
    for a, b in zip(py, cpp):
        for key in FIELDS:
            x, y = a.get(key), b.get(key)
            if key in ("mean", "l2") and isinstance(x, float) and isinstance(y, float):
                assert y == pytest.approx(x, rel=1e-12, abs=0.0), (key, a["i"], a["op"])
            else:
                assert x == y, (key, a["i"], a["op"], x, y)


def _cases():
    rng = random.Random(20261204)
    acts = [torch.relu, torch.tanh, torch.nn.functional.gelu]
    for device, dtype, stats in itertools.product(["cpu", "cuda"], [torch.float32, torch.float64],
                                                  [True, False]):
        widths = [rng.randint(3, 40) for _ in range(rng.randint(2, 4))]
        yield pytest.param(widths, rng.choice(acts), rng.choice(["sgd", "adam"]), dtype, device,
                           stats, rng.randint(1, 3),
                           marks=[_CUDA] if device == "cuda" else [],
                           id=f"{device}-{str(dtype)[6:]}-stats{int(stats)}-"
                              f"{'x'.join(map(str, widths))}")


@pytest.mark.parametrize("widths,act,opt_name,dtype,device,stats,steps", list(_cases()))
def test_the_cpp_recorder_writes_the_python_recorders_entries(tmp_path, widths, act, opt_name,
                                                               dtype, device, stats, steps):
    """Every field of every entry: ops, shapes, source lines, module paths, steps, the autograd
    nodes of the backward (which runs on torch's device thread on CUDA), the producing entries,
    hashes and statistics. Torch's own code takes the same paths under both: the ops are alike
    one for one (the plain training steps here use no op whose backward picks another kernel
    when it sees a dispatch mode)."""
    py, cpp = both(tmp_path, training(widths, act, opt_name, dtype, device, steps, seed=3),
                   stats=stats, context="run 1")
    assert any(e.get("grad_fn") for e in py)
    assert any(e["layer"].startswith("optimizer.") for e in py)
    assert_same(py, cpp)


@pytest.mark.parametrize("device", DEVICES)
def test_other_dtypes_get_the_hash_of_their_bytes_and_no_statistics(tmp_path, device):
    """bool, uint8, int8, int16 and complex64 outputs of sizes that do and do not fill whole
    64-bit words: the sum64 hash of their bytes, as the Python recorder's torch path hashes them,
    with the statistics marked as not computed."""
    g = torch.Generator().manual_seed(5)
    sources = []
    for dtype, n in itertools.product(
        [torch.bool, torch.uint8, torch.int8, torch.int16, torch.complex64], [1, 7, 8, 13, 4096 + 3]
    ):
        x = torch.randn(n, 2, generator=g)
        if dtype == torch.bool:
            x = x > 0
        elif dtype == torch.complex64:
            x = torch.view_as_complex(x.contiguous())
        else:
            x = (x * 50).to(dtype)
        sources.append(x.to(device))
    path = tmp_path / "o.trace"
    with tr.trace(str(path), recorder="cpp"):
        for s in sources:
            s.clone()
    _, entries = read(path)
    clones = [e for e in entries if e["op"] == "aten.clone.default"]
    assert len(clones) == len(sources)
    for e, s in zip(clones, sources):
        raw = s.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        assert e["sum_hash"] == tr.hash_hex(tr.sum_hash_reference(raw)), e["dtype"]
        assert e["nan"] == -1 and e["min"] == "nan" and e["samples"] == []
        assert e["dtype"] == str(s.dtype).removeprefix("torch.")


@pytest.mark.parametrize("device", DEVICES)
def test_inputs_name_the_last_writer_of_the_bytes_read(tmp_path, device):
    """An in-place op is the producer of what it wrote; a view reads its base's producer; a
    tensor autograd saved (a new tensor over the same storage) reads its forward op's entry."""
    path = tmp_path / "p.trace"
    x = torch.randn(6, 4, device=device, requires_grad=True)
    with tr.trace(str(path), recorder="cpp"):
        a = x.exp()  # saves its output for the backward
        b = a.detach().clone()
        b.mul_(2.0)
        c = b.t().sin()  # reads b through a view
        a.sum().backward()
    _, e = read(path)
    by_op = {x["op"]: x for x in e}
    exp, clone = by_op["aten.exp.default"], by_op["aten.clone.default"]
    mul, sin = by_op["aten.mul_.Tensor"], by_op["aten.sin.default"]
    assert clone["inputs"] == [exp["i"]] and mul["inputs"] == [clone["i"]]
    assert sin["inputs"] == [mul["i"]]
    backward = [x for x in e if x.get("grad_fn") == "ExpBackward0"]
    assert backward and exp["i"] in backward[0]["inputs"]
    assert c.shape == (4, 6)


def test_the_recorder_is_chosen_nested_and_refused_as_documented(tmp_path):
    with pytest.raises(ValueError, match="recorder"):
        tr.trace(str(tmp_path / "x.trace"), recorder="fast")
    outer = tr.trace(str(tmp_path / "outer.trace"))
    assert isinstance(outer, _trace_cpp.CppTracer)
    with outer:
        inner = tr.trace(str(tmp_path / "inner.trace"))  # auto: the C++ one is taken
        assert isinstance(inner, tr.Tracer)
        with pytest.raises(RuntimeError, match="another trace is recording"):
            with tr.trace(str(tmp_path / "third.trace"), recorder="cpp"):
                pass
        with inner:
            torch.ones(3).add(1.0)
        torch.ones(2).mul(3.0)
    _, a = read(tmp_path / "outer.trace")
    _, b = read(tmp_path / "inner.trace")
    assert [e["op"] for e in b] == ["aten.add.Tensor"]
    assert "aten.mul.Tensor" in [e["op"] for e in a]
    assert not (tmp_path / "third.trace").exists()
    # After the outer trace, auto takes the C++ recorder again, and `step` is settable.
    again = tr.trace(str(tmp_path / "again.trace"))
    assert isinstance(again, _trace_cpp.CppTracer)
    with again as t:
        t.step = 7
        torch.ones(2).neg()
    _, c = read(tmp_path / "again.trace")
    assert [e["step"] for e in c] == [7]


def test_a_path_that_cannot_be_written_is_refused_before_recording(tmp_path):
    with pytest.raises(samebits.InvalidArgument, match="does not exist"):
        with tr.trace(str(tmp_path / "no_such_folder" / "x.trace"), recorder="cpp"):
            pass
    # Nothing is left recording: the next trace starts.
    with tr.trace(str(tmp_path / "ok.trace"), recorder="cpp"):
        torch.ones(2).neg()
    assert len(read(tmp_path / "ok.trace")[1]) == 1
