#include "replay/load.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string_view>
#include <span>

#include <sys/mman.h>
#include <unistd.h>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <variant>

#include <fmt/format.h>

#include "replay/batch_channel.h"
#include "gpumemshim/analyzer/errors.h"
#include "replay/stream_order.h"
#include "replay/time_order.h"
#include "gpumemshim/format/decoder.h"
#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/varint.h"

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

// Timed events are replayed in time order (ties: file order). Each thread's records are in order
// in the file, but the shim writes per-thread buffers: across threads a free can come after the
// next allocation of the same address. The first pass replays while reading through a bounded
// window of events put in time order by rounds (stream_order.h); only when the file is too far out
// of order for it does a second pass collect every event and replay them in the order of a stable
// sort by time, found by merging the threads' runs (time_order.h). Both queue a pointer to the
// record, not the decoded record: a record is decoded once, when it is replayed.
using RecordPtr = const uint8_t*;  // a timed record's first byte (its type) in the mapped file

// The time and stream (thread) of a timed record: its payload's first fields.
struct TimeAndStream {
  uint64_t time;
  uint64_t stream;
};
TimeAndStream time_and_stream(const fmtr::RawRecord& raw) {
  if (raw.fixed_layout && fmtr::is_fixed_layout_type(raw.type)) {  // 2.x: at fixed offsets
    if (raw.size < fmtr::kFixedTimeAndThreadSize) return {0, 0};  // malformed: decoding says so
    auto [time, thread] = fmtr::fixed_time_and_thread(raw.payload);
    return {time, thread};
  }
  fmtr::ByteReader r(raw.payload, raw.size, raw.readable_end);
  uint64_t time = r.varint();
  // memory-info samples carry no thread: one stream of their own
  uint64_t stream = raw.type == RecordType::kMemInfo ? UINT64_MAX : r.varint();
  return {time, stream};
}

// Every event kept until the end of the file (the fallback pass).
class EventQueue {
 public:
  void push(TimeAndStream ts, RecordPtr rec) {
    if (ts.time < last_) sorted_ = false;
    last_ = std::max(last_, ts.time);
    events_.push_back(Item{ts.time, ts.stream, rec});
  }
  size_t size() const { return events_.size(); }
  template <typename Visit>
  void replay_into(Visit&& visit) {
    if (sorted_) {
      for (const Item& e : events_) visit(e.rec);
    } else {
      for_each_in_time_order(
          events_.size(), [&](size_t i) { return events_[i].time; },
          [&](size_t i) { return events_[i].stream; }, [&](size_t i) { visit(events_[i].rec); });
    }
    events_.clear();
  }

 private:
  struct Item {
    uint64_t time;
    uint64_t stream;
    RecordPtr rec;
  };
  std::vector<Item> events_;
  uint64_t last_ = 0;
  bool sorted_ = true;
};

// The pages already read are dropped from the process (they stay in the page cache): resident
// memory is then the live state, not the file.
void release_read_pages(std::span<const uint8_t> bytes, uint64_t upto) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t end = upto / page * page;
  if (end > 0) madvise(const_cast<uint8_t*>(bytes.data()), end, MADV_DONTNEED);
}

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

namespace {

// A timed record, decoded. Reading, ordering and decoding are one side of the load, replaying the
// other: one thread calls both; a pipelined load hands batches of these from one to the other.
using TimedEvent = std::variant<fmtr::AllocRecord, fmtr::FreeRecord, fmtr::TorchEventRecord,
                                fmtr::AllocFailedRecord, fmtr::MemInfoRecord, fmtr::MarkerRecord>;

// Decodes the timed record at `rec` (its head was checked when it was read) and calls f(record).
class TimedDecoder {
 public:
  TimedDecoder(const std::string& path, std::span<const uint8_t> bytes, bool fixed_layout)
      : path_(path), bytes_(bytes), fixed_layout_(fixed_layout) {}

  // Inline where it is called: the hot records' path is a few loads; the rest (and its frame of
  // saved registers) is out of line.
  template <typename F>
  [[gnu::always_inline]] void operator()(RecordPtr rec, F&& f) const {
    if (fixed_layout_ && fixed(rec, f)) [[likely]]
      return;
    careful(rec, f);
  }

 private:
  template <typename F>
  [[gnu::noinline]] void careful(RecordPtr rec, F& f) const {
    fmtr::RawRecord raw = frame(rec);
    switch (raw.type) {
      case RecordType::kAlloc: f(decode_or_throw<fmtr::AllocRecord>(path_, raw)); break;
      case RecordType::kFree: f(decode_or_throw<fmtr::FreeRecord>(path_, raw)); break;
      case RecordType::kTorchEvent: f(decode_or_throw<fmtr::TorchEventRecord>(path_, raw)); break;
      case RecordType::kAllocFailed: f(decode_or_throw<fmtr::AllocFailedRecord>(path_, raw)); break;
      case RecordType::kMemInfo: f(decode_or_throw<fmtr::MemInfoRecord>(path_, raw)); break;
      case RecordType::kMarker: f(decode_or_throw<fmtr::MarkerRecord>(path_, raw)); break;  // text checked when read
      default: break;  // only timed records are queued
    }
  }

  // A hot record of a 2.x file whose length takes one byte (as the shim writes them) is decoded
  // here, inline; false for anything else, and for a malformed one (the careful path says why).
  template <typename F>
  [[gnu::always_inline]] bool fixed(RecordPtr rec, F& f) const {
    if (rec[1] >= 0x80) return false;
    switch (static_cast<RecordType>(*rec)) {
      case RecordType::kAlloc: return fixed_as<fmtr::AllocRecord>(rec, f);
      case RecordType::kFree: return fixed_as<fmtr::FreeRecord>(rec, f);
      case RecordType::kTorchEvent: return fixed_as<fmtr::TorchEventRecord>(rec, f);
      default: return false;
    }
  }
  template <typename Rec, typename F>
  [[gnu::always_inline]] static bool fixed_as(RecordPtr rec, F& f) {
    Rec r;
    if (!fmtr::decode_fixed(rec + 2, rec[1], r)) return false;
    f(r);
    return true;
  }

  fmtr::RawRecord frame(RecordPtr rec) const {
    fmtr::ByteReader r(rec + 1, static_cast<size_t>(bytes_.data() + bytes_.size() - rec - 1));
    fmtr::RawRecord raw;
    raw.type = static_cast<RecordType>(*rec);
    raw.size = r.varint();
    raw.payload = r.position();
    raw.offset = static_cast<uint64_t>(rec - bytes_.data());
    raw.readable_end = bytes_.data() + bytes_.size();
    raw.fixed_layout = fixed_layout_;
    return raw;
  }

  const std::string& path_;
  std::span<const uint8_t> bytes_;
  bool fixed_layout_;  // a 2.x file (RawRecord::fixed_layout)
};

// Replays decoded timed records in the order given, counting them in the trace's statistics.
class TimedReplay {
 public:
  TimedReplay(LoadedTrace& t, BackwardAttribution& backward) : t_(t), backward_(backward) {}

  void operator()(fmtr::AllocRecord r) {
    ++allocs_[static_cast<uint8_t>(r.api)];
    bytes_[static_cast<uint8_t>(r.api)] += r.size;
    r.stack_id = backward_.attribute(r.thread_id, r.stack_id);
    t_.replay.alloc(r);
  }
  void operator()(const fmtr::FreeRecord& r) {
    ++frees_[static_cast<uint8_t>(r.api)];
    t_.replay.free(r);
  }
  void operator()(fmtr::TorchEventRecord r) {
    r.stack_id = backward_.attribute(r.thread_id, r.stack_id);
    t_.replay.torch(r);
  }
  void operator()(fmtr::AllocFailedRecord r) {
    ++failed_[static_cast<uint8_t>(r.api)];
    r.stack_id = backward_.attribute(r.thread_id, r.stack_id);
    t_.replay.failed(r);
  }
  void operator()(const fmtr::MemInfoRecord& r) { t_.replay.meminfo(r); }
  void operator()(const fmtr::MarkerRecord& r) {
    backward_.marker(r);
    t_.replay.marker(r);
  }

  // After the last record: the counts by API into the trace's statistics (an API out of range
  // counted as unknown, its bytes not).
  void add_counts() const {
    TraceStats& s = t_.stats;
    for (size_t i = 0; i < allocs_.size(); ++i) {
      if (i < fmtr::kApiCount) {
        s.allocs_by_api[i] += allocs_[i];
        s.frees_by_api[i] += frees_[i];
        s.failed_by_api[i] += failed_[i];
        s.bytes_by_api[i] += bytes_[i];
      } else {
        s.unknown_api += allocs_[i] + frees_[i] + failed_[i];
      }
    }
  }

 private:
  // By the API's byte, every value (no range check per record): added up by add_counts().
  std::array<uint64_t, 256> allocs_{}, frees_{}, failed_{}, bytes_{};
  LoadedTrace& t_;
  BackwardAttribution& backward_;
};

// The replay side of a load on a second thread: the reader decodes each record it puts in time
// order into a batch and hands full batches over; the replay takes them in order. For one big
// trace on a machine with a core to spare (analyze(): cores >= 2 x traces at once).
class ReplayThread {
 public:
  explicit ReplayThread(TimedReplay& replay) : thread_([this, &replay] { run(replay); }) {
    batch_.reserve(kBatch);
  }
  ~ReplayThread() {  // an early return or an error: the rest is abandoned
    if (thread_.joinable()) {
      channel_.abort();
      thread_.join();
    }
  }
  ReplayThread(const ReplayThread&) = delete;
  ReplayThread& operator=(const ReplayThread&) = delete;

  // A decoded timed record, next in time order.
  template <typename Record>
  void operator()(Record&& r) {
    batch_.emplace_back(std::forward<Record>(r));
    if (batch_.size() == kBatch) hand_off();
  }

  // Every record was handed in: waits until they are replayed; rethrows the replay's error.
  void finish() {
    hand_off();
    channel_.close();
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static constexpr size_t kBatch = 4096;  // 288 KiB of decoded records
  static constexpr size_t kDepth = 4;     // batches waiting at most

  void hand_off() {
    if (batch_.empty()) return;
    channel_.push(std::move(batch_));  // false: the replay failed; finish() says why
    batch_ = channel_.spare();
    batch_.reserve(kBatch);
  }
  void run(TimedReplay& replay) {
    try {
      while (std::optional<std::vector<TimedEvent>> b = channel_.pop()) {
        for (TimedEvent& e : *b) std::visit(replay, e);
        channel_.recycle(std::move(*b));
      }
    } catch (...) {
      error_ = std::current_exception();
      channel_.abort();
    }
  }

  BatchChannel<TimedEvent> channel_{kDepth};
  std::vector<TimedEvent> batch_;
  std::exception_ptr error_;  // the replay's, read after join
  std::thread thread_;        // last: starts once the rest is there
};

bool is_timed(RecordType type) {
  switch (type) {
    case RecordType::kAlloc:
    case RecordType::kFree:
    case RecordType::kAllocFailed:
    case RecordType::kMemInfo:
    case RecordType::kMarker:
    case RecordType::kTorchEvent: return true;
    default: return false;
  }
}

// One read of the file into `t`. streaming: replay while reading; returns false when the file is
// too far out of time order for that (then nothing in `t` is usable). replay_thread (streaming
// only): the replay runs on a second thread.
bool load_pass(const std::string& path, LoadedTrace& t, bool streaming,
               const std::vector<uint32_t>& site_groups, bool replay_thread) {
  t.path = path;
  if (!site_groups.empty()) t.replay.set_site_groups(site_groups);
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
  // Stacks found without Python frames while replaying: a PyStack record for one of them later in
  // the file would have changed an attribution, so that file needs the buffered pass.
  std::unordered_set<uint64_t> no_python_yet;
  std::mutex py_mutex;  // py_stacks and no_python_yet, when the replay has its own thread
  BackwardAttribution backward(
      [&t, &no_python_yet, &py_mutex, streaming](uint64_t stack_id) {
        std::lock_guard lock(py_mutex);
        if (t.py_stacks.count(stack_id) != 0) return true;
        if (streaming) no_python_yet.insert(stack_id);
        return false;
      },
      t.attributed_stacks);
  TimedDecoder decode(path, bytes, fmtr::has_fixed_layout(reader.version()));
  TimedReplay replay(t, backward);
  // Declared after everything its thread uses. Decoded markers point into the mapped file; pages
  // released below while the worker is behind are read again from the file, not lost.
  std::optional<ReplayThread> worker;
  if (streaming && replay_thread) worker.emplace(replay);
  // Inline in the order's emit loop (called per event, a call's saved registers cost more than
  // the hot records' decoding).
  auto replay_one = [&](RecordPtr rec) __attribute__((always_inline)) {
    if (worker) decode(rec, *worker);
    else decode(rec, replay);
  };
  uint64_t end_seen = 0;  // the latest End record's time, for the replay once it is done
  EventQueue events;
  StreamingTimeOrder<RecordPtr> order;
  bool in_order = true;
  uint64_t released = 0, release_checked = 0;
  constexpr uint64_t kReleaseEvery = 32ull << 20;
  constexpr uint64_t kReadAhead = 16 << 10;
  constexpr uint64_t kTouchEvery = 64 << 10, kTouchAhead = 256 << 10;
  uint64_t touched = 0;
  // next_hot's records: counted here, added to the statistics at the end.
  std::array<uint64_t, 32> hot_by_type{};
  constexpr size_t kHotRun = 4 << 10;
  const uint8_t* const read_ahead_end = bytes.data() + bytes.size() - 1;
  auto queue_hot = [&](RecordPtr rec) __attribute__((always_inline)) {
    __builtin_prefetch(std::min(rec + kReadAhead, read_ahead_end));
    ++hot_by_type[rec[0]];
    auto [time, thread] = fmtr::fixed_time_and_thread(rec + 2);
    if (!streaming) events.push({time, thread}, rec);
    else in_order = order.push(thread, time, rec, replay_one);
    return in_order;
  };
  fmtr::RawRecord raw;
  for (;;) {
    if (!in_order) return false;
    if (streaming && reader.offset() - release_checked >= kReleaseEvery) {
      // Up to the oldest record still queued: the queue points into the file. Checked once per
      // kReleaseEvery bytes read, also when nothing could be released (the queue can hold events
      // from far back: a scan per record would make the read quadratic).
      release_checked = reader.offset();
      uint64_t upto = reader.offset();
      order.for_each_queued([&](RecordPtr rec) { upto = std::min(upto, static_cast<uint64_t>(rec - bytes.data())); });
      if (upto > released) {
        released = upto;
        release_read_pages(bytes, released);
      }
    }
    // The hardware's prefetcher stops at each 4 KiB page of the mapping: reading ahead across
    // pages by hand keeps the sequential read from stalling on memory (~10 % of a load).
    __builtin_prefetch(bytes.data() + std::min<uint64_t>(reader.offset() + kReadAhead, bytes.size() - 1));
    // A prefetch of a page not mapped yet does nothing, and the kernel maps a file 64 KiB per
    // fault: one byte read well ahead, once per 64 KiB, takes the fault there, so the prefetches
    // above find their pages mapped (50 M trace: 3.25 -> 3.10 s).
    if (reader.offset() >= touched) {
      touched = reader.offset() + kTouchEvery;
      if (touched + kTouchAhead < bytes.size()) {
        volatile uint8_t sink = bytes[touched + kTouchAhead];
        (void)sink;
      }
    }
    // The bulk of a 2.x trace, hot records one after the other, framed and queued in a tight loop
    // (a few KiB at a time: the checks above keep their pace).
    reader.next_hot(kHotRun, queue_hot);
    if (!in_order) return false;
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
    if (is_timed(raw.type)) {
      if (raw.type == RecordType::kMarker) {  // markers are also kept in file order
        auto r = decode_or_throw<fmtr::MarkerRecord>(path, raw);
        check_text(path, raw, {r.name});
        t.markers.add(r);
      }
      TimeAndStream ts = time_and_stream(raw);
      RecordPtr rec = bytes.data() + raw.offset;
      if (!streaming) events.push(ts, rec);
      else in_order = order.push(ts.stream, ts.time, rec, replay_one);
      continue;
    }
    switch (raw.type) {
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
        std::lock_guard lock(py_mutex);
        t.py_stacks.try_emplace(r.stack_id, py_frames.begin(), py_frames.end());
        if (no_python_yet.count(r.stack_id) != 0) return false;
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
      case RecordType::kStackLabel: {
        auto r = decode_or_throw<fmtr::StackLabelRecord>(path, raw);
        check_text(path, raw, {r.label});
        t.stack_labels.try_emplace(r.stack_id, r.label);
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
      case RecordType::kFlush: {
        auto r = decode_or_throw<fmtr::FlushRecord>(path, raw);
        if (streaming) order.flush_mark(r.time_ns, replay_one);
        break;
      }
      case RecordType::kEnd: {
        auto r = decode_or_throw<fmtr::EndRecord>(path, raw);
        t.clean_exit = true;
        t.end_time_ns = r.time_ns;
        end_seen = std::max(end_seen, r.time_ns);
        break;
      }
      default:
        ++t.stats.unknown_records;  // a later minor version's record: skipped
        break;
    }
  }
  for (size_t type = 0; type < hot_by_type.size(); ++type) {
    t.stats.records += hot_by_type[type];
    t.stats.by_type[type] += hot_by_type[type];
  }
  // While the file is mapped: the queues point into it.
  if (streaming) {
    if (!in_order) return false;
    order.finish(replay_one);
    if (worker) worker->finish();
    t.stats.max_order_window = order.max_buffered();  // finish's round counts too
  } else {
    t.stats.max_order_window = events.size();
    events.replay_into(replay_one);
  }
  t.replay.seen_time(end_seen);  // not while the worker may still be replaying
  t.replay.finish();
  replay.add_counts();
  return true;
}

}  // namespace

LoadedTrace load_trace(const std::string& path, const std::vector<uint32_t>& site_groups,
                       bool replay_thread) {
  LoadedTrace t;  // one object, returned in place (NRVO)
  if (load_pass(path, t, true, site_groups, replay_thread)) return t;
  t = LoadedTrace{};
  load_pass(path, t, false, site_groups, false);
  return t;
}

}  // namespace gpumemshim::analyzer
