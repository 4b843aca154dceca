# The finder on PyG's own GraphSAGE (SAGEConv) trained on Cora (data/cora), the model of
# python/bench/bench_trace.py. On the CPU, PyG's aggregation is deterministic: two runs agree.
# On CUDA in torch's default mode, the aggregation's atomic scatter is where the runs part: the
# finder names it, inside torch_geometric, called from the model's line. (The CUDA test skips
# where there is no GPU; the lead runs it on the H200.)
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("torch_geometric")
BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import bench_trace  # noqa: E402

from samebits.torch.finder import find_nondeterminism  # noqa: E402


def conv_line(conv):
    for n, text in enumerate((BENCH / "bench_trace.py").read_text().splitlines(), 1):
        if f"self.{conv}(" in text:
            return f"{BENCH / 'bench_trace.py'}:{n}"
    raise AssertionError(f"bench_trace.py has no {conv} call")


def training(device, steps):
    def run():
        step = bench_trace.make_step(torch.device(device))
        for _ in range(steps):
            step()

    return run


def test_pyg_training_on_the_cpu_is_deterministic():
    report = find_nondeterminism(training("cpu", 2), runs=2, stats=False)
    assert report.deterministic, str(report)
    assert report.compared > 100


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_default_mode_pyg_training_on_cuda_parts_at_the_aggregation():
    report = find_nondeterminism(training("cuda", 3), runs=2, deterministic=False)
    print(report)
    first = report.first
    assert first is not None, "two default-mode CUDA trainings agreed: no atomics ran?"
    assert any(k in first.op for k in ("scatter", "index_add", "index_put")), str(report)
    # Inside the library (torch_geometric, or torch_scatter / pyg_lib where installed).
    assert "site-packages" in first.source or "torch_geometric" in first.source, str(report)
    # The user's line: a layer's forward, or its backward (conv1's or conv2's). The first
    # layer's sums can agree by chance (the atomics added in the same order), so either layer.
    assert first.caller.startswith(str(BENCH / "bench_trace.py")), str(report)
    if not first.grad_fn:
        assert first.caller in (conv_line("conv1"), conv_line("conv2")), str(report)
    assert not first.deterministic_algorithms
    assert first in report.origins
