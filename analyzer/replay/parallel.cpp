#include "replay/parallel.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpumemshim/analyzer/units.h"
#include "gpumemshim/format/trace_reader.h"

namespace gpumemshim::analyzer {

size_t worker_count(size_t jobs, size_t tasks) {
  if (jobs == 0) jobs = format::usable_cores();
  return std::max<size_t>(1, std::min(jobs, tasks));
}

void parallel_for(size_t n, size_t jobs, const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failed{n};  // lowest failed index so far
  std::vector<std::exception_ptr> errors(n);
  auto work = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= n || i > first_failed.load()) return;
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
        size_t seen = first_failed.load();
        while (i < seen && !first_failed.compare_exchange_weak(seen, i)) {
        }
      }
    }
  };
  size_t workers = worker_count(jobs, n);
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  try {
    for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started (and this one) do the work.
  }
  work();
  for (std::thread& t : threads) t.join();
  // Indexes are handed out in order, so every index below the first failure ran to completion.
  if (size_t f = first_failed.load(); f < n) std::rethrow_exception(errors[f]);
}

uint64_t file_size_or_zero(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::chrono::milliseconds Progress::default_delay() {
  if (const char* v = std::getenv("GPUMEMSHIM_PROGRESS_DELAY_MS"); v && *v)
    return std::chrono::milliseconds(std::strtoll(v, nullptr, 10));
  return std::chrono::milliseconds(2000);
}

bool Progress::stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(size_t traces, uint64_t total_bytes, bool enabled, std::chrono::milliseconds delay)
    : traces_(traces),
      total_bytes_(total_bytes),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      delay_(delay) {
  next_draw_ms_ = delay_.count();
}

Progress::~Progress() {
  if (!enabled_) return;
  std::lock_guard lock(draw_);
  if (drawn_) std::fputs("\r\033[K", stderr);  // leave the terminal as it was
}

void Progress::add_bytes(uint64_t bytes) {
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  maybe_draw();
}

void Progress::trace_done() {
  done_.fetch_add(1, std::memory_order_relaxed);
  maybe_draw();
}

void Progress::maybe_draw() {
  if (!enabled_) return;
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start_).count();
  int64_t due = next_draw_ms_.load(std::memory_order_relaxed);
  if (now_ms < due) return;
  // One drawer at a time, at most ~5 redraws a second.
  if (!next_draw_ms_.compare_exchange_strong(due, now_ms + 200)) return;
  std::lock_guard lock(draw_);
  uint64_t bytes = std::min(bytes_.load(), total_bytes_);
  int percent = total_bytes_ ? static_cast<int>(bytes * 100 / total_bytes_) : 100;
  std::fprintf(stderr, "\r\033[Kgpumemshim: analysing %zu/%zu traces, %s of %s read (%d%%)",
               done_.load(), traces_, human_bytes(bytes).c_str(), human_bytes(total_bytes_).c_str(),
               percent);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace gpumemshim::analyzer
