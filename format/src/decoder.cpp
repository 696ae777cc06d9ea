#include "decoder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/varint.h"

namespace gpumemshim::format {

namespace {
constexpr uint64_t kMaxRecordSize = 1u << 21;  // the encoder never writes more
}

void release_read_pages(std::span<const uint8_t> mapping, uint64_t upto, uint64_t unit) {
  uint64_t end = upto / unit * unit;
  if (end > 0) madvise(const_cast<uint8_t*>(mapping.data()), end, MADV_DONTNEED);
}

void PassedPages::passed(uint64_t at) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (at - released_ < every_) return;
  released_ = at / page * page;
  release_read_pages(mapping_, released_, page);
}

MappedFile::~MappedFile() {
  if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::string MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fmt::format("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fmt::format("{}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd);
    return fmt::format("{}: empty file, not a gpumemshim trace", path);
  }
  void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    size_ = 0;
    return fmt::format("{}: cannot map: {}", path, std::strerror(errno));
  }
  madvise(p, size_, MADV_SEQUENTIAL);
  data_ = static_cast<const uint8_t*>(p);
  return {};
}

std::string RecordReader::read_header() {
  if (data_.empty()) return "empty file, not a gpumemshim trace";
  if (data_.size() < kHeaderSize) {
    if (std::memcmp(data_.data(), kMagic, std::min(data_.size(), sizeof kMagic)) == 0)
      return "truncated trace header";
    return "not a gpumemshim trace (bad magic)";
  }
  if (std::memcmp(data_.data(), kMagic, sizeof kMagic) != 0)
    return "not a gpumemshim trace (bad magic)";
  version_.major = static_cast<uint16_t>(data_[8] | (data_[9] << 8));
  version_.minor = static_cast<uint16_t>(data_[10] | (data_[11] << 8));
  if (version_.major > kVersionMajor || version_.major == 0)
    return fmt::format(
        "trace format version {}.{} is not supported (this gpumemshim reads versions 1.0 to {}.x)",
        version_.major, version_.minor, kVersionMajor);
  const size_t header_size = has_blocks(version_) ? kHeaderSizeV3 : kHeaderSize;
  if (data_.size() < header_size) return "truncated trace header";
  pos_ = header_size;
  return {};
}

ReadStatus RecordReader::next_careful(RawRecord& out) {
  if (pos_ >= data_.size()) return ReadStatus::kEnd;
  const size_t start = pos_;
  ByteReader r(data_.data() + pos_, data_.size() - pos_);
  uint8_t type = r.u8();
  uint64_t length = r.varint();
  if (r.failed()) return ReadStatus::kTruncated;  // the file ends inside a record's head
  if (type == 0 || length > kMaxRecordSize) {
    error_ = fmt::format("malformed record at offset {} (type {}, length {})", start, type, length);
    return ReadStatus::kError;
  }
  if (length > r.remaining()) return ReadStatus::kTruncated;
  out.type = static_cast<RecordType>(type);
  out.payload = r.position();
  out.size = length;
  out.offset = start;
  out.readable_end = data_.data() + data_.size();
  out.fixed_layout = has_fixed_layout(version_);
  pos_ = static_cast<size_t>(r.position() - data_.data()) + length;
  return ReadStatus::kRecord;
}

namespace {
ByteReader reader(const RawRecord& r) { return ByteReader(r.payload, r.size, r.readable_end); }
}  // namespace

bool decode(const RawRecord& raw, ProcessRecord& o) {
  auto r = reader(raw);
  o.pid = r.varint(); o.ppid = r.varint(); o.rank = r.svarint();
  o.start_wall_ns = r.varint(); o.start_mono_ns = r.varint();
  o.host = r.bytes(); o.command_line = r.bytes(); o.executable = r.bytes();
  return !r.failed();
}

bool decode(const RawRecord& raw, ModuleRecord& o) {
  auto r = reader(raw);
  o.load_bias = r.varint(); o.start = r.varint(); o.size = r.varint();
  o.build_id = r.bytes(); o.path = r.bytes();
  return !r.failed();
}

bool decode(const RawRecord& raw, StackRecord& o, std::vector<uint64_t>& frames) {
  auto r = reader(raw);
  o.id = r.varint();
  uint64_t n = r.varint();
  if (r.failed() || n > r.remaining()) return false;  // every frame takes at least one byte
  frames.resize(n);
  uint64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    prev += static_cast<uint64_t>(r.svarint());
    frames[i] = prev;
  }
  o.frame_count = static_cast<uint32_t>(n);
  o.frames = frames.data();
  return !r.failed();
}

namespace {
template <typename Rec>
bool event_head(ByteReader& r, Rec& o) {
  o.time_ns = r.varint(); o.thread_id = r.varint();
  o.device = static_cast<int32_t>(r.svarint()); o.stream = r.varint();
  o.api = static_cast<Api>(r.u8());
  o.kind = static_cast<MemoryKind>(r.u8());
  auto k = static_cast<uint8_t>(o.kind);
  return k >= 1 && k <= kMemoryKindMax;
}
}  // namespace

bool decode(const RawRecord& raw, AllocRecord& o) {
  if (raw.fixed_layout) return decode_fixed(raw.payload, raw.size, o);
  auto r = reader(raw);
  bool kind_ok = event_head(r, o);
  // 1.x: the hot records' last fields change length from record to record (varint_varying)
  o.address = r.varint_varying(); o.size = r.varint_varying(); o.stack_id = r.varint_varying();
  return kind_ok && !r.failed();
}

bool decode(const RawRecord& raw, FreeRecord& o) {
  if (raw.fixed_layout) return decode_fixed(raw.payload, raw.size, o);
  auto r = reader(raw);
  bool kind_ok = event_head(r, o);
  o.address = r.varint_varying(); o.stack_id = r.varint_varying();
  o.result = static_cast<uint32_t>(r.varint());
  return kind_ok && !r.failed();
}

bool decode(const RawRecord& raw, AllocFailedRecord& o) {
  auto r = reader(raw);
  bool kind_ok = event_head(r, o);
  o.size = r.varint(); o.error = static_cast<uint32_t>(r.varint()); o.stack_id = r.varint();
  return kind_ok && !r.failed();
}

bool decode(const RawRecord& raw, StackLabelRecord& o) {
  auto r = reader(raw);
  o.stack_id = r.varint(); o.label = r.bytes();
  return !r.failed();
}

bool decode(const RawRecord& raw, TorchEventRecord& o) {
  if (raw.fixed_layout) return decode_fixed(raw.payload, raw.size, o);
  auto r = reader(raw);
  o.time_ns = r.varint(); o.thread_id = r.varint();
  o.device = static_cast<int32_t>(r.svarint()); o.stream = r.varint();
  o.action = static_cast<TorchAction>(r.u8());  // unknown values: for the reader to ignore
  o.address = r.varint_varying(); o.size = r.varint_varying(); o.stack_id = r.varint_varying();
  return !r.failed();
}

bool decode(const RawRecord& raw, MemInfoRecord& o) {
  auto r = reader(raw);
  o.time_ns = r.varint(); o.device = static_cast<int32_t>(r.svarint());
  o.free_bytes = r.varint(); o.total_bytes = r.varint();
  return !r.failed();
}

bool decode(const RawRecord& raw, ProcessMemoryRecord& o) {
  auto r = reader(raw);
  o.time_ns = r.varint();
  o.device = static_cast<int32_t>(r.svarint());
  o.flags = r.u8();
  o.process_used_bytes = r.varint();
  o.device_used_bytes = r.varint();
  o.device_total_bytes = r.varint();
  return !r.failed();
}

bool decode(const RawRecord& raw, MarkerRecord& o) {
  auto r = reader(raw);
  o.time_ns = r.varint(); o.thread_id = r.varint();
  o.kind = static_cast<MarkerKind>(r.u8());
  o.name = r.bytes();
  o.stack_id = r.remaining() ? r.varint() : 0;  // a trailing field: older writers omit it
  return !r.failed();
}

bool decode(const RawRecord& raw, DeviceRecord& o) {
  auto r = reader(raw);
  o.device = static_cast<int32_t>(r.svarint()); o.total_bytes = r.varint(); o.name = r.bytes();
  return !r.failed();
}

bool decode(const RawRecord& raw, AttributeRecord& o) {
  auto r = reader(raw);
  o.key = r.bytes(); o.value = r.bytes();
  return !r.failed();
}

bool decode(const RawRecord& raw, EndRecord& o) {
  auto r = reader(raw);
  o.time_ns = r.varint();
  o.has_counts = r.remaining() != 0;  // format 3's counts; older writers stop here
  if (o.has_counts) {
    o.blocks = r.varint();
    o.records = r.varint();
    o.write_error = r.varint();
  }
  return !r.failed();
}

bool decode(const RawRecord& raw, FlushRecord& o) {
  auto r = reader(raw);
  o.time_ns = r.varint();
  return !r.failed();
}

bool decode(const RawRecord& raw, PyCodeRecord& o) {
  auto r = reader(raw);
  o.code_id = r.varint(); o.first_line = r.varint();
  o.filename = r.bytes(); o.name = r.bytes(); o.line_table = r.bytes();
  o.python_minor = r.u8();
  return !r.failed();
}

bool decode(const RawRecord& raw, PyStackRecord& o, std::vector<PyFrameRef>& frames) {
  auto r = reader(raw);
  o.stack_id = r.varint();
  uint64_t n = r.varint();
  if (r.failed() || n > r.remaining() / 3) return false;  // every frame takes at least 3 bytes
  frames.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    frames[i].code_id = r.varint(); frames[i].instr_offset = r.varint(); frames[i].flags = r.u8();
  }
  o.frame_count = static_cast<uint32_t>(n);
  o.frames = frames.data();
  return !r.failed();
}

}  // namespace gpumemshim::format
