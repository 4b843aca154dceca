# Compiler warnings for every samebits target (library, CLI, tests, benchmarks): -Wall -Wextra for
# C++ and for the host code nvcc compiles, and -Werror for both with SAMEBITS_WERROR=ON (CI sets
# it through .ci/run and the Makefile's WERROR=1). Designated initializers that name some fields
# of an options struct (`{.level = Determinism::portable}`) are how the API is called, so GCC's
# -Wmissing-field-initializers, which flags them, is off.
function(samebits_warnings target)
  # GCC 12's -Wrestrict misfires on std::string concatenation at -O3 (GCC bug 105329).
  set(cxx -Wall -Wextra -Wno-missing-field-initializers -Wno-restrict)
  # nvcc hands `#pragma unroll` of host-device functions to the host compiler, which does not know it.
  set(cuda -Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers,-Wno-unknown-pragmas,-Wno-restrict)
  if(SAMEBITS_WERROR)
    list(APPEND cxx -Werror)
    list(APPEND cuda -Xcompiler=-Werror --Werror=all-warnings)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${cxx}>
                                           $<$<COMPILE_LANGUAGE:CUDA>:${cuda}>)
endfunction()
