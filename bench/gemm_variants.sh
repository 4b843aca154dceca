#!/usr/bin/env bash
# On the GPU machine: build bench/gemm_variant_probe.cu against variants of the wide float GEMM
# kernel (bench/gemm_variants.py), print each one's registers, spills and register-bank score
# (bench/sass_bank_conflicts.py), and run each twice; each run also times gemm_copy_tiles at several
# step depths and stage counts (a variant's edit applies to it where it edits what both share, as
# kGemmBlockK). docs/decisions.md has the figures.
#   VARIANTS="base:0 foldsmem:65536" bash bench/gemm_variants.sh     (name:dynamic shared bytes)
#   NOACC=1 leaves the accuracy part out.
set -uo pipefail
VARIANTS=${VARIANTS:-base:0 foldreg:0 foldsmem:65536 lb2:0 swz:0 u4:0 bk8:0}
dir=/tmp/gemm_variants
names=$(for v in $VARIANTS; do echo -n "${v%%:*} "; done)
python3 bench/gemm_variants.py . $dir $names
# The variants build side by side (one nvcc each), then report in order.
for v in $VARIANTS; do
  n=${v%%:*} smem=${v##*:}
  nvcc -O3 -std=c++20 --expt-relaxed-constexpr --fmad=false -ftz=false -prec-div=true \
    -prec-sqrt=true -arch=sm_90 -Xptxas -v -I$dir/$n/src -Iinclude -DSMEM_DYN=$smem \
    bench/gemm_variant_probe.cu -o $dir/probe_$n -lcublas >$dir/build_$n.txt 2>&1 &
done
wait
for n in $names; do
  [ -x $dir/probe_$n ] || { echo "$n: build failed"; continue; }
  echo "$n: $(grep -A2 gemm_tilesIf $dir/build_$n.txt | grep -E 'Used|spill' | tr -s ' \n' ' ')"
  # A line per copy configuration: its template arguments (mangled), spills, registers.
  awk -v n="$n" '/Compiling entry.*gemm_copy_tiles/ { match($0, /tilesIL[^E]*E(Li[0-9]+E)+/);
      cfg = substr($0, RSTART + 5, RLENGTH - 5) }
    cfg != "" && /spill stores/ { sp = $0; sub(/.*stack frame, /, "", sp) }
    cfg != "" && /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/,.*/, "", r);
      print n ": copy " cfg ": " r ", " sp; cfg = "" }' $dir/build_$n.txt
  # The register-bank conflicts of each copy configuration's fmas (bench/sass_bank_conflicts.py).
  score='s/^ *[0-9]+ FFMA +([0-9.]+) extra reads per FFMA.*tilesI(L[^E]*E(Li[0-9]+E)+).*/'
  python3 bench/sass_bank_conflicts.py $dir/probe_$n gemm_copy_tiles 2>&1 |
    sed -E "${score}$n: copy I\2: \1 extra register reads per fma/"
done
for round in 1 2; do
  for n in $names; do [ -x $dir/probe_$n ] && $dir/probe_$n $n; done
done
