#!/usr/bin/env bash
# What another length of the canonical GEMM's k blocks (256) would give, on the GPU machine: for each
# length in BLOCKS (default 32) a copy of the tree with that length, its GEMM GPU tests (the CPU's
# and CUDA's bits equal) and the gemm rows of samebits_bench_gpu ($OUT/gpu_bench_block<N>.json and
# the deciding rows printed). docs/decisions.md has run 142's figures.
#   OUT=... bash bench/gemm_block_length.sh
set -uo pipefail
root=$PWD/.device/root
mkdir -p "$root"
for d in .device/debs/*.deb; do dpkg -x "$d" "$root"; done
export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for bk in ${BLOCKS:-32}; do
  src=/tmp/exp$bk
  rm -rf $src && mkdir -p $src
  tar --exclude=./build-device --exclude=./.device --exclude=./build --exclude=./.venv \
    --exclude=./.git -cf - . | tar -xf - -C $src
  sed -i "s/constexpr std::int64_t kGemmBlockK = 256;/constexpr std::int64_t kGemmBlockK = $bk;/" $src/src/ops/gemm.hpp
  sed -i "s/constexpr std::int64_t kBlockK = 256;/constexpr std::int64_t kBlockK = $bk;/" $src/src/cpu/gemm_kernels.hpp
  # The deep tiles step 128 k at a time: no more than one block.
  sed -i "s/BM = 16, BN = 16, BK = 128,/BM = 16, BN = 16, BK = $((bk < 128 ? bk : 128)),/" $src/src/cuda/gemm_kernels.cuh
  grep -n "BM = 16, BN = 16" $src/src/cuda/gemm_kernels.cuh
  grep -n "kGemmBlockK = \|kBlockK = " $src/src/ops/gemm.hpp $src/src/cpu/gemm_kernels.hpp
  echo "== block $bk build ($(date +%T))"
  (cd $src && cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMEBITS_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$root/usr" >/tmp/cfg$bk.txt 2>&1 &&
   cmake --build b -j "$(nproc)" --target samebits_bench_gpu test_gemm_gpu >/tmp/build$bk.txt 2>&1) ||
    { grep -E "error" /tmp/build$bk.txt | head -20; tail -5 /tmp/cfg$bk.txt; continue; }
  echo "== block $bk tests ($(date +%T))"
  (cd $src/b && timeout 240 ./tests/test_gemm_gpu 2>&1 | tail -4) || true
  echo "== block $bk bench ($(date +%T))"
  mkdir -p /tmp/out$bk
  timeout 240 $src/b/bench/samebits_bench_gpu --only gemm --out /tmp/out$bk >/dev/null 2>&1
  cp /tmp/out$bk/gpu_bench.json "$OUT/gpu_bench_block$bk.json"
  python3 bench/gemm_rows.py "$OUT/gpu_bench_block$bk.json"
done
echo "== gemm_block done ($(date +%T))"
