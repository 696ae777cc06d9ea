#include "gpumemshim/format/trace_reader.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "block_stream.h"
#include "decoder.h"
#include "event_queue.h"
#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/varint.h"
#include "read_errors.h"
#include "stream_order.h"
#include "timed_decoder.h"

namespace gpumemshim::format {

// Format 3's records with text (metadata, markers), copied out of the decompressed blocks, whose
// pages are given back as they are read: the sink's string views stay valid while the reader lives.
class TextRecords {
 public:
  // A copy of the record at `rec` (head and payload: `size` bytes). Padded: decoders may read a
  // few bytes ahead.
  const uint8_t* keep(const uint8_t* rec, size_t size) {
    auto& copy = kept_.emplace_back(std::make_unique<uint8_t[]>(size + kPadding));
    std::memcpy(copy.get(), rec, size);
    std::memset(copy.get() + size, 0, kPadding);
    return copy.get();
  }

 private:
  static constexpr size_t kPadding = 16;
  std::vector<std::unique_ptr<uint8_t[]>> kept_;
};

struct TraceReader::Impl {
  std::string path;
  MappedFile file;
  Version version;
  TraceCounts counts;
  TraceIntegrity integrity;
  std::optional<BlockScan> blocks;  // format 3
  TextRecords text;
  std::optional<unsigned> read_threads;  // set_read_threads
};

namespace {

// The time and stream (thread) of a timed record: its payload's first fields.
struct TimeAndStream {
  uint64_t time;
  uint64_t stream;
};
TimeAndStream time_and_stream(const RawRecord& raw) {
  if (raw.fixed_layout && is_fixed_layout_type(raw.type)) {  // 2.x: at fixed offsets
    if (raw.size < kFixedTimeAndThreadSize) return {0, 0};   // malformed: decoding says so
    auto [time, thread] = fixed_time_and_thread(raw.payload);
    return {time, thread};
  }
  ByteReader r(raw.payload, raw.size, raw.readable_end);
  uint64_t time = r.varint();
  // memory samples carry no thread: a stream of their own per record type
  if (raw.type == RecordType::kMemInfo) return {time, UINT64_MAX};
  if (raw.type == RecordType::kProcessMemory) return {time, UINT64_MAX - 1};
  uint64_t stream = r.varint();
  return {time, stream};
}

bool is_timed(RecordType type) {
  switch (type) {
    case RecordType::kAlloc:
    case RecordType::kFree:
    case RecordType::kAllocFailed:
    case RecordType::kMemInfo:
    case RecordType::kMarker:
    case RecordType::kTorchEvent:
    case RecordType::kProcessMemory:
      return true;
    default:
      return false;
  }
}

// One read of the file into a sink. streaming: events are delivered while reading, through the
// bounded window of stream_order.h; run() returns false when the file is too far out of order for
// that or the sink asks for a buffered read. Otherwise every event is held to the end of the file.
class ReadPass {
 public:
  // stream: format 3's records, decompressed (bytes is then the stream's region); text: where
  // format 3's records with text are kept.
  ReadPass(const std::string& path, std::span<const uint8_t> bytes, Version version,
           TraceCounts& counts, TraceSink& sink, bool streaming, BlockStream* stream = nullptr,
           TextRecords* text = nullptr)
      : path_(path),
        bytes_(stream ? stream->region() : bytes),
        counts_(counts),
        sink_(sink),
        streaming_(streaming),
        stream_(stream),
        text_(text),
        reader_(bytes_),
        decode_(path, bytes_, has_fixed_layout(version)),
        deliver_(sink) {
    if (stream_)
      reader_.start_stream(bytes_.first(0), version);
    else
      reader_.read_header();  // checked when the file was opened
    if (has_exact_marks(version)) order_.exact_marks();
  }

  // Why run() gave up on streaming (when it returned false).
  const char* gave_up_because() const { return gave_up_because_; }

  bool run() {
    for (;;) {
      if (!in_order_) return false;
      keep_pace();
      // The bulk of a 2.x trace, hot records one after the other, framed and queued in a tight
      // loop (a few KiB at a time: keep_pace's checks keep theirs).
      reader_.next_hot(
          kHotRun, [this](RecordPtr rec) __attribute__((always_inline)) { return queue_hot(rec); });
      if (!in_order_) return false;
      RawRecord raw;
      ReadStatus st = reader_.next(raw);
      if (st == ReadStatus::kEnd) {
        if (stream_ && more()) continue;
        break;
      }
      if (st == ReadStatus::kTruncated) {
        counts_.truncated = true;
        counts_.truncated_at = reader_.offset();
        break;
      }
      if (st == ReadStatus::kError) fail(path_, reader_.error());
      ++counts_.records;
      ++counts_.by_type[static_cast<uint8_t>(raw.type)];
      if (!record(raw)) return false;
    }
    finish();
    return true;
  }

 private:
  static constexpr size_t kHotRun = 4 << 10;
  static constexpr uint64_t kReleaseEvery = 8ull << 20;
  static constexpr uint64_t kReadAhead = 16 << 10;
  static constexpr uint64_t kTouchEvery = 64 << 10, kTouchAhead = 256 << 10;
  static constexpr uint64_t kTellEvery = 1 << 20;

  // Delivers one queued event. Inline in the orders' emit loops: called per event, a call's
  // saved registers cost more than the hot records' decoding.
  struct Emit {
    ReadPass* pass;
    [[gnu::always_inline]] void operator()(RecordPtr rec) const {
      pass->decode_(rec, pass->deliver_);
    }
    // A straggler: replayed at `time`, the latest already replayed, so that the sink's clock
    // never goes back.
    void late(RecordPtr rec, uint64_t time) const {
      pass->decode_(rec, [this, time](const auto& r) {
        auto moved = r;
        moved.time_ns = time;
        pass->deliver_(moved);
      });
    }
  };

  [[gnu::always_inline]] void queue(uint64_t stream, uint64_t time, RecordPtr rec) {
    if (!streaming_) {
      held_.push(stream, time, rec);
    } else if (!order_.push(stream, time, rec, Emit{this})) [[unlikely]] {
      in_order_ = false;
      gave_up_because_ = "an event older than one already replayed, before any flush mark";
    }
  }

  [[gnu::always_inline]] bool queue_hot(RecordPtr rec) {
    __builtin_prefetch(std::min(rec + kReadAhead, bytes_.data() + bytes_.size() - 1));
    ++hot_by_type_[rec[0]];
    auto [time, thread] = fixed_time_and_thread(rec + 2);
    queue(thread, time, rec);
    return in_order_;
  }

  // Format 3: waits for the producer's next block; false at the end of the stream.
  bool more() {
    const uint64_t at = reader_.offset();
    const uint64_t ready = stream_->wait_beyond(at);
    if (ready <= at) return false;
    told_ = at;
    reader_.extend(ready);
    return true;
  }

  // Memory upkeep, once per hot run.
  void keep_pace() {
    const uint64_t at = reader_.offset();
    if (stream_ && at - told_ >= kTellEvery) {  // the producer may go that much further ahead
      told_ = at;
      stream_->consumed(at);
    }
    if (streaming_ && at - release_checked_ >= kReleaseEvery) {
      // Up to the oldest record still queued: the queue points into the file. Checked once per
      // kReleaseEvery bytes read, also when nothing could be released (the queue can hold events
      // from far back: a scan per record would make the read quadratic).
      release_checked_ = at;
      uint64_t upto = at;
      order_.for_each_queued([&](RecordPtr rec) {
        if (rec >= bytes_.data() && rec < bytes_.data() + bytes_.size())  // not a kept copy
          upto = std::min(upto, static_cast<uint64_t>(rec - bytes_.data()));
      });
      if (upto > released_) {
        released_ = upto;
        if (stream_) {
          stream_->release(released_);
        } else {
          static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
          release_read_pages(bytes_, released_, page);
        }
      }
    }
    // The hardware's prefetcher stops at each 4 KiB page of the mapping: reading ahead across
    // pages by hand keeps the sequential read from stalling on memory.
    __builtin_prefetch(bytes_.data() + std::min<uint64_t>(at + kReadAhead, bytes_.size() - 1));
    // A prefetch of a page not mapped yet does nothing, and the kernel maps a file 64 KiB per
    // fault: one byte read well ahead, once per 64 KiB, takes the fault there, so the prefetches
    // above find their pages mapped.
    if (at >= touched_ && !stream_) {  // the stream's pages are the producer's to fault in
      touched_ = at + kTouchEvery;
      if (touched_ + kTouchAhead < bytes_.size()) {
        volatile uint8_t sink = bytes_[touched_ + kTouchAhead];
        (void)sink;
      }
    }
  }

  // One record that next() framed; false: the read must restart buffered.
  bool record(const RawRecord& read) {
    const RawRecord raw = keep_text(read);
    if (is_timed(raw.type)) {
      if (raw.type == RecordType::kMarker) {  // its text is checked as it is read
        auto r = decode_or_throw<MarkerRecord>(path_, raw);
        check_text(path_, raw, {r.name});
      }
      TimeAndStream ts = time_and_stream(raw);
      queue(ts.stream, ts.time, raw.payload - (read.payload - (bytes_.data() + read.offset)));
      return true;
    }
    if (raw.type == RecordType::kFlush) {
      auto r = decode_or_throw<FlushRecord>(path_, raw);
      if (streaming_) order_.flush_mark(r.time_ns, Emit{this});
      return true;
    }
    if (raw.type == RecordType::kPyStack) {
      PyStackRecord r;
      if (!decode(raw, r, py_frames_)) malformed(path_, raw);
      if (sink_.py_stack(r) || !streaming_) return true;
      gave_up_because_ = "a Python stack defined after an event that used it";
      return false;
    }
    metadata(raw);
    return true;
  }

  // Format 3: a record with text fields is kept in memory of its own (TextRecords), the rest is
  // read where it is.
  RawRecord keep_text(const RawRecord& raw) {
    if (!text_) return raw;
    switch (raw.type) {
      case RecordType::kMarker:
      case RecordType::kProcess:
      case RecordType::kModule:
      case RecordType::kPyCode:
      case RecordType::kStackLabel:
      case RecordType::kDevice:
      case RecordType::kAttribute:
        break;
      default:
        return raw;
    }
    const uint8_t* rec = bytes_.data() + raw.offset;
    const size_t head = static_cast<size_t>(raw.payload - rec);
    RawRecord kept = raw;
    kept.payload = text_->keep(rec, head + raw.size) + head;
    kept.readable_end = nullptr;
    return kept;
  }

  void metadata(const RawRecord& raw) {
    switch (raw.type) {
      case RecordType::kStack: {
        StackRecord r;
        if (!decode(raw, r, frames_)) malformed(path_, raw);
        sink_.stack(r);
        break;
      }
      case RecordType::kPyCode:
        to_sink(raw, &TraceSink::py_code, &PyCodeRecord::filename, &PyCodeRecord::name);
        break;
      case RecordType::kModule:
        to_sink(raw, &TraceSink::module, &ModuleRecord::path);
        break;
      case RecordType::kProcess:
        to_sink(raw, &TraceSink::process, &ProcessRecord::host, &ProcessRecord::command_line,
                &ProcessRecord::executable);
        break;
      case RecordType::kStackLabel:
        to_sink(raw, &TraceSink::stack_label, &StackLabelRecord::label);
        break;
      case RecordType::kDevice:
        to_sink(raw, &TraceSink::device, &DeviceRecord::name);
        break;
      case RecordType::kAttribute:
        to_sink(raw, &TraceSink::attribute, &AttributeRecord::key, &AttributeRecord::value);
        break;
      case RecordType::kEnd:
        to_sink(raw, &TraceSink::end);
        break;
      default:
        ++counts_.unknown_records;
        break;  // a later minor version's record: skipped
    }
  }

  // Decodes a metadata record, checks its text fields and hands it to the sink.
  template <typename Rec, typename... Text>
  void to_sink(const RawRecord& raw, void (TraceSink::*take)(const Rec&), Text Rec::*... text) {
    auto r = decode_or_throw<Rec>(path_, raw);
    if constexpr (sizeof...(text) > 0) check_text(path_, raw, {r.*text...});
    (sink_.*take)(r);
  }

  // After the last record: what is still held goes out, while the file is mapped (the queues
  // point into it).
  void finish() {
    for (size_t type = 0; type < hot_by_type_.size(); ++type) {
      counts_.records += hot_by_type_[type];
      counts_.by_type[type] += hot_by_type_[type];
    }
    if (streaming_) {
      order_.finish(Emit{this});
      counts_.max_order_window = order_.max_buffered();  // finish's round counts too
      counts_.late_events = order_.late_events();
      counts_.max_lateness_ns = order_.max_lateness();
    } else {
      counts_.max_order_window = held_.size();
      held_.deliver(Emit{this});
    }
    deliver_.add_counts(counts_);
  }

  const std::string& path_;
  std::span<const uint8_t> bytes_;
  TraceCounts& counts_;
  TraceSink& sink_;
  const bool streaming_;
  BlockStream* const stream_;
  TextRecords* const text_;
  RecordReader reader_;
  TimedDecoder decode_;
  TimedDelivery deliver_;
  StreamingTimeOrder<RecordPtr> order_;
  EventQueue<RecordPtr> held_;
  bool in_order_ = true;
  const char* gave_up_because_ = "";
  std::vector<uint64_t> frames_;
  std::vector<PyFrameRef> py_frames_;
  uint64_t released_ = 0, release_checked_ = 0, touched_ = 0, told_ = 0;
  std::array<uint64_t, 32> hot_by_type_{};  // next_hot's records, added to the counts at the end
};

// Keeps every timed event (the exports, which want the whole history).
class EventCollector final : public TraceSink {
 public:
  std::vector<TimedEvent> all;
  void alloc(const AllocRecord& r) override { all.emplace_back(r); }
  void free(const FreeRecord& r) override { all.emplace_back(r); }
  void torch(const TorchEventRecord& r) override { all.emplace_back(r); }
  void failed(const AllocFailedRecord& r) override { all.emplace_back(r); }
  void meminfo(const MemInfoRecord& r) override { all.emplace_back(r); }
  void process_memory(const ProcessMemoryRecord& r) override { all.emplace_back(r); }
  void marker(const MarkerRecord& r) override { all.emplace_back(r); }
  void restart() override { all.clear(); }
};

}  // namespace

TraceReader::TraceReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  if (std::string err = impl_->file.open(path); !err.empty())
    throw TraceReadError(err);  // has the path
  RecordReader reader(impl_->file.bytes());
  if (std::string err = reader.read_header(); !err.empty()) fail(path, err);
  impl_->version = reader.version();
}

TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const std::string& TraceReader::path() const {
  return impl_->path;
}
Version TraceReader::version() const {
  return impl_->version;
}
void TraceReader::set_read_threads(unsigned n) {
  impl_->read_threads = n;
}
const TraceCounts& TraceReader::counts() const {
  return impl_->counts;
}
const TraceIntegrity& TraceReader::integrity() const {
  return impl_->integrity;
}

std::string integrity_name(const TraceIntegrity& t, Version v) {
  switch (t.status) {
    case IntegrityStatus::kComplete:
      return "complete";
    case IntegrityStatus::kUnchecked:
      return "unchecked (format " + std::to_string(v.major) + ")";
    case IntegrityStatus::kIncomplete:
      return "incomplete";
    case IntegrityStatus::kDamaged:
      return "damaged";
    case IntegrityStatus::kWriteFailed:
      return "write-failed";
  }
  return "unknown";
}

namespace {
// Formats 1 and 2 carry no checksums: all the reader can say is whether the trace was ended.
TraceIntegrity unchecked_integrity(const TraceCounts& c) {
  TraceIntegrity t;
  t.checked = false;
  t.ended = c.by_type[static_cast<uint8_t>(RecordType::kEnd)] > 0;
  t.truncated = c.truncated;
  if (t.ended) {
    t.status = IntegrityStatus::kUnchecked;
  } else {
    t.status = IntegrityStatus::kIncomplete;
    t.first_problem_offset = c.truncated ? c.truncated_at : c.file_bytes;
    t.detail =
        c.truncated
            ? "incomplete: the file ends inside a record (killed, crashed or still being written)"
            : "incomplete: no End record (killed, crashed or still being written)";
  }
  return t;
}

// 1234567 -> "1,234,567": the figures users read in a detail line.
std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return grouped(n) + " " + (n == 1 ? one : many);
}

// An errno's text; a number no errno can be (from a damaged header) says so instead.
std::string errno_text(uint32_t error) {
  constexpr uint32_t kLargestErrno = 4095;  // the kernel's MAX_ERRNO
  return error <= kLargestErrno ? std::strerror(static_cast<int>(error)) : "not an errno";
}

// The one line that says what is wrong with a format 3 trace, and where.
std::string integrity_detail(const TraceIntegrity& t, const BlockScan& scan,
                             const BlockResults& found, bool end_differs, bool header_disagrees) {
  std::vector<std::string> parts;
  if (found.damaged_blocks)
    parts.push_back(fmt::format("{} failed {} checksum or decompression (first at byte {})",
                                plural(found.damaged_blocks, "block", "blocks"),
                                found.damaged_blocks == 1 ? "its" : "their",
                                grouped(found.first_damaged_offset)));
  if (scan.out_of_sequence)
    parts.push_back(fmt::format("{} out of sequence (first at byte {})",
                                plural(scan.out_of_sequence, "block", "blocks"),
                                grouped(scan.out_of_sequence_offset)));
  if (scan.missing_blocks)
    parts.push_back(fmt::format("{} missing from the sequence (first gap before byte {})",
                                plural(scan.missing_blocks, "block", "blocks"),
                                grouped(scan.first_gap_offset)));
  if (scan.junk_bytes)
    parts.push_back(fmt::format("{} that are no block skipped (first at byte {})",
                                plural(scan.junk_bytes, "byte", "bytes"),
                                grouped(scan.first_junk_offset)));
  if (end_differs && found.end.has_counts)
    parts.push_back(fmt::format(
        "the End record counts {} and {} before it, {} and {} read",
        plural(found.end.blocks, "block", "blocks"), plural(found.end.records, "record", "records"),
        grouped(found.blocks_before_end), grouped(found.records_before_end)));
  else if (end_differs)
    parts.push_back("the End record has no counts");
  if (scan.truncated)
    parts.push_back(
        fmt::format("the file ends inside a block at byte {}", grouped(scan.truncated_at)));
  if (!t.ended) parts.push_back("no End record (killed, crashed or still being written)");
  if (t.records_lost)
    parts.push_back(fmt::format("{}{} lost", t.records_lost_exact ? "" : "at least ",
                                plural(t.records_lost, "record", "records")));
  std::string line = t.status == IntegrityStatus::kWriteFailed ? "write-failed: "
                     : t.status == IntegrityStatus::kDamaged   ? "damaged: "
                                                               : "incomplete: ";
  if (t.status == IntegrityStatus::kWriteFailed)
    parts.insert(parts.begin(),
                 t.write_error ? fmt::format("the shim could not write the trace ({}, errno {})",
                                             errno_text(t.write_error), t.write_error)
                               : std::string("the shim could not write the trace"));
  if (header_disagrees)
    parts.insert(parts.begin(),
                 fmt::format("the file header holds an errno ({}) without its write-failed flag",
                             scan.write_error));
  for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
  return line;
}

// Format 3: what the block headers (scan) and the checked blocks (found) say about the trace.
TraceIntegrity checked_integrity(const BlockScan& scan, const BlockResults& found,
                                 uint64_t file_bytes) {
  TraceIntegrity t;
  t.checked = true;
  t.ended = found.ended;
  // The shim writes the flag and the errno together: an errno without the flag is damage.
  const bool flagged = scan.flags & kHeaderWriteFailed;
  const bool header_disagrees = !flagged && scan.write_error != 0;
  t.write_error = flagged && scan.write_error
                      ? scan.write_error
                      : static_cast<uint32_t>(found.ended ? found.end.write_error : 0);
  t.blocks = found.good_blocks;
  t.damaged_blocks = found.damaged_blocks + scan.out_of_sequence;
  t.missing_blocks = scan.missing_blocks;
  t.skipped_bytes = scan.junk_bytes + scan.truncated_bytes + found.damaged_bytes;
  t.truncated = scan.truncated;
  t.records_lost = found.damaged_records;
  // End counts what was written before it: anything less read was lost on the way.
  const bool end_differs =
      found.ended && (!found.end.has_counts || found.end.blocks != found.blocks_before_end ||
                      found.end.records != found.records_before_end);
  if (found.ended && found.end.has_counts && found.end.records >= found.records_before_end) {
    t.records_lost = found.end.records - found.records_before_end;
    t.records_lost_exact = true;
  }
  t.first_problem_offset =
      std::min({found.first_damaged_offset, scan.first_gap_offset, scan.out_of_sequence_offset,
                scan.first_junk_offset, scan.truncated ? scan.truncated_at : UINT64_MAX,
                found.ended ? UINT64_MAX : file_bytes});
  const bool write_failed = flagged || t.write_error != 0;
  const bool damaged =
      t.damaged_blocks || t.missing_blocks || scan.junk_bytes || end_differs || header_disagrees;
  if (write_failed)
    t.status = IntegrityStatus::kWriteFailed;
  else if (damaged)
    t.status = IntegrityStatus::kDamaged;
  else if (t.truncated || !t.ended)
    t.status = IntegrityStatus::kIncomplete;
  else
    t.status = IntegrityStatus::kComplete;
  if (t.status == IntegrityStatus::kComplete)
    t.first_problem_offset = 0;
  else
    t.detail = integrity_detail(t, scan, found, end_differs, header_disagrees);
  return t;
}
// The stream's block work offered to the sink for the time of one pass (withdrawn before the
// stream goes, an error included).
class OfferedHelp {
 public:
  OfferedHelp(TraceSink& sink, BlockStream& stream) : sink_(stream.helped() ? &sink : nullptr) {
    if (sink_) sink_->read_help(&stream);
  }
  ~OfferedHelp() {
    if (sink_) sink_->read_help(nullptr);
  }
  OfferedHelp(const OfferedHelp&) = delete;
  OfferedHelp& operator=(const OfferedHelp&) = delete;

 private:
  TraceSink* sink_;
};
}  // namespace

void TraceReader::read(TraceSink& sink) {
  Impl& m = *impl_;
  if (has_blocks(m.version) && !m.blocks) m.blocks = scan_blocks(m.file.bytes());
  BlockResults found;
  const char* gave_up = "";
  auto pass = [&](bool streaming) {
    m.counts = TraceCounts{};
    m.counts.file_bytes = m.file.bytes().size();
    m.counts.version = m.version;
    if (!m.blocks) {
      ReadPass read(m.path, m.file.bytes(), m.version, m.counts, sink, streaming);
      if (read.run()) return true;
      gave_up = read.gave_up_because();
      return false;
    }
    BlockStream stream(*m.blocks, m.file.bytes(), m.version, m.read_threads,
                       sink.wants_read_help());
    const OfferedHelp offered(sink, stream);
    ReadPass read(m.path, m.file.bytes(), m.version, m.counts, sink, streaming, &stream, &m.text);
    if (!read.run()) {
      gave_up = read.gave_up_because();
      return false;
    }
    found = stream.finish();
    return true;
  };
  // GPUMEMSHIM_READ_BUFFERED=1 holds every event, as the fallback does: the reference that the
  // streamed read's findings are compared with.
  const char* forced = std::getenv("GPUMEMSHIM_READ_BUFFERED");
  if (forced && std::strcmp(forced, "1") == 0) {
    pass(false);
    m.counts.buffered_read = true;
    m.counts.buffered_because = "GPUMEMSHIM_READ_BUFFERED=1";
  } else if (!pass(true)) {
    sink.restart();
    pass(false);
    m.counts.buffered_read = true;
    m.counts.buffered_because = gave_up;
  }
  if (!m.blocks) {
    m.integrity = unchecked_integrity(m.counts);
    return;
  }
  m.counts.blocks = found.good_blocks;
  m.counts.raw_bytes = found.raw_bytes;
  m.counts.truncated = m.blocks->truncated;
  m.counts.truncated_at = m.blocks->truncated_at;
  m.integrity = checked_integrity(*m.blocks, found, m.counts.file_bytes);
}

std::vector<TimedEvent> TraceReader::timed_events() {
  EventCollector collector;
  read(collector);
  return std::move(collector.all);
}

}  // namespace gpumemshim::format
