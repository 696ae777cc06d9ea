#include "gpumemshim/analyzer/load.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "gpumemshim/analyzer/errors.h"
#include "gpumemshim/analyzer/time_order.h"
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

// Timed events are replayed in time order. Each thread's records are in order in the file, but the
// shim writes per-thread buffers: across threads a free can come after the next allocation of the
// same address. So events are collected and, when out of order, replayed in the order of a stable
// sort by time, found by merging the threads' runs (time_order.h).
// TODO(scale): stream with a bounded window once the writer guarantees a flush interval.
using TimedEvent = std::variant<fmtr::AllocRecord, fmtr::FreeRecord, fmtr::AllocFailedRecord,
                                fmtr::MemInfoRecord, fmtr::MarkerRecord, fmtr::TorchEventRecord>;

class EventQueue {
 public:
  template <typename Rec>
  void push(const Rec& r) {
    if (r.time_ns < last_) sorted_ = false;
    last_ = std::max(last_, r.time_ns);
    events_.emplace_back(r);
  }
  void replay_into(Replay& replay, BackwardAttribution& backward) {
    auto time = [&](size_t i) { return std::visit([](const auto& r) { return r.time_ns; }, events_[i]); };
    auto thread = [&](size_t i) {
      return std::visit([](const auto& r) -> uint64_t {
        if constexpr (requires { r.thread_id; }) return r.thread_id;
        else return UINT64_MAX;  // memory-info samples carry no thread: one stream of their own
      }, events_[i]);
    };
    auto visit = [&](size_t i) {
      const TimedEvent& e = events_[i];
      switch (e.index()) {
        case 0: {
          fmtr::AllocRecord r = std::get<0>(e);
          r.stack_id = backward.attribute(r.thread_id, r.stack_id);
          replay.alloc(r);
          break;
        }
        case 1: replay.free(std::get<1>(e)); break;
        case 2: {
          fmtr::AllocFailedRecord r = std::get<2>(e);
          r.stack_id = backward.attribute(r.thread_id, r.stack_id);
          replay.failed(r);
          break;
        }
        case 3: replay.meminfo(std::get<3>(e)); break;
        case 4:
          backward.marker(std::get<4>(e));
          replay.marker(std::get<4>(e));
          break;
        case 5: {
          fmtr::TorchEventRecord r = std::get<5>(e);
          r.stack_id = backward.attribute(r.thread_id, r.stack_id);
          replay.torch(r);
          break;
        }
      }
    };
    if (sorted_) {
      for (size_t i = 0; i < events_.size(); ++i) visit(i);
    } else {
      for_each_in_time_order(events_.size(), time, thread, visit);
    }
    events_.clear();
  }

 private:
  std::vector<TimedEvent> events_;
  uint64_t last_ = 0;
  bool sorted_ = true;
};

template <typename Rec>
Rec decode_or_throw(const std::string& path, const fmtr::RawRecord& raw) {
  Rec rec;
  if (!fmtr::decode(raw, rec)) malformed(path, raw);
  return rec;
}

// Text fields (paths, names, command lines) are C strings where they come from: a NUL byte in one
// means the bytes were damaged (e.g. zeroed) even though the record still decodes.
void check_text(const std::string& path, const fmtr::RawRecord& raw,
                std::initializer_list<std::string_view> fields) {
  for (std::string_view f : fields)
    if (f.find('\0') != std::string_view::npos)
      throw_trace_error(path, fmt::format("malformed record at offset {} (type {}): NUL byte in a text field",
                                          raw.offset, static_cast<unsigned>(raw.type)));
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
  std::vector<fmtr::PyFrameRef> py_frames;
  EventQueue events;
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
        events.push(r);
        break;
      }
      case RecordType::kFree: {
        auto r = decode_or_throw<fmtr::FreeRecord>(path, raw);
        auto api = static_cast<uint8_t>(r.api);
        if (api < fmtr::kApiCount) ++t.stats.frees_by_api[api]; else ++t.stats.unknown_api;
        events.push(r);
        break;
      }
      case RecordType::kAllocFailed: {
        auto r = decode_or_throw<fmtr::AllocFailedRecord>(path, raw);
        auto api = static_cast<uint8_t>(r.api);
        if (api < fmtr::kApiCount) ++t.stats.failed_by_api[api]; else ++t.stats.unknown_api;
        events.push(r);
        break;
      }
      case RecordType::kStack: {
        fmtr::StackRecord r;
        if (!fmtr::decode(raw, r, frames)) malformed(path, raw);
        // The same stack may be defined twice (by two threads): identical frames, keep the first.
        t.stacks.try_emplace(r.id, frames.begin(), frames.end());
        break;
      }
      case RecordType::kPyStack: {
        fmtr::PyStackRecord r;
        if (!fmtr::decode(raw, r, py_frames)) malformed(path, raw);
        t.py_stacks.try_emplace(r.stack_id, py_frames.begin(), py_frames.end());
        break;
      }
      case RecordType::kPyCode: {
        auto r = decode_or_throw<fmtr::PyCodeRecord>(path, raw);
        check_text(path, raw, {r.filename, r.name});
        t.py_codes.try_emplace(r.code_id, PyCodeInfo{std::string(r.filename), std::string(r.name),
                                                     std::string(r.line_table), r.first_line,
                                                     r.python_minor});
        break;
      }
      case RecordType::kModule: {
        auto r = decode_or_throw<fmtr::ModuleRecord>(path, raw);
        check_text(path, raw, {r.path});
        t.modules.push_back(ModuleInfo{std::string(r.path), std::string(r.build_id), r.load_bias,
                                       r.start, r.size});
        break;
      }
      case RecordType::kProcess: {
        auto r = decode_or_throw<fmtr::ProcessRecord>(path, raw);
        check_text(path, raw, {r.host, r.command_line, r.executable});
        t.process = ProcessInfo{r.pid, r.ppid, r.rank, r.start_wall_ns, r.start_mono_ns,
                                std::string(r.host), std::string(r.command_line),
                                std::string(r.executable), true};
        break;
      }
      case RecordType::kTorchEvent:
        events.push(decode_or_throw<fmtr::TorchEventRecord>(path, raw));
        break;
      case RecordType::kMemInfo:
        events.push(decode_or_throw<fmtr::MemInfoRecord>(path, raw));
        break;
      case RecordType::kMarker: {
        auto r = decode_or_throw<fmtr::MarkerRecord>(path, raw);
        check_text(path, raw, {r.name});
        events.push(r);
        t.markers.add(r);
        break;
      }
      case RecordType::kDevice: {
        auto r = decode_or_throw<fmtr::DeviceRecord>(path, raw);
        check_text(path, raw, {r.name});
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
        check_text(path, raw, {r.key, r.value});
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
  BackwardAttribution backward(
      [&t](uint64_t stack_id) { return t.py_stacks.count(stack_id) != 0; }, t.attributed_stacks);
  events.replay_into(t.replay, backward);  // while the file is mapped: markers point into it
  return t;
}

}  // namespace gpumemshim::analyzer
