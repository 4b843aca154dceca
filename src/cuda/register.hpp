// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cuda_gemm(Registry& r);  // cuda/gemm.cu

}  // namespace samebits::detail
