// Text read from a file or the environment, made safe to quote in an error message: a malformed
// file may hold binary bytes and lines of any length, which must not reach the user's terminal.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include <cstddef>
#include <fmt/format.h>
#include <string>
#include <string_view>

namespace samebits::detail {

// At most `max_bytes` bytes of `text`, printable ASCII as is and every other byte escaped
// (\t, \r, \n, \\ and \xNN); a longer text ends in "... (N bytes)".
inline std::string printable_excerpt(std::string_view text, std::size_t max_bytes = 48) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\\')
      out += "\\\\";
    else if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (text.size() > max_bytes)
    out += fmt::format("... ({} bytes)", text.size());
  return out;
}

// `text` for HTML or SVG text and double-quoted attributes: <, >, & and " as entities.
inline std::string xml_escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

} // namespace samebits::detail
