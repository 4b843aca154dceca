"""Trainings of a PyG model on Cora under the drop-in mode and nothing else, for a profiler that
attaches to the whole process (ncu, nsys): the first training warms up (plans, kept sorts), the
rest are what a profiler should look at. bench/device.sh's pygncu step runs it under ncu.

    python python/bench/pyg_mode_training.py --model gcn --trainings 2 --epochs 10
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import pyg_cora  # noqa: E402  (the example's loader and training loop)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gcn", choices=("sage", "gcn", "gat"))
    ap.add_argument("--level", default="run_to_run", choices=("run_to_run", "portable"))
    ap.add_argument("--trainings", type=int, default=2, help="trainings, the first a warm-up (2)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "data", "cora"))
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu for a quick check")
    a = ap.parse_args(argv)
    if a.trainings < 1 or a.epochs < 1:
        ap.error("--trainings and --epochs must be at least 1")
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("needs a CUDA device (--device cpu runs it on the CPU)")
    data, nf, nc = pyg_cora.load_cora_tsv(device, a.data)
    with pyg_cora.st.deterministic(a.level):
        for t in range(a.trainings):
            digest, acc = pyg_cora.train_once(a.model, data, nf, nc, a.epochs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            print(f"training {t + 1}: weights {digest}, accuracy {acc:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
