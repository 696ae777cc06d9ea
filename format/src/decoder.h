// Reads a trace: header check, then one framed record at a time. A truncated final record ends the
// read cleanly (status kTruncated); anything else malformed is an error with the byte offset.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::format {

// A read-only memory map of a trace file.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  // Returns "" on success, else a one-line reason.
  std::string open(const std::string& path);
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops the pages of a mapping below `upto`, rounded down to `unit` (the page size, or the huge
// page of a block stream's region: releasing part of one would split it), from the process. A file
// mapping's pages stay in the page cache: resident memory is then the reader's state, not the file.
void release_read_pages(std::span<const uint8_t> mapping, uint64_t upto, uint64_t unit);

// For a reader that passes through a file mapping once, front to back: passed(at) drops the pages
// before `at` each time that is `every` bytes past the last drop.
class PassedPages {
 public:
  PassedPages(std::span<const uint8_t> mapping, uint64_t every) : mapping_(mapping), every_(every) {}
  void passed(uint64_t at);

 private:
  std::span<const uint8_t> mapping_;
  uint64_t every_;
  uint64_t released_ = 0;
};

struct RawRecord {
  RecordType type{};
  const uint8_t* payload = nullptr;
  size_t size = 0;
  uint64_t offset = 0;  // of the record's first byte in the file
  const uint8_t* readable_end = nullptr;  // the mapped file's end (decoding may read ahead to it)
  // The payload layout of the hot records (Alloc, Free, TorchEvent): fixed (a 2.x file,
  // fixed_layout.h) or varint (1.x). Set by RecordReader::next from the file's version.
  bool fixed_layout = false;
};

enum class ReadStatus { kRecord, kEnd, kTruncated, kError };

class RecordReader {
 public:
  explicit RecordReader(std::span<const uint8_t> data) : data_(data) {}
  // Checks magic and version; returns "" when the records can be read, else a one-line reason.
  std::string read_header();
  Version version() const { return version_; }
  ReadStatus next(RawRecord& out) {
    // Most records (every hot one) have a payload shorter than 128 bytes: a one-byte length.
    // Inline, for the tens of millions of them; anything else takes the careful path.
    const size_t left = data_.size() - pos_;
    if (left >= 2 && data_[pos_] != 0 && data_[pos_ + 1] < 0x80 && data_[pos_ + 1] <= left - 2) [[likely]] {
      out.type = static_cast<RecordType>(data_[pos_]);
      out.size = data_[pos_ + 1];
      out.payload = data_.data() + pos_ + 2;
      out.offset = pos_;
      out.readable_end = data_.data() + data_.size();
      out.fixed_layout = has_fixed_layout(version_);
      pos_ += 2 + out.size;
      return ReadStatus::kRecord;
    }
    return next_careful(out);
  }
  // A 2.x file's hot records (Alloc, Free, TorchEvent) that follow the read position, framed with
  // less work than next() for the bulk of a trace: calls hot(record) for each (type at [0], a
  // one-byte length at [1], the payload from [2], at least its time and thread), while they come
  // whole, until `max_bytes` are read or hot() returns false (the read position is then that
  // record's). Stops before anything else, which is next()'s (so is every record of a 1.x file).
  template <typename Hot>
  [[gnu::always_inline]] void next_hot(size_t max_bytes, Hot&& hot) {
    if (!has_fixed_layout(version_)) return;
    const uint8_t* p = data_.data() + pos_;
    const uint8_t* const end = data_.data() + data_.size();
    if (end - p < 2) return;
    // Up to here a record's head (type and length) is in the file.
    const uint8_t* const stop = p + std::min<size_t>(max_bytes, static_cast<size_t>(end - p) - 1);
    while (p < stop) {
      const unsigned length = p[1];
      // A hot type; a one-byte length holding at least the time and thread; the whole record.
      if (!is_fixed_layout_type(static_cast<RecordType>(p[0])) ||
          length - kFixedTimeAndThreadSize >= 0x80 - kFixedTimeAndThreadSize ||
          length > static_cast<size_t>(end - p) - 2)
        break;
      if (!hot(p)) break;
      p += 2 + length;
    }
    pos_ = static_cast<size_t>(p - data_.data());
  }
  // Format 3: the reader reads the records of blocks, not a file. `data` (a decompressed stream,
  // whole records) replaces the file, read from its start with the layout of version `v`.
  void start_stream(std::span<const uint8_t> data, Version v) {
    data_ = data;
    version_ = v;
    pos_ = 0;
  }
  // More of the same stream is readable: its first `size` bytes.
  void extend(size_t size) { data_ = {data_.data(), size}; }
  const std::string& error() const { return error_; }
  uint64_t offset() const { return pos_; }
  uint64_t size() const { return data_.size(); }

 private:
  ReadStatus next_careful(RawRecord& out);

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  Version version_;
  std::string error_;
};

// Payload decoders: false when the payload is malformed. Fields added by later minor versions
// follow the known ones and are ignored. String views point into the mapped file. Alloc, Free and
// TorchEvent read the layout `r.fixed_layout` says (fixed: a payload shorter than the layout is
// malformed).
bool decode(const RawRecord& r, ProcessRecord& out);
bool decode(const RawRecord& r, ModuleRecord& out);
bool decode(const RawRecord& r, StackRecord& out, std::vector<uint64_t>& frames);
bool decode(const RawRecord& r, AllocRecord& out);
bool decode(const RawRecord& r, FreeRecord& out);
bool decode(const RawRecord& r, AllocFailedRecord& out);
bool decode(const RawRecord& r, MemInfoRecord& out);
bool decode(const RawRecord& r, ProcessMemoryRecord& out);
bool decode(const RawRecord& r, StackLabelRecord& out);
bool decode(const RawRecord& r, TorchEventRecord& out);  // any action value (append-only)
bool decode(const RawRecord& r, MarkerRecord& out);
bool decode(const RawRecord& r, DeviceRecord& out);
bool decode(const RawRecord& r, AttributeRecord& out);
bool decode(const RawRecord& r, EndRecord& out);
bool decode(const RawRecord& r, FlushRecord& out);
bool decode(const RawRecord& r, PyCodeRecord& out);
bool decode(const RawRecord& r, PyStackRecord& out, std::vector<PyFrameRef>& frames);

}  // namespace gpumemshim::format
