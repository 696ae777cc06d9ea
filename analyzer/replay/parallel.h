// Running the per-trace work of an analysis on every core, and telling the user how far it got.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace gpumemshim::analyzer {

// How many workers `jobs` means: 0 → one per core this process may use; never more than the tasks.
size_t worker_count(size_t jobs, size_t tasks);

// Runs task(i) for every i in [0, n) on worker_count(jobs, n) threads (the caller's thread is one
// of them), each i exactly once, the lowest indexes first. When tasks throw, the exception of the
// lowest index is rethrown once all workers stopped, so the error names the same trace whatever
// the number of workers; tasks after a failed one are skipped.
void parallel_for(size_t n, size_t jobs, const std::function<void(size_t)>& task);

// The size of a file, 0 when it cannot be read (the loader reports why).
uint64_t file_size_or_zero(const std::string& path);

// A one-line progress display on stderr ("gpumemshim: analysing 3/8 traces, 1.2/4.0 GiB"), only
// when stderr is a terminal and only once the analysis has run for `delay` (short analyses stay
// silent). Thread-safe: workers report bytes and finished traces as they go.
class Progress {
 public:
  Progress(size_t traces, uint64_t total_bytes, bool enabled,
           std::chrono::milliseconds delay = default_delay());
  ~Progress();  // clears the line if one was drawn
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add_bytes(uint64_t bytes);
  void trace_done();

  // 2 s, or GPUMEMSHIM_PROGRESS_DELAY_MS (tests).
  static std::chrono::milliseconds default_delay();
  // True when stderr is a terminal.
  static bool stderr_is_tty();

 private:
  void maybe_draw();

  size_t traces_;
  uint64_t total_bytes_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::milliseconds delay_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<size_t> done_{0};
  std::atomic<int64_t> next_draw_ms_{0};  // since start_
  std::mutex draw_;
  bool drawn_ = false;
};

}  // namespace gpumemshim::analyzer
