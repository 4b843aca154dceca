"""samebits.torch.distributed on the CPU (gloo): the one-shot all_reduce at one rank, the
accumulator's partition independence without a process group, and the check script end to end
(world sizes 1, 2, 3 in processes of their own)."""
import io
import os
import subprocess
import sys

import pytest
import torch

import samebits
from samebits.torch import distributed as sbd
from samebits.torch.distributed import check


def test_all_reduce_one_rank_portable_keeps_float32_values():
    x = torch.randn(1000, dtype=torch.float32) * 3
    y = x.clone()
    sbd.all_reduce(y, level="portable")
    assert torch.equal(x, y)  # one rank: a resolution of 2^-50 of the max keeps float32 exact
    z = x.t().clone()
    sbd.all_reduce(z, level="run_to_run")
    assert torch.equal(x, z)


def test_all_reduce_names_non_finite_tensor():
    x = torch.tensor([1.0, float("nan")])
    with pytest.raises(samebits.OverflowError, match="layer.weight"):
        sbd.all_reduce(x, level="portable", name="layer.weight")


def _accumulate(groups, steps):
    """Sums the same micro-batch gradients split into `groups` accumulators, as ranks would: the
    accumulators' integers, counts and max-abs are folded into the first (what the SUM and MAX
    all-reduces do), which writes the mean. Two steps: the first keeps the gradients, the second
    converts them at once at the scale of the first step's max-abs. Returns the step means."""
    models, accs = [], []
    for _ in groups:
        model = torch.nn.Module()
        model.w = torch.nn.Parameter(torch.zeros(50))
        models.append(model)
        accs.append(sbd.GradientAccumulator(model))
    means = []
    for grads in steps:
        for part, model in zip(groups, models):
            for j in part:
                model.w.backward(grads[j])
        s0 = next(iter(accs[0]._slots.values()))
        for acc in accs[1:]:
            s = next(iter(acc._slots.values()))
            s0.kept += s.kept
            s0.q += s.q
            s0.count += s.count
            torch.maximum(s0.local_max, s.local_max, out=s0.local_max)
            s.kept, s.count, s.s = [], 0, None
            s.q.zero_()
            s.local_max.zero_()
        accs[0].reduce()
        for acc in accs[1:]:
            next(iter(acc._slots.values())).reference = s0.reference
        means.append(models[0].w.grad.clone())
        for model in models:
            model.w.grad = None
    return means


def test_accumulator_mean_is_partition_independent_and_accurate():
    steps = [[torch.randn(50) * (1 + j) for j in range(12)] for _ in range(2)]
    groupings = ([list(range(12))], [list(range(0, 12, 2)), list(range(1, 12, 2))],
                 [list(range(r, 12, 3)) for r in range(3)], [[j] for j in range(12)])
    outs = [_accumulate(g, steps) for g in groupings]
    for o in outs[1:]:
        for a, b in zip(o, outs[0]):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    for mean, grads in zip(outs[0], steps):
        ref = torch.stack([g.double() for g in grads]).mean(0)
        assert torch.allclose(mean.double(), ref, rtol=2 ** -23, atol=1e-9)


def test_accumulator_overflow_names_the_parameter():
    model = torch.nn.Linear(3, 1)
    acc = sbd.GradientAccumulator(model, headroom_log2=2)
    model.weight.backward(torch.ones(1, 3))
    model.bias.backward(torch.ones(1))
    acc.reduce()                                  # step 1: reference max-abs 1
    model.weight.backward(torch.full((1, 3), 100.0))
    model.bias.backward(torch.ones(1))
    with pytest.raises(samebits.OverflowError, match="weight.*headroom_log2"):
        acc.reduce()


def test_check_script_world_sizes_1_2_3():
    out = io.StringIO()
    worlds = [1, 2, 3]
    res = check.run(worlds, "gloo", models=("mlp", "graphsage"), out=out)
    print(out.getvalue())
    assert check.verdict(res, worlds, ("mlp", "graphsage")) == []
    for name in ("mlp", "graphsage"):
        # plain DDP depends on the world size (otherwise this test could not fail)
        assert len({res[(name, w, "plain")] for w in worlds}) > 1
        # run_to_run equals plain at one rank (no reduction to order)
        assert res[(name, 1, "run_to_run")] == res[(name, 1, "plain")]


_cuda = pytest.mark.skipif(not (torch.cuda.is_available() and samebits.cuda_available()),
                           reason="needs a CUDA device and a CUDA build")


@_cuda
def test_conversions_cuda_bitwise_equal_to_cpu():
    from samebits import _core
    x = torch.randn(100_003, dtype=torch.float32) * 7
    x[::1000] = torch.tensor([2.5, float("inf"), float("nan"), 2.0 ** 60] * 26)[:x[::1000].numel()]
    for s in (0, 20, 40):
        out = {}
        for dev in ("cpu", "cuda"):
            xd = x.to(dev)
            q = torch.full((x.numel(),), 3, dtype=torch.int64, device=dev)
            f = torch.zeros(1, dtype=torch.int64, device=dev)
            _core.to_fixed(xd, s, q, f, True, 12, sbd._stream(xd))
            y = torch.empty_like(xd)
            _core.from_fixed(q, s, 7, y, sbd._stream(y))
            out[dev] = (q.cpu(), f.cpu(), y.cpu())
        assert torch.equal(out["cpu"][0], out["cuda"][0])
        assert torch.equal(out["cpu"][1], out["cuda"][1])
        assert torch.equal(out["cpu"][2].view(torch.int32), out["cuda"][2].view(torch.int32))


@_cuda
def test_accumulator_cuda_equals_cpu():
    grads = [torch.randn(300) for _ in range(6)]
    means = {}
    for dev in ("cpu", "cuda"):
        model = torch.nn.Module()
        model.w = torch.nn.Parameter(torch.zeros(300, device=dev))
        acc = sbd.GradientAccumulator(model)
        for step in range(2):
            for g in grads:
                model.w.backward(g.to(dev) * (step + 1))
            acc.reduce()
        means[dev] = model.w.grad.cpu()
    assert torch.equal(means["cpu"].view(torch.int32), means["cuda"].view(torch.int32))


def _run_check_cli(*args, **env):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    return subprocess.run([sys.executable, "-m", "samebits.torch.distributed.check", *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("args,message", [
    (["--world-sizes", "abc"], "not a comma-separated list"),
    (["--world-sizes", "0"], "must divide the 12"), (["--world-sizes", "1,5"], "not 5"),
    (["--models", "mlp,foo"], "unknown model foo"), (["--backend", "bogus"], "not available")])
def test_check_cli_refuses_bad_arguments_before_any_training(args, message, capsys,
                                                             monkeypatch):
    def no_training(*a, **k):
        raise AssertionError("trained despite a bad argument")
    monkeypatch.setattr(check, "run", no_training)
    with pytest.raises(SystemExit) as e:
        check.main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_check_cli_runs_its_ranks_without_warnings():
    # Every rank runs the module as its main: nothing may import it under its name first.
    r = _run_check_cli("--world-sizes", "1,2", "--models", "mlp",
                       PYTHONWARNINGS="error::RuntimeWarning")
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr
    assert "portable: the same weights for world sizes 1,2" in r.stdout
