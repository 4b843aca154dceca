#!/bin/sh
# Data sets the experiment reads: tiny crafted files in a scratch directory, and the bundled Cora
# found from another directory.
#   tests/cli_data.sh SAMEBITS SCRATCH_DIR CASE
set -u
bin=$1
dir=$2/data_$3
case_name=$3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir" || exit 1
fail() {
  echo "FAIL ($case_name): $*"
  exit 1
}
run() {
  "$@" >out.txt 2>&1
  status=$?
  cat out.txt
}
# A 4-node graph: nodes.tsv with the given feature fields and labels, edges.tsv with the given
# edges (one "src dst" pair per argument).
graph() {
  labels=$1
  features=$2
  shift 2
  mkdir -p g
  printf 'node\tlabel\tsplit\tfeatures\n' >g/nodes.tsv
  i=0
  for split in train train test test; do
    label=$(echo "$labels" | cut -d' ' -f$((i + 1)))
    feature=$(echo "$features" | cut -d' ' -f$((i + 1)))
    printf '%s\t%s\t%s\t%s\n' $i "$label" $split "$feature" >>g/nodes.tsv
    i=$((i + 1))
  done
  printf 'src\tdst\n' >g/edges.tsv
  for e in "$@"; do
    printf '%s\t%s\n' "${e% *}" "${e#* }" >>g/edges.tsv
  done
}
experiment() {
  "$bin" experiment graphsage --data g --check none --device cpu --runs 2 --epochs 1 \
    --levels portable "$@"
}

case $case_name in
huge_feature_refused)
  # One feature index of 2^24 - 1: 16.7M declared columns, 3 used. With a wide hidden layer the
  # model cannot fit anywhere: refused before anything is allocated, after a warning.
  graph "0 1 0 1" "0,1 2 16777215 1" "0 1" "1 0" "2 3" "3 2"
  run timeout 60 "$bin" experiment graphsage --data g --check none --device cpu --runs 1 \
    --epochs 1 --levels portable --hidden 1048576
  [ "$status" -eq 1 ] || fail "exit status $status, expected 1"
  grep -q "declares 16777216 feature columns (its largest feature index + 1) but uses only 4" \
    out.txt || fail "no warning about the declared feature columns"
  grep -q "the model does not fit in memory" out.txt || fail "not refused before allocating"
  ;;
huge_label_warned)
  # A label of 65535 makes 65536 classes of which 2 are used: a warning, and the model's size.
  graph "0 65535 0 65535" "0 1 2 3" "0 1" "1 0" "2 3" "3 2"
  run experiment
  [ "$status" -eq 0 ] || fail "exit status $status"
  grep -q "declares 65536 classes (its largest label + 1) but uses only 2" out.txt ||
    fail "no warning about the declared classes"
  grep -q "model: 4 features -> 16 hidden -> 65536 classes, 2162832 parameters" out.txt ||
    fail "the model's size was not printed"
  ;;
size_printed)
  graph "0 1 0 1" "0 1 2 3" "0 1" "1 0" "2 3" "3 2"
  run experiment
  [ "$status" -eq 0 ] || fail "exit status $status"
  grep -q "model: 4 features -> 16 hidden -> 2 classes, 210 parameters; training needs about" \
    out.txt || fail "the model's size was not printed"
  grep -q "warning" out.txt && fail "a warning for a sound data set"
  ;;
duplicate_edges_warned)
  graph "0 1 0 1" "0 1 2 3" "0 1" "1 0" "2 3" "0 1" "0 1" "3 2"
  run experiment
  [ "$status" -eq 0 ] || fail "exit status $status"
  grep -q "warning: 2 edges are listed more than once (first: g/edges.tsv line 5: 0 -> 1 (first at line 2))" \
    out.txt || fail "no warning naming the duplicate edges"
  grep -q "note: the data set lists 2 edges more than once" out.txt ||
    fail "the table does not note the duplicate edges"
  ;;
bundled_from_elsewhere)
  # No --data, run from a directory with no data/ in it: the bundled Cora is found beside the
  # program (the source tree's data/ for a build tree).
  run "$bin" experiment graphsage --device cpu --runs 1 --epochs 1 --levels portable
  [ "$status" -eq 0 ] || fail "exit status $status"
  grep -q "GraphSAGE on cora: 2708 nodes" out.txt || fail "the bundled Cora was not found"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($case_name)"
