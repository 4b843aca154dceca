#!/usr/bin/env bash
# The main job of `make run`: the GraphSAGE-on-Cora reproducibility experiment. Trains the same
# model with the same seed RUNS times at each determinism level (and 20 different seeds once, for
# the spread a seed causes), on the CPU and, where present, on CUDA; prints the table and writes
# the HTML report and the JSON results under out/. One to two minutes on 2 CPU cores.
#   scripts/main_job.sh [BUILD_DIR]       RUNS=... EPOCHS=... to change the defaults
set -euo pipefail
build=${1:-build}
runs=${RUNS:-200}
epochs=${EPOCHS:-10}
mkdir -p out
"$build/samebits" experiment graphsage --data data/cora --runs "$runs" --epochs "$epochs" \
  --seeds 20 --device auto --json out/graphsage.json --report out/graphsage.html
