#include "read_errors.h"

#include <fmt/format.h>

namespace gpumemshim::format {

void fail(const std::string& path, const std::string& reason) {
  throw TraceReadError(path + ": " + reason);
}

void malformed(const std::string& path, const RawRecord& raw) {
  fail(path, fmt::format("malformed record at offset {} (type {}, length {})", raw.offset,
                         static_cast<unsigned>(raw.type), raw.size));
}

void check_text(const std::string& path, const RawRecord& raw,
                std::initializer_list<std::string_view> fields) {
  for (std::string_view f : fields)
    if (f.find('\0') != std::string_view::npos)
      fail(path, fmt::format("malformed record at offset {} (type {}): NUL byte in a text field",
                             raw.offset, static_cast<unsigned>(raw.type)));
}

}  // namespace gpumemshim::format
