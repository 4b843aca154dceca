#!/usr/bin/env bash
# One call on the GPU machine: build for sm_90, run the GPU tests (and the CPU ones), the GPU tests
# under compute-sanitizer, the CUDA benchmark program, the GraphSAGE experiment and inference
# benchmark, and PyTorch's reference figures, writing everything under $OUT.
#
#   bench/device.sh [steps]     steps: any of build,test,sanitize,bench,experiment,tools,torch,
#                               python, profile (default: all but profile)
#
# The Debian development packages samebits builds against travel as .deb files in .device/debs
# (git-ignored; see docs/device.md) and are unpacked into .device/root; PyTorch's reference script
# travels as .device/bench/torch_reference.py with Cora's Planetoid files in .device/data/cora.
set -uo pipefail
steps=${1:-build,test,sanitize,bench,experiment,tools,torch,python}
OUT=${OUT:-/tmp/samebits-out}
mkdir -p "$OUT"
log="$OUT/log.txt"
has() { [[ ",$steps," == *",$1,"* ]]; }
say() { echo "== $* ($(date +%T))" | tee -a "$log"; }

root=$PWD/.device/root
mkdir -p "$root"
for d in .device/debs/*.deb; do dpkg -x "$d" "$root"; done
export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee -a "$log"

B=build-device
if has build; then
  say build
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMEBITS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$root/usr" >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  cmake --build $B -j "$(nproc)" >>"$OUT/build.txt" 2>&1 || { grep -E "error|Error" "$OUT/build.txt" | head -40; exit 1; }
fi
if has test; then
  say "tests (all labels)"
  (cd $B && ctest -j 8 --timeout 300 --output-on-failure) >"$OUT/tests.txt" 2>&1
  tail -25 "$OUT/tests.txt" | tee -a "$log"
fi
if has sanitize; then
  say "compute-sanitizer memcheck and racecheck on the GPU test programs (in parallel)"
  # The long repeat/variance tests are left out: they rerun the same kernels many times.
  # SANITIZE_ONLY="test_gemm_gpu ..." limits the programs, SANITIZE_TOOLS="racecheck" the tools,
  # SANITIZE_FILTER the tests; SANITIZE_TIMEOUT (s) bounds each run; SANITIZE_SHARDS=n splits the
  # cases of the long reference tests into n processes run side by side (SAMEBITS_TEST_SHARD).
  filter=${SANITIZE_FILTER:--*Repeat*:*Var*:*Concurrent*:*100*}
  shards=${SANITIZE_SHARDS:-1}
  mkdir -p /tmp/sanitize
  # test_large_gpu walks 2^31 positions per kernel, far too long under the sanitizers: only by name.
  progs=$(ls $B/tests/test_*_gpu | grep -v test_large_gpu)
  [ -n "${SANITIZE_ONLY:-}" ] && progs=$(for p in $SANITIZE_ONLY; do echo $B/tests/$p; done)
  for t in $progs; do
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
      for ((i = 0; i < shards; i++)); do echo "$tool $t $i/$shards"; done
    done
  done | xargs -P "${SANITIZE_JOBS:-8}" -L 1 bash -c 'log=/tmp/sanitize/$0_$(basename $1)_${2%/*}.txt; \
      SAMEBITS_TEST_SHARD=$2 timeout '"${SANITIZE_TIMEOUT:-150}"' compute-sanitizer --tool $0 \
      --error-exitcode 99 "$1" --gtest_brief=1 --gtest_filter="'"$filter"'" >$log 2>&1; rc=$?; \
      [ $rc = 124 ] && rc="124 (timed out)"; \
      echo "$0 $(basename $1) shard $2 rc=$rc $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $log | tr "\n" " ")"' \
    | sort | tee -a "$log"
  cat /tmp/sanitize/*.txt > "$OUT/sanitize.txt"
fi
if has bench; then
  say "CUDA benchmark program"
  $B/bench/samebits_bench_gpu --out "$OUT" ${BENCH_ONLY:+--only "$BENCH_ONLY"} 2>&1 | tail -80 | tee -a "$log"
fi
if has experiment; then
  say "GraphSAGE experiment and inference benchmark"
  if $B/samebits --help 2>/dev/null | grep -q experiment; then
    $B/samebits experiment graphsage --device cuda --runs 1000 --epochs 10 \
      --json "$OUT/experiment_cuda.json" --report "$OUT/report.html" 2>&1 | tail -30 | tee -a "$log"
    say "cross-device check: portable on the CPU and on CUDA"
    $B/samebits experiment graphsage --device cpu,cuda --levels portable --runs 5 --epochs 10 \
      2>&1 | tail -8 | tee -a "$log"
    $B/samebits bench graphsage --json "$OUT/bench_graphsage.json" 2>&1 | tail -30 | tee -a "$log"
  else
    echo "no experiment command in this build" | tee -a "$log"
  fi
fi
if has tools; then
  say "samebits doctor, demo, variability on the anchor shapes, trace diff"
  $B/samebits doctor 2>&1 | tee -a "$log"
  $B/samebits demo --device all 2>&1 | tail -12 | tee -a "$log"
  for shape in "--n 1000000 --rows 1000" "--n 100000 --rows 1000 --features 16" "--n 10000000 --rows 100000"; do
    $B/samebits variability --op index_add $shape --runs 100 --level all --device cuda 2>&1 | tail -6 | tee -a "$log"
  done
  $B/samebits experiment graphsage --device cuda --runs 1 --epochs 10 --levels not_guaranteed \
      --trace /tmp/ng1.trace >/dev/null 2>&1
  $B/samebits experiment graphsage --device cuda --runs 1 --epochs 10 --levels not_guaranteed \
      --trace /tmp/ng2.trace >/dev/null 2>&1
  $B/samebits diff /tmp/ng1.trace /tmp/ng2.trace 2>&1 | head -20 | tee -a "$log"
  $B/samebits experiment graphsage --device cuda --runs 1 --epochs 10 --levels run_to_run \
      --trace /tmp/rr1.trace >/dev/null 2>&1
  $B/samebits experiment graphsage --device cuda --runs 1 --epochs 10 --levels run_to_run \
      --trace /tmp/rr2.trace >/dev/null 2>&1
  $B/samebits diff /tmp/rr1.trace /tmp/rr2.trace 2>&1 | head -8 | tee -a "$log"
fi
if has profile; then
  # PROFILE_GRAPHS=synthetic profiles the 1M-node graph instead of Cora.
  graphs=${PROFILE_GRAPHS:-cora}
  say "per-kernel GPU time of the $graphs forward pass per level (ncu, CUDA graph nodes)"
  for level in ${PROFILE_LEVELS:-not_guaranteed run_to_run}; do
    ncu --csv --print-units base --metrics gpu__time_duration.sum \
      $B/samebits bench graphsage --graphs "$graphs" --device cuda --levels "$level" --reps 3 \
      >"$OUT/ncu_$level.csv" 2>"$OUT/ncu_$level.err"
    python3 bench/kernel_times.py "$OUT/ncu_$level.csv" --title "$graphs, $level" | tee -a "$log"
  done
fi
if has torch; then
  say "PyTorch reference (same call, same GPU)"
  (cd .device/bench && OUT="$OUT" PYTHONUNBUFFERED=1 timeout 400 python3 torch_reference.py \
     --runs "${TORCH_RUNS:-100}") >"$OUT/torch.txt" 2>&1
  tail -40 "$OUT/torch.txt" | tee -a "$log"
fi
if has python; then
  # The Python package, built offline from this tree (torch, nanobind and scikit-build-core are
  # on the machine; pytest and numpy travel as wheels in .device/wheels if it lacks them) into a
  # target directory, then its tests (the GPU ones included) and bench_torch.py.
  say "Python package: pip install (offline), pytest, bench_torch"
  py=$PWD/.device/python
  rm -rf "$py" && mkdir -p "$py"
  python3 -m pip install --no-build-isolation --no-deps --no-index --target "$py" \
    -Cbuild-dir=build-device-python -Ccmake.define.SAMEBITS_CUDA=ON \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 -Ccmake.define.CMAKE_PREFIX_PATH="$root/usr" . \
    >/tmp/python_build.txt 2>&1 || tail -30 /tmp/python_build.txt | tee -a "$log"
  python3 -c "import pytest, numpy" 2>/dev/null ||
    python3 -m pip install --no-index --no-deps --target "$py" .device/wheels/*.whl >/dev/null
  (PYTHONPATH=$py timeout 900 python3 -m pytest -q -p no:cacheprovider python/tests) \
    >"$OUT/python_tests.txt" 2>&1
  tail -15 "$OUT/python_tests.txt" | tee -a "$log"
  PYTHONPATH=$py timeout 600 python3 python/bench/bench_torch.py --out "$OUT/bench_torch.json" \
    2>&1 | tee -a "$log"
fi
say done
