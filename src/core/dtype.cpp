// Names and parsing of dtypes and devices.
#include "samebits/dtype.hpp"

#include "samebits/errors.hpp"

#include <charconv>
#include <string>

namespace samebits {

std::string_view to_string(DType t) {
  switch (t) {
  case DType::f32:
    return "float32";
  case DType::f64:
    return "float64";
  case DType::i32:
    return "int32";
  case DType::i64:
    return "int64";
  case DType::bf16:
    return "bfloat16";
  case DType::f16:
    return "float16";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  struct Name {
    std::string_view name;
    DType dtype;
  };
  static constexpr Name kNames[] = {
      {"float32", DType::f32}, {"f32", DType::f32},       {"float", DType::f32},
      {"float64", DType::f64}, {"f64", DType::f64},       {"double", DType::f64},
      {"int32", DType::i32},   {"i32", DType::i32},       {"int64", DType::i64},
      {"i64", DType::i64},     {"bfloat16", DType::bf16}, {"bf16", DType::bf16},
      {"float16", DType::f16}, {"f16", DType::f16},       {"half", DType::f16}};
  for (const auto& n : kNames)
    if (n.name == s)
      return n.dtype;
  throw InvalidArgument("unknown dtype '" + std::string(s) +
                        "': use float32, float64, bfloat16, float16, int32 or int64");
}

std::string_view to_string(DeviceType t) {
  return t == DeviceType::cpu ? "cpu" : "cuda";
}

std::string to_string(Device d) {
  return d.is_cpu() ? "cpu" : "cuda:" + std::to_string(d.index);
}

Device parse_device(std::string_view s) {
  if (s == "cpu")
    return Device::cpu();
  if (s == "cuda" || s == "gpu")
    return Device::cuda(0);
  if (s.starts_with("cuda:")) {
    int i = -1;
    auto r = std::from_chars(s.data() + 5, s.data() + s.size(), i);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size() && i >= 0)
      return Device::cuda(i);
  }
  throw InvalidArgument("unknown device '" + std::string(s) + "': use cpu, cuda or cuda:N");
}

} // namespace samebits
