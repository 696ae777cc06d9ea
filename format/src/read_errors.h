// How the reader rejects a file: one TraceReadError, "<path>: <reason>", with the offending
// record's offset where there is one.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

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
bool text_is_clean(std::initializer_list<std::string_view> fields);

// Whether the record decodes as the reader will decode it (payload and text fields): format 3
// checks a block's every record before any of them is delivered.
bool record_decodes(const RawRecord& raw, std::vector<uint64_t>& frames,
                    std::vector<PyFrameRef>& py_frames);

}  // namespace gpumemshim::format
