#include "gpumemshim/analyzer/load.h"

#include <fmt/format.h>

#include "gpumemshim/analyzer/errors.h"
#include "gpumemshim/format/decoder.h"

namespace gpumemshim::analyzer {

namespace fmtr = gpumemshim::format;
using fmtr::RecordType;

double LoadedTrace::duration_s() const {
  uint64_t end = clean_exit ? end_time_ns : replay.last_time_ns();
  if (clean_exit && replay.last_time_ns() > end) end = replay.last_time_ns();
  return static_cast<double>(end) / 1e9;
}

namespace {

[[noreturn]] void malformed(const std::string& path, const fmtr::RawRecord& raw) {
  throw_trace_error(path, fmt::format("malformed record at offset {} (type {}, length {})",
                                      raw.offset, static_cast<unsigned>(raw.type), raw.size));
}

template <typename Rec>
Rec decode_or_throw(const std::string& path, const fmtr::RawRecord& raw) {
  Rec rec;
  if (!fmtr::decode(raw, rec)) malformed(path, raw);
  return rec;
}

}  // namespace

LoadedTrace load_trace(const std::string& path) {
  LoadedTrace t;
  t.path = path;
  fmtr::MappedFile file;
  if (std::string err = file.open(path); !err.empty()) throw TraceError(err);  // has the path
  auto bytes = file.bytes();
  t.stats.file_bytes = bytes.size();
  fmtr::RecordReader reader(bytes);
  if (std::string err = reader.read_header(); !err.empty()) throw_trace_error(path, err);
  t.stats.version_major = reader.version().major;
  t.stats.version_minor = reader.version().minor;

  std::vector<uint64_t> frames;
  fmtr::RawRecord raw;
  for (;;) {
    fmtr::ReadStatus st = reader.next(raw);
    if (st == fmtr::ReadStatus::kEnd) break;
    if (st == fmtr::ReadStatus::kTruncated) {
      t.truncated = true;
      t.truncated_at = reader.offset();
      break;
    }
    if (st == fmtr::ReadStatus::kError) throw_trace_error(path, reader.error());
    ++t.stats.records;
    ++t.stats.by_type[static_cast<uint8_t>(raw.type)];
    switch (raw.type) {
      case RecordType::kAlloc: {
        auto r = decode_or_throw<fmtr::AllocRecord>(path, raw);
        auto api = static_cast<uint8_t>(r.api);
        if (api < fmtr::kApiCount) {
          ++t.stats.allocs_by_api[api];
          t.stats.bytes_by_api[api] += r.size;
        } else {
          ++t.stats.unknown_api;
        }
        t.replay.alloc(r);
        break;
      }
      case RecordType::kFree: {
        auto r = decode_or_throw<fmtr::FreeRecord>(path, raw);
        auto api = static_cast<uint8_t>(r.api);
        if (api < fmtr::kApiCount) ++t.stats.frees_by_api[api]; else ++t.stats.unknown_api;
        t.replay.free(r);
        break;
      }
      case RecordType::kAllocFailed: {
        auto r = decode_or_throw<fmtr::AllocFailedRecord>(path, raw);
        auto api = static_cast<uint8_t>(r.api);
        if (api < fmtr::kApiCount) ++t.stats.failed_by_api[api]; else ++t.stats.unknown_api;
        t.replay.failed(r);
        break;
      }
      case RecordType::kStack: {
        fmtr::StackRecord r;
        if (!fmtr::decode(raw, r, frames)) malformed(path, raw);
        // The same stack may be defined twice (by two threads): identical frames, keep the first.
        t.stacks.try_emplace(r.id, frames.begin(), frames.end());
        break;
      }
      case RecordType::kModule: {
        auto r = decode_or_throw<fmtr::ModuleRecord>(path, raw);
        t.modules.push_back(ModuleInfo{std::string(r.path), std::string(r.build_id), r.load_bias,
                                       r.start, r.size});
        break;
      }
      case RecordType::kProcess: {
        auto r = decode_or_throw<fmtr::ProcessRecord>(path, raw);
        t.process = ProcessInfo{r.pid, r.ppid, r.rank, r.start_wall_ns, r.start_mono_ns,
                                std::string(r.host), std::string(r.command_line),
                                std::string(r.executable), true};
        break;
      }
      case RecordType::kMemInfo:
        t.replay.meminfo(decode_or_throw<fmtr::MemInfoRecord>(path, raw));
        break;
      case RecordType::kMarker:
        t.replay.marker(decode_or_throw<fmtr::MarkerRecord>(path, raw));
        break;
      case RecordType::kDevice: {
        auto r = decode_or_throw<fmtr::DeviceRecord>(path, raw);
        bool known = false;
        for (auto& d : t.devices) {
          if (d.device == r.device) {
            d = DeviceInfo{r.device, r.total_bytes, std::string(r.name)};
            known = true;
          }
        }
        if (!known) t.devices.push_back(DeviceInfo{r.device, r.total_bytes, std::string(r.name)});
        break;
      }
      case RecordType::kAttribute: {
        auto r = decode_or_throw<fmtr::AttributeRecord>(path, raw);
        t.attributes.emplace_back(std::string(r.key), std::string(r.value));
        break;
      }
      case RecordType::kEnd: {
        auto r = decode_or_throw<fmtr::EndRecord>(path, raw);
        t.clean_exit = true;
        t.end_time_ns = r.time_ns;
        t.replay.seen_time(r.time_ns);
        break;
      }
      default:
        ++t.stats.unknown_records;  // a later minor version's record: skipped
        break;
    }
  }
  return t;
}

}  // namespace gpumemshim::analyzer
