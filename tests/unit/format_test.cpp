// Round trip of every record type through the encoder and the decoder, and the reader's handling
// of unknown, truncated and malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "block_stream.h"
#include "decoder.h"
#include "gpumemshim/format/encoder.h"
#include "gpumemshim/format/fixed_layout.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TraceBuilder;

namespace {

std::span<const uint8_t> span_of(const TraceBuilder& t) { return {t.bytes().data(), t.bytes().size()}; }

// Reads the single record after the header.
template <typename Rec>
Rec read_back(const TraceBuilder& t, gf::RecordType type) {
  gf::RecordReader reader(span_of(t));
  EXPECT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(raw.type, type);
  Rec out;
  EXPECT_TRUE(gf::decode(raw, out));
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
  return out;
}

}  // namespace

TEST(FormatRoundTrip, Header) {
  TraceBuilder t(gf::kVersion2_0);
  gf::RecordReader reader(span_of(t));
  EXPECT_EQ(reader.read_header(), "");
  EXPECT_EQ(reader.version().major, 2);
  EXPECT_EQ(reader.version().minor, 0);
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
}

TEST(FormatRoundTrip, Process) {
  gf::ProcessRecord r{4242, 17, -1, 123456789012345ull, 987654321, "node-3", "python train.py --x", "/usr/bin/python3"};
  TraceBuilder t(gf::kVersion2_0);
  t.add(r);
  auto o = read_back<gf::ProcessRecord>(t, gf::RecordType::kProcess);
  EXPECT_EQ(o.pid, r.pid); EXPECT_EQ(o.ppid, r.ppid); EXPECT_EQ(o.rank, r.rank);
  EXPECT_EQ(o.start_wall_ns, r.start_wall_ns); EXPECT_EQ(o.start_mono_ns, r.start_mono_ns);
  EXPECT_EQ(o.host, r.host); EXPECT_EQ(o.command_line, r.command_line); EXPECT_EQ(o.executable, r.executable);
}

TEST(FormatRoundTrip, Module) {
  std::string build_id("\x01\x02\xff\x00\x7f", 5);
  gf::ModuleRecord r{0x7f0000000000ull, 0x7f0000001000ull, 0x23000, build_id, "/lib/libfoo.so"};
  TraceBuilder t(gf::kVersion2_0);
  t.add(r);
  auto o = read_back<gf::ModuleRecord>(t, gf::RecordType::kModule);
  EXPECT_EQ(o.load_bias, r.load_bias); EXPECT_EQ(o.start, r.start); EXPECT_EQ(o.size, r.size);
  EXPECT_EQ(o.build_id, build_id); EXPECT_EQ(o.path, r.path);
}

TEST(FormatRoundTrip, Stack) {
  std::vector<uint64_t> frames = {0x7f00000012345ull, 0x401000, 0xffffffffffffff00ull, 0, 0x401004};
  TraceBuilder t(gf::kVersion2_0);
  t.stack(0xdeadbeefcafeull, frames);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  gf::StackRecord o;
  std::vector<uint64_t> out;
  ASSERT_TRUE(gf::decode(raw, o, out));
  EXPECT_EQ(o.id, 0xdeadbeefcafeull);
  EXPECT_EQ(o.frame_count, frames.size());
  EXPECT_EQ(out, frames);
}

TEST(FormatRoundTrip, AllocFreeFailed) {
  gf::AllocRecord a{1000, 77, 3, 0x55, gf::Api::kCudaMallocAsync, gf::MemoryKind::kPool, 0x7f1234560000ull, 1ull << 33, 9};
  TraceBuilder t1(gf::kVersion2_0);
  t1.add(a);
  auto ao = read_back<gf::AllocRecord>(t1, gf::RecordType::kAlloc);
  EXPECT_EQ(ao.time_ns, a.time_ns); EXPECT_EQ(ao.thread_id, a.thread_id); EXPECT_EQ(ao.device, a.device);
  EXPECT_EQ(ao.stream, a.stream); EXPECT_EQ(ao.api, a.api); EXPECT_EQ(ao.kind, a.kind);
  EXPECT_EQ(ao.address, a.address); EXPECT_EQ(ao.size, a.size); EXPECT_EQ(ao.stack_id, a.stack_id);

  gf::FreeRecord f{2000, 78, -1, 0, gf::Api::kCuMemRelease, gf::MemoryKind::kPhysical, 42, 10, 700};
  TraceBuilder t2(gf::kVersion2_0);
  t2.add(f);
  auto fo = read_back<gf::FreeRecord>(t2, gf::RecordType::kFree);
  EXPECT_EQ(fo.time_ns, f.time_ns); EXPECT_EQ(fo.thread_id, f.thread_id); EXPECT_EQ(fo.device, f.device);
  EXPECT_EQ(fo.api, f.api); EXPECT_EQ(fo.kind, f.kind); EXPECT_EQ(fo.address, f.address);
  EXPECT_EQ(fo.stack_id, f.stack_id); EXPECT_EQ(fo.result, f.result);

  gf::AllocFailedRecord x{3000, 79, 1, 5, gf::Api::kCuMemAlloc, gf::MemoryKind::kDevice, 1ull << 40, 2, 11};
  TraceBuilder t3(gf::kVersion2_0);
  t3.add(x);
  auto xo = read_back<gf::AllocFailedRecord>(t3, gf::RecordType::kAllocFailed);
  EXPECT_EQ(xo.time_ns, x.time_ns); EXPECT_EQ(xo.device, x.device); EXPECT_EQ(xo.stream, x.stream);
  EXPECT_EQ(xo.api, x.api); EXPECT_EQ(xo.kind, x.kind); EXPECT_EQ(xo.size, x.size);
  EXPECT_EQ(xo.error, x.error); EXPECT_EQ(xo.stack_id, x.stack_id);
}

TEST(FormatRoundTrip, MemInfoMarkerDeviceAttributeEnd) {
  TraceBuilder t1(gf::kVersion2_0);
  t1.add(gf::MemInfoRecord{5, 2, 1000, 80ull << 30});
  auto m = read_back<gf::MemInfoRecord>(t1, gf::RecordType::kMemInfo);
  EXPECT_EQ(m.time_ns, 5u); EXPECT_EQ(m.device, 2); EXPECT_EQ(m.free_bytes, 1000u); EXPECT_EQ(m.total_bytes, 80ull << 30);

  TraceBuilder t2(gf::kVersion2_0);
  t2.add(gf::MarkerRecord{6, 9, gf::MarkerKind::kStep, "step 3"});
  auto k = read_back<gf::MarkerRecord>(t2, gf::RecordType::kMarker);
  EXPECT_EQ(k.time_ns, 6u); EXPECT_EQ(k.thread_id, 9u); EXPECT_EQ(k.kind, gf::MarkerKind::kStep); EXPECT_EQ(k.name, "step 3");
  EXPECT_EQ(k.stack_id, 0u);

  TraceBuilder t2s(gf::kVersion2_0);
  t2s.add(gf::MarkerRecord{7, 9, gf::MarkerKind::kRangePush, "torch.backward", 0xfeedbeefcafeull});
  auto ks = read_back<gf::MarkerRecord>(t2s, gf::RecordType::kMarker);
  EXPECT_EQ(ks.name, "torch.backward"); EXPECT_EQ(ks.stack_id, 0xfeedbeefcafeull);

  // A marker written before the stack field existed ends after its name: it has no stack.
  TraceBuilder t2o(gf::kVersion2_0);
  t2o.raw(static_cast<uint8_t>(gf::RecordType::kMarker), std::string("\x08\x09\x02\x02s1", 6));
  auto ko = read_back<gf::MarkerRecord>(t2o, gf::RecordType::kMarker);
  EXPECT_EQ(ko.time_ns, 8u); EXPECT_EQ(ko.kind, gf::MarkerKind::kStep); EXPECT_EQ(ko.name, "s1");
  EXPECT_EQ(ko.stack_id, 0u);

  TraceBuilder tl(gf::kVersion2_0);
  tl.add(gf::StackLabelRecord{0xabcdefull, "N5torch8autograd9generated11MmBackward0E"});
  auto l = read_back<gf::StackLabelRecord>(tl, gf::RecordType::kStackLabel);
  EXPECT_EQ(l.stack_id, 0xabcdefull); EXPECT_EQ(l.label, "N5torch8autograd9generated11MmBackward0E");

  TraceBuilder t3(gf::kVersion2_0);
  t3.add(gf::DeviceRecord{1, 141ull << 30, "NVIDIA H200"});
  auto d = read_back<gf::DeviceRecord>(t3, gf::RecordType::kDevice);
  EXPECT_EQ(d.device, 1); EXPECT_EQ(d.total_bytes, 141ull << 30); EXPECT_EQ(d.name, "NVIDIA H200");

  TraceBuilder t4(gf::kVersion2_0);
  t4.add(gf::AttributeRecord{"cuda.runtime_version", "13000"});
  auto a = read_back<gf::AttributeRecord>(t4, gf::RecordType::kAttribute);
  EXPECT_EQ(a.key, "cuda.runtime_version"); EXPECT_EQ(a.value, "13000");

  TraceBuilder t5(gf::kVersion2_0);
  t5.add(gf::EndRecord{123456});
  EXPECT_EQ(read_back<gf::EndRecord>(t5, gf::RecordType::kEnd).time_ns, 123456u);

  TraceBuilder t6(gf::kVersion2_0);
  t6.add(gf::FlushRecord{50'000'123});
  EXPECT_EQ(read_back<gf::FlushRecord>(t6, gf::RecordType::kFlush).time_ns, 50'000'123u);
}

// Format 3.1's NVML sample: every field, with and without this process's own figure.
TEST(FormatRoundTrip, ProcessMemory) {
  TraceBuilder t1(gf::kVersion2_0);  // records without blocks: read_back's reader reads them
  t1.add(gf::ProcessMemoryRecord{123456789, 3, gf::kProcessUsedKnown, 700ull << 20, 60ull << 30,
                                 141ull << 30});
  auto m = read_back<gf::ProcessMemoryRecord>(t1, gf::RecordType::kProcessMemory);
  EXPECT_EQ(m.time_ns, 123456789u);
  EXPECT_EQ(m.device, 3);
  EXPECT_TRUE(m.process_used_known());
  EXPECT_EQ(m.process_used_bytes, 700ull << 20);
  EXPECT_EQ(m.device_used_bytes, 60ull << 30);
  EXPECT_EQ(m.device_total_bytes, 141ull << 30);

  TraceBuilder t2(gf::kVersion1_1);  // the same payload in any version's file
  t2.process_memory(-1, UINT64_MAX, UINT64_MAX, -1);
  auto u = read_back<gf::ProcessMemoryRecord>(t2, gf::RecordType::kProcessMemory);
  EXPECT_FALSE(u.process_used_known());
  EXPECT_EQ(u.process_used_bytes, 0u);
  EXPECT_EQ(u.device, -1);
  EXPECT_EQ(u.device_used_bytes, UINT64_MAX);
  EXPECT_EQ(u.device_total_bytes, UINT64_MAX);

  // Cut anywhere, the payload is malformed.
  uint8_t buf[160];  // the event encoder wants room for its largest payload
  const size_t n = gf::encode(buf, sizeof buf, gf::ProcessMemoryRecord{1, 0, 1, 2, 3, 4});
  ASSERT_GT(n, 2u);
  for (size_t cut = 2; cut < n; ++cut) {
    gf::RawRecord raw;
    raw.type = gf::RecordType::kProcessMemory;
    raw.payload = buf + 2;
    raw.size = cut - 2;
    raw.readable_end = raw.payload + raw.size;
    gf::ProcessMemoryRecord o;
    EXPECT_FALSE(gf::decode(raw, o)) << "cut at " << cut;
  }
}

TEST(FormatReader, UnknownRecordTypeIsSkippable) {
  TraceBuilder t(gf::kVersion2_0);
  t.raw(200, "future payload").alloc(0x1000, 64);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(static_cast<int>(raw.type), 200);
  EXPECT_EQ(raw.size, 14u);
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(raw.type, gf::RecordType::kAlloc);
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
}

TEST(FormatReader, TruncatedFinalRecord) {
  TraceBuilder t(gf::kVersion2_0);
  t.alloc(0x1000, 64).alloc(0x2000, 128);
  auto& b = t.mutable_bytes();
  b.resize(b.size() - 2);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kTruncated);
}

TEST(FormatReader, GarbageInTheMiddleIsAnError) {
  TraceBuilder t(gf::kVersion2_0);
  t.alloc(0x1000, 64).append_bytes(std::string_view("\x00\x05\x00\x00\x00\x00\x00\x00", 8)).alloc(0x2000, 64);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kError);
  EXPECT_NE(reader.error().find("offset"), std::string::npos);
}

TEST(FormatReader, BadHeaders) {
  std::vector<uint8_t> empty;
  EXPECT_NE(gf::RecordReader(empty).read_header(), "");
  std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_NE(gf::RecordReader(elf).read_header().find("bad magic"), std::string::npos);
  TraceBuilder newer(gf::kVersion2_0);
  newer.header_version(gf::kVersionMajor + 1, 0);
  EXPECT_NE(gf::RecordReader(span_of(newer)).read_header().find("not supported"), std::string::npos);
  TraceBuilder minor(gf::kVersion2_0);
  minor.header_version(2, 7);
  EXPECT_EQ(gf::RecordReader(span_of(minor)).read_header(), "");
}

TEST(FormatRoundTrip, PyCodeAndPyStack) {
  std::string table("\x80\x00\xd8\x04\x05\x00", 6);
  gf::PyCodeRecord code{0x1234567890abcdefull, 42, "/app/train.py", "Model.forward", table, 12};
  std::vector<gf::PyFrameRef> frames = {{0x1234567890abcdefull, 17, 0}, {7, 0, gf::kPyFrameEntry},
                                        {0xffffffffffffffffull, 100000, 1}};
  gf::PyStackRecord stack{0xfeedull, static_cast<uint32_t>(frames.size()), frames.data()};
  TraceBuilder t(gf::kVersion2_0);
  t.add(code);
  t.add(stack);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  ASSERT_EQ(raw.type, gf::RecordType::kPyCode);
  gf::PyCodeRecord c;
  ASSERT_TRUE(gf::decode(raw, c));
  EXPECT_EQ(c.code_id, code.code_id); EXPECT_EQ(c.first_line, 42u);
  EXPECT_EQ(c.filename, code.filename); EXPECT_EQ(c.name, code.name);
  EXPECT_EQ(c.line_table, table); EXPECT_EQ(c.python_minor, 12);
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  ASSERT_EQ(raw.type, gf::RecordType::kPyStack);
  gf::PyStackRecord s;
  std::vector<gf::PyFrameRef> out;
  ASSERT_TRUE(gf::decode(raw, s, out));
  EXPECT_EQ(s.stack_id, 0xfeedull);
  ASSERT_EQ(out.size(), frames.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].code_id, frames[i].code_id);
    EXPECT_EQ(out[i].instr_offset, frames[i].instr_offset);
    EXPECT_EQ(out[i].flags, frames[i].flags);
  }
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
  // A frame count larger than the payload can hold is malformed, not a huge allocation.
  gf::RawRecord bad = raw;
  uint8_t payload[] = {0x01, 0xff, 0xff, 0x03};
  bad.payload = payload;
  bad.size = sizeof payload;
  EXPECT_FALSE(gf::decode(bad, s, out));
}

TEST(FormatRoundTrip, TorchEvent) {
  gf::TorchEventRecord e{4000, 81, 2, 0xdeadbeef, gf::TorchAction::kFreeCompleted,
                         0x7f00aa000000ull, 3ull << 20, 12};
  TraceBuilder t(gf::kVersion2_0);
  t.add(e);
  auto o = read_back<gf::TorchEventRecord>(t, gf::RecordType::kTorchEvent);
  EXPECT_EQ(o.time_ns, e.time_ns); EXPECT_EQ(o.thread_id, e.thread_id); EXPECT_EQ(o.device, e.device);
  EXPECT_EQ(o.stream, e.stream); EXPECT_EQ(o.action, e.action); EXPECT_EQ(o.address, e.address);
  EXPECT_EQ(o.size, e.size); EXPECT_EQ(o.stack_id, e.stack_id);

  // Extremes fit the unchecked fast path: every varint at its longest, a negative device (1.x;
  // the fixed layout's extremes: FormatLayouts below).
  gf::TorchEventRecord big{UINT64_MAX, UINT64_MAX, INT32_MIN, UINT64_MAX, gf::TorchAction::kOom,
                           UINT64_MAX, UINT64_MAX, UINT64_MAX};
  TraceBuilder t2(gf::kVersion1_1);
  t2.add(big);
  auto b = read_back<gf::TorchEventRecord>(t2, gf::RecordType::kTorchEvent);
  EXPECT_EQ(b.time_ns, UINT64_MAX); EXPECT_EQ(b.thread_id, UINT64_MAX); EXPECT_EQ(b.device, INT32_MIN);
  EXPECT_EQ(b.action, gf::TorchAction::kOom);
  EXPECT_EQ(b.address, UINT64_MAX); EXPECT_EQ(b.size, UINT64_MAX); EXPECT_EQ(b.stack_id, UINT64_MAX);
  EXPECT_EQ(gf::torch_action_name(gf::TorchAction::kSegmentUnmap), "segment_unmap");
}

TEST(FormatRoundTrip, TorchEventUnknownActionDecodes) {
  gf::TorchEventRecord e{1, 2, 0, 0, static_cast<gf::TorchAction>(9), 0x1000, 64, 0};
  TraceBuilder t(gf::kVersion2_0);
  t.add(e);
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  gf::TorchEventRecord out;
  EXPECT_TRUE(gf::decode(raw, out));  // a later action: the reader ignores it
  EXPECT_EQ(static_cast<int>(out.action), 9);
  EXPECT_EQ(out.size, 64u);
}

// The word-at-a-time varint (ten bytes readable) and the byte-by-byte one near the end of the
// readable memory must agree on every length, on values that overflow 64 bits and on varints that
// run past the record.
TEST(FormatVarint, FastAndCarefulPathsAgree) {
  std::vector<uint64_t> values{0, 1, 127, 128, 300, UINT64_MAX, UINT64_MAX - 1, 1ull << 63};
  for (int bits = 1; bits <= 64; ++bits) {
    values.push_back((bits == 64 ? 0 : (1ull << bits)) - 1);
    values.push_back((1ull << (bits - 1)) | (0x5a5a5a5a5a5a5a5aull & ((1ull << (bits - 1)) - 1)));
  }
  for (uint64_t v : values) {
    uint8_t buf[32] = {};
    gf::ByteWriter w(buf, sizeof buf);
    w.varint(v);
    w.varint(v ^ 0x3c);  // a second one right behind
    const size_t n = w.size();
    // Fast: lots of readable memory after the two varints.
    gf::ByteReader fast(buf, n, buf + sizeof buf);
    EXPECT_EQ(fast.varint(), v);
    EXPECT_EQ(fast.varint(), v ^ 0x3c);
    EXPECT_FALSE(fast.failed());
    EXPECT_EQ(fast.remaining(), 0u);
    // Careful: the readable memory ends with the span.
    gf::ByteReader careful(buf, n);
    EXPECT_EQ(careful.varint(), v);
    EXPECT_EQ(careful.varint(), v ^ 0x3c);
    EXPECT_FALSE(careful.failed());
    // Branch-free length (varint_varying), with and without the 16 readable bytes it needs.
    gf::ByteReader varying(buf, n, buf + sizeof buf), varying_near_end(buf, n);
    EXPECT_EQ(varying.varint_varying(), v);
    EXPECT_EQ(varying.varint_varying(), v ^ 0x3c);
    EXPECT_EQ(varying_near_end.varint_varying(), v);
    EXPECT_EQ(varying_near_end.varint_varying(), v ^ 0x3c);
    EXPECT_FALSE(varying.failed() || varying_near_end.failed());
    EXPECT_EQ(varying.remaining(), 0u);
    // Cut one byte short: the second varint runs past the span on every path.
    gf::ByteReader cut_fast(buf, n - 1, buf + sizeof buf), cut_careful(buf, n - 1),
        cut_varying(buf, n - 1, buf + sizeof buf);
    cut_fast.varint();
    cut_careful.varint();
    cut_varying.varint_varying();
    EXPECT_EQ(cut_fast.varint(), 0u);
    EXPECT_EQ(cut_careful.varint(), 0u);
    EXPECT_EQ(cut_varying.varint_varying(), 0u);
    EXPECT_TRUE(cut_fast.failed());
    EXPECT_TRUE(cut_careful.failed());
    EXPECT_TRUE(cut_varying.failed());
  }
  // Eleven continuation bytes, and a tenth byte carrying more than bit 63: same on both paths.
  const uint8_t too_long[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  const uint8_t overflow[16] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x03};
  for (const uint8_t* bytes : {too_long, overflow}) {
    gf::ByteReader fast(bytes, 11, bytes + 16), careful(bytes, 11), varying(bytes, 11, bytes + 16);
    uint64_t a = fast.varint(), b = careful.varint(), c = varying.varint_varying();
    EXPECT_EQ(a, b);
    EXPECT_EQ(c, b);
    EXPECT_EQ(fast.failed(), careful.failed());
    EXPECT_EQ(varying.failed(), careful.failed());
    EXPECT_EQ(fast.remaining(), careful.remaining());
    EXPECT_EQ(varying.remaining(), careful.remaining());
  }
}

// ---- Format 2.0: the hot records' fixed layout (docs/trace-format.md), and 1.x still read. ----

namespace gpumemshim::format {
void PrintTo(const Version& v, std::ostream* os) { *os << v.major << "." << v.minor; }
}  // namespace gpumemshim::format

namespace {

// The single record after the header, decoded; checks the reader's layout flag for the file.
template <typename Rec>
Rec read_hot(const TraceBuilder& t, gf::RecordType type, gf::Version v, size_t fixed_size) {
  gf::RecordReader reader(span_of(t));
  EXPECT_EQ(reader.read_header(), "");
  EXPECT_EQ(reader.version().major, v.major);
  EXPECT_EQ(reader.version().minor, v.minor);
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(raw.type, type);
  EXPECT_EQ(raw.fixed_layout, v.major >= 2);
  if (v.major >= 2) {
    EXPECT_EQ(raw.size, fixed_size);
  }
  Rec out;
  EXPECT_TRUE(gf::decode(raw, out));
  if (v.major >= 2) {  // the analyzer's inline readers agree with decode()
    Rec inl;
    EXPECT_TRUE(gf::decode_fixed(raw.payload, inl));
    EXPECT_EQ(inl.time_ns, out.time_ns);
    EXPECT_EQ(inl.address, out.address);
    EXPECT_EQ(inl.stack_id, out.stack_id);
    auto [time, thread] = gf::fixed_time_and_thread(raw.payload);
    EXPECT_EQ(time, out.time_ns);
    EXPECT_EQ(thread, out.thread_id);
  }
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
  return out;
}

std::string describe(gf::Version v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

class FormatLayouts : public ::testing::TestWithParam<gf::Version> {};

// One hot record's payload as the 2.0 encoder writes it.
template <typename Rec>
std::string fixed_payload(const Rec& r) {
  uint8_t buf[64];
  size_t n = gf::encode(buf, sizeof buf, r);
  EXPECT_EQ(static_cast<size_t>(buf[1]), n - 2);
  return std::string(reinterpret_cast<const char*>(buf + 2), n - 2);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Versions, FormatLayouts, ::testing::Values(gf::Version{1, 0}, gf::kVersion1_1, gf::kVersion2_0),
                         [](const auto& info) {
                           return "v" + std::to_string(info.param.major) + "_" + std::to_string(info.param.minor);
                         });

TEST_P(FormatLayouts, AllocEveryFieldAndExtremes) {
  const gf::Version v = GetParam();
  const gf::AllocRecord cases[] = {
      {1000, 77, 3, 0x55, gf::Api::kCudaMallocAsync, gf::MemoryKind::kPool, 0x7f1234560000ull, 1ull << 33, 9},
      {UINT64_MAX, UINT32_MAX, -1, UINT64_MAX, gf::Api::kCuMemGetInfo, gf::MemoryKind::kReservation,
       UINT64_MAX, UINT64_MAX, UINT64_MAX},
      {0, 0, 0, 0, gf::Api::kUnknown, gf::MemoryKind::kDevice, 0, 0, 0},
      {1, 1, INT16_MIN, 1, static_cast<gf::Api>(255), gf::MemoryKind::kManaged, 1, 1, 1},  // api: any byte
  };
  for (const gf::AllocRecord& a : cases) {
    SCOPED_TRACE(describe(v) + " time " + std::to_string(a.time_ns));
    TraceBuilder t(v);
    t.add(a);
    auto o = read_hot<gf::AllocRecord>(t, gf::RecordType::kAlloc, v, gf::kFixedAllocSize);
    EXPECT_EQ(o.time_ns, a.time_ns); EXPECT_EQ(o.thread_id, a.thread_id); EXPECT_EQ(o.device, a.device);
    EXPECT_EQ(o.stream, a.stream); EXPECT_EQ(o.api, a.api); EXPECT_EQ(o.kind, a.kind);
    EXPECT_EQ(o.address, a.address); EXPECT_EQ(o.size, a.size); EXPECT_EQ(o.stack_id, a.stack_id);
  }
}

TEST_P(FormatLayouts, FreeEveryFieldAndExtremes) {
  const gf::Version v = GetParam();
  const gf::FreeRecord cases[] = {
      {2000, 78, -1, 0, gf::Api::kCuMemRelease, gf::MemoryKind::kPhysical, 42, 10, 700},
      {UINT64_MAX, UINT32_MAX, INT16_MAX, UINT64_MAX, gf::Api::kCudaFreeAsync, gf::MemoryKind::kMapping,
       UINT64_MAX, UINT64_MAX, UINT32_MAX},
      {0, 0, 0, 0, gf::Api::kUnknown, gf::MemoryKind::kDevice, 0, 0, 0},
  };
  for (const gf::FreeRecord& f : cases) {
    SCOPED_TRACE(describe(v) + " time " + std::to_string(f.time_ns));
    TraceBuilder t(v);
    t.add(f);
    auto o = read_hot<gf::FreeRecord>(t, gf::RecordType::kFree, v, gf::kFixedFreeSize);
    EXPECT_EQ(o.time_ns, f.time_ns); EXPECT_EQ(o.thread_id, f.thread_id); EXPECT_EQ(o.device, f.device);
    EXPECT_EQ(o.stream, f.stream); EXPECT_EQ(o.api, f.api); EXPECT_EQ(o.kind, f.kind);
    EXPECT_EQ(o.address, f.address); EXPECT_EQ(o.stack_id, f.stack_id); EXPECT_EQ(o.result, f.result);
  }
}

TEST_P(FormatLayouts, TorchEventEveryFieldAndExtremes) {
  const gf::Version v = GetParam();
  const gf::TorchEventRecord cases[] = {
      {4000, 81, 2, 0xdeadbeef, gf::TorchAction::kFreeCompleted, 0x7f00aa000000ull, 3ull << 20, 12},
      {UINT64_MAX, UINT32_MAX, -1, UINT64_MAX, gf::TorchAction::kOom, UINT64_MAX, UINT64_MAX, UINT64_MAX},
      {0, 0, 0, 0, static_cast<gf::TorchAction>(200), 0, 0, 0},  // a later action: decodes
  };
  for (const gf::TorchEventRecord& e : cases) {
    SCOPED_TRACE(describe(v) + " time " + std::to_string(e.time_ns));
    TraceBuilder t(v);
    t.add(e);
    auto o = read_hot<gf::TorchEventRecord>(t, gf::RecordType::kTorchEvent, v, gf::kFixedTorchEventSize);
    EXPECT_EQ(o.time_ns, e.time_ns); EXPECT_EQ(o.thread_id, e.thread_id); EXPECT_EQ(o.device, e.device);
    EXPECT_EQ(o.stream, e.stream); EXPECT_EQ(o.action, e.action); EXPECT_EQ(o.address, e.address);
    EXPECT_EQ(o.size, e.size); EXPECT_EQ(o.stack_id, e.stack_id);
  }
}

// The other records keep their varint payloads in 2.0: the same bytes in both versions.
TEST_P(FormatLayouts, OtherRecordsAreTheSameInEveryVersion) {
  TraceBuilder t(GetParam()), ref(gf::kVersion2_0);
  for (TraceBuilder* b : {&t, &ref}) {
    b->add(gf::AllocFailedRecord{3000, 79, 1, 5, gf::Api::kCuMemAlloc, gf::MemoryKind::kDevice, 1ull << 40, 2, 11});
    b->add(gf::MemInfoRecord{5, 2, 1000, 80ull << 30});
    b->add(gf::MarkerRecord{6, 9, gf::MarkerKind::kStep, "step 3", 7});
    b->add(gf::FlushRecord{8});
  }
  EXPECT_EQ(t.view().substr(gf::kHeaderSize), ref.view().substr(gf::kHeaderSize));
}

TEST(FormatLayouts, DeviceIsSavedAsI16InTheFixedLayout) {
  const std::pair<int32_t, int32_t> cases[] = {{-1, -1}, {0, 0}, {7, 7}, {32767, 32767}, {32768, 32767},
                                                {-32768, -32768}, {-32769, -32768}, {INT32_MAX, 32767},
                                                {INT32_MIN, -32768}};
  for (auto [in, stored] : cases) {
    SCOPED_TRACE(in);
    TraceBuilder fixed(gf::kVersion2_0), varint(gf::kVersion1_1);
    gf::AllocRecord a{1, 2, in, 0, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice, 0x1000, 64, 0};
    fixed.add(a);
    varint.add(a);
    EXPECT_EQ(read_hot<gf::AllocRecord>(fixed, gf::RecordType::kAlloc, gf::kVersion2_0, gf::kFixedAllocSize).device, stored);
    EXPECT_EQ(read_hot<gf::AllocRecord>(varint, gf::RecordType::kAlloc, gf::kVersion1_1, 0).device, in);
    gf::TorchEventRecord e{1, 2, in, 0, gf::TorchAction::kAlloc, 0x1000, 64, 0};
    TraceBuilder torch(gf::kVersion2_0);
    torch.add(e);
    EXPECT_EQ(read_hot<gf::TorchEventRecord>(torch, gf::RecordType::kTorchEvent, gf::kVersion2_0,
                                             gf::kFixedTorchEventSize).device, stored);
  }
}

// The documented byte layout, byte for byte (docs/trace-format.md "Format 2.0").
TEST(FormatLayouts, FixedAllocBytes) {
  gf::AllocRecord a{0x0807060504030201ull, 0x0c0b0a09, -2, 0x2f2e2d2c2b2a2928ull, gf::Api::kCudaMalloc,
                    gf::MemoryKind::kPool, 0x1716151413121110ull, 0x1f1e1d1c1b1a1918ull, 0x2726252423222120ull};
  const std::string p = fixed_payload(a);
  ASSERT_EQ(p.size(), 48u);
  const std::string expect(
      "\x01\x02\x03\x04\x05\x06\x07\x08"  // time_ns
      "\x09\x0a\x0b\x0c"                  // thread
      "\xfe\xff"                          // device -2
      "\x01\x04"                          // api, memory kind
      "\x10\x11\x12\x13\x14\x15\x16\x17"  // address
      "\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"  // size
      "\x20\x21\x22\x23\x24\x25\x26\x27"  // stack_id
      "\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f",  // stream
      48);
  EXPECT_EQ(p, expect);
  gf::FreeRecord f{1, 2, 3, 4, gf::Api::kCudaFree, gf::MemoryKind::kDevice, 5, 6, 0x0a0b0c0d};
  const std::string q = fixed_payload(f);
  ASSERT_EQ(q.size(), 44u);
  EXPECT_EQ(q[16], 5); EXPECT_EQ(q[24], 6); EXPECT_EQ(q[32], 4);
  EXPECT_EQ(q.substr(40), std::string("\x0d\x0c\x0b\x0a", 4));
  gf::TorchEventRecord e{1, 2, 3, 4, gf::TorchAction::kSegmentMap, 5, 6, 7};
  const std::string r = fixed_payload(e);
  ASSERT_EQ(r.size(), 48u);
  EXPECT_EQ(r[14], 6); EXPECT_EQ(r[15], 0);
  EXPECT_EQ(r[16], 5); EXPECT_EQ(r[24], 6); EXPECT_EQ(r[32], 7); EXPECT_EQ(r[40], 4);
}

// The encoder's contract: bytes written, 0 when the record does not fit.
TEST(FormatLayouts, FixedEncoderCapacity) {
  uint8_t buf[64];
  gf::AllocRecord a;
  gf::FreeRecord f;
  gf::TorchEventRecord e;
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedAllocSize - 1, a), 0u);
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedAllocSize, a), 2 + gf::kFixedAllocSize);
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedFreeSize - 1, f), 0u);
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedFreeSize, f), 2 + gf::kFixedFreeSize);
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedTorchEventSize - 1, e), 0u);
  EXPECT_EQ(gf::encode(buf, 2 + gf::kFixedTorchEventSize, e), 2 + gf::kFixedTorchEventSize);
  EXPECT_EQ(gf::encode(buf, 0, a), 0u);
  uint8_t header[gf::kHeaderSizeV3];
  // The version written: 3.3.
  ASSERT_EQ(gf::encode_header(header, sizeof header), gf::kHeaderSizeV3);
  EXPECT_EQ(header[8] | header[9] << 8, 3);
  EXPECT_EQ(header[10] | header[11] << 8, 3);
  EXPECT_EQ(gf::encode_header(header, gf::kHeaderSizeV3 - 1), 0u);
  ASSERT_EQ(gf::encode_header(header, sizeof header, gf::kVersion2_0), gf::kHeaderSize);
  EXPECT_EQ(header[8] | header[9] << 8, 2);
  ASSERT_EQ(gf::encode_header(header, sizeof header, gf::kVersion1_1), gf::kHeaderSize);
  EXPECT_EQ(header[8] | header[9] << 8, 1);
  EXPECT_EQ(header[10] | header[11] << 8, 1);
}

// A fixed payload one byte short is malformed; bytes after the layout (a later 2.x minor's
// fields) are ignored.
TEST(FormatLayouts, ShortFixedPayloadFailsTrailingBytesAreIgnored) {
  const gf::AllocRecord a{10, 11, 1, 12, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice, 0x1000, 64, 13};
  const gf::FreeRecord f{20, 21, 1, 22, gf::Api::kCudaFree, gf::MemoryKind::kDevice, 0x1000, 23, 24};
  const gf::TorchEventRecord e{30, 31, 1, 32, gf::TorchAction::kAlloc, 0x1000, 64, 33};
  const std::string pa = fixed_payload(a), pf = fixed_payload(f), pe = fixed_payload(e);
  TraceBuilder t(gf::kVersion2_0);
  t.raw(4, pa.substr(0, pa.size() - 1)).raw(5, pf.substr(0, pf.size() - 1)).raw(14, pe.substr(0, pe.size() - 1));
  t.raw(4, pa + "later").raw(5, pf + "later").raw(14, pe + "later");
  t.raw(4, "").raw(5, "").raw(14, "");
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  gf::RawRecord raw;
  gf::AllocRecord ao;
  gf::FreeRecord fo;
  gf::TorchEventRecord eo;
  auto next = [&] {
    EXPECT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
    EXPECT_TRUE(raw.fixed_layout);
    return raw;
  };
  // one byte short
  EXPECT_FALSE(gf::decode(next(), ao));
  EXPECT_FALSE(gf::decode(next(), fo));
  EXPECT_FALSE(gf::decode(next(), eo));
  // longer than the layout
  ASSERT_TRUE(gf::decode(next(), ao));
  EXPECT_EQ(ao.time_ns, 10u); EXPECT_EQ(ao.stream, 12u); EXPECT_EQ(ao.stack_id, 13u);
  ASSERT_TRUE(gf::decode(next(), fo));
  EXPECT_EQ(fo.time_ns, 20u); EXPECT_EQ(fo.stream, 22u); EXPECT_EQ(fo.result, 24u);
  ASSERT_TRUE(gf::decode(next(), eo));
  EXPECT_EQ(eo.time_ns, 30u); EXPECT_EQ(eo.stream, 32u); EXPECT_EQ(eo.stack_id, 33u);
  // empty
  EXPECT_FALSE(gf::decode(next(), ao));
  EXPECT_FALSE(gf::decode(next(), fo));
  EXPECT_FALSE(gf::decode(next(), eo));
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
}

// Memory kinds are checked as in 1.x: 1..kMemoryKindMax.
TEST(FormatLayouts, FixedMemoryKindIsValidated) {
  for (int kind : {0, 1, 7, 8, 255}) {
    SCOPED_TRACE(kind);
    const bool ok = kind >= 1 && kind <= gf::kMemoryKindMax;
    for (gf::Version v : {gf::kVersion1_1, gf::kVersion2_0}) {
      TraceBuilder t(v);
      t.add(gf::AllocRecord{1, 2, 0, 0, gf::Api::kCudaMalloc, static_cast<gf::MemoryKind>(kind), 0x1000, 64, 0});
      t.add(gf::FreeRecord{1, 2, 0, 0, gf::Api::kCudaFree, static_cast<gf::MemoryKind>(kind), 0x1000, 0, 0});
      gf::RecordReader reader(span_of(t));
      ASSERT_EQ(reader.read_header(), "");
      gf::RawRecord raw;
      gf::AllocRecord a;
      gf::FreeRecord f;
      ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
      EXPECT_EQ(gf::decode(raw, a), ok);
      ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);
      EXPECT_EQ(gf::decode(raw, f), ok);
    }
  }
}

// Readers read 1.0, 1.1, 2.0 and 3.0 (and later minors); a 4.0 file is rejected with a one-line
// error.
TEST(FormatLayouts, VersionsRead) {
  for (gf::Version v : {gf::Version{1, 0}, gf::Version{1, 1}, gf::Version{2, 0}, gf::Version{2, 5},
                        gf::Version{3, 0}, gf::Version{3, 2}, gf::Version{3, 3}}) {
    TraceBuilder t(v);
    gf::RecordReader reader(span_of(t));
    EXPECT_EQ(reader.read_header(), "") << describe(v);
  }
  TraceBuilder three(gf::kVersion2_0);
  three.header_version(4, 0);
  const std::string err = gf::RecordReader(span_of(three)).read_header();
  EXPECT_NE(err.find("version 4.0 is not supported"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  TraceBuilder zero(gf::kVersion2_0);
  zero.header_version(0, 9);
  EXPECT_NE(gf::RecordReader(span_of(zero)).read_header().find("not supported"), std::string::npos);
}

// RecordReader::next_hot frames a 2.x file's run of hot records and stops, at the right byte, at
// anything else (another type, a record it cannot frame whole, the byte budget); next() reads on
// from there. A 1.x file's hot records are next()'s alone.
TEST(FormatReader, NextHotFramesRunsOfHotRecordsAndStopsBeforeTheRest) {
  TraceBuilder t(gf::kVersion2_0);
  t.alloc(0x1000, 64).free(0x1000).torch(gf::TorchAction::kAlloc, 0x2000, 32);
  t.marker(gf::MarkerKind::kStep, "a step marker, long enough to be framed like a hot record");
  t.alloc(0x3000, 64).alloc(0x4000, 64).alloc(0x5000, 64);
  t.mutable_bytes().pop_back();  // the last one truncated by a byte
  gf::RecordReader reader(span_of(t));
  ASSERT_EQ(reader.read_header(), "");
  std::vector<gf::RecordType> hot;
  auto take = [&](const uint8_t* rec) {
    hot.push_back(static_cast<gf::RecordType>(rec[0]));
    EXPECT_EQ(rec[1], gf::fixed_payload_size(static_cast<gf::RecordType>(rec[0])));
    return true;
  };
  reader.next_hot(1 << 20, take);
  EXPECT_EQ(hot, (std::vector<gf::RecordType>{gf::RecordType::kAlloc, gf::RecordType::kFree,
                                              gf::RecordType::kTorchEvent}));
  gf::RawRecord raw;
  ASSERT_EQ(reader.next(raw), gf::ReadStatus::kRecord);  // the marker
  EXPECT_EQ(raw.type, gf::RecordType::kMarker);
  hot.clear();
  reader.next_hot(1, take);  // a budget of one byte: one record (it starts within the budget)
  EXPECT_EQ(hot.size(), 1u);
  reader.next_hot(1 << 20, [&](const uint8_t* rec) {  // refused: the position stays at it
    hot.push_back(static_cast<gf::RecordType>(rec[0]));
    return false;
  });
  EXPECT_EQ(hot.size(), 2u);
  reader.next_hot(1 << 20, take);  // the refused one again, then the truncated one is left
  EXPECT_EQ(hot.size(), 3u);
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kTruncated);

  TraceBuilder old(gf::kVersion1_1);
  old.alloc(0x1000, 64);
  gf::RecordReader v1(span_of(old));
  ASSERT_EQ(v1.read_header(), "");
  hot.clear();
  v1.next_hot(1 << 20, take);
  EXPECT_TRUE(hot.empty());
  ASSERT_EQ(v1.next(raw), gf::ReadStatus::kRecord);
  EXPECT_EQ(raw.type, gf::RecordType::kAlloc);
}

// A stream whose blocks decompress faster than a reader reads them (a repetitive loop's), more than
// twice BlockStream::kAhead long.
class LoopStream : public ::testing::Test {
 protected:
  void SetUp() override {
    TraceBuilder t;
    t.blocks(1024);
    t.process(1, "app");
    for (uint64_t i = 0; i < 800'000; ++i) t.alloc(0x100000, 4096).free(0x100000);
    t.end();
    ASSERT_EQ(file.open(t.write(dir.file("t.trace"))), "");
    scan = gf::scan_blocks(file.bytes());
    ASSERT_GT(scan.raw_bytes, 2 * gf::BlockStream::kAhead);
    for (const gf::BlockRef& b : scan.blocks)
      largest = std::max<uint64_t>(largest, b.header.raw_size);
  }

  gpumemshim::testing::TempDir dir;
  gf::MappedFile file;
  gf::BlockScan scan;
  uint64_t largest = 0;  // a block's raw size
};

// Read threads decompress ahead of the reader only so far (BlockStream::kAhead): a stream whose
// blocks decompress faster than the reader reads them (two threads) must not end up decompressed,
// and resident, whole while the reader stands still.
TEST_F(LoopStream, ReadThreadsStayWithinTheirLeadOfTheReader) {
  gf::BlockStream stream(scan, file.bytes(), gf::kVersion, 2u);
  ASSERT_GT(stream.wait_beyond(0), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // as far ahead as they may go
  EXPECT_LE(stream.wait_beyond(0), gf::BlockStream::kAhead + largest);
}

// The sink's thread that shares the blocks (ReadHelp, no read threads) keeps the same lead: it
// takes blocks until that far ahead, then none until the reader moves on.
TEST_F(LoopStream, AHelperStaysWithinItsLeadOfTheReader) {
  gf::BlockStream stream(scan, file.bytes(), gf::kVersion, 0u, true);
  ASSERT_TRUE(stream.helped());
  size_t taken = 0;
  while (stream.help()) ++taken;
  EXPECT_GT(taken, 1u);
  const uint64_t ahead = stream.wait_beyond(0);  // what the helper made ready
  EXPECT_GE(ahead, gf::BlockStream::kAhead - largest);
  EXPECT_LE(ahead, gf::BlockStream::kAhead + largest);
  stream.consumed(ahead);  // the reader caught up: the helper takes blocks again
  EXPECT_TRUE(stream.help());
  EXPECT_EQ(stream.finish().good_blocks, scan.blocks.size());
}

// A stream no sink helps, or one with read threads, is not shared.
TEST(BlockStream, OnlyAStreamWithoutReadThreadsIsShared) {
  gpumemshim::testing::TempDir dir;
  TraceBuilder t;
  t.blocks(1024);
  for (uint64_t i = 0; i < 100'000; ++i) t.alloc(0x100000, 4096).free(0x100000);
  t.end();
  gf::MappedFile file;
  ASSERT_EQ(file.open(t.write(dir.file("t.trace"))), "");
  const gf::BlockScan scan = gf::scan_blocks(file.bytes());
  ASSERT_GT(scan.raw_bytes, 1u << 20);
  EXPECT_FALSE(gf::BlockStream(scan, file.bytes(), gf::kVersion, 0u, false).helped());
  gf::BlockStream threaded(scan, file.bytes(), gf::kVersion, 1u, true);
  EXPECT_FALSE(threaded.helped());
  EXPECT_FALSE(threaded.help());
}
