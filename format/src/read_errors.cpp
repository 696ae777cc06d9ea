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

bool text_is_clean(std::initializer_list<std::string_view> fields) {
  for (std::string_view f : fields)
    if (f.find('\0') != std::string_view::npos) return false;
  return true;
}

void check_text(const std::string& path, const RawRecord& raw,
                std::initializer_list<std::string_view> fields) {
  if (!text_is_clean(fields))
    fail(path, fmt::format("malformed record at offset {} (type {}): NUL byte in a text field",
                           raw.offset, static_cast<unsigned>(raw.type)));
}

namespace {
template <typename Rec, typename... Text>
bool decodes(const RawRecord& raw, Text Rec::*... text) {
  Rec r;
  if (!decode(raw, r)) return false;
  if constexpr (sizeof...(text) > 0) return text_is_clean({r.*text...});
  return true;
}
}  // namespace

bool record_decodes(const RawRecord& raw, std::vector<uint64_t>& frames,
                    std::vector<PyFrameRef>& py_frames) {
  switch (raw.type) {
    case RecordType::kAlloc: return decodes<AllocRecord>(raw);
    case RecordType::kFree: return decodes<FreeRecord>(raw);
    case RecordType::kTorchEvent: return decodes<TorchEventRecord>(raw);
    case RecordType::kAllocFailed: return decodes<AllocFailedRecord>(raw);
    case RecordType::kMemInfo: return decodes<MemInfoRecord>(raw);
    case RecordType::kProcessMemory:
      return decodes<ProcessMemoryRecord>(raw);
    case RecordType::kMarker: return decodes(raw, &MarkerRecord::name);
    case RecordType::kFlush: return decodes<FlushRecord>(raw);
    case RecordType::kEnd: return decodes<EndRecord>(raw);
    case RecordType::kStack: {
      StackRecord r;
      return decode(raw, r, frames);
    }
    case RecordType::kPyStack: {
      PyStackRecord r;
      return decode(raw, r, py_frames);
    }
    case RecordType::kPyCode: return decodes(raw, &PyCodeRecord::filename, &PyCodeRecord::name);
    case RecordType::kModule: return decodes(raw, &ModuleRecord::path);
    case RecordType::kProcess:
      return decodes(raw, &ProcessRecord::host, &ProcessRecord::command_line,
                     &ProcessRecord::executable);
    case RecordType::kStackLabel: return decodes(raw, &StackLabelRecord::label);
    case RecordType::kDevice: return decodes(raw, &DeviceRecord::name);
    case RecordType::kAttribute: return decodes(raw, &AttributeRecord::key, &AttributeRecord::value);
    default: return true;  // a later minor version's record: skipped
  }
}

}  // namespace gpumemshim::format
