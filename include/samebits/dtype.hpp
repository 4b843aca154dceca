// Element types and devices that samebits tensors can hold.
#pragma once
#include "samebits/half.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace samebits {

// bf16 and f16 are storage types: ops that take them compute in float32 (see each op's header).
// New dtypes go at the end: the enum value is part of content_hash.
enum class DType : std::uint8_t { f32, f64, i32, i64, bf16, f16 };

constexpr std::size_t size_of(DType t) {
  return (t == DType::f64 || t == DType::i64) ? 8 : (t == DType::bf16 || t == DType::f16) ? 2 : 4;
}
constexpr bool is_half(DType t) {
  return t == DType::bf16 || t == DType::f16;
}
constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || is_half(t);
}
constexpr bool is_integer(DType t) {
  return t == DType::i32 || t == DType::i64;
}
std::string_view to_string(DType t); // "float32", "bfloat16", "float16", ... as torch spells them
// Parses a dtype name: the torch names ("float32", "bfloat16", ...) or the short ones ("f32",
// "bf16", "f16", "half", "float", "double", "i32", ...); throws InvalidArgument otherwise.
DType parse_dtype(std::string_view s);

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <> constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <> constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <> constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <> constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <> constexpr DType dtype_of<f16>() {
  return DType::f16;
}

enum class DeviceType : std::uint8_t { cpu, cuda };
std::string_view to_string(DeviceType t);

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(Device a, Device b) {
    return a.type == b.type && (a.type == DeviceType::cpu || a.index == b.index);
  }
};
std::string to_string(Device d);
// Parses "cpu", "cuda" or "cuda:N"; throws InvalidArgument otherwise.
Device parse_device(std::string_view s);

// A CUDA stream, as an opaque handle (cudaStream_t); null is the default stream.
struct Stream {
  void* handle = nullptr;
};

} // namespace samebits
