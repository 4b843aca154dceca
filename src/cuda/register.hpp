// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cuda_reduce(Registry& r);  // cuda/reduce.cu

}  // namespace samebits::detail
