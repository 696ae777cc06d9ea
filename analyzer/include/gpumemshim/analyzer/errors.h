// The one error type of the analyzer: a trace that cannot be used. what() is one line,
// "<file>: <reason>", ready for "gpumemshim: error: " in front.
#pragma once
#include <stdexcept>
#include <string>

namespace gpumemshim::analyzer {

class TraceError : public std::runtime_error {
 public:
  explicit TraceError(const std::string& message) : std::runtime_error(message) {}
};

// "<file>: <reason>"
[[noreturn]] void throw_trace_error(const std::string& file, const std::string& reason);

}  // namespace gpumemshim::analyzer
