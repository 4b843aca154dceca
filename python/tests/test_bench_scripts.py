"""The benchmark scripts under python/bench run and write what they say (on the CPU, small
shapes): a script that breaks between device runs would cost a device call to find out."""
import json
import pathlib
import subprocess
import sys

import pytest
import torch

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


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
