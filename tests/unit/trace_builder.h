// Builds gpumemshim traces in memory for tests: a header, then records written with the format's
// encoder; in format 3 (the default, what the shim writes) the records are framed into blocks
// when the bytes are asked for (bytes(), write()). Header-only; depends on
// gpumemshim_format_headers, liblz4 and libzstd.
//
//   TraceBuilder t;                       // format 3 (t.header_version(9, 0) to fake another)
//   t.blocks(16, gf::BlockCodec::kRaw);   // 16 records a block, uncompressed (default: 64, LZ4)
//   TraceBuilder t2(gf::kVersion2_0);     // a 2.0 trace: records after a 16-byte header
//   TraceBuilder t1(gf::kVersion1_1);     // a 1.1 trace: the hot records' varint payloads
//   t.process(1234, "app --flag");
//   t.module("/usr/bin/app", 0x400000, 0x10000);
//   t.stack(7, {0x401000, 0x402000});
//   t.alloc(0x7000, 4 << 20, /*stack=*/7);
//   t.free(0x7000);
//   t.end();
//   std::string path = t.write(dir + "/x.trace");
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/block_writer.h"
#include "gpumemshim/format/encoder.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::testing {

namespace gf = gpumemshim::format;

class TraceBuilder {
 public:
  // A trace of format `version` (default: the one the shim writes): its header, and its records
  // as that version lays them out.
  explicit TraceBuilder(gf::Version version = gf::kVersion) : version_(version) {
    header_.resize(gf::has_blocks(version) ? gf::kHeaderSizeV3 : gf::kHeaderSize);
    gf::encode_header(header_.data(), header_.size(), version);
    if (!blocked()) bytes_ = header_;
    stale_ = blocked();
  }
  // Overwrites the header's version (e.g. a newer major version); records added keep the layout
  // (and the framing) of the version the builder was made for.
  TraceBuilder& header_version(uint16_t major, uint16_t minor) {
    for (auto* h : {&header_, &bytes_}) {
      if (h->size() < 12) continue;
      (*h)[8] = static_cast<uint8_t>(major & 0xff); (*h)[9] = static_cast<uint8_t>(major >> 8);
      (*h)[10] = static_cast<uint8_t>(minor & 0xff); (*h)[11] = static_cast<uint8_t>(minor >> 8);
    }
    return *this;
  }

  // Format 3: how write() frames the records: records per block, and the codec.
  TraceBuilder& blocks(size_t records_per_block, gf::BlockCodec codec = gf::BlockCodec::kLz4) {
    per_block_ = records_per_block;
    codec_ = codec;
    return dirty();
  }
  // Format 3: the header says a write failed (flag and errno), as the shim sets it.
  TraceBuilder& header_write_failed(uint32_t error) {
    gf::detail::put32(header_.data() + gf::kHeaderFlagsOffset, gf::kHeaderWriteFailed);
    gf::detail::put32(header_.data() + gf::kHeaderWriteErrorOffset, error);
    return dirty();
  }
  // Format 3: the End record claims these counts instead of what the framing gives.
  TraceBuilder& end_claims(uint64_t blocks, uint64_t records) {
    claimed_blocks_ = blocks;
    claimed_records_ = records;
    return dirty();
  }

  // Any record the encoder knows.
  template <typename Record>
  TraceBuilder& add(const Record& r) {
    std::vector<uint8_t> buf(4096);
    for (;;) {
      size_t n = gf::encode_for(version_, buf.data(), buf.size(), r);
      if (n) return append_record({reinterpret_cast<const char*>(buf.data()), n});
      if (buf.size() > (8u << 20)) throw std::length_error("record too large to encode");
      buf.resize(buf.size() * 4);
    }
  }
  // A record of a type unknown to this version: type byte, length, payload.
  TraceBuilder& raw(uint8_t type, std::string_view payload) {
    std::string rec(1, static_cast<char>(type));
    uint64_t len = payload.size();
    while (len >= 0x80) { rec.push_back(static_cast<char>(static_cast<uint8_t>(len) | 0x80)); len >>= 7; }
    rec.push_back(static_cast<char>(len));
    rec.append(payload);
    return append_record(rec);
  }
  // Bytes after the last record: in format 3, inside its block (a record that does not decode
  // damages the block); to put bytes between blocks, edit mutable_bytes().
  TraceBuilder& append_bytes(std::string_view b) {
    if (!blocked()) {
      bytes_.insert(bytes_.end(), b.begin(), b.end());
      return *this;
    }
    if (records_.empty()) records_.emplace_back();
    records_.back().bytes.append(b);
    return dirty();
  }

  TraceBuilder& process(uint64_t pid, std::string_view command_line, uint64_t ppid = 1,
                        int64_t rank = -1, std::string_view host = "testhost") {
    gf::ProcessRecord r;
    r.pid = pid; r.ppid = ppid; r.rank = rank; r.start_wall_ns = 1'700'000'000'000'000'000ull;
    r.start_mono_ns = 1000; r.host = host; r.command_line = command_line; r.executable = "/bin/app";
    return add(r);
  }
  TraceBuilder& module(std::string_view path, uint64_t start, uint64_t size, uint64_t load_bias = 0,
                       std::string_view build_id = {}) {
    gf::ModuleRecord r;
    r.path = path; r.start = start; r.size = size; r.load_bias = load_bias ? load_bias : start;
    r.build_id = build_id;
    return add(r);
  }
  TraceBuilder& stack(uint64_t id, std::vector<uint64_t> frames) {
    gf::StackRecord r;
    r.id = id; r.frame_count = static_cast<uint32_t>(frames.size()); r.frames = frames.data();
    return add(r);
  }
  // The Python frames of stack `id` (innermost first), each a code object of its own whose line
  // is its first line (an empty line table): what the shim writes for a Python caller, as the
  // analyzer shows it after the native frames.
  struct PyFrame {
    std::string_view file, function;
    uint32_t line = 0;
  };
  TraceBuilder& python_stack(uint64_t id, std::initializer_list<PyFrame> frames) {
    std::vector<gf::PyFrameRef> refs;
    for (const PyFrame& f : frames) {
      gf::PyCodeRecord code;
      code.code_id = 0x9c0de000 + ++py_codes_;
      code.first_line = f.line; code.filename = f.file; code.name = f.function;
      code.python_minor = 12;
      add(code);
      refs.push_back(gf::PyFrameRef{code.code_id, 0, 0});
    }
    return add(gf::PyStackRecord{id, static_cast<uint32_t>(refs.size()), refs.data()});
  }
  // A TorchEvent (the torch bridge): action, block/segment address (oom: free bytes), size.
  TraceBuilder& torch(gf::TorchAction action, uint64_t address, uint64_t size, uint64_t stack_id = 0,
                      int32_t device = 0) {
    gf::TorchEventRecord r;
    r.time_ns = tick(); r.thread_id = 1; r.device = device; r.action = action;
    r.address = address; r.size = size; r.stack_id = stack_id;
    return add(r);
  }
  TraceBuilder& alloc(uint64_t address, uint64_t size, uint64_t stack_id = 0,
                      gf::Api api = gf::Api::kCudaMalloc, gf::MemoryKind kind = gf::MemoryKind::kDevice,
                      int32_t device = 0) {
    gf::AllocRecord r;
    r.time_ns = tick(); r.thread_id = 1; r.device = device; r.api = api; r.kind = kind;
    r.address = address; r.size = size; r.stack_id = stack_id;
    return add(r);
  }
  TraceBuilder& free(uint64_t address, gf::Api api = gf::Api::kCudaFree,
                     gf::MemoryKind kind = gf::MemoryKind::kDevice, uint32_t result = 0) {
    gf::FreeRecord r;
    r.time_ns = tick(); r.thread_id = 1; r.api = api; r.kind = kind; r.address = address;
    r.result = result;
    return add(r);
  }
  TraceBuilder& failed(uint64_t size, uint32_t error = 2, uint64_t stack_id = 0,
                       gf::Api api = gf::Api::kCudaMalloc, gf::MemoryKind kind = gf::MemoryKind::kDevice) {
    gf::AllocFailedRecord r;
    r.time_ns = tick(); r.thread_id = 1; r.api = api; r.kind = kind; r.size = size; r.error = error;
    r.stack_id = stack_id;
    return add(r);
  }
  TraceBuilder& marker(gf::MarkerKind kind, std::string_view name) {
    gf::MarkerRecord r;
    r.time_ns = tick(); r.thread_id = 1; r.kind = kind; r.name = name;
    return add(r);
  }
  // A ProcessMemory record (the shim's NVML sample, format 3.1): process_used < 0 when NVML did not
  // list this process.
  TraceBuilder& process_memory(int64_t process_used, uint64_t device_used, uint64_t total,
                               int32_t device = 0) {
    gf::ProcessMemoryRecord r;
    r.time_ns = tick();
    r.device = device;
    r.flags = process_used >= 0 ? gf::kProcessUsedKnown : 0;
    r.process_used_bytes = process_used >= 0 ? static_cast<uint64_t>(process_used) : 0;
    r.device_used_bytes = device_used;
    r.device_total_bytes = total;
    return add(r);
  }
  // A MemInfo record (cudaMemGetInfo's answer).
  TraceBuilder& meminfo(uint64_t free_bytes, uint64_t total, int32_t device = 0) {
    gf::MemInfoRecord r;
    r.time_ns = tick();
    r.device = device;
    r.free_bytes = free_bytes;
    r.total_bytes = total;
    return add(r);
  }
  TraceBuilder& device(int32_t device, uint64_t total, std::string_view name = "Fake GPU") {
    gf::DeviceRecord r;
    r.device = device; r.total_bytes = total; r.name = name;
    return add(r);
  }
  // The End record; in format 3 its counts (blocks and records before it) are filled in when the
  // records are framed, and write_error is the shim's errno of a failed write.
  TraceBuilder& end(uint64_t write_error = 0) {
    gf::EndRecord r;
    r.time_ns = tick();
    r.write_error = write_error;
    if (!blocked()) return add(r);
    records_.push_back(Record{{}, true, r});
    return dirty();
  }

  // The file's bytes (format 3: the records framed into blocks; edits through mutable_bytes()
  // last until a record is added).
  const std::vector<uint8_t>& bytes() const {
    if (stale_) frame();
    return bytes_;
  }
  std::vector<uint8_t>& mutable_bytes() {
    bytes();
    return bytes_;
  }
  std::string_view view() const {
    bytes();
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  // Format 3: the offset of each block's header in bytes().
  const std::vector<size_t>& block_offsets() const {
    bytes();
    return block_offsets_;
  }
  // Writes the trace (optionally only its first `limit` bytes) and returns the path.
  std::string write(const std::string& path, size_t limit = SIZE_MAX) const {
    return write_file(path, bytes(), limit);
  }
  static std::string write_file(const std::string& path, const std::vector<uint8_t>& bytes,
                                size_t limit = SIZE_MAX) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    size_t n = std::min(limit, bytes.size());
    bool ok = std::fwrite(bytes.data(), 1, n, f) == n;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) throw std::runtime_error("cannot write " + path);
    return path;
  }

  uint64_t now() const { return time_ns_; }
  // The next timed record gets time_ns (then +1000 per record as usual).
  TraceBuilder& at(uint64_t time_ns) {
    time_ns_ = time_ns - 1000;
    return *this;
  }

 private:
  struct Record {
    std::string bytes;  // encoded (and any bytes appended after it)
    bool is_end = false;  // format 3's End: encoded when framed, with its counts
    gf::EndRecord end;
  };

  bool blocked() const { return gf::has_blocks(version_); }
  uint64_t py_codes_ = 0;
  TraceBuilder& dirty() {
    stale_ = blocked();
    return *this;
  }
  TraceBuilder& append_record(std::string_view rec) {
    if (!blocked()) {
      bytes_.insert(bytes_.end(), rec.begin(), rec.end());
      return *this;
    }
    records_.push_back(Record{std::string(rec), false, {}});
    return dirty();
  }

  // Format 3: the header, then the records per_block_ at a time in blocks (record_count as the
  // writer counts them), the End's counts being what precedes it.
  void frame() const {
    bytes_ = header_;
    block_offsets_.clear();
    gf::BlockFramer framer(codec_);
    for (size_t first = 0; first < records_.size(); first += per_block_) {
      std::string raw;
      for (size_t i = first; i < std::min(records_.size(), first + per_block_); ++i) {
        const Record& r = records_[i];
        if (!r.is_end) {
          raw += r.bytes;
          continue;
        }
        gf::EndRecord e = r.end;
        e.blocks = claimed_blocks_ != UINT64_MAX ? claimed_blocks_ : framer.blocks();
        e.records = claimed_records_ != UINT64_MAX ? claimed_records_ : framer.records() + (i - first);
        uint8_t buf[64];
        raw.append(reinterpret_cast<const char*>(buf), gf::encode(buf, sizeof buf, e));
      }
      block_offsets_.push_back(bytes_.size());
      framer.frame(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(),
                   [&](const uint8_t* p, size_t n) { bytes_.insert(bytes_.end(), p, p + n); });
    }
    stale_ = false;
  }

  uint64_t tick() { return time_ns_ += 1000; }
  gf::Version version_;
  std::vector<uint8_t> header_;
  std::vector<Record> records_;  // format 3
  size_t per_block_ = 64;
  gf::BlockCodec codec_ = gf::BlockCodec::kLz4;
  uint64_t claimed_blocks_ = UINT64_MAX, claimed_records_ = UINT64_MAX;
  mutable std::vector<uint8_t> bytes_;  // the file (format 3: framed from records_ when stale_)
  mutable std::vector<size_t> block_offsets_;
  mutable bool stale_ = false;
  uint64_t time_ns_ = 0;
};

}  // namespace gpumemshim::testing
