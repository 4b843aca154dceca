// Device building blocks of samebits' canonical summation order (include/samebits/ops/reduce.hpp;
// host twin: src/cpu/canonical_sum.hpp): one 4096-element chunk summed by one warp.
//
// The order is defined on 256 lanes; lane l adds elements l, l+256, ..., l+3840 of its chunk.
// A warp holds the 256 lanes in registers so that each thread issues 16-byte loads:
//   kVec  = 16 / sizeof(T)        consecutive lanes per 16-byte load (4 floats, 2 doubles)
//   kSlots = 256 / (32 * kVec)    16-byte groups per thread per row (2 for float, 4 for double)
//   thread t, slot r, element k   holds lane kVec * (t + 32 r) + k
// A row j of the chunk (elements 256 j .. 256 j + 255) is then 32 * kSlots coalesced 16-byte
// loads, and the halving tree maps onto slots (s >= 32 kVec), shuffles (kVec <= s < 32 kVec) and
// the elements of one load (s < kVec). StridedLanes holds the same 256 lanes as lane t + 32 q for
// element loads. A mapping decides only where lanes live, never the order of any addition, so
// the bits are those of the CPU.
#pragma once
#include "cuda/vec16.cuh"

#include <cstdint>
#include <cuda_runtime.h>

namespace samebits::detail::canonical {

inline constexpr int kLanes = 256;
inline constexpr int kSteps = 16;
inline constexpr std::int64_t kChunk = kLanes * kSteps; // 4096 elements

template <class T> inline constexpr int kVec = kPerVec16<T>;
template <class T> inline constexpr int kSlots = kLanes / (32 * kVec<T>);

// The lane registers of one thread: acc[r][k] is lane kVec * (thread + 32 r) + k.
template <class T> struct Lanes {
  T acc[kSlots<T>][kVec<T>];

  __device__ void init() {
#pragma unroll
    for (int r = 0; r < kSlots<T>; ++r)
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k)
        acc[r][k] = T(-0.0);
  }
  // Adds one 16-byte group (kVec consecutive elements) into slot r.
  __device__ void add(int r, float4 v) {
    acc[r][0] = acc[r][0] + v.x;
    acc[r][1] = acc[r][1] + v.y;
    acc[r][2] = acc[r][2] + v.z;
    acc[r][3] = acc[r][3] + v.w;
  }
  __device__ void add(int r, double2 v) {
    acc[r][0] = acc[r][0] + v.x;
    acc[r][1] = acc[r][1] + v.y;
  }
  // Adds the rounded products of two groups (no fused multiply-add, as on the CPU).
  __device__ void add_products(int r, float4 a, float4 b) {
    acc[r][0] = acc[r][0] + __fmul_rn(a.x, b.x);
    acc[r][1] = acc[r][1] + __fmul_rn(a.y, b.y);
    acc[r][2] = acc[r][2] + __fmul_rn(a.z, b.z);
    acc[r][3] = acc[r][3] + __fmul_rn(a.w, b.w);
  }
  __device__ void add_products(int r, double2 a, double2 b) {
    acc[r][0] = acc[r][0] + __dmul_rn(a.x, b.x);
    acc[r][1] = acc[r][1] + __dmul_rn(a.y, b.y);
  }

  // The halving tree over the 256 lanes; the chunk's sum ends in lane 0 of the warp. Every
  // thread of the warp must call it (shuffles). Each step is lane[l] = lane[l] + lane[l + s].
  __device__ T tree() {
#pragma unroll
    for (int sr = kSlots<T> / 2; sr >= 1; sr /= 2) // s = 32 kVec sr: lanes in another slot
#pragma unroll
      for (int r = 0; r < sr; ++r)
#pragma unroll
        for (int k = 0; k < kVec<T>; ++k)
          acc[r][k] = acc[r][k] + acc[r + sr][k];
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) // s = kVec off: lanes in another thread
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k)
        acc[0][k] = acc[0][k] + __shfl_down_sync(0xffffffffu, acc[0][k], off);
#pragma unroll
    for (int s = kVec<T> / 2; s >= 1; s /= 2) // s < kVec: lanes of the same 16-byte group
#pragma unroll
      for (int k = 0; k < s; ++k)
        acc[0][k] = acc[0][k] + acc[0][k + s];
    return acc[0][0];
  }
};

// The element-load layout, for chunks that are partial, unaligned or strided: thread t holds
// lanes t + 32 q (q < 8), so that the 32 loads of one instruction are neighbouring elements.
template <class T> struct StridedLanes {
  static constexpr int kPerThread = kLanes / 32;
  T acc[kPerThread];

  __device__ void init() {
#pragma unroll
    for (int q = 0; q < kPerThread; ++q)
      acc[q] = T(-0.0);
  }
  // The same halving tree as Lanes::tree; the sum ends in lane 0 of the warp.
  __device__ T tree() {
#pragma unroll
    for (int sq = kPerThread / 2; sq >= 1; sq /= 2) // s = 32 sq: lanes of this thread
#pragma unroll
      for (int q = 0; q < sq; ++q)
        acc[q] = acc[q] + acc[q + sq];
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) // s = off: lanes of other threads
      acc[0] = acc[0] + __shfl_down_sync(0xffffffffu, acc[0], off);
    return acc[0];
  }
};

} // namespace samebits::detail::canonical
