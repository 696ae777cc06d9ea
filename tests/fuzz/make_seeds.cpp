// Writes the fuzz target's seed corpus into a directory: small valid traces that between them
// hold every record type the reader knows, in format 3 (LZ4, zstd and raw blocks, with and without
// the target's checksum repair), in format 2 and in format 1.1, plus the damaged and unfinished
// shapes the integrity verdicts tell apart. The seeds take turns at the target's writers and CI
// policies (controls.h). Made by the build from the format's own encoder
// (tests/unit/trace_builder.h), never stored as binaries.
//
//   make_seeds OUT_DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "controls.h"
#include "gpumemshim/format/block.h"
#include "gpumemshim/format/records.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kApp = 0x400000;

// What every seed starts with: process, device, attribute, a module that is not on this machine
// (the symbolizer then keeps frames as module + offset without reading a file), stacks.
void preamble(TraceBuilder& t) {
  t.process(4242, "python train.py --steps 4", 1, 0);
  t.device(0, 80ull << 30, "Fake H100");
  t.add(gf::AttributeRecord{"cuda.runtime_version", "12040"});
  t.module("/nonexistent/app", kApp, 0x10000);
  t.stack(1, {kApp + 0x1000, kApp + 0x2000});
  t.stack(2, {kApp + 0x3000, kApp + 0x2000, kApp + 0x1100});
}

// Allocations and frees over a few steps: one site frees what it made, one keeps a little more
// each step (growth, and a leak at the end), one fails and is sampled by cudaMemGetInfo.
void steps(TraceBuilder& t, int count) {
  for (int s = 0; s < count; ++s) {
    t.marker(gf::MarkerKind::kStep, "step");
    t.alloc(0x7f0000000000 + s * 0x1000000ull, 2 * kMiB, 1);
    t.alloc(0x7e0000000000 + s * 0x100000ull, (s + 1) * 4096, 2, gf::Api::kCudaMallocAsync,
            gf::MemoryKind::kPool);
    t.free(0x7f0000000000 + s * 0x1000000ull);
  }
  gf::MemInfoRecord m;
  m.time_ns = t.now() + 1000;
  m.device = 0;
  m.free_bytes = 3 * kMiB;
  m.total_bytes = 80ull << 30;
  t.add(m).at(m.time_ns + 1000);
  t.failed(64 * kMiB, 2, 2);
}

// The memory kinds other than device and pool, and a failed free.
void kinds(TraceBuilder& t) {
  t.alloc(0x10000, 4096, 1, gf::Api::kCudaMallocHost, gf::MemoryKind::kPinnedHost);
  t.alloc(0x20000, kMiB, 2, gf::Api::kCudaMallocManaged, gf::MemoryKind::kManaged);
  t.free(0x20000, gf::Api::kCudaFree, gf::MemoryKind::kManaged, 1);
  t.free(0x10000, gf::Api::kCudaFreeHost, gf::MemoryKind::kPinnedHost);
  t.free(0x30000);  // unmatched
}

// VMM: a reservation, physical memory mapped and released while mapped, then unmapped.
void vmm(TraceBuilder& t) {
  const uint64_t va = 0x7d0000000000;
  t.alloc(va, 8 * kMiB, 2, gf::Api::kCuMemAddressReserve, gf::MemoryKind::kReservation);
  for (uint64_t i = 0; i < 2; ++i) {
    t.alloc(0x100 + i, 2 * kMiB, 1, gf::Api::kCuMemCreate, gf::MemoryKind::kPhysical);
    gf::AllocRecord map;
    map.time_ns = t.now() + 1000;
    map.thread_id = 1;
    map.api = gf::Api::kCuMemMap;
    map.kind = gf::MemoryKind::kMapping;
    map.address = va + i * 2 * kMiB;
    map.size = 2 * kMiB;
    map.stack_id = 2;
    map.stream = 0x100 + i;  // the handle, as the shim writes it
    t.add(map).at(map.time_ns + 1000);
    t.free(0x100 + i, gf::Api::kCuMemRelease, gf::MemoryKind::kPhysical);
  }
  gf::FreeRecord unmap;
  unmap.time_ns = t.now() + 1000;
  unmap.thread_id = 1;
  unmap.device = -1;
  unmap.api = gf::Api::kCuMemUnmap;
  unmap.kind = gf::MemoryKind::kMapping;
  unmap.address = va;
  unmap.stream = 2 * kMiB;  // the range's size: the second mapping stays (a leak)
  t.add(unmap).at(unmap.time_ns + 1000);
}

// The torch bridge: a segment, blocks handed out and back, an OOM; Python frames for stack 3
// (a code object with a CPython 3.11 line table), a labelled stack, an expect_no_leak region and
// the backward range.
void torch(TraceBuilder& t) {
  static const std::string line_table("\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41", 11);
  t.add(gf::PyCodeRecord{77, 10, "/work/train.py", "train_step", line_table, 11});
  t.stack(3, {kApp + 0x4000, kApp + 0x2000});
  const gf::PyFrameRef frames[2] = {{77, 4, 0}, {77, 0, gf::kPyFrameEntry}};
  t.add(gf::PyStackRecord{3, 2, frames});
  t.add(gf::StackLabelRecord{4, "torch::autograd::generated::MmBackward0"});
  t.torch(gf::TorchAction::kSegmentAlloc, 0x7c0000000000, 20 * kMiB, 3);
  t.marker(gf::MarkerKind::kRangePush, "expect_no_leak:forward");
  t.torch(gf::TorchAction::kAlloc, 0x7c0000000000, 4 * kMiB, 3);
  t.torch(gf::TorchAction::kAlloc, 0x7c0000400000, 8 * kMiB, 3);
  t.marker(gf::MarkerKind::kRangePop, "expect_no_leak:forward");
  t.marker(gf::MarkerKind::kRangePush, "torch.backward");
  t.torch(gf::TorchAction::kAlloc, 0x7c0000c00000, 2 * kMiB, 4);
  t.torch(gf::TorchAction::kFreeRequested, 0x7c0000000000, 4 * kMiB, 3);
  t.torch(gf::TorchAction::kFreeCompleted, 0x7c0000000000, 4 * kMiB, 3);
  t.marker(gf::MarkerKind::kRangePop, "torch.backward");
  t.torch(gf::TorchAction::kOom, 1 * kMiB, 32 * kMiB, 3);
  t.torch(gf::TorchAction::kSegmentMap, 0x7b0000000000, 2 * kMiB, 3);
  t.torch(gf::TorchAction::kSegmentUnmap, 0x7b0000000000, 2 * kMiB, 3);
  t.marker(gf::MarkerKind::kMark, "checkpoint");
}

// Two threads whose records interleave out of time order across a flush mark.
void threads(TraceBuilder& t) {
  const uint64_t base = t.now() + 1000;
  for (uint64_t i = 0; i < 4; ++i) {
    gf::AllocRecord a;
    a.time_ns = base + 2000 * i + (i % 2 ? 0 : 5000);
    a.thread_id = 2 + i % 2;
    a.api = gf::Api::kCudaMalloc;
    a.kind = gf::MemoryKind::kDevice;
    a.address = 0x7a0000000000 + i * 0x100000;
    a.size = 1 * kMiB;
    a.stack_id = 1;
    t.add(a);
    if (i == 1) t.add(gf::FlushRecord{base + 3000});
  }
  t.at(base + 20000);
  t.free(0x7a0000000000);
}

struct Seeds {
  std::filesystem::path dir;
  int written = 0;
  // repair: the target recomputes the block checksums (format 3). Each seed gets the next writer
  // and the next CI policy in turn.
  void write(const std::string& name, const TraceBuilder& t, bool repair, size_t limit = SIZE_MAX) {
    namespace fz = gpumemshim::fuzz;
    std::vector<uint8_t> bytes = t.bytes();
    uint8_t c = static_cast<uint8_t>((written / 4 % 8) << 3);
    c = fz::with_writer(c, static_cast<fz::Writer>(written % 4));
    if (repair) c |= fz::kRepairChecksums;
    bytes[fz::control_offset(bytes.data(), bytes.size())] = c;
    TraceBuilder::write_file((dir / (name + ".trace")).string(), bytes, limit);
    ++written;
  }
};

// A whole trace: preamble, events, End.
TraceBuilder full(gf::Version version, size_t per_block, gf::BlockCodec codec) {
  TraceBuilder t(version);
  if (gf::has_blocks(version)) t.blocks(per_block, codec);
  preamble(t);
  steps(t, 5);
  kinds(t);
  vmm(t);
  torch(t);
  threads(t);
  t.end();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  Seeds seeds{argv[1]};
  std::filesystem::create_directories(seeds.dir);
  const auto lz4 = gf::BlockCodec::kLz4, zstd = gf::BlockCodec::kZstd, raw = gf::BlockCodec::kRaw;

  seeds.write("v3-lz4", full(gf::kVersion, 16, lz4), false);
  seeds.write("v3-lz4-repair", full(gf::kVersion, 64, lz4), true);
  seeds.write("v3-zstd", full(gf::kVersion, 16, zstd), false);
  seeds.write("v3-zstd-repair", full(gf::kVersion, 64, zstd), true);
  seeds.write("v3-raw", full(gf::kVersion, 8, raw), false);
  seeds.write("v3-raw-repair", full(gf::kVersion, 24, raw), true);
  seeds.write("v2", full(gf::kVersion2_0, 0, raw), false);
  seeds.write("v1", full(gf::kVersion1_1, 0, raw), false);

  // One concern each, small: mutations of a short trace run fast.
  {
    TraceBuilder t;
    t.blocks(4, raw);
    preamble(t);
    vmm(t);
    t.end();
    seeds.write("v3-raw-vmm-repair", t, true);
  }
  {
    TraceBuilder t;
    t.blocks(6, raw);
    preamble(t);
    torch(t);
    t.end();
    seeds.write("v3-raw-torch-repair", t, true);
  }
  {
    TraceBuilder t;
    t.blocks(8, raw);
    preamble(t);
    steps(t, 8);
    t.end();
    seeds.write("v3-raw-steps-repair", t, true);
  }
  {
    TraceBuilder t;
    t.blocks(4, raw);
    preamble(t);
    threads(t);
    kinds(t);
    t.end();
    seeds.write("v3-raw-threads-repair", t, true);
  }
  // Unfinished and damaged: no End, a cut block, a failed write, an End that counts more.
  {
    TraceBuilder t;
    t.blocks(8, lz4);
    preamble(t);
    steps(t, 3);
    seeds.write("v3-no-end", t, false);
    t.end();
    seeds.write("v3-cut", t, false, t.bytes().size() - 10);
    TraceBuilder failed = t;
    failed.header_write_failed(28);
    seeds.write("v3-write-failed", failed, false);
    t.end_claims(9, 99);
    seeds.write("v3-end-counts-more-repair", t, true);
  }
  {
    TraceBuilder t(gf::kVersion2_0);
    preamble(t);
    steps(t, 2);
    seeds.write("v2-no-end", t, false);
  }
  std::printf("%d seeds in %s\n", seeds.written, argv[1]);
  return 0;
}
