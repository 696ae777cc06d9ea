// Opens the modules a trace's stacks point into on a thread of its own, while the trace is still
// being read. A report's first symbolization in a module pays for the module's ELF and DWARF (a
// distribution's debug file is decompressed whole: tens of milliseconds for libc's), and without
// this it pays after the load, on the one thread the report then runs on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symbolize/symbolizer.h"

namespace gpumemshim::analyzer {

class SymbolWarmup {
 public:
  // skip(path): modules not worth opening (the recording tool's own, whose frames are never shown).
  explicit SymbolWarmup(std::function<bool(const std::string&)> skip);
  ~SymbolWarmup();  // stops the thread; what it opened is dropped unless taken
  SymbolWarmup(const SymbolWarmup&) = delete;
  SymbolWarmup& operator=(const SymbolWarmup&) = delete;

  // From the one thread that reads the trace, in trace order: a module, and the pcs of a stack seen
  // for the first time. Stacks are hints: with the thread far behind, they are dropped.
  void module(const ModuleInfo& m);
  void stack(const uint64_t* pcs, size_t count);

  // Stops the thread once the module it is opening is open, and returns its symbolizer: every
  // module given, in order, those it reached already open. Once; later calls return an empty one.
  Symbolizer take();

 private:
  struct Work {
    std::vector<ModuleInfo> modules;
    std::vector<uint64_t> pcs;
    bool empty() const { return modules.empty() && pcs.empty(); }
  };
  static constexpr size_t kHandOver = 1024;  // pcs the reading thread gathers before handing over
  static constexpr size_t kMaxQueued = 1 << 16;  // pcs waiting at most (512 KiB); more are dropped

  void hand_over();
  void run();
  void stop_and_join();

  std::function<bool(const std::string&)> skip_;
  Work gathered_;  // the reading thread's, not handed over yet
  std::mutex mutex_;
  std::condition_variable wake_;
  Work queued_;  // under mutex_
  std::atomic<bool> stop_{false};
  bool handed_any_ = false;  // the reading thread's
  bool taken_ = false;
  Symbolizer symbolizer_;  // the thread's until it is joined
  std::thread thread_;     // last: starts once the rest is there
};

}  // namespace gpumemshim::analyzer
