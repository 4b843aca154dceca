// Registration of the CUDA backend's op families, one function per family file.
#pragma once

namespace samebits::detail {

class Registry;

}  // namespace samebits::detail
