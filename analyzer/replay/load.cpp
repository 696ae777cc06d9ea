#include "replay/load.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <utility>
#include <variant>

#include "replay/batch_channel.h"

namespace gpumemshim::analyzer {

namespace fmtr = gpumemshim::format;
using fmtr::TimedEvent;

uint64_t LoadedTrace::end_ns() const {
  uint64_t end = clean_exit ? end_time_ns : replay.last_time_ns();
  if (clean_exit && replay.last_time_ns() > end) end = replay.last_time_ns();
  return end;
}

double LoadedTrace::duration_s() const { return static_cast<double>(end_ns()) / 1e9; }

namespace {

// Replays decoded timed records in the order given; markers also go to the trace's marker log.
class TimedReplay {
 public:
  TimedReplay(LoadedTrace& t, BackwardAttribution& backward) : t_(t), backward_(backward) {}

  void operator()(const fmtr::AllocRecord& r) {
    attributed(r, [this](const fmtr::AllocRecord& a) { t_.replay.alloc(a); });
  }
  void operator()(const fmtr::FreeRecord& r) { t_.replay.free(r); }
  void operator()(const fmtr::TorchEventRecord& r) {
    attributed(r, [this](const fmtr::TorchEventRecord& a) { t_.replay.torch(a); });
  }
  void operator()(const fmtr::AllocFailedRecord& r) {
    attributed(r, [this](const fmtr::AllocFailedRecord& a) { t_.replay.failed(a); });
  }
  void operator()(const fmtr::MemInfoRecord& r) { t_.replay.meminfo(r); }
  void operator()(const fmtr::ProcessMemoryRecord& r) { t_.replay.process_memory(r); }
  void operator()(const fmtr::MarkerRecord& r) {
    t_.markers.add(r);
    backward_.marker(r);
    t_.replay.marker(r);
  }

 private:
  // replay(r), or replay of a copy under the stack backward attribution gives it. The record is
  // passed on as it is in the common case: it was just written field by field, and a copy (read
  // in wider loads) would wait for those stores.
  template <typename Record, typename Replay>
  [[gnu::always_inline]] void attributed(const Record& r, Replay&& replay) {
    const uint64_t stack = backward_.attribute(r.thread_id, r.stack_id);
    if (stack == r.stack_id) [[likely]]
      replay(r);
    else
      replay_as(r, stack, replay);
  }
  template <typename Record, typename Replay>
  [[gnu::noinline]] static void replay_as(const Record& r, uint64_t stack, Replay& replay) {
    Record a = r;
    a.stack_id = stack;
    replay(a);
  }

  LoadedTrace& t_;
  BackwardAttribution& backward_;
};

// The replay side of a load on a second thread: the reader's events are handed over in batches;
// the replay takes them in order. For one big trace on a machine with a core to spare
// (analyze(): cores >= 2 x traces at once).
class ReplayThread {
 public:
  explicit ReplayThread(TimedReplay& replay) : thread_([this, &replay] { run(replay); }) {
    batch_.reserve(kBatch);
  }
  ~ReplayThread() {  // an early return or an error: the rest is abandoned
    if (thread_.joinable()) {
      channel_.abort();
      thread_.join();
    }
  }
  ReplayThread(const ReplayThread&) = delete;
  ReplayThread& operator=(const ReplayThread&) = delete;

  // The next event in time order.
  template <typename Record>
  void operator()(const Record& r) {
    batch_.emplace_back(r);
    if (batch_.size() == kBatch) hand_off();
  }

  // The read's block work, done between batches when none is waiting (nullptr: withdrawn, and
  // then no longer done once this returns).
  void read_help(fmtr::ReadHelp* help) {
    std::lock_guard lock(help_mutex_);
    help_ = help;
  }

  // Every event was handed in: waits until they are replayed; rethrows the replay's error.
  void finish() {
    hand_off();
    channel_.close();
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static constexpr size_t kBatch = 4096;  // 288 KiB of decoded records
  static constexpr size_t kDepth = 4;     // batches waiting at most

  void hand_off() {
    if (batch_.empty()) return;
    channel_.push(std::move(batch_));  // false: the replay failed; finish() says why
    batch_ = channel_.spare();
    batch_.reserve(kBatch);
  }

  void run(TimedReplay& replay) {
    try {
      const auto help = [this] {
        std::lock_guard lock(help_mutex_);
        return help_ && help_->help();
      };
      while (std::optional<std::vector<TimedEvent>> b = channel_.pop(help)) {
        for (const TimedEvent& e : *b) std::visit(replay, e);
        channel_.recycle(std::move(*b));
      }
    } catch (...) {
      error_ = std::current_exception();
      channel_.abort();
    }
  }

  BatchChannel<TimedEvent> channel_{kDepth};
  std::vector<TimedEvent> batch_;
  std::exception_ptr error_;  // the replay's, read after join
  std::mutex help_mutex_;     // held while helping, so that withdrawing waits for the help to end
  fmtr::ReadHelp* help_ = nullptr;
  std::thread thread_;        // last: starts once the rest is there
};

// The trace's counts, as the report shows them.
TraceStats stats_of(const fmtr::TraceCounts& c) {
  return TraceStats{.file_bytes = c.file_bytes, .version_major = c.version.major,
                    .version_minor = c.version.minor, .records = c.records, .by_type = c.by_type,
                    .unknown_records = c.unknown_records, .allocs_by_api = c.allocs_by_api,
                    .frees_by_api = c.frees_by_api, .failed_by_api = c.failed_by_api,
                    .bytes_by_api = c.bytes_by_api, .unknown_api = c.unknown_api,
                    .max_order_window = c.max_order_window, .buffered_read = c.buffered_read,
                    .buffered_because = c.buffered_because, .late_events = c.late_events,
                    .max_lateness_ns = c.max_lateness_ns};
}

// Feeds one read of a trace into a LoadedTrace: the metadata into its tables, the timed events
// into its Replay (on this thread or a second one).
class Loader final : public fmtr::TraceSink {
 public:
  Loader(LoadedTrace& t, const std::string& path, const std::vector<uint32_t>& site_groups,
         bool replay_thread)
      : t_(t), path_(path), site_groups_(site_groups) {
    start(replay_thread);
  }

  // After the read: what the replay needs once every event is in.
  void finish(const fmtr::TraceCounts& counts) {
    if (pass_->worker) pass_->worker->finish();
    t_.replay.seen_time(end_seen_);  // not while the worker may still be replaying
    t_.replay.finish();
    t_.stats = stats_of(counts);
    t_.truncated = counts.truncated;
    t_.truncated_at = counts.truncated_at;
  }

  void process(const fmtr::ProcessRecord& r) override {
    t_.process = ProcessInfo{r.pid, r.ppid, r.rank, r.start_wall_ns, r.start_mono_ns, std::string(r.host),
                             std::string(r.command_line), std::string(r.executable), true};
  }
  void device(const fmtr::DeviceRecord& r) override {
    DeviceInfo info{r.device, r.total_bytes, std::string(r.name)};
    bool known = false;
    for (DeviceInfo& d : t_.devices) {
      if (d.device == r.device) {
        d = info;
        known = true;
      }
    }
    if (!known) t_.devices.push_back(std::move(info));
  }
  void module(const fmtr::ModuleRecord& r) override {
    t_.modules.push_back(ModuleInfo{std::string(r.path), std::string(r.build_id), r.load_bias, r.start, r.size});
    if (t_.symbols) t_.symbols->module(t_.modules.back());
  }
  void stack(const fmtr::StackRecord& r) override {
    // The same stack may be defined twice (by two threads): identical frames, keep the first.
    const bool added = t_.stacks.try_emplace(r.id, r.frames, r.frames + r.frame_count).second;
    if (added && t_.symbols) t_.symbols->stack(r.frames, r.frame_count);
  }
  bool py_stack(const fmtr::PyStackRecord& r) override {
    std::lock_guard lock(py_mutex_);
    t_.py_stacks.try_emplace(r.stack_id, r.frames, r.frames + r.frame_count);
    return no_python_yet_.count(r.stack_id) == 0;
  }
  void py_code(const fmtr::PyCodeRecord& r) override {
    t_.py_codes.try_emplace(r.code_id, PyCodeInfo{std::string(r.filename), std::string(r.name),
                                                  std::string(r.line_table), r.first_line, r.python_minor});
  }
  void stack_label(const fmtr::StackLabelRecord& r) override { t_.stack_labels.try_emplace(r.stack_id, r.label); }
  void attribute(const fmtr::AttributeRecord& r) override {
    t_.attributes.emplace_back(std::string(r.key), std::string(r.value));
  }
  void end(const fmtr::EndRecord& r) override {
    t_.clean_exit = true;
    t_.end_time_ns = r.time_ns;
    end_seen_ = std::max(end_seen_, r.time_ns);
  }

  void alloc(const fmtr::AllocRecord& r) override { timed(r); }
  void free(const fmtr::FreeRecord& r) override { timed(r); }
  void torch(const fmtr::TorchEventRecord& r) override { timed(r); }
  void failed(const fmtr::AllocFailedRecord& r) override { timed(r); }
  void meminfo(const fmtr::MemInfoRecord& r) override { timed(r); }
  void process_memory(const fmtr::ProcessMemoryRecord& r) override { timed(r); }
  void marker(const fmtr::MarkerRecord& r) override { timed(r); }

  bool wants_read_help() const override { return pass_->worker.has_value(); }
  void read_help(fmtr::ReadHelp* help) override {
    if (pass_->worker) pass_->worker->read_help(help);
  }

  // The streaming read failed: everything starts over, the replay on this thread, with every
  // Python stack known before the first event.
  void restart() override {
    pass_.reset();  // the worker first: it uses the trace
    std::unique_ptr<SymbolWarmup> symbols = std::move(t_.symbols);  // the same modules again
    t_ = LoadedTrace{};
    t_.symbols = std::move(symbols);
    no_python_yet_.clear();
    buffered_ = true;
    end_seen_ = 0;
    start(false);
  }

 private:
  // What one read replays with: the backward attribution's state, and the replay thread if any.
  struct Pass {
    Pass(Loader& l, bool replay_thread)
        : backward([&l](uint64_t stack_id) { return l.has_python(stack_id); }, l.t_.attributed_stacks),
          replay(l.t_, backward) {
      if (replay_thread) worker.emplace(replay);
    }
    BackwardAttribution backward;
    TimedReplay replay;
    std::optional<ReplayThread> worker;  // last: destroyed (joined) first
  };

  // Out of line, the replay thread's hand-over: the replay on this thread, the common case, is
  // then a check and a jump.
  template <typename Record>
  [[gnu::always_inline]] void timed(const Record& r) {
    if (pass_->worker) [[unlikely]]
      hand_over(r);
    else
      pass_->replay(r);
  }
  template <typename Record>
  [[gnu::noinline]] void hand_over(const Record& r) {
    (*pass_->worker)(r);
  }

  void start(bool replay_thread) {
    t_.path = path_;
    if (!site_groups_.empty()) t_.replay.set_site_groups(site_groups_);
    pass_.emplace(*this, replay_thread);
  }

  // Stacks found without Python frames while replaying: a PyStack record for one of them later in
  // the file would have changed an attribution, so a streaming read of that file is redone
  // buffered (the reader then reads every PyStack before the first event is delivered).
  bool has_python(uint64_t stack_id) {
    std::lock_guard lock(py_mutex_);
    if (t_.py_stacks.count(stack_id) != 0) return true;
    if (!buffered_) no_python_yet_.insert(stack_id);
    return false;
  }

  LoadedTrace& t_;
  const std::string& path_;
  const std::vector<uint32_t>& site_groups_;
  std::mutex py_mutex_;  // py_stacks and no_python_yet_, when the replay has its own thread
  std::unordered_set<uint64_t> no_python_yet_;
  bool buffered_ = false;
  uint64_t end_seen_ = 0;  // the latest End record's time, for the replay once it is done
  std::optional<Pass> pass_;
};

}  // namespace

LoadThreads plan_threads(unsigned cores, fmtr::Version v) {
  if (fmtr::has_zstd_blocks(v))
    return {.replay_thread = cores >= 3, .read_threads = fmtr::read_threads_for(cores),
            .symbol_warmup = cores >= 2};
  return {.replay_thread = cores >= 2,
          .read_threads = fmtr::has_blocks(v) && cores >= 3 ? 1u : 0u,
          .symbol_warmup = cores >= 2};
}

LoadedTrace load_trace(const std::string& path, const std::vector<uint32_t>& site_groups,
                       unsigned cores) {
  LoadedTrace t;  // one object, returned in place (NRVO)
  t.path = path;
  fmtr::TraceReader reader = reading_trace([&] { return fmtr::TraceReader(path); });
  const LoadThreads plan = plan_threads(cores, reader.version());
  reader.set_read_threads(plan.read_threads);
  if (plan.symbol_warmup) {
    try {
      t.symbols = std::make_unique<SymbolWarmup>(is_shim_module);
    } catch (const std::system_error&) {
      // No thread to be had: the report opens the modules itself, as on one core.
    }
  }
  Loader loader(t, path, site_groups, plan.replay_thread);
  reading_trace([&] { reader.read(loader); });
  loader.finish(reader.counts());
  t.integrity = reader.integrity();
  t.version = reader.version();
  return t;
}

}  // namespace gpumemshim::analyzer
