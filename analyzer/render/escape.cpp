#include "render/escape.h"

#include <fmt/format.h>

namespace gpumemshim::analyzer {

namespace {

// The entities of the characters both HTML and XML reserve; null for any other character.
const char* markup_entity(unsigned char c) {
  switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    default: return nullptr;
  }
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    if (const char* entity = markup_entity(static_cast<unsigned char>(ch))) out += entity;
    else if (ch == '\'') out += "&#39;";
    else out += ch;
  }
  return out;
}

std::string xml_escape(const std::string& text) { return xml_escape(text, true); }

std::string xml_escape(const std::string& text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (const char* entity = markup_entity(c)) {
      out += entity;
      continue;
    }
    switch (c) {
      case '\'': out += "&apos;"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;  // a raw newline in an attribute is a space
      case '\t': out += "&#9;"; break;
      case '\r': out += "&#13;"; break;
      default:
        // Other control characters are not allowed anywhere in XML 1.0, not even as references.
        out += c < 0x20 ? '?' : static_cast<char>(c);
    }
  }
  return out;
}

std::string file_uri(const std::string& path) {
  std::string out = path.starts_with("/") ? "file://" : "";
  for (unsigned char c : path) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '/' || c == '-' || c == '_' || c == '.' || c == '~';
    out += plain ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
  }
  return out;
}

}  // namespace gpumemshim::analyzer
