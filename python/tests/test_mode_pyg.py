"""PyG's own models, unchanged, trained on Cora under the drop-in mode: the same weights every
time, through samebits' kernels, with the accuracy torch's own kernels give."""
import importlib.util
import os

import pytest
import torch

import samebits.torch as st
from samebits.torch import mode as sbmode

pytest.importorskip("torch_geometric")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
spec = importlib.util.spec_from_file_location("pyg_cora", os.path.join(ROOT, "examples",
                                                                       "pyg_cora.py"))
pyg_cora = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pyg_cora)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module", params=DEVICES)
def cora(request):
    return pyg_cora.load_cora_tsv(torch.device(request.param), os.path.join(ROOT, "data", "cora"))


def test_bundled_cora_matches_the_readme(cora):
    data, nf, nc = cora
    assert (data.num_nodes, data.edge_index.shape[1], nf, nc) == (2708, 10556, 1433, 7)
    assert int(data.x.sum()) == 49216
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == [140, 500,
                                                                                        1000]


@pytest.mark.parametrize("model", ["sage", "gcn", "gat"])
def test_pyg_model_trains_to_one_weight_set_through_samebits(cora, model):
    data, nf, nc = cora
    plain = pyg_cora.train_once(model, data, nf, nc, epochs=3)
    sbmode.reset_calls()
    with st.deterministic("run_to_run"):
        a = pyg_cora.train_once(model, data, nf, nc, epochs=3)
        b = pyg_cora.train_once(model, data, nf, nc, epochs=3)
    assert sbmode.calls(), "no aggregation of the model ran through samebits"
    assert a[0] == b[0], "two trainings under the mode gave two weight sets"
    # A handful of roundings apart from torch's own kernels: the predictions agree closely.
    assert abs(a[1] - plain[1]) <= 0.02


def test_synthetic_inference_times_every_mode_and_compares_outputs():
    # The --synthetic figure's code path on a small random graph: every mode reports a time, and
    # under the mode the repeated forward passes are bitwise equal to the first.
    res = pyg_cora.synthetic_inference(torch.device("cpu"), lambda: None, nodes=300, edges=3000,
                                       feats=8, reps=2)
    assert set(res) == set(pyg_cora.MODES)
    for mode in ("run_to_run", "portable"):
        assert res[mode]["ms"] > 0 and res[mode]["differ"] == 0, res


def test_the_script_writes_its_rows_as_json(tmp_path):
    import json
    out = tmp_path / "pyg.json"
    rows = pyg_cora.main(["--device", "cpu", "--runs", "2", "--epochs", "1", "--models", "sage",
                          "--modes", "torch,run_to_run", "--json", str(out)])
    got = json.loads(out.read_text())
    assert [r["mode"] for r in got["rows"]] == ["torch", "run_to_run"] == [r["mode"] for r in rows]
    assert got["rows"][1]["distinct"] == 1 and got["synthetic"] is None


def test_modes_interleave_in_rounds_with_their_own_run_counts(tmp_path, monkeypatch):
    # --rounds spreads every mode's trainings over the rounds (round r runs each mode's r-th share
    # in turn, in reverse order in odd rounds), --runs sets the trainings of torch default and
    # run_to_run (equal rounds for the pair the no-cost claim compares), --ref-runs those of the
    # other modes, and a mode that throws is reported as refused without stopping the others.
    import json
    order = []

    def train_once(name, data, nf, nc, epochs, seed=0):
        mode = (st.level() if st.is_enabled() else
                "torch_det" if torch.are_deterministic_algorithms_enabled() else "torch")
        if mode == "torch_det":
            raise RuntimeError("refused by torch\nsecond line")
        order.append(mode)
        return f"h-{mode}-{len(order) % 2 if mode == 'torch' else 0}", 0.5
    monkeypatch.setattr(pyg_cora, "train_once", train_once)
    out = tmp_path / "pyg.json"
    rows = pyg_cora.main(["--device", "cpu", "--runs", "5", "--ref-runs", "3", "--rounds", "2",
                          "--epochs", "1", "--models", "gcn", "--modes",
                          "torch,torch_det,portable,run_to_run", "--json", str(out)])
    # Warm-up, then round 1 (torch 3, portable 2, run_to_run 3), then round 2 in reverse order
    # (run_to_run 2, portable 1, torch 2); torch_det is refused in round 1 and left out after.
    assert order == (["torch"] * 4 + ["portable"] * 3 + ["run_to_run"] * 4
                     + ["run_to_run"] * 2 + ["portable"] + ["torch"] * 2)
    assert [(r["mode"], r["runs"], r["rounds"], len(r["round_ms"])) for r in rows] == [
        ("torch", 5, 2, 2), ("portable", 3, 2, 2), ("run_to_run", 5, 2, 2)]
    assert [r["distinct"] for r in rows] == [2, 1, 1]
    assert [r["mode"] for r in json.loads(out.read_text())["rows"]] == [
        "torch", "portable", "run_to_run"]


def test_split_runs_keeps_every_training():
    for runs in range(1, 40):
        for rounds in range(1, runs + 1):
            shares = pyg_cora.split_runs(runs, rounds)
            assert sum(shares) == runs and max(shares) - min(shares) <= 1 and min(shares) >= 1


def test_an_interrupt_keeps_the_finished_models_rows(tmp_path, monkeypatch):
    # Ctrl-C during the second model: the first model's rows are written (marked interrupted), the
    # script exits with 130, and a JSON file from an earlier run is replaced only whole.
    import json

    def train_once(name, data, nf, nc, epochs, seed=0):
        if name == "gcn":
            raise KeyboardInterrupt
        return "h", 0.5
    monkeypatch.setattr(pyg_cora, "train_once", train_once)
    out = tmp_path / "pyg.json"
    out.write_text("earlier")
    with pytest.raises(SystemExit) as e:
        pyg_cora.main(["--device", "cpu", "--runs", "2", "--epochs", "1", "--models", "sage,gcn",
                       "--modes", "torch,run_to_run", "--json", str(out)])
    assert e.value.code == 130
    got = json.loads(out.read_text())
    assert got["interrupted"] and [(r["model"], r["mode"]) for r in got["rows"]] == [
        ("sage", "torch"), ("sage", "run_to_run")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyg.json"]  # no temporary file left


def test_an_unwritable_output_path_is_refused_before_any_training(tmp_path, monkeypatch):
    monkeypatch.setattr(pyg_cora, "train_once", lambda *a, **k: pytest.fail("trained"))
    for flag in ("--json", "--svg"):
        with pytest.raises(SystemExit) as e:
            pyg_cora.main(["--device", "cpu", "--runs", "1", flag,
                           str(tmp_path / "missing" / "out")])
        assert e.value.code == 2
