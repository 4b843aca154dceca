#!/usr/bin/env bash
# One call on the GPU machine: build for sm_90, run the GPU tests (and the CPU ones), the GPU tests
# under compute-sanitizer's four tools, the CUDA benchmark program, the GraphSAGE experiment and
# inference benchmark, and PyTorch's reference figures, writing everything under $OUT.
#
#   bench/device.sh [steps]     steps: any of build,test,sanitize,bench,experiment,tools,torch,
#                               python, pyg, pygprofile, pygncu and hostcost (after python),
#                               profile (default: all but profile, pygprofile, pygncu and hostcost)
#
# The Debian development packages samebits builds against travel as .deb files in .device/debs
# (git-ignored; see docs/device.md) and are unpacked into .device/root; PyTorch's reference script
# travels as .device/bench/torch_reference.py with Cora's Planetoid files in .device/data/cora.
set -uo pipefail
steps=${1:-build,test,sanitize,bench,experiment,tools,torch,python,pyg}
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
  # A build tree configured with other packages than .device/debs holds keeps what it found in its
  # cache (a call that did not carry .device, then one that did, linked objects built against two
  # nlohmann-json versions): such a tree starts again.
  stamp=$B/.samebits-device-debs
  debs=$(ls .device/debs 2>/dev/null | md5sum | cut -c1-32)
  if [ -d $B ] && [ "$(cat $stamp 2>/dev/null)" != "$debs" ]; then
    echo "build-device was configured with other packages: configuring it again" | tee -a "$log"
    rm -rf $B
  fi
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMEBITS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$root/usr" >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  echo "$debs" >$stamp
  cmake --build $B -j "$(nproc)" >>"$OUT/build.txt" 2>&1 || { grep -E "error|Error" "$OUT/build.txt" | head -40; exit 1; }
fi
if has test; then
  say "tests (all labels)"
  # CTEST_ARGS="-L gpu" runs the GPU tests alone.
  (cd $B && ctest -j 8 --timeout 300 --output-on-failure ${CTEST_ARGS:-}) >"$OUT/tests.txt" 2>&1
  tail -25 "$OUT/tests.txt" | tee -a "$log"
fi
if has sanitize; then
  say "compute-sanitizer: memcheck, racecheck, synccheck and initcheck on every GPU test program"
  # Racecheck (the slowest) runs one process per test (bench/sanitize_one.sh), the other tools one
  # per program except for the programs in SANITIZE_PER_TEST; SANITIZE_JOBS side by side,
  # racecheck and the case-sharded tests first. The repeat and variance tests are left out: they
  # rerun the same kernels many times. SANITIZE_ONLY="test_gemm_gpu ..." limits the programs,
  # SANITIZE_TOOLS="racecheck" the tools, SANITIZE_PAIRS="racecheck:test_gemm_gpu ..." names
  # (tool, program) pairs instead of the two; SANITIZE_FILTER picks tests; SANITIZE_TIMEOUT (s)
  # bounds each process. SANITIZE_CASE_SHARDS lists "TEST_PATTERN:C": a matching test runs as C
  # processes, each with SAMEBITS_TEST_SHARD=i/C (its case loop cut in C). The backend-ops
  # harness runs case shard 0 of SANITIZE_HARNESS_CASES (every op family, one case in that many;
  # SANITIZE_HARNESS_RACE_CASES under racecheck).
  # SANITIZE_WORK_LIMIT (elements, or multiply-adds for gemm) leaves the largest cases out
  # (SAMEBITS_TEST_WORK_LIMIT, tests/testing.hpp): racecheck follows every shared-memory access.
  export SANITIZE_FILTER=${SANITIZE_FILTER:--*Over100Repeats*:*Bitwise100Repeats*:*RepeatsAreIdentical*:*Varies*:*VaryRunToRun*:*Concurrent*}
  export SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-400} SANITIZE_DIR=/tmp/sanitize
  export SANITIZE_WORK_LIMIT=${SANITIZE_WORK_LIMIT:-4194304}
  shards=${SANITIZE_CASE_SHARDS:-*IndexAddMatches*:8 *PlanIsTheSame*:16 *ScatterReducePortable*:4
    *ForEveryTileShape*:8 *ThinKernel*:16 *TwoLaunchShapes*:4}
  harness_cases=${SANITIZE_HARNESS_CASES:-80} harness_race_cases=${SANITIZE_HARNESS_RACE_CASES:-800}
  rm -rf "$SANITIZE_DIR"
  mkdir -p "$SANITIZE_DIR"
  # test_large_gpu walks 2^31 positions per kernel, far too long under the sanitizers: only by name.
  pairs=${SANITIZE_PAIRS:-}
  if [ -z "$pairs" ]; then
    progs=$(cd $B/tests && ls test_*_gpu | grep -v test_large_gpu)
    [ -n "${SANITIZE_ONLY:-}" ] && progs=$SANITIZE_ONLY
    for p in $progs; do
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
        pairs="$pairs $tool:$p"
      done
    done
  fi
  per_test=" ${SANITIZE_PER_TEST:-test_gemm_gpu test_backend_ops_gpu} "
  for pair in $pairs; do
    tool=${pair%%:*} prog=${pair#*:}
    if [[ $tool != racecheck && $per_test != *" $prog "* ]]; then
      echo "2 $tool $B/tests/$prog $SANITIZE_FILTER 0/1"
      continue
    fi
    # GoogleTest's list: "Suite." lines, then "  Test" lines (parameterized: "  Test/0  # ...").
    $B/tests/$prog --gtest_list_tests --gtest_filter="$SANITIZE_FILTER" 2>/dev/null |
      awk '/^[^ ]/ { suite = $1; next } { print suite $1 }' |
      while read -r test; do
        n=1
        for s in $shards; do
          [[ $test == ${s%:*} ]] && n=${s##*:}
        done
        if [[ $prog == test_backend_ops_gpu ]]; then
          # racecheck follows every shared-memory access: a sparser sample (one case in 80 ran
          # out of 400 s in run 138)
          cases=$harness_cases
          [[ $tool == racecheck ]] && cases=$harness_race_cases
          echo "1 $tool $B/tests/$prog $test 0/$cases"
          continue
        fi
        for ((i = 0; i < n; i++)); do
          echo "$((n > 1 ? 1 : 2)) $tool $B/tests/$prog $test $i/$n"
        done
      done
  done | awk '{ print ($2 == "racecheck" ? 0 : 1), $0 }' | sort -s -k1,1n -k2,2n | cut -d' ' -f3- |
    xargs -P "${SANITIZE_JOBS:-16}" -L 1 bench/sanitize_one.sh
  # One line per program and tool, over its processes: errors (memcheck, synccheck and initcheck
  # errors, racecheck hazards), tests passed and failed, runs that timed out or failed to start.
  awk '{ k = $1 " " $2; runs[k]++; err[k] += $5; pass[k] += $6; fail[k] += $7;
         if ($4 == 124) to[k]++; else if ($4 != 0) bad[k]++; if ($8 > sec[k]) sec[k] = $8 }
       END { for (k in runs) {
               ok = err[k] == 0 && fail[k] == 0 && to[k] == 0 && bad[k] == 0
               split(k, p, " ")
               printf "sanitize %-10s %-24s %3d run(s): %d errors, %d tests passed, %d failed, " \
                      "%d timed out, %d other exits, longest %d s -> %s\n", p[1], p[2], runs[k],
                      err[k], pass[k], fail[k], to[k], bad[k], sec[k], ok ? "OK" : "CHECK"
             } }' "$SANITIZE_DIR/results.txt" | sort | tee -a "$log"
  # Every process's line, then the end of the log of each one that did not pass cleanly.
  { sort -k8,8nr "$SANITIZE_DIR/results.txt"
    awk '$4 != 0 || $5 != 0 || $7 != 0 { print $9 }' "$SANITIZE_DIR/results.txt" | head -40 |
      while read -r f; do echo "--- $f"; tail -30 "$f"; done
  } >"$OUT/sanitize.txt"
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
    -Cbuild-dir=$B -Ccmake.define.SAMEBITS_CUDA=ON -Ccmake.define.SAMEBITS_BUILD_TESTS=ON \
    -Ccmake.define.SAMEBITS_BUILD_BENCH=ON \
    -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 -Ccmake.define.CMAKE_PREFIX_PATH="$root/usr" . \
    >/tmp/python_build.txt 2>&1 || tail -30 /tmp/python_build.txt | tee -a "$log"
  python3 -c "import pytest, numpy" 2>/dev/null ||
    python3 -m pip install --no-index --no-deps --target "$py" .device/wheels/*.whl >/dev/null
  # PYTEST_ARGS="-n 8" runs the tests side by side (pytest-xdist, on the machine).
  (PYTHONPATH=$py timeout 900 python3 -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} \
     python/tests) >"$OUT/python_tests.txt" 2>&1
  tail -15 "$OUT/python_tests.txt" | tee -a "$log"
  # PY_BENCH=0 leaves bench_torch.py out. After the bench step of the same call, the anchors'
  # figures are compared with the C++ ones of $OUT/gpu_bench.json.
  cpp=()
  [[ -f $OUT/gpu_bench.json ]] && cpp=(--cpp "$OUT/gpu_bench.json")
  [[ ${PY_BENCH:-1} == 0 ]] ||
    PYTHONPATH=$py timeout 600 python3 python/bench/bench_torch.py --out "$OUT/bench_torch.json" \
      ${cpp[@]+"${cpp[@]}"} 2>&1 | tee -a "$log"
fi
if has pyg; then
  # PyG's own models on Cora under the drop-in mode against PyG's default, and SAGEConv inference
  # on the synthetic graph (examples/pyg_cora.py; PYG_RUNS trainings in torch default and at
  # run_to_run, PYG_REF_RUNS in torch deterministic and portable, all interleaved in 10 rounds).
  say "PyG on Cora and the synthetic graph under the drop-in mode"
  py=$PWD/.device/python
  PYTHONPATH=$py python3 examples/pyg_cora.py --device cuda --runs "${PYG_RUNS:-1000}" \
    --ref-runs "${PYG_REF_RUNS:-100}" --modes torch,torch_det,run_to_run,portable --synthetic \
    --json "$OUT/pyg_samebits.json" 2>&1 | tee -a "$log"
  # The same with the mode's Python kernels for every op (SAMEBITS_TORCH_MODE=python), against
  # its C++ scatters above: PYG_REF_RUNS trainings (PYG_PYTHON_KERNELS=0 leaves them out).
  [[ ${PYG_PYTHON_KERNELS:-1} == 0 ]] ||
    SAMEBITS_TORCH_MODE=python PYTHONPATH=$py python3 examples/pyg_cora.py --device cuda \
      --runs "${PYG_REF_RUNS:-100}" --modes run_to_run --json "$OUT/pyg_python_kernels.json" 2>&1 |
      tee -a "$log"
fi
if has pygprofile; then
  # Where the mode's time goes in a PyG training (python/bench/pyg_mode_profile.py), for each
  # model in PYG_MODELS (default: sage gcn gat): $OUT/pyg_profile_MODEL.txt and .json.
  say "PyG training under the mode: timings and profiler tables"
  for model in ${PYG_MODELS:-sage gcn gat}; do
    PYTHONPATH=$PWD/.device/python python3 python/bench/pyg_mode_profile.py --model "$model" \
      --json "$OUT/pyg_profile_$model.json" >"$OUT/pyg_profile_$model.txt" 2>&1
    echo "-- $model" | tee -a "$log"
    head -8 "$OUT/pyg_profile_$model.txt" | grep -v Warning | tee -a "$log"
  done
fi
if has pygncu; then
  # The covered scatters' kernels in a PyG training under the mode, under ncu: duration, speed of
  # light, occupancy, launch shape and warp stall reasons (why a short pull or check takes the time
  # it does). PYG_MODELS' first model (default gcn); NCU_KERNELS, a regex of kernel names;
  # NCU_COUNT kernels profiled after NCU_SKIP (120: about the warm-up training's).
  # $OUT/ncu_pyg_MODEL.csv, a summary in the log.
  model=${PYG_MODELS:-gcn}
  model=${model%% *}
  say "ncu: the mode's kernels in a $model training"
  PYTHONPATH=$PWD/.device/python timeout 400 ncu --csv --page raw --print-units base \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics smsp__cycles_active.avg,sm__cycles_elapsed.avg \
    --kernel-name "regex:${NCU_KERNELS:-pull_|fixed_cluster|block_count|block_sort}" \
    --launch-skip "${NCU_SKIP:-120}" --launch-count "${NCU_COUNT:-24}" \
    python3 python/bench/pyg_mode_training.py --model "$model" --trainings 2 \
    >"$OUT/ncu_pyg_$model.csv" 2>"$OUT/ncu_pyg_$model.err"
  python3 bench/ncu_summary.py "$OUT/ncu_pyg_$model.csv" 2>&1 | tee -a "$log"
fi
if has hostcost; then
  # The host time of the mode's scatters, layer by layer (python/bench/host_cost.py:
  # $OUT/host_cost.txt and .json), and what torch's deterministic setting, which the mode turns on,
  # costs each aten op of a PyG epoch (python/bench/flag_cost.py, each model in PYG_MODELS:
  # $OUT/flag_cost_MODEL.txt and .json).
  say "host time of the mode's scatters, and of torch's deterministic setting per aten op"
  PYTHONPATH=$PWD/.device/python python3 python/bench/host_cost.py --json "$OUT/host_cost.json" \
    >"$OUT/host_cost.txt" 2>&1
  grep -v Warning "$OUT/host_cost.txt" | tee -a "$log"
  for model in ${PYG_MODELS:-sage gcn gat}; do
    PYTHONPATH=$PWD/.device/python python3 python/bench/flag_cost.py --model "$model" \
      --json "$OUT/flag_cost_$model.json" >"$OUT/flag_cost_$model.txt" 2>&1
    echo "-- $model" | tee -a "$log"
    head -12 "$OUT/flag_cost_$model.txt" | tee -a "$log"
    tail -1 "$OUT/flag_cost_$model.txt" | tee -a "$log"
  done
fi
say done
