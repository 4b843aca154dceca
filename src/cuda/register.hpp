// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cuda_segment(Registry& r);   // cuda/segment.cu
void register_cuda_indexing(Registry& r);  // cuda/indexing.cu

}  // namespace samebits::detail
