"""Speed of samebits.torch.distributed against torch's own all-reduce (issue 27).

    python python/bench/bench_distributed.py --world 2 --device cuda --out dist.json   # 2 GPUs
    python python/bench/bench_distributed.py --world 2 --device cpu --sizes-mb 1,4      # smoke

Starts `world` processes (one GPU each, NCCL with NVLink SHARP off: NCCL_NVLS_ENABLE=0; gloo on
the CPU) and times, for float32 tensors of each size (default 25, 100, 256, 1024 MB):
  torch       dist.all_reduce(x) (float32 SUM; NCCL's ring/tree)
  portable    samebits all_reduce(x, level="portable") (max-abs MAX, to_fixed, int64 SUM,
              from_fixed): the target is <= 2.5x torch at 256 MB
  int64_sum   the int64 SUM of the same element count alone (the payload's share)
  run_to_run  the rank-ordered block sum (all-to-all, ordered sum, all-gather)
and one data-parallel training step end to end (an MLP of `--width`, 4 micro-batches per rank,
DDP's all-reduce vs the GradientAccumulator hook). Prints a table and writes JSON (--out).
"""
import argparse
import contextlib
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _time(fn, device, repeats, warmup=2):
    for _ in range(warmup):
        fn()
    _sync(device)
    ts = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _collectives(rank, device, sizes_mb, repeats):
    from samebits.torch import distributed as sbd
    rows = []
    for mb in sizes_mb:
        n = int(mb * 2 ** 20) // 4
        x = torch.randn(n, device=device)
        q = torch.zeros(n + 1, dtype=torch.int64, device=device)
        row = {"mb": mb, "elements": n}
        row["torch_s"] = _time(lambda: dist.all_reduce(x), device, repeats)
        row["portable_s"] = _time(lambda: sbd.all_reduce(x, level="portable"), device, repeats)
        row["int64_sum_s"] = _time(lambda: dist.all_reduce(q), device, repeats)
        row["run_to_run_s"] = _time(lambda: sbd.all_reduce(x, level="run_to_run"), device,
                                    repeats)
        row["portable_over_torch"] = row["portable_s"] / row["torch_s"]
        rows.append(row)
        del x, q
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def _training_step(rank, world, device, width, repeats):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from samebits.torch import distributed as sbd
    out = {}
    for mode in ("torch", "portable"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[m for _ in range(4) for m in
                                      (torch.nn.Linear(width, width), torch.nn.ReLU())]).to(device)
        acc = sbd.GradientAccumulator(model) if mode == "portable" else None
        net = DDP(model, device_ids=[rank] if device == "cuda" else None)
        if acc is not None:
            net.register_comm_hook(acc, sbd.hook)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        xs = [torch.randn(64, width, device=device) for _ in range(4)]

        def step():
            for k, x in enumerate(xs):
                ctx = net.no_sync() if k < len(xs) - 1 else contextlib.nullcontext()
                with ctx:
                    net(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        out[f"{mode}_step_s"] = _time(step, device, repeats)
        out["parameters"] = sum(p.numel() for p in model.parameters())
        if acc is not None:
            acc.remove()
    out["portable_over_torch"] = out["portable_step_s"] / out["torch_step_s"]
    return out


def _worker(rank, world, port, args, queue):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if args.device == "cuda":
        torch.cuda.set_device(rank)
    backend = "nccl" if args.device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        sizes = [float(s) for s in args.sizes_mb.split(",")]
        res = {"world": world, "device": args.device,
               "collectives": _collectives(rank, args.device, sizes, args.repeats),
               "training_step": _training_step(rank, world, args.device, args.width,
                                               args.repeats)}
        if args.device == "cuda":
            res["gpu"] = torch.cuda.get_device_name(rank)
        if rank == 0:
            queue.put(res)
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--sizes-mb", default="25,100,256,1024")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, args.world, port, args, queue))
             for r in range(args.world)]
    for p in procs:
        p.start()
    res = queue.get()
    for p in procs:
        p.join()
    print(f"{'MB':>8} {'torch ms':>10} {'portable ms':>12} {'ratio':>6} {'int64 ms':>9} "
          f"{'run_to_run ms':>14}")
    for r in res["collectives"]:
        print(f"{r['mb']:>8g} {1e3 * r['torch_s']:>10.2f} {1e3 * r['portable_s']:>12.2f} "
              f"{r['portable_over_torch']:>6.2f} {1e3 * r['int64_sum_s']:>9.2f} "
              f"{1e3 * r['run_to_run_s']:>14.2f}")
    t = res["training_step"]
    print(f"training step ({t['parameters']} parameters, 4 micro-batches/rank): torch "
          f"{1e3 * t['torch_step_s']:.2f} ms, portable {1e3 * t['portable_step_s']:.2f} ms "
          f"({t['portable_over_torch']:.2f}x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
