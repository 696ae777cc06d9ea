// The one reader of trace files. It maps a trace, checks its header and every record's framing and
// text, and delivers the decoded records to a TraceSink: the metadata records (process, devices,
// modules, stacks, Python code and stacks, stack labels, attributes, End) in file order as they
// are read, and the timed events (Alloc, Free, AllocFailed, MemInfo, Marker, TorchEvent,
// ProcessMemory) in time order, ties in file order (the order of a stable sort by time). Flush
// records are the reader's own (they bound the time order); records of types it does not know are
// counted and skipped.
//
// Each thread's records are in time order in the file, but the shim writes per-thread buffers:
// across threads a free can come after the next allocation of the same address. A read first
// streams: it holds only the events that a later record could still precede (the flush marks bound
// that window). When the file is too far out of order for that, or the sink asks for it, the sink
// is told to forget what it got (restart) and the file is read again holding every event to the
// end. Either way the sink sees the same records in the same order.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "gpumemshim/format/records.h"

namespace gpumemshim::format {

// A file that is not a usable trace. what() is one line: "<path>: <reason>".
class TraceReadError : public std::runtime_error {
 public:
  explicit TraceReadError(const std::string& message) : std::runtime_error(message) {}
};

// A timed record, decoded (TraceReader::timed_events).
using TimedEvent = std::variant<AllocRecord, FreeRecord, TorchEventRecord, AllocFailedRecord,
                                MemInfoRecord, MarkerRecord, ProcessMemoryRecord>;

// What a read counted. Final once read() returns; a restarted read counts again from zero.
struct TraceCounts {
  uint64_t file_bytes = 0;
  Version version;
  uint64_t records = 0;                 // whole records read
  std::array<uint64_t, 256> by_type{};  // by RecordType value, unknown types included
  uint64_t unknown_records = 0;         // of types this reader does not know (a later minor's)
  std::array<uint64_t, kApiCount> allocs_by_api{};
  std::array<uint64_t, kApiCount> frees_by_api{};
  std::array<uint64_t, kApiCount> failed_by_api{};
  std::array<uint64_t, kApiCount> bytes_by_api{};  // bytes of the allocations
  uint64_t unknown_api = 0;       // allocs, frees and failures whose api is out of range
  uint64_t max_order_window = 0;  // the most events held at once to put them in time order
  bool buffered_read = false;     // the streaming read gave up: every event was held (see below)
  const char* buffered_because = "";  // why, when buffered_read
  uint64_t late_events = 0;       // stragglers replayed late, where they were read (stream_order.h)
  uint64_t max_lateness_ns = 0;   // the most one of them was late by
  bool truncated = false;         // the file ends inside a record (format 3: a block): read up to there
  uint64_t truncated_at = 0;      // the offset of that record (block)
  uint64_t blocks = 0;            // format 3: good blocks read
  uint64_t raw_bytes = 0;         // format 3: their records' bytes, decompressed
};

// What the reader can vouch for in a trace (docs/trace-format.md "Integrity"). Final once read()
// returns. Worst first: a write failure explains the damage and the missing End that follow it.
enum class IntegrityStatus : uint8_t {
  kComplete,     // format 3: every block checked, End read, its counts match what was read
  kUnchecked,    // formats 1 and 2: no checksums, End read
  kIncomplete,   // no End: killed, crashed, or still being written; or cut inside a block
  kDamaged,      // blocks that fail their checksum, sequence or decompression, or junk between blocks
  kWriteFailed,  // the shim reported a failed write (header flag or End's write_error)
};

struct TraceIntegrity {
  IntegrityStatus status = IntegrityStatus::kComplete;
  bool checked = false;          // format 3: blocks carry checksums
  bool ended = false;            // an End record was read
  uint32_t write_error = 0;      // errno of the shim's first failed write (0: none)
  uint64_t blocks = 0;           // good blocks read
  uint64_t damaged_blocks = 0;   // headers found whose payload failed its checksum or decompression
  uint64_t missing_blocks = 0;   // sequence numbers never read (gaps, and End's count beyond)
  uint64_t skipped_bytes = 0;    // bytes not read as part of a good block (damage, a cut tail)
  uint64_t records_lost = 0;     // records known to be lost (End's count, or damaged blocks' counts)
  bool records_lost_exact = false;  // records_lost is End's count minus what was read
  uint64_t first_problem_offset = 0;
  bool truncated = false;        // the file ends inside a block (or, formats 1-2, a record)
  // One line for users, empty when complete: e.g. "damaged: 2 blocks failed their checksum at
  // offset 4096 (1234 records lost)", "incomplete: no End record (killed, crashed or still being
  // written)", "write-failed: No space left on device".
  std::string detail;

  bool clean() const {
    return status == IntegrityStatus::kComplete || status == IntegrityStatus::kUnchecked;
  }
};

// The CPUs this process may run on (taskset, cgroups' cpusets), not those of the machine.
unsigned usable_cores();
// The read threads that `cores` cores give a format 3 read: one per core beyond the two that the
// reading thread and its caller take (one with two cores, none with one), at most 4 (beyond, the
// reader no longer waits for blocks): more threads than cores would take turns with the reader.
unsigned read_threads_for(unsigned cores);

// "complete", "unchecked (format 2)", "incomplete", "damaged", "write-failed".
std::string integrity_name(const TraceIntegrity&, Version);

// Work a format 3 read gives one other thread of its caller's, for the time that thread would
// otherwise wait (the analyzer's replay thread between batches): checking and decompressing the
// blocks ahead of the reader, which the reader would otherwise do between its records.
class ReadHelp {
 public:
  // Checks and decompresses the next block if one may be taken now; false when none may (the
  // helper then waits for its own work). From one thread at a time.
  virtual bool help() = 0;

 protected:
  ~ReadHelp() = default;
};

// The consumer of a read. String views point into the mapped file: valid while the reader lives.
// Frame arrays (StackRecord::frames, PyStackRecord::frames) are valid during the call only.
class TraceSink {
 public:
  virtual ~TraceSink() = default;

  virtual void process(const ProcessRecord&) {}
  virtual void device(const DeviceRecord&) {}
  virtual void module(const ModuleRecord&) {}
  virtual void stack(const StackRecord&) {}
  // false: the events delivered so far were consumed as if this Python stack did not exist, and
  // the sink wants them again with every metadata record read first. A streaming read then
  // restarts, holding every event to the end (a restarted read never restarts again).
  virtual bool py_stack(const PyStackRecord&) { return true; }
  virtual void py_code(const PyCodeRecord&) {}
  virtual void stack_label(const StackLabelRecord&) {}
  virtual void attribute(const AttributeRecord&) {}
  virtual void end(const EndRecord&) {}

  // The timed events, in time order: one call per event, from the reader's innermost loop. The
  // record was just decoded field by field: a sink that reads the fields it needs, rather than
  // copying the whole record at once, does not wait for those stores.
  virtual void alloc(const AllocRecord&) {}
  virtual void free(const FreeRecord&) {}
  virtual void torch(const TorchEventRecord&) {}
  virtual void failed(const AllocFailedRecord&) {}
  virtual void meminfo(const MemInfoRecord&) {}
  virtual void marker(const MarkerRecord&) {}
  // NVML's view of the process's device memory, sampled by the shim (format 3.1).
  virtual void process_memory(const ProcessMemoryRecord&) {}

  // Everything delivered so far is void: the read starts over from the first record, holding every
  // event to the end of the file.
  virtual void restart() {}

  // Whether the sink has a thread that would call ReadHelp::help() while it waits for events.
  virtual bool wants_read_help() const { return false; }
  // A read that has block work to share (no read threads, a stream worth sharing) offers it when
  // it starts and withdraws it (nullptr) before it ends: once this returns with nullptr, the sink
  // is in no help() call and makes none.
  virtual void read_help(ReadHelp*) {}
};

class TraceReader {
 public:
  // Maps the file and checks its header. Throws TraceReadError.
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::string& path() const;
  Version version() const;
  // Format 3: how many threads check and decompress blocks ahead of the read (0: the reading
  // thread does it, a block at a time, shared with the sink's thread if it wants_read_help()).
  // Unset: by the cores this process may use, leaving one to the read and one to the caller.
  // GPUMEMSHIM_READ_THREADS overrides both (0 there: the reading thread alone).
  void set_read_threads(unsigned n);

  // Reads every record into `sink` (see above). Throws TraceReadError for a malformed record;
  // what the sink throws passes through. A truncated last record ends the read (counts() says so).
  void read(TraceSink& sink);
  const TraceCounts& counts() const;
  const TraceIntegrity& integrity() const;

  // Every timed event in time order (a read into a sink that keeps them).
  std::vector<TimedEvent> timed_events();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumemshim::format
