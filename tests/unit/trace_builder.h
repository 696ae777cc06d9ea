// Builds gpumemshim traces in memory for tests: a header, then records written with the format's
// encoder. Header-only; depends only on gpumemshim_format_headers.
//
//   TraceBuilder t;                       // writes the header (t.header_version(9, 0) to fake one)
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

#include "gpumemshim/format/encoder.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::testing {

namespace gf = gpumemshim::format;

class TraceBuilder {
 public:
  // A trace of format `version` (default: the one the shim writes): its header, and its records
  // as that version lays them out.
  explicit TraceBuilder(gf::Version version = gf::kVersion) : version_(version) {
    bytes_.resize(gf::kHeaderSize);
    gf::encode_header(bytes_.data(), bytes_.size(), version);
  }
  // Overwrites the header's version (e.g. a newer major version); records added keep the layout
  // of the version the builder was made for.
  TraceBuilder& header_version(uint16_t major, uint16_t minor) {
    bytes_[8] = static_cast<uint8_t>(major & 0xff); bytes_[9] = static_cast<uint8_t>(major >> 8);
    bytes_[10] = static_cast<uint8_t>(minor & 0xff); bytes_[11] = static_cast<uint8_t>(minor >> 8);
    return *this;
  }

  // Any record the encoder knows.
  template <typename Record>
  TraceBuilder& add(const Record& r) {
    std::vector<uint8_t> buf(4096);
    for (;;) {
      size_t n = gf::encode_for(version_, buf.data(), buf.size(), r);
      if (n) {
        bytes_.insert(bytes_.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        return *this;
      }
      if (buf.size() > (8u << 20)) throw std::length_error("record too large to encode");
      buf.resize(buf.size() * 4);
    }
  }
  // A record of a type unknown to this version: type byte, length, payload.
  TraceBuilder& raw(uint8_t type, std::string_view payload) {
    bytes_.push_back(type);
    uint64_t len = payload.size();
    while (len >= 0x80) { bytes_.push_back(static_cast<uint8_t>(len) | 0x80); len >>= 7; }
    bytes_.push_back(static_cast<uint8_t>(len));
    bytes_.insert(bytes_.end(), payload.begin(), payload.end());
    return *this;
  }
  TraceBuilder& append_bytes(std::string_view b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
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
  TraceBuilder& device(int32_t device, uint64_t total, std::string_view name = "Fake GPU") {
    gf::DeviceRecord r;
    r.device = device; r.total_bytes = total; r.name = name;
    return add(r);
  }
  TraceBuilder& end() {
    gf::EndRecord r;
    r.time_ns = tick();
    return add(r);
  }

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& mutable_bytes() { return bytes_; }
  std::string_view view() const {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  // Writes the trace (optionally only its first `limit` bytes) and returns the path.
  std::string write(const std::string& path, size_t limit = SIZE_MAX) const {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    size_t n = std::min(limit, bytes_.size());
    bool ok = std::fwrite(bytes_.data(), 1, n, f) == n;
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
  uint64_t tick() { return time_ns_ += 1000; }
  gf::Version version_;
  std::vector<uint8_t> bytes_;
  uint64_t time_ns_ = 0;
};

}  // namespace gpumemshim::testing
