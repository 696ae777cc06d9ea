// A compressed trace read where the kernel cannot move the reader's pages. The reader moves the
// pages it is done with to where the next blocks go (mremap with MREMAP_DONTUNMAP, Linux 5.7).
// A kernel before 5.7 refuses the flag; one before 4.17 also takes MAP_FIXED_NOREPLACE for a mere
// hint (so does valgrind); a move may fail after the destination was unmapped. Whatever the
// kernel, the read must deliver every event, as where moves work. This executable's own mremap
// and mmap stand in for the kernel's (the reader's calls bind to them); they pass every other
// call on to the next definition (the C library's, or a sanitizer's).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <vector>

#include "gpumemshim/format/trace_reader.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

enum class Kernel { kMoves, kBefore5_7, kBefore4_17, kFailsAfterUnmapping };
std::atomic<Kernel> kernel{Kernel::kMoves};
std::atomic<int> moves_tried{0};

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" void* mremap(void* old_address, size_t old_size, size_t new_size, int flags,
                        ...) noexcept {
  using Mremap = void* (*)(void*, size_t, size_t, int, ...);
  static const auto real = next<Mremap>("mremap");
  void* new_address = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list args;
    va_start(args, flags);
    new_address = va_arg(args, void*);
    va_end(args);
  }
  if (flags & MREMAP_DONTUNMAP) {
    ++moves_tried;
    switch (kernel.load()) {
      case Kernel::kMoves:
        break;
      case Kernel::kBefore5_7:
      case Kernel::kBefore4_17:  // an unknown flag: nothing was done
        errno = EINVAL;
        return MAP_FAILED;
      case Kernel::kFailsAfterUnmapping:
        munmap(new_address, new_size);
        errno = ENOMEM;
        return MAP_FAILED;
    }
  }
  return real(old_address, old_size, new_size, flags, new_address);
}

// Not under ThreadSanitizer, whose start-up maps memory through this definition before it can run
// (its guard of a local static is the sanitizer's own): the case that needs it is left out there.
#if !defined(__SANITIZE_THREAD__)
#define STANDS_IN_FOR_MMAP 1
extern "C" void* mmap(void* address, size_t size, int prot, int flags, int fd,
                      off_t offset) noexcept {
  using Mmap = void* (*)(void*, size_t, int, int, int, off_t);
  static const auto real = next<Mmap>("mmap");
  if (kernel.load() == Kernel::kBefore4_17) flags &= ~MAP_FIXED_NOREPLACE;  // unknown: a hint
  return real(address, size, prot, flags, fd, offset);
}
#endif

namespace {

// Keeps every event's time and address, in the order delivered.
class Events final : public gf::TraceSink {
 public:
  std::vector<uint64_t> times, addresses;
  void alloc(const gf::AllocRecord& r) override { keep(r.time_ns, r.address); }
  void free(const gf::FreeRecord& r) override { keep(r.time_ns, r.address); }
  void restart() override {
    times.clear();
    addresses.clear();
  }

 private:
  void keep(uint64_t time, uint64_t address) {
    times.push_back(time);
    addresses.push_back(address);
  }
};

class PageMoves : public ::testing::TestWithParam<unsigned> {
 protected:
  // Long enough that the reader releases pages while blocks are still to come (it does every
  // 8 MiB read; read threads run 32 MiB ahead); small blocks, so that each page holds several.
  void SetUp() override {
    TraceBuilder t;
    t.blocks(1024);
    for (uint64_t i = 0; i < kPairs; ++i) {
      // A flush mark every 10 000 pairs, as the shim writes them: without marks a one-thread trace
      // keeps a second of events queued, and the reader could release almost nothing.
      if (i % 10'000 == 0) t.add(gf::FlushRecord{2 * i * 1000});  // no later record is older
      t.alloc(address_of(i), 4096).free(address_of(i));
    }
    t.end();
    path = t.write(dir.file("t.trace"));
  }

  static uint64_t address_of(uint64_t pair) { return 0x100000 + (pair % 64) * 0x1000; }

  // Reads the trace with the kernel `k` and checks that every event came, in order: the builder
  // gives each record the next microsecond.
  void expect_every_event(Kernel k) {
    kernel = k;
    moves_tried = 0;
    gf::TraceReader reader(path);
    reader.set_read_threads(GetParam());
    Events events;
    reader.read(events);
    kernel = Kernel::kMoves;
    EXPECT_EQ(reader.integrity().status, gf::IntegrityStatus::kComplete);
    ASSERT_EQ(events.times.size(), 2 * kPairs);
    size_t wrong_times = 0, wrong_addresses = 0;
    for (size_t e = 0; e < events.times.size(); ++e) {
      wrong_times += events.times[e] != events.times[0] + e * 1000;
      wrong_addresses += events.addresses[e] != address_of(e / 2);
    }
    EXPECT_EQ(wrong_times, 0u);
    EXPECT_EQ(wrong_addresses, 0u);
  }

  static constexpr uint64_t kPairs = 500'000;
  TempDir dir;
  std::string path;
};

// Where the kernel moves pages, they are moved: the stand-in is called, so the cases below do
// test the reader's way around a move that fails.
TEST_P(PageMoves, AreMadeWhereTheKernelMovesPages) {
  expect_every_event(Kernel::kMoves);
  EXPECT_GT(moves_tried.load(), 0);
}

TEST_P(PageMoves, AKernelBefore5_7ReadsEveryEvent) {
  expect_every_event(Kernel::kBefore5_7);
  EXPECT_EQ(moves_tried.load(), 1);  // the first refusal ends the moves
}

#if defined(STANDS_IN_FOR_MMAP)
TEST_P(PageMoves, AKernelBefore4_17ReadsEveryEvent) {
  expect_every_event(Kernel::kBefore4_17);
  EXPECT_EQ(moves_tried.load(), 1);
}
#endif

TEST_P(PageMoves, AMoveThatFailsAfterUnmappingReadsEveryEvent) {
  expect_every_event(Kernel::kFailsAfterUnmapping);
  EXPECT_EQ(moves_tried.load(), 1);
}

// The reader taking each block itself, and read threads ahead of it.
INSTANTIATE_TEST_SUITE_P(ReadThreads, PageMoves, ::testing::Values(0u, 2u));

}  // namespace
