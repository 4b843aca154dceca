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
  }
  return "?";
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
