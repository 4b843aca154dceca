#!/usr/bin/env bash
# One compute-sanitizer run for bench/device.sh's sanitize step: one tool on one test of a GPU test
# program (or one case shard of it), its log in $SANITIZE_DIR, and one result line appended to
# $SANITIZE_DIR/results.txt: "tool program test/shard rc errors passed failed seconds log".
#   bench/sanitize_one.sh TOOL PROGRAM TEST CASE_SHARD/CASE_SHARDS
# CASE_SHARD/CASE_SHARDS becomes SAMEBITS_TEST_SHARD (the cases of the test's long loop, where the
# test reads it); "0/1" is no split. Environment: SANITIZE_TIMEOUT (s), SANITIZE_WORK_LIMIT
# (SAMEBITS_TEST_WORK_LIMIT: the largest cases are left out), SANITIZE_ENV (extra NAME=VALUE words
# for the program).
set -u
tool=$1 prog=$2 test=$3 cshard=$4
name=$(basename "$prog")
dir=${SANITIZE_DIR:-/tmp/sanitize}
log="$dir/${tool}_${name}_$(echo "$test" | tr -c 'A-Za-z0-9\n' '_')_c${cshard%/*}.txt"
start=$(date +%s)
# API errors are left out (--report-api-errors no): the runtime and plan-cache tests provoke
# invalid ordinals and out-of-memory returns on purpose, and samebits checks every return itself.
env SAMEBITS_TEST_SHARD="$cshard" SAMEBITS_TEST_WORK_LIMIT="${SANITIZE_WORK_LIMIT:-}" \
  ${SANITIZE_ENV:-} timeout "${SANITIZE_TIMEOUT:-400}" compute-sanitizer --tool "$tool" \
  --error-exitcode 99 --report-api-errors no "$prog" --gtest_brief=1 --gtest_filter="$test" \
  >"$log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
# "RACECHECK SUMMARY: N hazards displayed" (racecheck), "ERROR SUMMARY: N errors" (the others).
summary=$([ "$tool" = racecheck ] && echo "RACECHECK SUMMARY: [0-9]+" || echo "ERROR SUMMARY: [0-9]+")
errors=$(grep -Eo "$summary" "$log" | grep -Eo "[0-9]+$" | awk '{s += $1} END {print s + 0}')
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
echo "$tool $name $test/c$cshard $rc $errors ${passed:-0} ${failed:-0} $secs $log" >>"$dir/results.txt"
