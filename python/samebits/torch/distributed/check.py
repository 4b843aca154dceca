"""python -m samebits.torch.distributed.check --world-sizes 1,2,3 --backend gloo

Trains two models with DistributedDataParallel and gradient accumulation at every world size
(processes started here) and prints one weight hash per model, world size and mode:

  plain       DDP's own all-reduce, each micro-batch's loss divided by the rank's micro-batches
  run_to_run  the same loop with hook(ReduceState("run_to_run"), ...)
  portable    hook(GradientAccumulator(model), ...), the micro-batch's mean loss as it is
  single      (world 1, no process group) the portable rule without DDP: the accumulator's
              reduce() after the step's micro-batches

Models: an MLP on synthetic data, and a two-layer GraphSAGE (PyG's SAGEConv) on Cora (data/cora)
with micro-batches of fixed seed nodes. Each step has a global batch of 12 micro-batches; rank r
takes those with index j % world == r (world sizes must divide 12). Exits 1 when the portable
hashes differ across world sizes or from `single`.
"""
import argparse
import contextlib
import os
import pathlib
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import samebits
from samebits.torch import distributed as sbd

MICRO = 12
STEPS = 3
MODES = ("plain", "run_to_run", "portable")
DEVICE = torch.device("cpu")  # the worker's device (--device cuda: one GPU per rank, nccl)


def _repo_data():
    here = pathlib.Path(__file__).resolve()
    for up in here.parents:
        if (up / "data" / "cora" / "nodes.tsv").exists():
            return up / "data" / "cora"
    return pathlib.Path("data/cora")


def load_cora(path):
    lines = (path / "nodes.tsv").read_text().splitlines()[1:]
    x = torch.zeros(len(lines), 1433)
    y = torch.empty(len(lines), dtype=torch.int64)
    train = []
    for i, line in enumerate(lines):
        _, label, split, feats = line.split("\t")
        y[i] = int(label)
        if feats:
            x[i, [int(f) for f in feats.split(",")]] = 1.0
        if split == "train":
            train.append(i)
    edges = [tuple(map(int, l.split("\t"))) for l in (path / "edges.tsv").read_text().splitlines()[1:]]
    edge_index = torch.tensor(edges, dtype=torch.int64).t().contiguous()
    return x, y, edge_index, torch.tensor(train)


class Mlp:
    name = "mlp"

    def build(self):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))

    def loss(self, model, step, j):
        g = torch.Generator().manual_seed(1000 * step + j)
        x = torch.randn(8, 16, generator=g)
        y = torch.randint(0, 4, (8,), generator=g)
        return F.cross_entropy(model(x.to(DEVICE)), y.to(DEVICE))


class Sage:
    name = "graphsage"

    def __init__(self):
        self.x, self.y, self.edge_index, self.train = load_cora(_repo_data())

    def build(self):
        from torch_geometric.nn import SAGEConv

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = SAGEConv(1433, 16)
                self.c2 = SAGEConv(16, 7)

            def forward(self, x, ei):
                return self.c2(F.relu(self.c1(x, ei)), ei)

        torch.manual_seed(0)
        return Net()

    def loss(self, model, step, j):
        perm = torch.randperm(self.train.numel(), generator=torch.Generator().manual_seed(step))
        seeds = self.train[perm[8 * j:8 * (j + 1)]]
        # The seeds' two-hop neighbourhood (what two SAGE layers read), relabelled.
        from torch_geometric.utils import k_hop_subgraph
        nodes, ei, where, _ = k_hop_subgraph(seeds, 2, self.edge_index, relabel_nodes=True,
                                             num_nodes=self.x.size(0))
        out = model(self.x[nodes].to(DEVICE), ei.to(DEVICE))
        return F.cross_entropy(out[where.to(DEVICE)], self.y[seeds].to(DEVICE))


def _hash(model):
    return samebits.content_hash(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


def train(task, mode, rank, world):
    """One training run; returns the weight hash. mode 'single' runs without DDP."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = task.build().to(DEVICE)
    acc = sbd.GradientAccumulator(model) if mode in ("portable", "single") else None
    net = model
    if mode != "single":
        net = DDP(model, device_ids=[DEVICE.index] if DEVICE.type == "cuda" else None)
        if mode == "run_to_run":
            net.register_comm_hook(sbd.ReduceState("run_to_run"), sbd.hook)
        elif mode == "portable":
            net.register_comm_hook(acc, sbd.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    mine = list(range(rank, MICRO, world))
    for step in range(STEPS):
        for k, j in enumerate(mine):
            last = k == len(mine) - 1
            ctx = net.no_sync() if (mode != "single" and not last) else contextlib.nullcontext()
            with ctx:
                loss = task.loss(net, step, j)
                if mode in ("plain", "run_to_run"):
                    loss = loss / len(mine)
                loss.backward()
        if mode == "single":
            acc.reduce()
        opt.step()
        opt.zero_grad()
    if acc is not None:
        acc.remove()
    return _hash(model)


MODELS = {"mlp": Mlp, "graphsage": Sage}


def _tasks(models):
    return [MODELS[m]() for m in models]


def _worker(rank, world, port, backend, models, queue, device="cpu"):
    global DEVICE
    torch.set_num_threads(1)
    if device == "cuda":
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        DEVICE = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(DEVICE)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        for task in _tasks(models):
            for mode in MODES:
                h = train(task, mode, rank, world)
                if rank == 0:
                    queue.put((task.name, world, mode, h))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world_sizes, backend="gloo", models=("mlp", "graphsage"), out=sys.stdout, device="cpu"):
    """Returns {(model, world, mode): hash}, printing one line per entry. device "cuda": one GPU
    per rank (backend nccl; the single-process run on cuda:0). On CUDA the models' own torch ops
    must be deterministic (torch.use_deterministic_algorithms; PyG's scatter is not)."""
    global DEVICE
    results = {}
    torch.set_num_threads(1)
    if device == "cuda":
        DEVICE = torch.device("cuda", 0)
    for task in _tasks(models):
        results[(task.name, 1, "single")] = train(task, "single", 0, 1)
        print(f"{task.name} world 1 single {results[(task.name, 1, 'single')]}", file=out)
    DEVICE = torch.device("cpu")
    # Not fork: a forked child inherits the locks of whatever threads the caller runs (torch's
    # or samebits' pools, a test runner's) and may hang on them; nor can it use CUDA. A fork
    # server is a fresh process that imports this module once and forks the ranks from there.
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        # Run as `python -m`, each rank runs this module again as its main (multiprocessing's
        # rule): preloading it under its own name as well would make runpy warn in every rank.
        ctx.set_forkserver_preload([__name__ if __name__ != "__main__" else
                                    "samebits.torch.distributed", "torch_geometric"])
    for world in world_sizes:
        if MICRO % world:
            raise ValueError(f"world size {world} does not divide the {MICRO} micro-batches")
        queue = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_worker, args=(r, world, port, backend, models, queue, device))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError(f"world size {world}: a rank failed")
        while not queue.empty():
            name, w, mode, h = queue.get()
            results[(name, w, mode)] = h
        for name in models:
            for mode in MODES:
                print(f"{name} world {world} {mode} {results[(name, world, mode)]}", file=out)
    return results


def verdict(results, world_sizes, models):
    """Lines of failures (empty: the portable hashes agree everywhere)."""
    bad = []
    for name in models:
        ref = results[(name, 1, "single")]
        for w in world_sizes:
            if results[(name, w, "portable")] != ref:
                bad.append(f"{name}: portable at world {w} {results[(name, w, 'portable')]} != "
                           f"single {ref}")
    return bad


def _world_sizes(text):
    try:
        worlds = [int(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole "
                                         "numbers") from None
    bad = [w for w in worlds if w < 1 or MICRO % w]
    if bad:
        raise argparse.ArgumentTypeError(
            f"world sizes must divide the {MICRO} micro-batches of a step "
            f"({', '.join(str(d) for d in range(1, MICRO + 1) if MICRO % d == 0)}), "
            f"not {', '.join(map(str, bad))}")
    return worlds


def _models(text):
    models = tuple(text.split(","))
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown model {', '.join(unknown)} (known: "
                                         f"{', '.join(MODELS)})")
    return models


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m samebits.torch.distributed.check",
        description=__doc__.split("\n\n", 1)[1].strip() + "\n\nExit status: 0 the portable "
        "hashes agree, 1 they differ, 2 a usage error or a rank that failed.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-sizes", type=_world_sizes, default=[1, 2, 3],
                    help=f"comma-separated numbers of processes, each dividing {MICRO} "
                         "(default 1,2,3)")
    ap.add_argument("--backend", default="gloo",
                    help="torch.distributed backend: gloo (CPU), nccl (--device cuda), mpi, ucc "
                         "(default gloo)")
    ap.add_argument("--models", type=_models, default=tuple(MODELS),
                    help=f"comma-separated, any of {', '.join(MODELS)} (default both)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cuda: one GPU per rank (use --backend nccl --models mlp)")
    a = ap.parse_args(argv)
    if not dist.is_available() or not dist.is_backend_available(a.backend):
        ap.error(f"the torch.distributed backend {a.backend!r} is not available here")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda needs a CUDA device")
    worlds, models = a.world_sizes, a.models
    try:
        results = run(worlds, a.backend, models, device=a.device)
    except RuntimeError as e:  # a rank failed: its own traceback is above
        print(f"samebits.torch.distributed.check: {e}", file=sys.stderr)
        return 2
    bad = verdict(results, worlds, models)
    for line in bad:
        print("MISMATCH", line)
    if not bad:
        print(f"portable: the same weights for world sizes {','.join(map(str, worlds))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
