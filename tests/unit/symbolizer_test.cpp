// Symbolizes addresses of this very test process. Build with -g -O2 (see the CMake lines in the
// symbolizer's notes): the inlining case needs an optimized build with DWARF.
#include "symbolize/symbolizer.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "symbolize/symbol_warmup.h"

using gpumemshim::analyzer::ModuleInfo;
using gpumemshim::analyzer::SourceFrame;
using gpumemshim::analyzer::Symbolizer;
using ::testing::EndsWith;
using ::testing::HasSubstr;

namespace {

volatile int g_sink = 0;

// (a) A whole function on one line, so every line-table row of it has this line.
constexpr uint32_t kKnownFunctionLine = __LINE__ + 1;
__attribute__((noinline)) int known_function(int x) { return x * 3 + g_sink; }

// (b) A noinline callee that reports its return address, i.e. a pc inside its caller.
__attribute__((noinline)) uintptr_t capture_return_address() {
  uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");  // keeps the function opaque (no pure/const inference)
  return ra;
}

constexpr uint32_t kCallerCallLine = __LINE__ + 3;
__attribute__((noinline)) uintptr_t plain_caller() {
  g_sink = g_sink + 1;
  uintptr_t ra = capture_return_address();
  g_sink = g_sink + 2;  // work after the call: no tail call
  return ra;
}

// (c) An always_inline function inlined into an out-of-line one.
constexpr uint32_t kInlineCallLine = __LINE__ + 4;
__attribute__((always_inline)) inline uintptr_t inlined_helper(int x) {
  g_sink = g_sink + x;
  uintptr_t ra = 0;
  ra = capture_return_address();
  g_sink = g_sink + 2 * x;
  return ra;
}

constexpr uint32_t kOuterCallLine = __LINE__ + 3;
__attribute__((noinline)) uintptr_t outer_function(int x) {
  g_sink = g_sink + 7;
  uintptr_t ra = inlined_helper(x);
  g_sink = g_sink + 5;
  return ra;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  return buf;
}

std::string build_id_from_notes(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((nh->n_namesz + 3u) & ~3u);
      const char* next = desc + ((nh->n_descsz + 3u) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::string(name, 3) == "GNU") {
        return std::string(desc, nh->n_descsz);
      }
      p = next;
    }
  }
  return {};
}

std::vector<ModuleInfo> loaded_modules() {
  std::vector<ModuleInfo> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* mods = static_cast<std::vector<ModuleInfo>*>(data);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          lo = std::min<uint64_t>(lo, ph.p_vaddr);
          hi = std::max<uint64_t>(hi, ph.p_vaddr + ph.p_memsz);
        }
        if (hi <= lo) return 0;
        ModuleInfo m;
        m.path = (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') ? info->dlpi_name
                                                                            : self_exe();
        m.build_id = build_id_from_notes(info);
        m.load_bias = info->dlpi_addr;
        m.start = info->dlpi_addr + lo;
        m.size = hi - lo;
        mods->push_back(std::move(m));
        return 0;
      },
      &out);
  return out;
}

void add_all(Symbolizer& s) {
  for (const ModuleInfo& m : loaded_modules()) s.add_module(m);
}

std::string dump(const std::vector<SourceFrame>& frames) {
  std::string out;
  for (const SourceFrame& f : frames) {
    out += (f.inlined ? "  [inlined] " : "  ") + f.function + " at " + f.file + ":" +
           std::to_string(f.line) + " in " + f.module + "\n";
  }
  return out;
}

TEST(Symbolizer, FunctionAddressGivesFileAndLine) {
  Symbolizer s;
  add_all(s);
  const auto pc = reinterpret_cast<uint64_t>(&known_function);
  const auto frames = s.symbolize(pc, false);
  ASSERT_EQ(frames.size(), 1u) << dump(frames);
  EXPECT_THAT(frames[0].function, HasSubstr("known_function"));
  EXPECT_THAT(frames[0].file, EndsWith("symbolizer_test.cpp"));
  EXPECT_EQ(frames[0].file.front(), '/');
  EXPECT_EQ(frames[0].line, kKnownFunctionLine);
  EXPECT_EQ(frames[0].module, self_exe());
  EXPECT_EQ(frames[0].pc, pc);
  EXPECT_FALSE(frames[0].inlined);
  ASSERT_NE(s.module_for(pc), nullptr);
  EXPECT_EQ(s.module_for(pc)->path, self_exe());
}

TEST(Symbolizer, ReturnAddressReportsCallLine) {
  Symbolizer s;
  add_all(s);
  const uint64_t ra = plain_caller();
  const auto frames = s.symbolize(ra, true);
  ASSERT_EQ(frames.size(), 1u) << dump(frames);
  EXPECT_THAT(frames[0].function, HasSubstr("plain_caller"));
  EXPECT_THAT(frames[0].file, EndsWith("symbolizer_test.cpp"));
  EXPECT_EQ(frames[0].line, kCallerCallLine) << dump(frames);
  EXPECT_EQ(frames[0].pc, ra);
  EXPECT_FALSE(frames[0].inlined);
}

TEST(Symbolizer, InlinedFrameComesFirst) {
  Symbolizer s;
  add_all(s);
  const uint64_t ra = outer_function(3);
  const auto frames = s.symbolize(ra, true);
  ASSERT_EQ(frames.size(), 2u) << dump(frames);
  EXPECT_THAT(frames[0].function, HasSubstr("inlined_helper"));
  EXPECT_THAT(frames[0].file, EndsWith("symbolizer_test.cpp"));
  EXPECT_EQ(frames[0].line, kInlineCallLine) << dump(frames);
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_THAT(frames[1].function, HasSubstr("outer_function"));
  EXPECT_THAT(frames[1].file, EndsWith("symbolizer_test.cpp"));
  EXPECT_EQ(frames[1].line, kOuterCallLine) << dump(frames);
  EXPECT_FALSE(frames[1].inlined);
  for (const auto& f : frames) EXPECT_EQ(f.pc, ra);
}

TEST(Symbolizer, UnknownPc) {
  Symbolizer s;
  add_all(s);
  const auto frames = s.symbolize(0x10, false);  // page zero is never mapped
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].module, "");
  EXPECT_EQ(frames[0].file, "");
  EXPECT_EQ(frames[0].line, 0u);
  EXPECT_EQ(frames[0].pc, 0x10u);
  EXPECT_EQ(s.module_for(0x10), nullptr);
}

TEST(Symbolizer, WrongBuildIdGivesNoSourceInfo) {
  const std::string exe = self_exe();
  ModuleInfo self;
  for (const ModuleInfo& m : loaded_modules()) {
    if (m.path == exe) self = m;
  }
  ASSERT_FALSE(self.path.empty());
  ASSERT_FALSE(self.build_id.empty()) << "test binary linked without --build-id";
  self.build_id = std::string(self.build_id.size(), '\x5a');  // no such build anywhere
  Symbolizer s;
  s.add_module(self);
  const auto pc = reinterpret_cast<uint64_t>(&known_function);
  const auto frames = s.symbolize(pc, false);
  ASSERT_EQ(frames.size(), 1u) << dump(frames);
  EXPECT_EQ(frames[0].module, exe);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].file, "");
  EXPECT_EQ(frames[0].line, 0u);
  EXPECT_EQ(frames[0].pc, pc);
}

TEST(Symbolizer, MissingFileGivesModuleOnlyFrame) {
  ModuleInfo ghost;
  ghost.path = "/nonexistent/libghost.so";
  ghost.load_bias = 0x7e0000000000;
  ghost.start = 0x7e0000000000;
  ghost.size = 0x10000;
  Symbolizer s;
  s.add_module(ghost);
  const auto frames = s.symbolize(0x7e0000001234, true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].module, ghost.path);
  EXPECT_EQ(frames[0].function, "");
  EXPECT_EQ(frames[0].line, 0u);
}

TEST(Symbolizer, ModulesAddedAfterFirstLookupAndDuplicates) {
  Symbolizer s;
  const auto pc = reinterpret_cast<uint64_t>(&known_function);
  EXPECT_EQ(s.symbolize(pc, false)[0].module, "");  // nothing known yet (and cached)
  add_all(s);
  add_all(s);  // same path+bias again: no-op
  auto frames = s.symbolize(pc, false);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_THAT(frames[0].function, HasSubstr("known_function"));
  EXPECT_EQ(frames[0].line, kKnownFunctionLine);
  // Cached result is identical.
  auto again = s.symbolize(pc, false);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].function, frames[0].function);
  EXPECT_EQ(again[0].line, frames[0].line);
}

TEST(Symbolizer, SharedLibraryFunctionGetsName) {
  // libc is usually stripped of DWARF; the ELF symbol table still names exported functions.
  Symbolizer s;
  add_all(s);
  const auto pc = reinterpret_cast<uint64_t>(&::getpid);
  const auto frames = s.symbolize(pc, false);
  ASSERT_FALSE(frames.empty());
  EXPECT_THAT(frames.back().module, HasSubstr("libc"));
  EXPECT_THAT(frames.back().function, HasSubstr("getpid")) << dump(frames);
}

}  // namespace

namespace {

// The pcs of this test's own functions, one of each kind above, and one in libc.
std::vector<std::pair<uint64_t, bool>> sample_pcs() {
  return {{reinterpret_cast<uint64_t>(&known_function), false},
          {plain_caller(), true},
          {outer_function(3), true},
          {reinterpret_cast<uint64_t>(&::getpid), false}};
}

TEST(Symbolizer, PreparedModuleGivesTheSameFrames) {
  Symbolizer cold, prepared;
  add_all(cold);
  add_all(prepared);
  for (auto [pc, ra] : sample_pcs()) prepared.prepare(pc);
  prepared.prepare(0x10);  // in no module: nothing to open
  for (auto [pc, ra] : sample_pcs())
    EXPECT_EQ(dump(prepared.symbolize(pc, ra)), dump(cold.symbolize(pc, ra)));
}

TEST(SymbolWarmup, TakenSymbolizerGivesWhatAColdOneGives) {
  std::mutex mutex;
  std::vector<std::string> asked;  // the modules the thread decided on
  gpumemshim::analyzer::SymbolWarmup warmup([&](const std::string& path) {
    std::lock_guard lock(mutex);
    asked.push_back(path);
    return path.find("libc.so") != std::string::npos;  // skipped: still symbolized once taken
  });
  for (const ModuleInfo& m : loaded_modules()) warmup.module(m);
  std::vector<uint64_t> stack;
  for (auto [pc, ra] : sample_pcs()) stack.push_back(pc);
  warmup.stack(stack.data(), stack.size());
  // The thread reaches this program's module: the symbolizer taken then has it open.
  const std::string exe = self_exe();
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(mutex);
      if (std::find(asked.begin(), asked.end(), exe) != asked.end()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard lock(mutex);
    ASSERT_NE(std::find(asked.begin(), asked.end(), exe), asked.end());
  }
  Symbolizer taken = warmup.take();
  Symbolizer cold;
  add_all(cold);
  for (auto [pc, ra] : sample_pcs()) {
    EXPECT_EQ(dump(taken.symbolize(pc, ra)), dump(cold.symbolize(pc, ra)));
    ASSERT_NE(taken.module_for(pc), nullptr);
  }
  EXPECT_THAT(taken.symbolize(sample_pcs()[2].first, true)[0].function,
              HasSubstr("inlined_helper"));
  // Once: a second take has nothing, and what comes after it is ignored.
  Symbolizer again = warmup.take();
  EXPECT_EQ(again.module_for(sample_pcs()[0].first), nullptr);
  warmup.stack(stack.data(), stack.size());
}

TEST(SymbolWarmup, EndsWithoutBeingTaken) {
  // A load that fails before any report: the thread stops with the work it was given unfinished.
  gpumemshim::analyzer::SymbolWarmup warmup([](const std::string&) { return false; });
  for (const ModuleInfo& m : loaded_modules()) warmup.module(m);
  std::vector<uint64_t> pcs(100000, reinterpret_cast<uint64_t>(&known_function));
  for (int i = 0; i < 10; ++i) warmup.stack(pcs.data(), pcs.size());
}

}  // namespace
