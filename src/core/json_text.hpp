// JSON text of values that may hold bytes from users (paths, environment variables, names read
// from files): invalid UTF-8 is written as U+FFFD instead of throwing after the work is done.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace samebits::detail {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace samebits::detail
