// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cuda_segment(Registry& r);   // cuda/segment.cu
void register_cuda_indexing(Registry& r);  // cuda/indexing.cu
void register_cuda_scan(Registry& r);      // cuda/scan.cu
void register_cuda_histogram(Registry& r); // cuda/histogram.cu
void register_cuda_gemm(Registry& r);      // cuda/gemm.cu
void register_cuda_reduce(Registry& r);    // cuda/reduce.cu
void register_cuda_scatter(
    Registry& r); // cuda/scatter.cu (+ index_plan.cu, scatter_fixed_point.cu)
void register_cuda_scatter_half(Registry& r); // cuda/scatter_half.cu: bfloat16/float16 index_add

} // namespace samebits::detail
