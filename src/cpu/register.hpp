// Registration of the CPU backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cpu_reduce(Registry& r);    // cpu/reduce.cpp
void register_cpu_gemm(Registry& r);      // cpu/gemm.cpp

}  // namespace samebits::detail
