// Text from a trace (file names, functions, command lines, marker names) is untrusted: every
// writer of a markup format passes it through one of these.
#pragma once
#include <string>
#include <string_view>

namespace gpumemshim::analyzer {

// Text made safe for HTML element content and quoted attribute values.
std::string html_escape(std::string_view text);

// Text made safe for XML 1.0: an attribute value (newlines kept as &#10;) or character data.
std::string xml_escape(const std::string& text);
std::string xml_escape(const std::string& text, bool attribute);

// A file path as a SARIF artifact URI: absolute paths become file:// URIs, relative ones stay
// relative (percent-encoded either way).
std::string file_uri(const std::string& path);

}  // namespace gpumemshim::analyzer
