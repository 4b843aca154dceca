// Element types and devices that samebits tensors can hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace samebits {

enum class DType : std::uint8_t { f32, f64, i32, i64 };

constexpr std::size_t size_of(DType t) {
  return (t == DType::f64 || t == DType::i64) ? 8 : 4;
}
constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64;
}
constexpr bool is_integer(DType t) {
  return t == DType::i32 || t == DType::i64;
}
std::string_view to_string(DType t);

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
