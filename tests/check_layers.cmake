# CTest check (cmake -P, SOURCE_DIR=the samebits tree) that the layers show in the includes:
#   - the public headers, the application library (src/nn, src/tools), the command-line program
#     (tools) and the benchmarks include no header of the kernels' src/ (core/, cpu/, cuda/, ops/);
#     tools/ and bench/ include none of the application's private src/nn headers either, and
#     tools/ no CUDA runtime header (samebits/stream.hpp has what it needs);
#   - src/nn has no CUDA build switch and no call into the CPU thread pool's internals;
#   - tests include, of src/, only the internal testing headers listed here.
cmake_policy(VERSION 3.25)
set(test_internal_headers
    core/backends.hpp core/memory.hpp core/overlap.hpp core/plan_cache.hpp core/registry.hpp
    core/strided.hpp core/test_hooks.hpp core/tuning.hpp cuda/check.cuh ops/fixed_point.hpp
    ops/gemm.hpp ops/segment.hpp nn/kernels.hpp nn/portable_math.hpp
    # The kernel-choice functions and their tunings: the one internal API through which tests
    # and benchmarks set launch shapes (core/tuning.hpp).
    ops/histogram_choice.hpp ops/indexing_choice.hpp ops/reduce_choice.hpp ops/scan_choice.hpp
    ops/scatter_choice.hpp ops/segment_choice.hpp cuda/gemm_cublas.hpp)

set(failures "")
function(scan dirs pattern why)
  foreach(d ${dirs})
    file(GLOB_RECURSE files ${SOURCE_DIR}/${d}/*.cpp ${SOURCE_DIR}/${d}/*.hpp ${SOURCE_DIR}/${d}/*.cu
         ${SOURCE_DIR}/${d}/*.cuh)
    foreach(f ${files})
      file(STRINGS ${f} hits REGEX "${pattern}")
      foreach(h ${hits})
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
        list(APPEND failures "${rel}: ${h}  (${why})")
      endforeach()
    endforeach()
  endforeach()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

set(kernel_include "^#include \"(core|cpu|cuda|ops)/")
scan("include;src/nn;src/tools;tools" "${kernel_include}" "a kernel-private header")
scan("tools;bench" "^#include \"nn/" "an application-private header")
scan("tools" "^#include <cuda" "a CUDA header")
scan("src/nn" "SAMEBITS_HAS_CUDA|thread_pool|detail::parallel_" "a build switch or the pool")

# Tests, and benchmarks (which set tunings), may include the internal testing headers only.
file(GLOB_RECURSE test_files ${SOURCE_DIR}/tests/*.cpp ${SOURCE_DIR}/tests/*.hpp
     ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/bench/*.hpp)
foreach(f ${test_files})
  file(STRINGS ${f} hits REGEX "^#include \"(core|cpu|cuda|ops|nn)/")
  foreach(h ${hits})
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${h}")
    if(NOT header IN_LIST test_internal_headers)
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
      list(APPEND failures "${rel}: ${header} (not an internal testing header: tests/check_layers.cmake)")
    endif()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "layering: includes across the layers:\n  ${text}")
endif()
message(STATUS "layering: every include stays within its layer")
