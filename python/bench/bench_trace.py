# The cost of samebits.torch.trace on one PyG GraphSAGE training step on Cora (forward, NLL loss,
# backward, Adam step): unhooked, under samebits.torch.trace (hash and statistics, or hash only;
# its C++ recorder on torch's RecordFunction callbacks and its Python one on a TorchDispatchMode),
# under torch.utils._debug_mode.DebugMode with tensor hashes, which also hashes every op's
# output but reads each hash back to the host as it goes, and under a TorchDispatchMode that only
# passes each op on (the cost of the dispatch mode itself, which every such recorder pays), and
# under torch's profiler recording CPU ops (a callback in C++ on every op: what a hook without
# Python costs).
#
#   PYTHONPATH=python python python/bench/bench_trace.py [--device cuda] [--rounds 5] [--steps 5]
#       [--threads N] [--only trace,DebugMode]
#
# Prints milliseconds per step (median over --rounds rounds of --steps steps, the modes taking
# turns) and each mode's ratio to the unhooked step. Cora is read from data/cora (nodes.tsv, edges.tsv; see data/cora/README.md).
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parents[2]


def load_cora(folder: Path, device: torch.device):
    """Features (dense, 2708 x 1433), directed edges (2 x 10556), labels and the train mask."""
    rows = (folder / "nodes.tsv").read_text().splitlines()[1:]
    n = len(rows)
    labels = torch.empty(n, dtype=torch.long)
    train = torch.zeros(n, dtype=torch.bool)
    nz_r, nz_c, nz_v = [], [], []
    for line in rows:
        node, label, split, feats = (line.split("\t") + [""])[:4]
        i = int(node)
        labels[i] = int(label)
        train[i] = split == "train"
        for f in filter(None, feats.split(",")):
            c, _, v = f.partition(":")
            nz_r.append(i)
            nz_c.append(int(c))
            nz_v.append(float(v) if v else 1.0)
    x = torch.zeros(n, 1433 if not nz_c else max(nz_c) + 1)
    x[torch.tensor(nz_r), torch.tensor(nz_c)] = torch.tensor(nz_v)
    edges = [tuple(map(int, e.split("\t"))) for e in (folder / "edges.tsv").read_text().splitlines()[1:]]
    edge_index = torch.tensor(edges, dtype=torch.long).t().contiguous()
    return x.to(device), edge_index.to(device), labels.to(device), train.to(device)


class Sage(torch.nn.Module):
    """Two SAGEConv layers (mean aggregation), 16 hidden units, dropout 0.5."""

    def __init__(self, features: int, classes: int, hidden: int = 16):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.conv1 = SAGEConv(features, hidden)
        self.conv2 = SAGEConv(hidden, classes)

    def forward(self, x, edge_index):
        h = torch.relu(self.conv1(x, edge_index))
        h = torch.nn.functional.dropout(h, p=0.5, training=self.training)
        return torch.log_softmax(self.conv2(h, edge_index), dim=1)


class PassThrough(TorchDispatchMode):
    """Every op through Python and back, nothing recorded: what any TorchDispatchMode costs, the
    floor under a per-op recorder built on one."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def make_step(device: torch.device):
    x, edge_index, y, train = load_cora(REPO / "data" / "cora", device)
    torch.manual_seed(0)
    model = Sage(x.shape[1], int(y.max()) + 1).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def step():
        opt.zero_grad()
        out = model(x, edge_index)
        loss = torch.nn.functional.nll_loss(out[train], y[train])
        loss.backward()
        opt.step()
        return loss

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_modes(step, device, modes, rounds: int, steps: int) -> dict[str, float]:
    """Median ms per step of each mode. The modes take turns, `steps` steps each per round, so
    that a change in the machine's load falls on all of them alike."""
    for _ in range(3):
        step()
    sync(device)
    times: dict[str, list[float]] = {name: [] for name, _ in modes}
    for _ in range(rounds):
        for name, wrap in modes:
            with wrap():
                step()  # the first step under a mode pays for its set-up (caches, file)
                sync(device)
                for _ in range(steps):
                    t0 = time.perf_counter()
                    step()
                    sync(device)
                    times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="steps per mode and round")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--only", default="",
                    help="comma-separated parts of mode names: time only the modes naming one "
                         "(the unhooked step always)")
    o = ap.parse_args()
    if o.threads:
        torch.set_num_threads(o.threads)
    from samebits import _core

    # The trace's CPU hash runs on samebits' threads: as many as torch's, so that neither side
    # has more cores to itself.
    _core.set_num_threads(torch.get_num_threads())
    device = torch.device(o.device)
    step = make_step(device)

    import contextlib

    from samebits.torch.tracing import trace
    from torch.utils._debug_mode import DebugMode

    folder = tempfile.mkdtemp(prefix="samebits_bench_trace_")
    path = os.path.join(folder, "bench.trace")

    def debug_mode(hash_fn):
        @contextlib.contextmanager
        def wrap():
            with DebugMode(), DebugMode.log_tensor_hashes(hash_fn=hash_fn):
                yield

        return wrap

    def cpp_callbacks():
        """torch's profiler recording CPU ops only: each op goes through RecordFunction callbacks
        in C++ (with no Python), which store an event. What a per-op hook in C++ costs at least,
        beside the Python floor."""
        from torch.profiler import ProfilerActivity, profile

        return profile(activities=[ProfilerActivity.CPU], record_shapes=False, with_stack=False)

    modes = [
        ("unhooked", contextlib.nullcontext),
        ("an empty TorchDispatchMode (the floor)", PassThrough),
        ("torch.profiler, CPU ops (C++ callbacks)", cpp_callbacks),
        ("samebits.torch.trace (C++ recorder)", lambda: trace(path, recorder="cpp")),
        ("samebits.torch.trace(stats=False), C++",
         lambda: trace(path, stats=False, recorder="cpp")),
        ("samebits.torch.trace (Python recorder)", lambda: trace(path, recorder="python")),
        ("samebits.torch.trace(stats=False), Python",
         lambda: trace(path, stats=False, recorder="python")),
        ("DebugMode + log_tensor_hashes('norm')", debug_mode("norm")),
        ("DebugMode + log_tensor_hashes('hash_tensor')", debug_mode("hash_tensor")),
    ]
    if o.only:
        parts = [p for p in o.only.split(",") if p]
        modes = [m for m in modes if m[0] == "unhooked" or any(p in m[0] for p in parts)]
    print(f"PyG GraphSAGE training step on Cora, {device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads (torch and samebits), "
          f"median of {o.rounds} x {o.steps} steps")
    result = time_modes(step, device, modes, o.rounds, o.steps)
    base = result["unhooked"]
    for name, ms in result.items():
        print(f"  {name:<46} {ms:9.2f} ms   {ms / base:5.2f}x", flush=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    os.rmdir(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
