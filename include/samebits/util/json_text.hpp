// JSON text of values that may hold bytes from users (paths, environment variables, names read
// from files): invalid UTF-8 is written as U+FFFD instead of throwing after the work is done.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include <string>

namespace samebits::detail {

// Json is nlohmann::json: a template, so that this header needs no JSON library of its own.
template <class Json> std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

} // namespace samebits::detail
