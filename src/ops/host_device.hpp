// SAMEBITS_HD marks the helpers that the CPU and the CUDA code share: host and device functions
// under nvcc, plain functions elsewhere.
#pragma once

#if defined(__CUDACC__)
#define SAMEBITS_HD __host__ __device__
#else
#define SAMEBITS_HD
#endif
