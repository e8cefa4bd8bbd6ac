// Text for SVG and HTML: the five characters XML reserves, escaped. Shared by every writer in
// src/report/ that emits markup.
#pragma once

#include <string>

namespace trident {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c == '\'') out += "&#39;";
    else out += c;
  }
  return out;
}

}  // namespace trident
