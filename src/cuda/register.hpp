// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;
void register_cuda_scatter(Registry& r);  // cuda/scatter.cu (+ cuda/index_plan.cu)

}  // namespace samebits::detail
