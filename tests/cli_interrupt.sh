#!/bin/sh
# An interrupted experiment keeps its finished groups: SIGINT (or SIGTERM) once the first group
# has finished must print the table so far, write the JSON and the report of the complete groups
# marked "complete": false, leave no .partial file and exit with 128 + the signal's number.
#   tests/cli_interrupt.sh SAMEBITS SCRATCH_DIR INT|TERM
set -u
bin=$1
sig=$3
dir=$2/interrupt_$sig
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir" || exit 1
fail() {
  echo "FAIL: $*"
  echo "--- stdout"
  cat out.txt
  echo "--- stderr"
  cat err.txt
  exit 1
}
# Three groups of 60 short trainings: the first ends after a second or two, the other two take
# longer than the wait for the signal to arrive.
# A background job of a non-interactive shell starts with SIGINT ignored (which samebits
# respects): env gives it the default disposition, as a job in a terminal has.
env --default-signal=INT,TERM "$bin" experiment graphsage --device cpu \
  --levels portable,run_to_run,not_guaranteed --runs 60 --epochs 2 --json r.json --report r.html \
  --trace t.jsonl >out.txt 2>err.txt &
pid=$!
waited=0
until grep -q "cpu portable: 60 runs" err.txt; do
  sleep 0.2
  waited=$((waited + 1))
  [ $waited -lt 1500 ] || {
    kill -KILL $pid
    fail "the first group did not finish within 300 s"
  }
  kill -0 $pid 2>/dev/null || fail "the experiment ended before it was interrupted"
done
kill -"$sig" $pid
wait $pid
status=$?
expected=130
[ "$sig" = TERM ] && expected=143
[ $status -eq $expected ] || fail "exit status $status, expected $expected"
grep -q "INTERRUPTED" out.txt || fail "the table does not say it was interrupted"
grep -q "^cpu     portable" out.txt || fail "the table lost the finished group"
grep -q '"complete": false' r.json || fail "the JSON is not marked \"complete\": false"
grep -q '"level": "portable"' r.json || fail "the JSON lost the finished group"
grep -q "INTERRUPTED" r.html || fail "the report does not say it was interrupted"
[ -s t.jsonl ] || fail "the trace was not kept"
left=$(find . -name '*.partial')
[ -z "$left" ] || fail "left behind: $left"
echo "PASS: exit status $status, groups kept"
