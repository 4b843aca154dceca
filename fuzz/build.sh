#!/bin/sh
# Builds the readers' libFuzzer targets with clang 14 (ASan + UBSan + libFuzzer):
#   fuzz/build.sh LIB_BUILD_DIR OUT_DIR
# Each fuzzer compiles its reader's source itself, instrumented, and takes the rest of samebits
# from LIB_BUILD_DIR/libsamebits.a (a normal g++ build, CPU-only): clang 14 cannot compile the
# whole library (it lacks C++20's lambda captures of structured bindings), and the readers are
# what the fuzzers need instrumented. The linker takes no archive member whose symbols the
# instrumented object already defines.
set -eu
lib_dir=$1
out=$2
mkdir -p "$out"
flags="-std=c++20 -O1 -g -fno-omit-frame-pointer -ffp-contract=off -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -Iinclude -Isrc"
libs="$lib_dir/libsamebits.a -lfmt -lxxhash -lpthread"
# A library built with its CUDA backend needs the CUDA runtime and cuBLAS that CMake found for it.
for v in CUDA_cudart_LIBRARY CUDA_cublas_LIBRARY; do
  f=$(sed -n "s/^$v:FILEPATH=//p" "$lib_dir/CMakeCache.txt")
  if [ -n "$f" ]; then # set only where CMake looked for (and found) the CUDA toolkit
    libs="$libs $f -Wl,-rpath,$(dirname "$f")"
  fi
done
build() { # name, reader source
  echo "fuzz/build.sh: fuzz_$1"
  clang++-14 $flags "fuzz/fuzz_$1.cpp" "$2" $libs -o "$out/fuzz_$1"
}
build graph_reader src/nn/cora.cpp
build trace_reader src/core/trace.cpp
build tolerance_json src/tools/tolerance.cpp
