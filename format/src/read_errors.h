// How the reader rejects a file: one TraceReadError, "<path>: <reason>", with the offending
// record's offset where there is one.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>

#include "decoder.h"
#include "gpumemshim/format/trace_reader.h"

namespace gpumemshim::format {

[[noreturn]] void fail(const std::string& path, const std::string& reason);
[[noreturn]] void malformed(const std::string& path, const RawRecord& raw);

template <typename Rec>
Rec decode_or_throw(const std::string& path, const RawRecord& raw) {
  Rec rec;
  if (!decode(raw, rec)) malformed(path, raw);
  return rec;
}

// Text fields (paths, names, command lines) are C strings where they come from: a NUL byte in one
// means the bytes were damaged (e.g. zeroed) even though the record still decodes.
void check_text(const std::string& path, const RawRecord& raw,
                std::initializer_list<std::string_view> fields);

}  // namespace gpumemshim::format
