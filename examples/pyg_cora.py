"""The reproducibility experiment in PyTorch Geometric: unchanged PyG models trained N times on Cora
in four modes (torch default, torch deterministic, samebits run_to_run, samebits portable).

    python examples/pyg_cora.py --runs 100 --device cuda --models sage,gcn,gat --svg out/pyg.svg

For every model and mode it prints how many distinct weight sets the N trainings gave (same seed,
same data, same code), the test accuracy's spread and the time per training, and it can draw the
distinct counts as an SVG bar chart. The modes' trainings interleave in rounds (--rounds), their
order reversed every other round, so a drift of the machine's speed during the run does not fall
on one mode. With --synthetic it also times PyG SAGEConv inference on a random graph of 1M nodes
and 20M edges (CUDA) with and without the mode.
"""
import argparse
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import samebits.torch as st
except ImportError:  # run from a source tree whose package was built in place (make python)
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import samebits.torch as st

MODES = ("torch", "torch_det", "run_to_run", "portable")


def load_cora_tsv(device, data_dir):
    """Cora from samebits' bundled nodes.tsv and edges.tsv (data/cora/README.md) as a PyG Data:
    the same nodes, features, labels, split and edge order as PyG's Planetoid("Cora")."""
    from torch_geometric.data import Data
    rows, cols, labels, split = [], [], [], []
    with open(os.path.join(data_dir, "nodes.tsv")) as f:
        next(f)
        for line in f:
            node, label, part, feats = line.rstrip("\n").split("\t")
            labels.append(int(label))
            split.append(part)
            for c in filter(None, feats.split(",")):
                rows.append(int(node))
                cols.append(int(c.split(":")[0]))
    with open(os.path.join(data_dir, "edges.tsv")) as f:
        next(f)
        edges = [tuple(map(int, line.split())) for line in f]
    n, nf = len(labels), 1433
    x = torch.zeros(n, nf)
    x[torch.tensor(rows), torch.tensor(cols)] = 1.0
    mask = {p: torch.tensor([s == p for s in split]) for p in ("train", "val", "test")}
    data = Data(x=x, edge_index=torch.tensor(edges).t().contiguous(), y=torch.tensor(labels),
                train_mask=mask["train"], val_mask=mask["val"], test_mask=mask["test"])
    return data.to(device), nf, int(max(labels)) + 1


def load_cora(device, data_dir):
    """Cora through PyG's own Planetoid reader (needs scipy) from the ind.cora.* files."""
    from torch_geometric.datasets import Planetoid
    root = tempfile.mkdtemp(prefix="samebits-pyg-")
    os.makedirs(os.path.join(root, "Cora", "raw"))
    for f in os.listdir(data_dir):
        shutil.copy(os.path.join(data_dir, f), os.path.join(root, "Cora", "raw", f))
    ds = Planetoid(root, "Cora")
    data = ds[0].to(device)
    shutil.rmtree(root, ignore_errors=True)
    return data, ds.num_features, ds.num_classes


def make_model(name, num_features, num_classes, hidden=16):
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv
    conv = {"sage": lambda i, o, last: SAGEConv(i, o),
            "gcn": lambda i, o, last: GCNConv(i, o),
            "gat": lambda i, o, last: GATConv(i, o, heads=1 if last else 4, concat=not last)}[name]
    mid = hidden * (4 if name == "gat" else 1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = conv(num_features, hidden, False)
            self.c2 = conv(mid, num_classes, True)

        def forward(self, x, edge_index):
            x = F.dropout(F.relu(self.c1(x, edge_index)), 0.5, self.training)
            return self.c2(x, edge_index)
    return Net()


def train_once(name, data, nf, nc, epochs, seed=0):
    """One training from a fixed seed: (weight hash, test accuracy)."""
    torch.manual_seed(seed)
    model = make_model(name, nf, nc).to(data.x.device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
        acc = (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()
    w = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    return hashlib.sha256(w.numpy().tobytes()).hexdigest()[:16], acc


class Mode:
    """The context a mode trains in."""
    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.was = torch.are_deterministic_algorithms_enabled()
        if self.mode == "torch_det":
            torch.use_deterministic_algorithms(True)
        elif self.mode in ("run_to_run", "portable"):
            st.enable(self.mode)

    def __exit__(self, *exc):
        if self.mode in ("run_to_run", "portable"):
            st.disable()
        torch.use_deterministic_algorithms(self.was)


def turn_order(items, r):
    """The order the modes (or configurations) take their turns in round r: as given in even
    rounds, reversed in odd ones, so that none always follows the same other."""
    return items if r % 2 == 0 else items[::-1]


def split_runs(runs, rounds):
    """`runs` trainings spread over `rounds` rounds as evenly as whole trainings allow."""
    return [runs // rounds + (r < runs % rounds) for r in range(rounds)]


def run_modes(name, modes, data, nf, nc, runs, epochs, sync, rounds=1, progress=None):
    """Trains model `name` runs[mode] times in each mode, the modes interleaved: round r runs
    each mode's r-th share of its trainings in turn, so that a drift of the machine's speed over
    the whole run (clocks, other load) falls on every mode alike. The turns go in the order of
    `modes` in even rounds and in reverse in odd ones, so that no mode always follows the same
    other (a drift within a round cancels over two rounds), and Python's garbage is collected
    before each timed share, so that no share pays for the garbage of another. Rows in the order
    of `modes`;
    ms is the mean per training over all rounds, round_ms the mean of each round. A mode that
    torch refuses (its deterministic mode throws on some ops) gives a row with `refused`;
    progress(r, rounds), when given, is called as each round ends."""
    rounds = max(1, min(rounds, min(runs[m] for m in modes)))
    hashes = {m: set() for m in modes}
    accs = {m: [] for m in modes}
    total = dict.fromkeys(modes, 0.0)
    round_ms = {m: [] for m in modes}
    refused = {}
    shares = {m: split_runs(runs[m], rounds) for m in modes}
    for r in range(rounds):
        for mode in turn_order(modes, r):
            if mode in refused:
                continue
            try:
                with Mode(mode):
                    if r == 0:
                        train_once(name, data, nf, nc, epochs)  # warm-up: kernels, caches
                    gc.collect()
                    sync()
                    t0 = time.perf_counter()
                    for _ in range(shares[mode][r]):
                        h, acc = train_once(name, data, nf, nc, epochs)
                        hashes[mode].add(h)
                        accs[mode].append(acc)
                    sync()
                    dt = (time.perf_counter() - t0) * 1e3
            except RuntimeError as e:
                refused[mode] = str(e).splitlines()[0][:120]
                continue
            total[mode] += dt
            round_ms[mode].append(dt / shares[mode][r])
        if progress:
            progress(r + 1, rounds)
    rows = []
    for mode in modes:
        if mode in refused:
            rows.append(dict(model=name, mode=mode, refused=refused[mode]))
            continue
        n = len(accs[mode])
        rows.append(dict(model=name, mode=mode, runs=n, distinct=len(hashes[mode]),
                         acc_min=min(accs[mode]), acc_max=max(accs[mode]), ms=total[mode] / n,
                         hash=sorted(hashes[mode])[0], rounds=rounds, round_ms=round_ms[mode]))
    return rows


def synthetic_inference(device, sync, nodes=1_000_000, edges=20_000_000, feats=128, reps=10):
    """SAGEConv inference on a random graph in every mode: milliseconds per forward pass (the timed
    loop runs nothing else), and how many of `reps` outputs differ from the first, compared
    bitwise on the device after the timing."""
    from torch_geometric.nn import SAGEConv
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(nodes, feats, generator=g).to(device)
    ei = torch.randint(0, nodes, (2, edges), generator=g).to(device)
    conv = SAGEConv(feats, feats).to(device).eval()
    res = {}
    for mode in MODES:
        try:
            with Mode(mode), torch.no_grad():
                first = conv(x, ei)
                sync()
                t0 = time.perf_counter()
                for _ in range(reps):
                    conv(x, ei)
                sync()
                ms = (time.perf_counter() - t0) * 1e3 / reps
                differ = sum(not torch.equal(conv(x, ei), first) for _ in range(reps))
        except RuntimeError as e:  # torch's deterministic mode throws on some ops
            res[mode] = dict(refused=str(e).splitlines()[0][:120])
            continue
        res[mode] = dict(ms=ms, differ=differ, reps=reps)
    return res


def write_atomically(path, write):
    """write(f) into a file beside `path`, then renamed over it: an interrupted or failed write
    leaves the old file as it was."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def svg_chart(rows, f):
    """Distinct weight sets per model and mode, as bars scaled to the number of runs."""
    w, bar, gap, top = 720, 14, 6, 30
    h = top + len(rows) * (bar + gap) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           '<text x="10" y="18">distinct weight sets (bar: share of runs)</text>']
    for k, r in enumerate(rows):
        y = top + k * (bar + gap)
        frac = r["distinct"] / r["runs"]
        out.append(f'<text x="10" y="{y + 11}">{r["model"]} {r["mode"]}</text>')
        out.append(f'<rect x="170" y="{y}" width="{max(1, 450 * frac):.1f}" height="{bar}" '
                   f'fill="{"#c0392b" if r["distinct"] > 1 else "#27ae60"}"/>')
        out.append(f'<text x="{175 + 450 * frac:.1f}" y="{y + 11}">{r["distinct"]} of '
                   f'{r["runs"]}</text>')
    out.append("</svg>")
    f.write("\n".join(out) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20,
                    help="trainings per model in torch default and run_to_run, and in the other "
                    "modes unless --ref-runs is given (20)")
    ap.add_argument("--ref-runs", type=int,
                    help="trainings in torch_det and portable (default: --runs); torch default "
                    "and run_to_run, the pair the no-cost claim compares, run --runs each, so "
                    "their rounds are equally long")
    ap.add_argument("--rounds", type=int, default=10,
                    help="rounds the modes' trainings interleave in (10; 1 runs each mode's "
                    "trainings in one block)")
    ap.add_argument("--epochs", type=int, default=10, help="epochs per training (10)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--models", default="sage,gcn,gat", help="any of sage, gcn, gat")
    ap.add_argument("--modes", default=",".join(MODES), help="any of " + ", ".join(MODES))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "data", "cora"),
                    help="folder with nodes.tsv and edges.tsv, or with Planetoid's ind.cora.* "
                    "files (read by PyG's Planetoid, which needs scipy)")
    ap.add_argument("--svg", help="write the distinct counts as an SVG chart")
    ap.add_argument("--synthetic", action="store_true",
                    help="also time SAGEConv inference on a 1M-node, 20M-edge random graph")
    ap.add_argument("--json", help="write the rows (and the synthetic figures) as JSON")
    a = ap.parse_args(argv)
    if a.ref_runs is None:
        a.ref_runs = a.runs
    if min(a.runs, a.ref_runs, a.epochs, a.rounds) < 1:
        ap.error("--runs, --ref-runs, --epochs and --rounds must be at least 1")
    modes = a.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            ap.error(f"--modes: unknown mode {mode!r}")
    for name in a.models.split(","):
        if name not in ("sage", "gcn", "gat"):
            ap.error(f"--models: unknown model {name!r}")
    for flag, path in (("--json", a.json), ("--svg", a.svg)):  # before hours of trainings
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            ap.error(f"{flag}: cannot write into {folder} (no such folder, or not writable)")
    device = torch.device(a.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    if os.path.exists(os.path.join(a.data, "nodes.tsv")):
        data, nf, nc = load_cora_tsv(device, a.data)
    else:
        data, nf, nc = load_cora(device, a.data)
    rows = []
    print(f"{'model':6} {'mode':11} {'runs':>5} {'distinct':>8} {'acc min':>8} {'acc max':>8} "
          f"{'ms/training':>12}")
    runs = {m: a.runs if m in ("torch", "run_to_run") else a.ref_runs for m in modes}
    synthetic, interrupted = None, False
    try:
        for name in a.models.split(","):
            def progress(done, rounds):
                print(f"{name}: round {done} of {rounds}", file=sys.stderr, flush=True)
            for r in run_modes(name, modes, data, nf, nc, runs, a.epochs, sync, a.rounds,
                               progress):
                if "refused" in r:
                    print(f"{name:6} {r['mode']:11} refused: {r['refused'][:90]}")
                    continue
                rows.append(r)
                print(f"{name:6} {r['mode']:11} {r['runs']:5d} {r['distinct']:8d} "
                      f"{r['acc_min']:8.4f} {r['acc_max']:8.4f} {r['ms']:12.2f}", flush=True)
        if a.synthetic:
            if device.type != "cuda":
                print("synthetic: skipped (needs --device cuda)")
            else:
                synthetic = synthetic_inference(device, sync)
                for mode, r in synthetic.items():
                    if "refused" in r:
                        print(f"synthetic SAGEConv inference {mode:11} refused: {r['refused']}")
                    else:
                        print(f"synthetic SAGEConv inference {mode:11} {r['ms']:8.2f} ms, "
                              f"{r['differ']} of {r['reps']} outputs differ from the first")
    except KeyboardInterrupt:  # keep what was measured: the models whose rounds all ran
        interrupted = True
        print(f"interrupted: keeping the {len(rows)} rows of the models that finished",
              file=sys.stderr)
    if a.svg:
        write_atomically(a.svg, lambda f: svg_chart(rows, f))
    if a.json:
        info = dict(torch=torch.__version__, device=str(device), epochs=a.epochs,
                    gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")
        if interrupted:
            info["interrupted"] = True
        write_atomically(a.json, lambda f: json.dump(dict(info, rows=rows, synthetic=synthetic), f,
                                                     indent=1))
    if interrupted:
        raise SystemExit(130)
    return rows


if __name__ == "__main__":
    main()
