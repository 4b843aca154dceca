#!/bin/sh
# Runs each fuzzer built by fuzz/build.sh for SECONDS on its corpus (fuzz/corpus/NAME, read only:
# new inputs go to a scratch directory) and prints one line per fuzzer; exits 1 if any found a
# crash, a leak, a sanitizer report or a timeout (the reproducer is in OUT_DIR/artifacts/).
#   fuzz/run.sh OUT_DIR [SECONDS]
set -u
out=$1
seconds=${2:-60}
mkdir -p "$out/artifacts"
status=0
for name in graph_reader trace_reader tolerance_json; do
  scratch=$(mktemp -d)
  log="$out/fuzz_$name.log"
  "$out/fuzz_$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/${name}-" "$scratch" "fuzz/corpus/$name" \
    > "$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ $rc -eq 0 ]; then
    echo "fuzz $name: ${seconds} s, ${runs:-?} runs, no crash"
  else
    echo "fuzz $name: FAILED (exit $rc), see $log and $out/artifacts/"
    status=1
  fi
  rm -rf "$scratch"
done
exit $status
