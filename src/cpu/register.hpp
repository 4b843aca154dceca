// Registration of the CPU backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cpu_reduce(Registry& r);    // cpu/reduce.cpp
void register_cpu_scatter(Registry& r);   // cpu/scatter.cpp (+ cpu/index_plan.cpp)

}  // namespace samebits::detail
