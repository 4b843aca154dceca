#!/usr/bin/env bash
# A full baseline run on the GPU machine, in two calls that each fit the device tool's 10 minutes
# and leave at most the 8 files it returns in $OUT (bench/results/README.md: copying them into
# bench/results/run<N>/, run.json, make baseline). Pass carry: [".device"] to both calls.
#
#   bash bench/full_run.sh a   build, GPU tests, benchmarks, experiment, tools, PyTorch (about 9 min)
#   bash bench/full_run.sh b   the Python package and PyG on Cora (about 5 min; the same machine,
#                              else it builds first)
set -uo pipefail
part=${1:-}
OUT=${OUT:-/tmp/samebits-out}
mkdir -p "$OUT"
[ -d .device/debs ] || { echo "full_run: .device/debs is missing: pass carry [\".device\"]"; exit 2; }

# keep FILE...: everything else under $OUT goes (the tool returns 8 files at most).
keep() {
  local f
  for f in "$OUT"/*; do
    case " $* " in *" $(basename "$f") "*) ;; *) rm -rf "$f" ;; esac
  done
  ls "$OUT"
}

case "$part" in
a)
  CTEST_ARGS="-L gpu" TORCH_RUNS=10 bash bench/device.sh build,test,bench,experiment,tools,torch
  mv "$OUT/tests.txt" "$OUT/tests_gpu.txt" 2>/dev/null
  mv "$OUT/log.txt" "$OUT/log_a.txt" 2>/dev/null
  keep log_a.txt tests_gpu.txt gpu_bench.json torch_baseline.json torch.txt experiment_cuda.json \
    bench_graphsage.json
  ;;
b)
  steps=python,pyg
  [ -d build-device ] || steps=build,$steps
  PYTEST_ARGS="-n 12 -k zzz_none" PYG_REF_RUNS=30 PYG_RUNS=1000 PYG_PYTHON_KERNELS=0 \
    bash bench/device.sh $steps
  mv "$OUT/log.txt" "$OUT/log_b.txt" 2>/dev/null
  keep log_b.txt bench_torch.json pyg_samebits.json
  ;;
*)
  echo "usage: bash bench/full_run.sh a|b   (see the comment at the top)"
  exit 2
  ;;
esac
