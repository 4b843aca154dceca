# find_nondeterminism and `python -m samebits.torch.check` on the CPU: a planted nondeterministic
# custom op (registered with torch.library like any extension op, its output changed by a few
# random bits on every call) is named with its source line, as silent nondeterminism when torch's
# deterministic mode was on; a deterministic model shows no difference; in this process, in fresh
# processes, and for a script.
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from samebits.torch.finder import compare_traces, find_nondeterminism


@torch.library.custom_op("samebits_test::jitter", mutates_args=())
def jitter(x: torch.Tensor) -> torch.Tensor:
    # What an atomics-based kernel does to a sum, planted: a different last bit per call, from a
    # source that no torch seed controls.
    noise = torch.randint(0, 2, x.shape, generator=_fresh_generator()).to(x.device, x.dtype)
    return torch.nextafter(x, x + noise)


def _fresh_generator():
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)


@jitter.register_fake
def _(x):
    return torch.empty_like(x)


jitter.register_autograd(lambda ctx, grad: grad)


class Model(torch.nn.Module):
    def __init__(self, planted):
        super().__init__()
        self.planted = planted
        self.lin1 = torch.nn.Linear(16, 32)
        self.lin2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.lin1(x)
        if self.planted:
            h = jitter(h)  # PLANTED_LINE
        return self.lin2(torch.relu(h))


def line_of(marker):
    for n, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith("# " + marker):
            return f"{__file__}:{n}"
    raise AssertionError(marker)


def train(planted=True, steps=3, device="cpu"):
    model = Model(planted).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16).to(device), torch.randint(0, 4, (64,)).to(device)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


def train_deterministic():
    train(planted=False)


def check_planted(report):
    assert not report.deterministic
    first = report.first
    assert first.op == "samebits_test.jitter.default", str(report)
    assert first.source == line_of("PLANTED_LINE") and first.layer == "Model"
    assert first.step == 0 and first.shape == [64, 32]
    # The planted op is the only place where runs part by themselves: every later differing op
    # (the planted one of later steps too, whose weights have moved) differs because what it
    # was given did. With deterministic mode on, that is silent.
    assert report.origins == [first] and report.silent == [first], str(report)
    assert len(report.differing) > 3 * len(report.origins)
    # Growth: every step differs after the first; the first step has the undisturbed entries.
    assert [g.step for g in report.growth] == [0, 1, 2]
    assert report.growth[0].differing < report.growth[0].entries
    text = str(report)
    assert "first difference: entry" in text and line_of("PLANTED_LINE") in text
    assert "silent nondeterminism" in text


def _cpp_recorder_built():
    from samebits.torch import _trace_cpp

    return _trace_cpp._cpp is not None and hasattr(_trace_cpp._cpp, "TraceRecorder")


@pytest.mark.parametrize("recorder", [
    "python",
    pytest.param("cpp", marks=pytest.mark.skipif(
        not _cpp_recorder_built(), reason="samebits._torch_mode is not built against this torch")),
])
def test_finds_the_planted_op_in_process(recorder):
    check_planted(find_nondeterminism(train, runs=2, deterministic=True, recorder=recorder))
    with pytest.raises(ValueError, match="recorder"):
        find_nondeterminism(train, runs=2, recorder="fast")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_finds_the_planted_op_on_cuda(monkeypatch):
    # The same planted op in a model trained on the GPU: the device hashes part at it. (torch's
    # deterministic mode refuses cuBLAS without a fixed workspace configuration.)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    check_planted(find_nondeterminism(lambda: train(device="cuda"), runs=2, deterministic=True))


def infer():
    model = Model(planted=True)
    x = torch.randn(64, 16)
    with torch.no_grad():
        for _ in range(3):
            model(x)


def test_every_call_of_the_planted_op_is_a_source_when_its_inputs_agree():
    report = find_nondeterminism(infer, runs=2)
    assert [d.op for d in report.origins] == ["samebits_test.jitter.default"] * 3, str(report)
    assert not report.silent  # deterministic mode was off
    # Downstream ops differ too, but not by themselves.
    assert {d.op for d in report.differing} > {"samebits_test.jitter.default"}


def test_a_deterministic_model_shows_no_difference():
    report = find_nondeterminism(train_deterministic, runs=3, deterministic=True)
    assert report.deterministic, str(report)
    assert report.compared > 50 and report.first is None and not report.origins
    assert "no difference" in str(report)


def test_without_a_fixed_seed_the_random_op_is_named(tmp_path):
    runs = iter([1, 2])

    def unseeded():
        torch.manual_seed(next(runs))
        train(planted=False, steps=1)

    report = find_nondeterminism(unseeded, runs=2, trace_dir=str(tmp_path))
    assert report.first is not None and report.first.random, str(report)
    assert "a random op" in str(report)
    assert (tmp_path / "run1.trace").exists()  # kept where asked


def test_finds_the_planted_op_in_fresh_processes():
    check_planted(find_nondeterminism(train, runs=2, fresh_process=True, deterministic=True))


def test_the_first_difference_without_input_links_is_still_found(tmp_path):
    # Traces without "inputs" (C++ ones): the first difference is the only origin known.
    import json

    for name, h in (("a", "1"), ("b", "2")):
        lines = [json.dumps({"samebits_trace": 1})]
        for i in range(3):
            lines.append(json.dumps({"i": i, "step": 0, "layer": "l", "op": "op", "dtype": "float32",
                                     "shape": [2], "hash": h if i else "0", "min": 0, "max": 1,
                                     "mean": 0.5, "l2": 1, "nan": 0, "samples": [0, 1]}))
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    report = compare_traces([str(tmp_path / "a"), str(tmp_path / "b")])
    assert report.first.index == 1 and [d.index for d in report.origins] == [1]
    assert len(report.differing) == 2


SCRIPT = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {tests!r})
    import test_finder
    model = test_finder.Model(planted=sys.argv[1] == "planted")
    x = torch.randn(8, 16)
    out = model(x)
    out = out * 2  # SCRIPT_LINE
    """
)


def run_check(tmp_path, options, script_arg):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent)))
    # The child imports samebits from where this process did (the installed package), not from
    # the source tree, which holds no built extension.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "samebits.torch.check", *options, str(script), script_arg]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)


@pytest.mark.parametrize("recorder", ["auto", "python"])
def test_check_names_the_planted_op_of_a_script(tmp_path, recorder):
    r = run_check(tmp_path, ["--deterministic", "--recorder", recorder,
                             "--keep", str(tmp_path / "traces")], "planted")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "samebits_test.jitter.default" in r.stdout and line_of("PLANTED_LINE") in r.stdout
    assert "silent nondeterminism" in r.stdout
    assert (tmp_path / "traces" / "run2.trace").exists()


def test_check_of_a_deterministic_script_exits_0(tmp_path):
    r = run_check(tmp_path, ["--runs", "2"], "plain")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no difference" in r.stdout


def test_check_refuses_a_missing_script_and_a_keep_folder_it_would_overwrite(tmp_path, capsys,
                                                                             monkeypatch):
    from samebits.torch import check

    def no_run(*args, **kwargs):
        raise AssertionError("a run started despite the refusal")
    monkeypatch.setattr(check.subprocess, "run", no_run)
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    a_file = tmp_path / "taken"
    a_file.write_text("the user's")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "run1.trace").write_text("an earlier run's")
    for argv, message in (([str(tmp_path / "missing.py")], "no such script"),
                          ([str(kept)], "is a directory, not a script"),
                          (["--keep", str(a_file), str(script)], "is not a folder"),
                          (["--keep", str(kept), str(script)], "already holds run1.trace")):
        assert check.main(argv) == 2
        assert message in capsys.readouterr().err, argv
    assert a_file.read_text() == "the user's"
    assert (kept / "run1.trace").read_text() == "an earlier run's"


# find_nondeterminism and calibrate check what they are given the same way, before fn runs once.
@pytest.mark.parametrize("name", ["find_nondeterminism", "calibrate"])
@pytest.mark.parametrize("fn, runs, error, message", [
    (42, 2, TypeError, "fn must be callable, not int"),
    (lambda: 0, 2.0, TypeError, "runs must be an int, not float"),
    (lambda: 0, True, TypeError, "runs must be an int, not bool"),
    (lambda: 0, 1, ValueError, "runs=1; .* needs at least 2 runs"),
    (lambda: 0, -3, ValueError, "runs=-3; .* needs at least 2 runs"),
])
def test_bad_function_or_run_count_is_refused_before_any_run(name, fn, runs, error, message):
    from samebits.torch.calibration import calibrate
    called = []

    def counted(*a, **k):
        called.append(1)
        return fn(*a, **k)

    target = {"find_nondeterminism": find_nondeterminism, "calibrate": calibrate}[name]
    with pytest.raises(error, match=f"^{name}: {message}"):
        target(counted if callable(fn) else fn, runs)
    assert not called
