#include "replay/trace_events.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpumemshim/analyzer/errors.h"
#include "replay/time_order.h"

namespace gpumemshim::analyzer {

namespace fmtr = gpumemshim::format;
using fmtr::RecordType;

uint64_t event_time_ns(const TimedEvent& e) {
  return std::visit([](const auto& r) { return r.time_ns; }, e);
}

namespace {

template <typename Rec>
void push(const std::string& path, const fmtr::RawRecord& raw, std::vector<TimedEvent>& out,
          bool& sorted, uint64_t& last) {
  Rec r;
  if (!fmtr::decode(raw, r))
    throw_trace_error(path, fmt::format("malformed record at offset {}", raw.offset));
  if (r.time_ns < last) sorted = false;
  last = std::max(last, r.time_ns);
  out.emplace_back(r);
}

}  // namespace

TraceEvents read_trace_events(const std::string& path) {
  TraceEvents t;
  if (std::string err = t.file.open(path); !err.empty()) throw TraceError(err);
  fmtr::RecordReader reader(t.file.bytes());
  if (std::string err = reader.read_header(); !err.empty()) throw_trace_error(path, err);
  bool sorted = true;
  uint64_t last = 0;
  fmtr::RawRecord raw;
  for (;;) {
    fmtr::ReadStatus st = reader.next(raw);
    if (st == fmtr::ReadStatus::kEnd || st == fmtr::ReadStatus::kTruncated) break;
    if (st == fmtr::ReadStatus::kError) throw_trace_error(path, reader.error());
    switch (raw.type) {
      case RecordType::kAlloc: push<fmtr::AllocRecord>(path, raw, t.events, sorted, last); break;
      case RecordType::kFree: push<fmtr::FreeRecord>(path, raw, t.events, sorted, last); break;
      case RecordType::kAllocFailed: push<fmtr::AllocFailedRecord>(path, raw, t.events, sorted, last); break;
      case RecordType::kMemInfo: push<fmtr::MemInfoRecord>(path, raw, t.events, sorted, last); break;
      case RecordType::kMarker: push<fmtr::MarkerRecord>(path, raw, t.events, sorted, last); break;
      case RecordType::kTorchEvent: push<fmtr::TorchEventRecord>(path, raw, t.events, sorted, last); break;
      default: break;
    }
  }
  // The shim writes per-thread buffers: across threads a free can come after the next allocation
  // of the same address in the file. load_trace sorts the same way.
  if (!sorted) {  // the order of a stable sort by time, by merging the threads' runs (time_order.h)
    std::vector<TimedEvent> ordered;
    ordered.reserve(t.events.size());
    auto thread = [&](size_t i) {
      return std::visit([](const auto& r) -> uint64_t {
        if constexpr (requires { r.thread_id; }) return r.thread_id;
        else return UINT64_MAX;  // memory-info samples carry no thread: one stream of their own
      }, t.events[i]);
    };
    for_each_in_time_order(
        t.events.size(), [&](size_t i) { return event_time_ns(t.events[i]); }, thread,
        [&](size_t i) { ordered.push_back(std::move(t.events[i])); });
    t.events = std::move(ordered);
  }
  return t;
}

}  // namespace gpumemshim::analyzer
