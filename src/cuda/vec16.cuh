// 16-byte loads and stores of float and double elements (float4 / double2), for kernels that move
// consecutive elements of one thread at once. The caller checks that the address is 16-byte
// aligned.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace samebits::detail {

template <class T> struct Vec16;
template <> struct Vec16<float> { using type = float4; };
template <> struct Vec16<double> { using type = double2; };
template <class T> inline constexpr int kPerVec16 = 16 / static_cast<int>(sizeof(T));

// Whether p may be read or written 16 bytes at a time.
__host__ __device__ inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// r[0..N) = p[0..N), N a multiple of kPerVec16<T>.
template <class T, int N> __device__ __forceinline__ void load16(const T* p, T (&r)[N]) {
  using V = typename Vec16<T>::type;
  constexpr int W = kPerVec16<T>;
  static_assert(N % W == 0, "whole 16-byte loads only");
#pragma unroll
  for (int q = 0; q < N / W; ++q) {
    const V v = reinterpret_cast<const V*>(p)[q];
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int w = 0; w < W; ++w)
      r[q * W + w] = e[w];
  }
}

// p[0..N) = r[0..N), N a multiple of kPerVec16<T>.
template <class T, int N> __device__ __forceinline__ void store16(T* p, const T (&r)[N]) {
  using V = typename Vec16<T>::type;
  constexpr int W = kPerVec16<T>;
  static_assert(N % W == 0, "whole 16-byte stores only");
#pragma unroll
  for (int q = 0; q < N / W; ++q) {
    V v;
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int w = 0; w < W; ++w)
      e[w] = r[q * W + w];
    reinterpret_cast<V*>(p)[q] = v;
  }
}

} // namespace samebits::detail
