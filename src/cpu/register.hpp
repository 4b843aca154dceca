// Registration of the CPU backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cpu_reduce(Registry& r);    // cpu/reduce.cpp
void register_cpu_segment(Registry& r);   // cpu/segment.cpp
void register_cpu_indexing(Registry& r);  // cpu/indexing.cpp
void register_cpu_scan(Registry& r);      // cpu/scan.cpp
void register_cpu_histogram(Registry& r); // cpu/histogram.cpp
void register_cpu_scatter(Registry& r);   // cpu/scatter.cpp (+ cpu/index_plan.cpp)
void register_cpu_gemm(Registry& r);      // cpu/gemm.cpp

} // namespace samebits::detail
