// Round trip of every record type through the encoder and the decoder, and the reader's handling
// of unknown, truncated and malformed input.
#include <gtest/gtest.h>

#include <vector>

#include "gpumemshim/format/decoder.h"
#include "gpumemshim/format/encoder.h"
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
  TraceBuilder t;
  gf::RecordReader reader(span_of(t));
  EXPECT_EQ(reader.read_header(), "");
  EXPECT_EQ(reader.version().major, gf::kVersionMajor);
  EXPECT_EQ(reader.version().minor, gf::kVersionMinor);
  gf::RawRecord raw;
  EXPECT_EQ(reader.next(raw), gf::ReadStatus::kEnd);
}

TEST(FormatRoundTrip, Process) {
  gf::ProcessRecord r{4242, 17, -1, 123456789012345ull, 987654321, "node-3", "python train.py --x", "/usr/bin/python3"};
  TraceBuilder t;
  t.add(r);
  auto o = read_back<gf::ProcessRecord>(t, gf::RecordType::kProcess);
  EXPECT_EQ(o.pid, r.pid); EXPECT_EQ(o.ppid, r.ppid); EXPECT_EQ(o.rank, r.rank);
  EXPECT_EQ(o.start_wall_ns, r.start_wall_ns); EXPECT_EQ(o.start_mono_ns, r.start_mono_ns);
  EXPECT_EQ(o.host, r.host); EXPECT_EQ(o.command_line, r.command_line); EXPECT_EQ(o.executable, r.executable);
}

TEST(FormatRoundTrip, Module) {
  std::string build_id("\x01\x02\xff\x00\x7f", 5);
  gf::ModuleRecord r{0x7f0000000000ull, 0x7f0000001000ull, 0x23000, build_id, "/lib/libfoo.so"};
  TraceBuilder t;
  t.add(r);
  auto o = read_back<gf::ModuleRecord>(t, gf::RecordType::kModule);
  EXPECT_EQ(o.load_bias, r.load_bias); EXPECT_EQ(o.start, r.start); EXPECT_EQ(o.size, r.size);
  EXPECT_EQ(o.build_id, build_id); EXPECT_EQ(o.path, r.path);
}

TEST(FormatRoundTrip, Stack) {
  std::vector<uint64_t> frames = {0x7f00000012345ull, 0x401000, 0xffffffffffffff00ull, 0, 0x401004};
  TraceBuilder t;
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
  TraceBuilder t1;
  t1.add(a);
  auto ao = read_back<gf::AllocRecord>(t1, gf::RecordType::kAlloc);
  EXPECT_EQ(ao.time_ns, a.time_ns); EXPECT_EQ(ao.thread_id, a.thread_id); EXPECT_EQ(ao.device, a.device);
  EXPECT_EQ(ao.stream, a.stream); EXPECT_EQ(ao.api, a.api); EXPECT_EQ(ao.kind, a.kind);
  EXPECT_EQ(ao.address, a.address); EXPECT_EQ(ao.size, a.size); EXPECT_EQ(ao.stack_id, a.stack_id);

  gf::FreeRecord f{2000, 78, -1, 0, gf::Api::kCuMemRelease, gf::MemoryKind::kPhysical, 42, 10, 700};
  TraceBuilder t2;
  t2.add(f);
  auto fo = read_back<gf::FreeRecord>(t2, gf::RecordType::kFree);
  EXPECT_EQ(fo.time_ns, f.time_ns); EXPECT_EQ(fo.thread_id, f.thread_id); EXPECT_EQ(fo.device, f.device);
  EXPECT_EQ(fo.api, f.api); EXPECT_EQ(fo.kind, f.kind); EXPECT_EQ(fo.address, f.address);
  EXPECT_EQ(fo.stack_id, f.stack_id); EXPECT_EQ(fo.result, f.result);

  gf::AllocFailedRecord x{3000, 79, 1, 5, gf::Api::kCuMemAlloc, gf::MemoryKind::kDevice, 1ull << 40, 2, 11};
  TraceBuilder t3;
  t3.add(x);
  auto xo = read_back<gf::AllocFailedRecord>(t3, gf::RecordType::kAllocFailed);
  EXPECT_EQ(xo.time_ns, x.time_ns); EXPECT_EQ(xo.device, x.device); EXPECT_EQ(xo.stream, x.stream);
  EXPECT_EQ(xo.api, x.api); EXPECT_EQ(xo.kind, x.kind); EXPECT_EQ(xo.size, x.size);
  EXPECT_EQ(xo.error, x.error); EXPECT_EQ(xo.stack_id, x.stack_id);
}

TEST(FormatRoundTrip, MemInfoMarkerDeviceAttributeEnd) {
  TraceBuilder t1;
  t1.add(gf::MemInfoRecord{5, 2, 1000, 80ull << 30});
  auto m = read_back<gf::MemInfoRecord>(t1, gf::RecordType::kMemInfo);
  EXPECT_EQ(m.time_ns, 5u); EXPECT_EQ(m.device, 2); EXPECT_EQ(m.free_bytes, 1000u); EXPECT_EQ(m.total_bytes, 80ull << 30);

  TraceBuilder t2;
  t2.add(gf::MarkerRecord{6, 9, gf::MarkerKind::kStep, "step 3"});
  auto k = read_back<gf::MarkerRecord>(t2, gf::RecordType::kMarker);
  EXPECT_EQ(k.time_ns, 6u); EXPECT_EQ(k.thread_id, 9u); EXPECT_EQ(k.kind, gf::MarkerKind::kStep); EXPECT_EQ(k.name, "step 3");
  EXPECT_EQ(k.stack_id, 0u);

  TraceBuilder t2s;
  t2s.add(gf::MarkerRecord{7, 9, gf::MarkerKind::kRangePush, "torch.backward", 0xfeedbeefcafeull});
  auto ks = read_back<gf::MarkerRecord>(t2s, gf::RecordType::kMarker);
  EXPECT_EQ(ks.name, "torch.backward"); EXPECT_EQ(ks.stack_id, 0xfeedbeefcafeull);

  // A marker written before the stack field existed ends after its name: it has no stack.
  TraceBuilder t2o;
  t2o.raw(static_cast<uint8_t>(gf::RecordType::kMarker), std::string("\x08\x09\x02\x02s1", 6));
  auto ko = read_back<gf::MarkerRecord>(t2o, gf::RecordType::kMarker);
  EXPECT_EQ(ko.time_ns, 8u); EXPECT_EQ(ko.kind, gf::MarkerKind::kStep); EXPECT_EQ(ko.name, "s1");
  EXPECT_EQ(ko.stack_id, 0u);

  TraceBuilder tl;
  tl.add(gf::StackLabelRecord{0xabcdefull, "N5torch8autograd9generated11MmBackward0E"});
  auto l = read_back<gf::StackLabelRecord>(tl, gf::RecordType::kStackLabel);
  EXPECT_EQ(l.stack_id, 0xabcdefull); EXPECT_EQ(l.label, "N5torch8autograd9generated11MmBackward0E");

  TraceBuilder t3;
  t3.add(gf::DeviceRecord{1, 141ull << 30, "NVIDIA H200"});
  auto d = read_back<gf::DeviceRecord>(t3, gf::RecordType::kDevice);
  EXPECT_EQ(d.device, 1); EXPECT_EQ(d.total_bytes, 141ull << 30); EXPECT_EQ(d.name, "NVIDIA H200");

  TraceBuilder t4;
  t4.add(gf::AttributeRecord{"cuda.runtime_version", "13000"});
  auto a = read_back<gf::AttributeRecord>(t4, gf::RecordType::kAttribute);
  EXPECT_EQ(a.key, "cuda.runtime_version"); EXPECT_EQ(a.value, "13000");

  TraceBuilder t5;
  t5.add(gf::EndRecord{123456});
  EXPECT_EQ(read_back<gf::EndRecord>(t5, gf::RecordType::kEnd).time_ns, 123456u);

  TraceBuilder t6;
  t6.add(gf::FlushRecord{50'000'123});
  EXPECT_EQ(read_back<gf::FlushRecord>(t6, gf::RecordType::kFlush).time_ns, 50'000'123u);
}

TEST(FormatReader, UnknownRecordTypeIsSkippable) {
  TraceBuilder t;
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
  TraceBuilder t;
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
  TraceBuilder t;
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
  TraceBuilder newer;
  newer.header_version(gf::kVersionMajor + 1, 0);
  EXPECT_NE(gf::RecordReader(span_of(newer)).read_header().find("not supported"), std::string::npos);
  TraceBuilder minor;
  minor.header_version(gf::kVersionMajor, 7);
  EXPECT_EQ(gf::RecordReader(span_of(minor)).read_header(), "");
}

TEST(FormatRoundTrip, PyCodeAndPyStack) {
  std::string table("\x80\x00\xd8\x04\x05\x00", 6);
  gf::PyCodeRecord code{0x1234567890abcdefull, 42, "/app/train.py", "Model.forward", table, 12};
  std::vector<gf::PyFrameRef> frames = {{0x1234567890abcdefull, 17, 0}, {7, 0, gf::kPyFrameEntry},
                                        {0xffffffffffffffffull, 100000, 1}};
  gf::PyStackRecord stack{0xfeedull, static_cast<uint32_t>(frames.size()), frames.data()};
  TraceBuilder t;
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
  TraceBuilder t;
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
  TraceBuilder t;
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
