"""The benchmark scripts under python/bench run and write what they say (on the CPU, small
shapes): a script that breaks between device runs would cost a device call to find out."""
import importlib
import json
import pathlib
import subprocess
import sys

import pytest
import torch

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


def bench_script(name):
    """The module of python/bench/NAME.py, imported from there."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def test_bench_torch_quick_writes_every_column(tmp_path):
    out = tmp_path / "bench_torch.json"
    subprocess.run([sys.executable, str(BENCH / "bench_torch.py"), "--device", "cpu", "--quick",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    assert set(result["overhead_us"]) >= {"index_add", "scatter_add", "index_select", "gather"}
    for row in result["overhead_us"].values():
        assert row["torch"] > 0 and row["samebits"] > 0 and row["deferred"] > 0
    assert len(result["anchors"]) == 8
    for row in result["anchors"]:
        for key in ("torch_default_ms", "torch_deterministic_ms", "samebits_run_to_run_ms",
                    "samebits_deferred_loop_ms"):
            assert row[key] > 0, (key, row)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU refusal only")
def test_pyg_mode_profile_says_it_needs_cuda():
    r = subprocess.run([sys.executable, str(BENCH / "pyg_mode_profile.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2
    assert "needs a CUDA device" in r.stderr


def test_pyg_mode_profile_interleaves_configurations_and_takes_medians(monkeypatch):
    pytest.importorskip("torch_geometric")
    prof = bench_script("pyg_mode_profile")
    order, clock, current = [], [0.0], {}

    class Fake:
        """A configuration whose trainings take `ms` on a fake clock."""

        def __init__(self, name, ms):
            self.name, self.ms = name, ms

        def __enter__(self):
            order.append(self.name)
            current.update(name=self.name, ms=self.ms)

        def __exit__(self, *exc):
            pass

    def train_once(model, data, nf, nc, epochs):
        clock[0] += current["ms"] / 1e3
        return (current["name"],)

    monkeypatch.setattr(prof.pyg_cora, "train_once", train_once)
    monkeypatch.setattr(prof.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(prof.torch.cuda, "synchronize", lambda: None)
    a, b = Fake("a", 10.0), Fake("b", 30.0)
    out = prof.time_configs([a, b], "sage", None, 0, 0, runs=6, epochs=1, rounds=3)
    # warm-up, then the rounds in turn, every other one in reverse order
    assert order == ["a", "b"] + ["a", "b"] + ["b", "a"] + ["a", "b"]
    assert [r["config"] for r in out] == ["a", "b"]
    assert [r["runs"] for r in out] == [6, 6]
    assert out[0]["ms"] == pytest.approx(10.0) and out[1]["ms"] == pytest.approx(30.0)
    assert out[0]["distinct"] == 1


def test_pyg_mode_profile_interleaves_the_issue_times(monkeypatch):
    pytest.importorskip("torch_geometric")
    prof = bench_script("pyg_mode_profile")
    order, clock, current = [], [0.0], {}

    class Fake:
        """A configuration that issues a training in `issue` ms and whose device ends `tail` ms
        later, on a fake clock."""

        def __init__(self, name, issue, tail):
            self.name, self.issue, self.tail = name, issue, tail

        def __enter__(self):
            order.append(self.name)
            current.update(cfg=self)

        def __exit__(self, *exc):
            pass

    def train_unsynced(model, data, nf, nc, epochs, train_idx):
        clock[0] += current["cfg"].issue / 1e3

    def synchronize():
        clock[0] += current["cfg"].tail / 1e3

    class Mask:
        def nonzero(self):
            return torch.tensor([[0], [2]])

    class Data:
        train_mask = Mask()

    monkeypatch.setattr(prof, "train_unsynced", train_unsynced)
    monkeypatch.setattr(prof.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(prof.torch.cuda, "synchronize", synchronize)
    a, b = Fake("a", 10.0, 0.0), Fake("b", 20.0, 5.0)
    out = prof.issue_times([a, b], "gcn", Data(), 0, 0, runs=4, epochs=1, rounds=2)
    assert order == ["a", "b"] + ["a", "b"] + ["b", "a"]  # warm-up, then the rounds in turn
    assert [r["config"] for r in out] == ["a", "b"]
    assert out[0]["issue_ms"] == pytest.approx(10.0) and out[0]["wall_ms"] == pytest.approx(10.0)
    assert out[1]["issue_ms"] == pytest.approx(20.0) and out[1]["wall_ms"] == pytest.approx(25.0)


def test_bench_torch_finds_the_cpp_figure_of_each_anchor():
    bench_torch = bench_script("bench_torch")
    rows = [{"op": "index_add", "shape": "E=10M N=1M F=1", "variant": "cuda.fixed_point", "ms": 0.2},
            {"op": "index_add", "shape": "E=2M N=100k F=64", "variant": "cuda.sort_pull", "ms": 9},
            {"op": "index_add", "shape": "E=2M N=100k F=64",
             "variant": "cuda.sort_pull (same index again)", "ms": 0.18},
            {"op": "index_add", "shape": "E=1M N=2708 F=128",
             "variant": "cuda.sort_pull (same index again)", "ms": 0.16}]
    assert bench_torch.cpp_ms(rows, "index_add", 10_000_000, 1_000_000, 1) == 0.2
    assert bench_torch.cpp_ms(rows, "scatter_add", 10_000_000, 1_000_000, 1) == 0.2
    assert bench_torch.cpp_ms(rows, "index_add", 2_000_000, 100_000, 64) == 0.18
    assert bench_torch.cpp_ms(rows, "scatter_add", 1_000_000, 2708, 128) == 0.16
    assert bench_torch.cpp_ms(rows, "index_add", 2_000_000, 1000, 64) is None


def test_pyg_mode_profile_tables_the_outermost_aten_ops():
    pytest.importorskip("torch_geometric")
    prof = bench_script("pyg_mode_profile")
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(8, 4, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(3):
            torch.index_select(x, 0, torch.tensor([1, 2, 2])).sum().backward()
    table = prof.outer_ops(p.events())
    # index_select's own callees (empty, resize...) are inside it, not rows of their own.
    assert table["aten::index_select"]["calls"] == 3
    assert table["aten::sum"]["calls"] == 3
    assert "aten::empty" not in table or table["aten::empty"]["calls"] < 20
    assert all(row["cpu_us"] > 0 for row in table.values())
    base = {"aten::sum": dict(table["aten::sum"])}
    more = {"aten::sum": dict(table["aten::sum"], launches=5)}
    text = prof.per_op_table(base, more)
    assert "sum" in text and "0/5" in text.replace(" ", "")
    assert len(prof.per_op_table(base, base).splitlines()) == 1  # the header: nothing differs


def test_host_cost_quick_times_every_layer(tmp_path):
    out = tmp_path / "host_cost.json"
    subprocess.run([sys.executable, str(BENCH / "host_cost.py"), "--device", "cpu", "--quick",
                    "--json", str(out)], check=True, capture_output=True, timeout=300)
    got = json.loads(out.read_text())
    rows = got["host_us"]
    assert set(rows) == {"scatter_add_ F=5", "index_add_ F=5", "index_select F=5",
                         "index_put_ accumulate F=7", "index_put_ mask F=7"}
    for name, row in rows.items():
        # the scatters' binding is split into the atomic variant and the plan's pull
        split = {"atomic", "plan"} if name.startswith(("scatter_add_", "index_add_")) else set()
        assert set(row) == {"torch", "mode", "wrapper", "raw"} | split, name
        assert all(v > 0 for v in row.values()), row
    assert got["launch_us"] > 0


def test_cpp_hook_floor_builds_its_callbacks_and_times_every_mode():
    pytest.importorskip("torch_geometric")
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        pytest.skip("torch's C++ extensions build with ninja")
    r = subprocess.run([sys.executable, str(BENCH / "cpp_hook_floor.py"), "--device", "cpu",
                        "--rounds", "1", "--steps", "1"], capture_output=True, text=True,
                       timeout=600, check=True)
    rows = [line.split() for line in r.stdout.splitlines() if line.endswith("x")]
    assert [" ".join(row[:-3]) for row in rows] == [
        "unhooked", "an empty TorchDispatchMode", "C++ callbacks, leaf ops found",
        "C++ callbacks, one reduction per leaf output"]
    assert all(float(row[-3]) > 0 for row in rows)
    seen = next(line for line in r.stdout.splitlines() if "leaf ops and" in line)
    leaves, reductions = (int(w) for w in seen.split(";")[1].split() if w.isdigit())
    assert leaves > 0 and 0 < reductions <= leaves


def test_flag_cost_times_each_op_both_ways_and_restores_the_settings(tmp_path):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "flag_cost.json"
    subprocess.run([sys.executable, str(BENCH / "flag_cost.py"), "--device", "cpu", "--repeat",
                    "1", "--batch", "2", "--json", str(out)], check=True, capture_output=True,
                   timeout=300)
    rows = {r["op"]: r for r in json.loads(out.read_text())["rows"]}
    # GCN's aggregation and its backward are the mode's; its matrix products are torch's
    assert rows["aten.scatter_add_.default"]["replaced"]
    assert not rows["aten.mm.default"]["replaced"]
    for r in rows.values():
        assert r["calls"] >= 1
        assert r["error"] or (r["on_us"] > 0 and r["off_us"] > 0), r
    # in process: the settings come back as they were
    flag_cost = bench_script("flag_cost")
    was = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    x = torch.randn(5, 3)
    calls = [(torch.ops.aten.index_add.default, (x, 0, torch.tensor([0, 0]), x[:2]), {})]
    got = flag_cost.flag_costs(calls, 1, 2, lambda: None, {"aten::index_add"}, fill=not fill)
    assert [r["replaced"] for r in got] == [True]
    assert torch.are_deterministic_algorithms_enabled() == was
    assert torch.utils.deterministic.fill_uninitialized_memory == fill


def test_pyg_mode_training_trains_under_the_mode_with_one_weight_set():
    # What device.sh's pygncu step runs under ncu, here on the CPU: the same weights each time.
    pytest.importorskip("torch_geometric")
    r = subprocess.run([sys.executable, str(BENCH / "pyg_mode_training.py"), "--device", "cpu",
                        "--model", "gcn", "--trainings", "2", "--epochs", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(",")[0].split(":")[0] for line in lines] == ["training 1", "training 2"]
    assert lines[0].split(",")[0].split()[-1] == lines[1].split(",")[0].split()[-1]
