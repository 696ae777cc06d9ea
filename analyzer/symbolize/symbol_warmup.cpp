#include "symbolize/symbol_warmup.h"

#include <utility>

namespace gpumemshim::analyzer {

SymbolWarmup::SymbolWarmup(std::function<bool(const std::string&)> skip)
    : skip_(std::move(skip)), thread_([this] { run(); }) {}

SymbolWarmup::~SymbolWarmup() {
  stop_and_join();
}

void SymbolWarmup::module(const ModuleInfo& m) {
  if (!taken_) gathered_.modules.push_back(m);
}

void SymbolWarmup::stack(const uint64_t* pcs, size_t count) {
  if (taken_) return;
  gathered_.pcs.insert(gathered_.pcs.end(), pcs, pcs + count);
  // The first stack at once (its modules are the ones most stacks share), then in batches: a
  // hand-over per stack would cost the reading thread a lock each.
  if (!handed_any_ || gathered_.pcs.size() >= kHandOver) hand_over();
}

void SymbolWarmup::hand_over() {
  {
    std::lock_guard lock(mutex_);
    for (ModuleInfo& m : gathered_.modules) queued_.modules.push_back(std::move(m));
    if (queued_.pcs.size() < kMaxQueued)
      queued_.pcs.insert(queued_.pcs.end(), gathered_.pcs.begin(), gathered_.pcs.end());
  }
  wake_.notify_one();
  gathered_.modules.clear();
  gathered_.pcs.clear();
  handed_any_ = true;
}

void SymbolWarmup::run() {
  try {
    Work batch;
    const ModuleInfo* last = nullptr;  // the module of the pc before, and whether it is skipped
    bool last_skipped = false;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stop_.load() || !queued_.empty(); });
        if (stop_.load()) return;
        std::swap(batch, queued_);
      }
      // Every module first, whatever comes: take() counts on the modules of a batch being in.
      for (const ModuleInfo& m : batch.modules) symbolizer_.add_module(m);
      for (uint64_t pc : batch.pcs) {
        if (stop_.load(std::memory_order_relaxed)) return;
        const ModuleInfo* m = symbolizer_.module_for(pc);
        if (m == nullptr) continue;
        if (m != last) {
          last = m;
          last_skipped = skip_(m->path);
        }
        if (!last_skipped) symbolizer_.prepare(pc);
      }
      batch.modules.clear();
      batch.pcs.clear();
    }
  } catch (...) {
    // Out of memory: what is not open yet opens when the report first needs it.
  }
}

void SymbolWarmup::stop_and_join() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

Symbolizer SymbolWarmup::take() {
  if (taken_) return Symbolizer();
  taken_ = true;
  stop_and_join();
  // The modules the thread never reached, after those it did: trace order.
  for (const ModuleInfo& m : queued_.modules) symbolizer_.add_module(m);
  for (const ModuleInfo& m : gathered_.modules) symbolizer_.add_module(m);
  return std::move(symbolizer_);
}

}  // namespace gpumemshim::analyzer
