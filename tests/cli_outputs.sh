#!/bin/sh
# The output-path rule of src/core/files.hpp, end to end through the samebits program:
#   tests/cli_outputs.sh SAMEBITS SCRATCH_DIR CASE
# Every case works in its own fresh directory under SCRATCH_DIR. Nothing here names a device or a
# standard stream directly: those are reached through links in the scratch directory, so that a
# samebits that replaced what it writes (the defect this guards against) replaces only the link.
set -u
bin=$1
dir=$2/$3
case_name=$3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir" || exit 1

fail() {
  echo "FAIL ($case_name): $*"
  exit 1
}
# A quick command with an output option: `variability` of a small sum.
quick() {
  "$bin" variability --op sum --n 1000 --runs 2 --level portable --device cpu "$@"
}
# Runs "$@", keeps its output in out.txt and its exit status in $status.
run() {
  "$@" >out.txt 2>&1
  status=$?
  cat out.txt
}
# A usage error: exit status 2, the message, and no work done (no report printed).
expect_usage_error() {
  pattern=$1
  shift
  run "$@"
  [ "$status" -eq 2 ] || fail "exit status $status, expected 2"
  grep -q -- "$pattern" out.txt || fail "no message matching '$pattern'"
  if grep -q -e "distinct outputs" -e "GraphSAGE on" -e "calibrated" -e "first difference" \
    -e "no difference" out.txt; then
    fail "the work ran before the usage error"
  fi
}
no_partial_left() {
  left=$(find . -name '*.partial')
  [ -z "$left" ] || fail "left behind: $left"
}

case $case_name in
regular_file)
  echo old >r.json
  chmod 640 r.json
  run quick --json r.json
  [ "$status" -eq 0 ] || fail "exit status $status"
  [ -f r.json ] && grep -q '"op"' r.json || fail "r.json was not written"
  [ "$(stat -c %a r.json)" = 640 ] || fail "the permissions of r.json changed"
  no_partial_left
  ;;
symlink_kept)
  mkdir sub
  ln -s sub/real.json link.json
  run quick --json link.json
  [ "$status" -eq 0 ] || fail "exit status $status"
  [ -L link.json ] || fail "link.json is no longer a symbolic link"
  grep -q '"op"' sub/real.json || fail "the link's target was not written"
  no_partial_left
  ;;
fifo_in_place)
  mkfifo pipe
  timeout 60 cat pipe >got.txt &
  reader=$!
  run quick --json pipe
  wait $reader
  [ "$status" -eq 0 ] || fail "exit status $status"
  [ -p pipe ] || fail "the FIFO was replaced"
  grep -q '"op"' got.txt || fail "the reader of the FIFO got no JSON"
  no_partial_left
  ;;
stdout_through_link)
  ln -s /dev/stdout to_stdout
  "$bin" variability --op sum --n 1000 --runs 2 --level portable --device cpu \
    --json to_stdout >got.txt 2>err.txt
  status=$?
  cat got.txt err.txt
  [ "$status" -eq 0 ] || fail "exit status $status"
  [ -L to_stdout ] || fail "the link to /dev/stdout was replaced"
  grep -q '"op"' got.txt || fail "the JSON did not reach the standard output"
  grep -q 'distinct outputs' got.txt || fail "the report printed before the JSON was lost"
  ;;
dash_is_stdout)
  run quick --json -
  [ "$status" -eq 0 ] || fail "exit status $status"
  grep -q '"op"' out.txt || fail "--json - wrote no JSON to the standard output"
  [ ! -e ./- ] || fail "a file named - was created"
  ;;
full_device)
  ln -s /dev/full full
  run quick --json full
  [ "$status" -eq 1 ] || fail "exit status $status, expected 1"
  grep -q "No space left on device" out.txt || fail "no 'No space left on device'"
  [ -L full ] || fail "the link to /dev/full was replaced"
  [ -c /dev/full ] || fail "/dev/full is no longer a character device"
  ;;
directory_refused)
  mkdir d
  expect_usage_error "is a directory" quick --json d
  ;;
empty_name_refused)
  expect_usage_error "the file name is empty" quick --json ""
  ;;
missing_directory_refused)
  expect_usage_error "the directory 'no/such' does not exist" \
    "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --levels portable \
    --report no/such/r.html
  [ ! -e no ] || fail "the missing directory was created"
  expect_usage_error "the directory 'no/such' does not exist" \
    "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --levels portable \
    --json no/such/r.json
  ;;
every_output_option)
  # The same checks on every output option of every subcommand.
  mkdir d
  expect_usage_error "--json: 'd' is a directory" \
    "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --json d
  expect_usage_error "--report: 'd' is a directory" \
    "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --report d
  expect_usage_error "--trace: 'd' is a directory" \
    "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --trace d
  expect_usage_error "--out: 'd' is a directory" \
    "$bin" calibrate --op sum --n 1000 --runs 2 --out d
  expect_usage_error "--json: 'd' is a directory" quick --json d
  expect_usage_error "--json: 'd' is a directory" \
    "$bin" bench graphsage --graphs synthetic --nodes 100 --edges 100 --reps 1 --json d
  printf '{"samebits_trace": 1}\n' >t.jsonl
  expect_usage_error "--plot: 'd' is a directory" "$bin" diff t.jsonl t.jsonl --plot d
  expect_usage_error "--plot: the file name is empty" "$bin" diff t.jsonl t.jsonl --plot ""
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($case_name)"
