#include "recorder.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

#include "../boot/python_path.h"
#include "../config.h"
#include "../log.h"
#include "../nvml/nvml_sampler.h"
#include "../stack/native_stack.h"
#include "../stack/python_stack.h"
#include "block_writer.h"
#include "clock.h"
#include "flush_order.h"
#include "gpumemshim/format/encoder.h"
#include "in_flight.h"
#include "thread_state.h"
#include "trace_file.h"

namespace gpumemshim::shim {

namespace fmtrec = gpumemshim::format;

namespace {

// Process-wide recording state. kUninit: nothing read yet; kOpening: one thread opens the trace;
// kRecording; kOff: disabled or the trace could not be written.
enum Status : int { kUninit, kOpening, kRecording, kOff };
// gpumemshim_pause(): events are passed through unrecorded (for side-by-side measurements).
std::atomic<bool> g_paused{false};

constexpr int kMaxThreads = 4096;
constexpr long kFlushIntervalNs = 50'000'000;  // a SIGKILLed run must lose at most ~100 ms

Config g_config;
std::atomic<int> g_config_state{0};  // 0 unread, 1 reading, 2 ready
std::atomic<int> g_status{kUninit};
std::atomic<bool> g_finalized{false};  // after exit started: every record is written at once
std::atomic<bool> g_ending{false};     // the End block is being or was written
pid_t g_owner_pid = 0;                 // the process that opened the trace (not a vfork child)
std::atomic<bool> g_flusher_running{false};
TraceFile g_file;
uint64_t g_start_mono_ns = 0;
pthread_key_t g_thread_key;
std::atomic<ThreadState*> g_slots[kMaxThreads];

__attribute__((tls_model("initial-exec"))) thread_local ThreadState* t_state = nullptr;

// Every thread's pending records, one raw block per ring. bounded: see SpinLock.
void drain_all(bool bounded = false) {
  for (auto& slot : g_slots) {
    ThreadState* s = slot.load(std::memory_order_acquire);
    if (s && !s->ring.empty()) s->ring.drain(g_file.blocks(), bounded);
  }
}

// The flusher's ordered flush (flush_order.h). Its buffers are mmap'ed on first use and grown by
// doubling up to kOrderedMaxBytes; a ring that would not fit is drained as it is, unordered.
constexpr size_t kOrderedMaxBytes = size_t{64} << 20;
struct OrderedFlush {
  uint8_t* staged = nullptr;  // the taken rings' pending bytes, one after the other
  uint8_t* merged = nullptr;  // what is written
  size_t capacity = 0;        // of each
  ThreadState* taken[kMaxThreads];
  size_t offset[kMaxThreads];
  ThreadBatch batches[kMaxThreads];
  MergeCursor cursors[kMaxThreads];
  Compressor compressor;  // its blocks are compressed here, off the recording threads
};
OrderedFlush g_ordered;
// g_ordered's owner: the flusher, or exit and exec writing everything (never a hook's per-event
// path). The flusher's module scans run under it too, so none can follow the End block.
SpinLock g_ordered_lock;

void* grow_mapping(void* old, size_t old_size, size_t size) {
  void* p = old ? mremap(old, old_size, size, MREMAP_MAYMOVE)
                : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Room for `bytes` in both buffers (the staged bytes are kept); false past the cap or out of
// memory.
bool reserve_ordered(size_t bytes) {
  OrderedFlush& o = g_ordered;
  if (bytes <= o.capacity) return true;
  if (bytes > kOrderedMaxBytes) return false;
  size_t cap = o.capacity ? o.capacity : size_t{4} << 20;
  while (cap < bytes) cap *= 2;
  void* staged = grow_mapping(o.staged, o.capacity, cap);
  if (!staged) return false;
  o.staged = static_cast<uint8_t*>(staged);
  void* merged = grow_mapping(o.merged, o.capacity, cap);
  if (!merged) {  // keep both at the old size
    void* back = mremap(o.staged, cap, o.capacity, 0);
    (void)back;
    return false;
  }
  o.merged = static_cast<uint8_t*>(merged);
  o.capacity = cap;
  return true;
}

// A periodic flush: from every ring, the records made by `cut`, merged by time, in one compressed
// block, followed in the same block by `flush` (when given and any thread had records). The caller
// holds g_ordered_lock. bounded: see SpinLock. Returns whether a thread other than the caller had
// records (the flusher's own are its NVML samples, not the program's activity).
bool flush_in_time_order(uint64_t cut, const fmtrec::FlushRecord* flush, bool bounded) {
  OrderedFlush& o = g_ordered;
  bool any = false, others = false;
  size_t count = 0, used = 0;
  for (auto& slot : g_slots) {
    ThreadState* s = slot.load(std::memory_order_acquire);
    if (!s || s->ring.empty()) continue;
    any = true;
    others |= s != t_state;
    if (!reserve_ordered(used + Ring::kCapacity)) {
      s->ring.drain(g_file.blocks(), bounded);
      continue;
    }
    if (!s->ring.lock(bounded)) continue;  // held until what is taken is written
    size_t take = bytes_made_by(o.staged + used, s->ring.copy_pending(o.staged + used), cut);
    if (take == 0) {
      s->ring.unlock();
      continue;
    }
    o.taken[count] = s;
    o.offset[count] = used;
    o.batches[count].size = take;
    ++count;
    used += take;
  }
  for (size_t i = 0; i < count; ++i) o.batches[i].bytes = o.staged + o.offset[i];
  size_t n = count ? merge_by_time(o.batches, count, o.cursors, o.merged) : 0;
  uint8_t mark[16];
  size_t mark_size = any && flush ? fmtrec::encode(mark, sizeof mark, *flush) : 0;
  if (mark_size && n + mark_size <= o.capacity) {  // reserve_ordered left a ring's room
    std::memcpy(o.merged + n, mark, mark_size);
    n += mark_size;
    mark_size = 0;
  }
  g_file.blocks().write_compressed(o.merged, n, o.compressor);
  for (size_t i = 0; i < count; ++i) {
    o.taken[i]->ring.consume(o.batches[i].size);
    o.taken[i]->ring.unlock();
  }
  g_file.blocks().write_raw(mark, mark_size);  // no memory for the merge: the mark on its own
  return others;
}

// The previous mark (under g_ordered_lock): the bound for a thread caught reading the clock
// (in_flight.h).
uint64_t g_previous_mark = 0;

// How far a mark may stay behind its cut for a thread caught making a record. A thread preempted
// in between (a loaded machine) would otherwise hold every later mark at its record's time, and a
// reader's window with them, for as long as it waits for a core; past this its record is a
// straggler, which readers replay late and count (docs/trace-format.md "Ordering").
constexpr uint64_t kMaxMarkLagNs = kFlushIntervalNs;

// The time of the mark that ends a flush cut at `cut`, read before the flush takes any ring: no
// record a thread has still to buffer is older, unless it has been making it for longer than
// kMaxMarkLagNs. The caller holds g_ordered_lock.
uint64_t mark_time(uint64_t cut) {
  InFlightClock::fence_after_cut();
  uint64_t mark = cut;
  for (auto& slot : g_slots) {
    if (ThreadState* s = slot.load(std::memory_order_acquire))
      mark = s->in_flight.bound(mark, g_previous_mark);
  }
  mark = std::max(mark, cut > kMaxMarkLagNs ? cut - kMaxMarkLagNs : 0);
  g_previous_mark = mark;
  return mark;
}

// The trace time after which the next recording thread flushes in the flusher's place: half a
// flush interval later than the flusher's own next flush. A flusher starved of a core (more busy
// threads than cores) would otherwise let the rings fill, and their owners would write them out of
// time order; and a reader holds about one flush of events, so flushes must stay short.
constexpr uint64_t kOverdueNs = kFlushIntervalNs + kFlushIntervalNs / 2;
std::atomic<uint64_t> g_flush_due{UINT64_MAX};

// A futex word's waits and wakes (no lock: the word says what changed).
void futex_wake(std::atomic<uint32_t>& word, int waiters) {
  syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, waiters, nullptr, nullptr, 0);
}
// Until the word is no longer `seen` (at once when it already changed), or timeout_ns.
void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, long timeout_ns) {
  timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
}

// Bumped after every ordered flush: a thread whose ring is full waits on it (a futex word) for the
// flush in progress, which takes its records too (make_room).
std::atomic<uint32_t> g_flushes_done{0};

// One ordered flush with its mark, cut now. The caller holds g_ordered_lock and checked that the
// End block is not being written. Returns what flush_in_time_order does.
bool ordered_flush() {
  const uint64_t cut = monotonic_ns() - g_start_mono_ns;
  const fmtrec::FlushRecord flush{mark_time(cut)};
  const bool others = flush_in_time_order(cut, &flush, false);
  // Counted from the end of the write: a flush that waited on a slow disk is not late, and a
  // recording thread that took the next one over would put the disk's wait on the program.
  g_flush_due.store(monotonic_ns() - g_start_mono_ns + kOverdueNs, std::memory_order_relaxed);
  g_flushes_done.fetch_add(1, std::memory_order_release);
  futex_wake(g_flushes_done, INT32_MAX);
  return others;
}

// At exit and before exec: everything still buffered, in time order, then whatever did not fit.
void write_everything(bool bounded) {
  if (g_ordered_lock.lock(bounded)) {
    flush_in_time_order(UINT64_MAX, nullptr, bounded);
    g_ordered_lock.unlock();
  }
  drain_all(bounded);
}

// The last events and the End block, once, and only in the process that owns the trace (a vfork
// child shares the parent's memory and must leave the parent's trace alone). False when it was
// not this call's to write.
bool end_trace(bool bounded) {
  if (g_status.load(std::memory_order_acquire) != kRecording || getpid() != g_owner_pid)
    return false;
  if (g_ending.exchange(true)) return false;
  g_finalized.store(true);
  if (bounded) g_file.blocks().set_bounded();
  write_everything(bounded);
  g_file.blocks().write_end(monotonic_ns() - g_start_mono_ns);
  return true;
}

// Bumped (and the flusher woken) when a ring passes kWakeAtBytes: a busy thread's records then
// go through an ordered flush before its ring fills. A futex word: no lock, one syscall per
// ~half a ring of records.
constexpr size_t kWakeAtBytes = Ring::kCapacity / 2;
std::atomic<uint32_t> g_flush_wakes{0};

void wake_flusher() {
  g_flush_wakes.fetch_add(1, std::memory_order_release);
  futex_wake(g_flush_wakes, 1);
}

// Until the next flush is due: kFlushIntervalNs, or sooner when a ring wakes us (a wake that came
// while we were flushing returns at once: the word changed since `seen`, read before the flush).
void wait_for_flush(uint32_t seen) { futex_wait(g_flush_wakes, seen, kFlushIntervalNs); }

void* flusher_main(void*) {
  uint32_t seen = g_flush_wakes.load(std::memory_order_acquire);
  bool active = true;  // the last flush took records of the program's threads
  for (;;) {
    wait_for_flush(seen);
    seen = g_flush_wakes.load(std::memory_order_acquire);  // a wake from now on: flush again soon
    if (!g_flusher_running.load(std::memory_order_acquire)) return nullptr;
    if (g_status.load(std::memory_order_acquire) != kRecording) continue;
    // Before the cut, so that its samples go out with this flush; outside g_ordered_lock, which
    // exit takes (NVML can be slow).
    nvml_tick(active);
    // The cut: a record made by it is in this flush or an earlier one, unless its thread read the
    // clock before and buffered it after its ring was taken; the mark is early enough for those
    // (in_flight.h). So the analyzer can order everything up to a mark without waiting for more
    // (a one-thread trace would otherwise be held for the analyzer's whole idle window).
    // Taken: a recording thread is flushing in our place (late, or its buffer full), and its flush
    // takes every ring; waiting for it would only spin for as long as its write takes.
    if (!g_ordered_lock.try_lock()) continue;
    if (!g_ending.load(std::memory_order_acquire)) {
      active = ordered_flush();
      g_file.write_new_modules();
    }
    g_ordered_lock.unlock();
  }
}

void start_flusher() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the host's signals never land on our thread
  pthread_t thread;
  g_flusher_running.store(true, std::memory_order_release);
  if (pthread_create(&thread, nullptr, flusher_main, nullptr) == 0) {
    pthread_detach(thread);
  } else {
    g_flusher_running.store(false);
    log_warn("cannot start the flush thread; events are written when buffers fill and at exit");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void on_thread_exit(void* p) {
  auto* s = static_cast<ThreadState*>(p);
  // What it has not written yet goes with the flusher's next ordered flush (the state is never
  // unmapped and stays in its slot; a thread that claims it appends after it); drained here, it
  // would land ahead of older records of the other threads. Without a flusher: now.
  if (!s->registered || !g_flusher_running.load(std::memory_order_acquire))
    s->ring.drain(g_file.blocks());
  t_state = nullptr;
  s->dead.store(true, std::memory_order_release);
}

void fork_prepare() {
  if (g_status.load() == kRecording) drain_all();
}

void fork_child() {
  g_ordered_lock.reset();  // held by the parent's flusher at fork time, it would never be released
  g_previous_mark = 0;     // the parent's clock origin: the child's marks start over
  // Only the forking thread exists in the child; the other states become free for reuse.
  for (auto& slot : g_slots) {
    ThreadState* s = slot.load();
    if (!s) continue;
    s->ring.reset_after_fork();
    s->in_flight.reset();  // a thread of the parent caught making a record
    if (s != t_state) s->dead.store(true);
  }
  if (t_state) {  // the child's file has none of them yet
    t_state->stacks.clear();
    t_state->py_codes.clear();
  }
  g_file.forget_after_fork();  // and its writer: the child's first block is its own seq 0
  nvml_after_fork_child();
  g_flusher_running.store(false);
  g_finalized.store(false);
  g_ending.store(false);
  if (g_status.load() != kOff) g_status.store(kUninit);
}

void read_config_once() {
  int expected = 0;
  if (g_config_state.compare_exchange_strong(expected, 1)) {
    g_config = read_config();
    init_native_unwinder();
    pthread_key_create(&g_thread_key, on_thread_exit);
    pthread_atfork(fork_prepare, nullptr, fork_child);
    nvml_configure(g_config.nvml);
    if (g_config.disabled) g_status.store(kOff);
    g_config_state.store(2, std::memory_order_release);
    return;
  }
  while (g_config_state.load(std::memory_order_acquire) != 2) sched_yield();
}

__attribute__((constructor)) void shim_constructor() {
  read_config_once();
  if (g_status.load() != kOff) add_python_boot_path();
}

__attribute__((destructor)) void shim_destructor() {
  if (end_trace(false)) g_flusher_running.store(false);
}

// Slow path of the first event of the process (and of a forked child).
bool ensure_recording() {
  for (;;) {
    int s = g_status.load(std::memory_order_acquire);
    if (s == kRecording) return true;
    if (s == kOff) return false;
    if (s == kUninit) {
      read_config_once();
      if (g_status.compare_exchange_strong(s, kOpening)) {
        g_start_mono_ns = monotonic_ns();
        g_owner_pid = getpid();
        if (!g_file.open(g_config.output_pattern, g_start_mono_ns)) {
          g_status.store(kOff);
          return false;
        }
        g_flush_due.store(kOverdueNs, std::memory_order_relaxed);
        start_flusher();
        g_status.store(kRecording, std::memory_order_release);
        return true;
      }
    }
    sched_yield();
  }
}

ThreadState* claim_state() {
  for (auto& slot : g_slots) {
    ThreadState* s = slot.load(std::memory_order_acquire);
    bool dead = true;
    if (s && s->dead.load() && s->dead.compare_exchange_strong(dead, false)) {
      s->in_flight.reset();
      s->stacks.clear();
      s->py_codes.clear();
      return s;
    }
  }
  void* mem = mmap(nullptr, sizeof(ThreadState), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  auto* s = new (mem) ThreadState();
  for (auto& slot : g_slots) {
    ThreadState* empty = nullptr;
    if (slot.compare_exchange_strong(empty, s)) {
      s->registered = true;
      return s;
    }
  }
  return s;  // more than kMaxThreads recording threads: this one writes through at once
}

ThreadState* attach_thread() {
  ThreadState* s = claim_state();
  if (!s) return nullptr;
  s->thread_id = static_cast<uint64_t>(syscall(SYS_gettid));
  pthread_setspecific(g_thread_key, s);
  t_state = s;
  return s;
}

inline ThreadState* recording_thread() {
  // Acquire pairs with ensure_recording's release: a thread that sees kRecording also sees the
  // start time and the open file (a plain load on x86).
  if (g_status.load(std::memory_order_acquire) != kRecording || g_paused.load(std::memory_order_relaxed))
      [[unlikely]] {
    if (g_paused.load(std::memory_order_relaxed) || !ensure_recording()) return nullptr;
  }
  ThreadState* s = t_state;
  if (!s) [[unlikely]] s = attach_thread();
  return s;
}

// The flusher's ordered flush, made by a recording thread because the flusher is late (its time is
// due, or the thread's ring is full). Never waits for the flusher's lock: whoever holds it is
// flushing. Compressed as the flusher's are: a flusher this late means every core is taken, so the
// work costs the program the same in either thread, and a raw block costs eight times the bytes.
// False when this thread did not flush.
[[gnu::noinline]] bool flush_for_the_flusher() {
  if (!g_flusher_running.load(std::memory_order_acquire) ||
      g_finalized.load(std::memory_order_relaxed) || !g_ordered_lock.try_lock())
    return false;
  const bool flushed = !g_ending.load(std::memory_order_acquire);
  if (flushed) ordered_flush();
  g_ordered_lock.unlock();
  return flushed;
}

// How long a thread with a full ring waits for the flushes in progress before it writes its ring
// on its own, out of time order with the other threads', unless a block is being written then. A
// flush takes as long as its write: on a slow or stalled disk, from tens of ms to seconds, and the
// thread's own write would only queue behind it (one write per ring instead of one per flush). The
// bound is for a flusher held up elsewhere: scanning the modules under the loader's lock, which a
// thread waiting here may hold (a library's constructor that allocates during dlopen).
constexpr uint64_t kFullRingWaitNs = 2'000'000'000;

// Until the flush after `seen` has written its block, or 10 ms.
void wait_for_flush_end(uint32_t seen) { futex_wait(g_flushes_done, seen, 10'000'000); }

// Room for n bytes in s's full ring. It goes out with every other ring in time order, by this
// thread or by whoever is flushing (who takes this ring too: the thread sleeps until that flush's
// write ends rather than spinning, which on a slow disk would run out long before the write ends);
// written on its own, out of time order with the other threads', only when no flush frees it
// within kFullRingWaitNs and no block is being written.
[[gnu::noinline]] void make_room(ThreadState* s, size_t n) {
  uint64_t deadline = 0;
  uint32_t seen = 0;
  while (!s->ring.has_room(n) && s->registered &&
         g_flusher_running.load(std::memory_order_acquire) &&
         !g_finalized.load(std::memory_order_relaxed)) {
    const uint32_t done = g_flushes_done.load(std::memory_order_acquire);
    const uint64_t now = monotonic_ns();
    if (deadline == 0 || done != seen) {  // a flush ended: the file makes progress
      seen = done;
      deadline = now + kFullRingWaitNs;
    } else if (now >= deadline && !g_file.blocks().writing()) {
      break;
    }
    if (!flush_for_the_flusher()) wait_for_flush_end(seen);
  }
  if (!s->ring.has_room(n)) s->ring.drain(g_file.blocks());
}

// After n bytes went into s's ring (pending: what it holds now).
inline void appended(ThreadState* s, size_t n, size_t pending) {
  if (pending >= kWakeAtBytes && pending - n < kWakeAtBytes) [[unlikely]]
    wake_flusher();
  if (!s->registered || g_finalized.load(std::memory_order_relaxed)) [[unlikely]]
    s->ring.drain(g_file.blocks());
}

// The record is buffered (or dropped): its time is no longer in flight.
inline void record_done(ThreadState* s) {
  s->in_flight.end();
  if (s->flush_overdue) [[unlikely]] {
    s->flush_overdue = false;
    flush_for_the_flusher();
  }
}

// Buffers the record encoded in s->scratch (n bytes; 0: it did not fit and is dropped rather than
// truncated), then ends the thread's in-flight time.
inline void commit(ThreadState* s, size_t n) {
  if (n != 0) [[likely]] {
    if (!s->ring.has_room(n)) [[unlikely]]
      make_room(s, n);
    appended(s, n, s->ring.append(s->scratch, n));
  }
  record_done(s);
}

template <typename Record>
inline void emit(ThreadState* s, const Record& r) {
  commit(s, fmtrec::encode(s->scratch, sizeof s->scratch, r));
}

// The hot records (alloc, free, tensor event: fixed layouts of under 128 bytes) are encoded
// straight into the ring when it has room in one piece, saving the copy from scratch.
template <typename Record>
inline void emit_hot(ThreadState* s, const Record& r) {
  constexpr size_t kRoom = fmtrec::kMaxHotRecordSize;
  if (uint8_t* at = s->ring.reserve(kRoom)) [[likely]] {
    const size_t n = fmtrec::encode(at, kRoom, r);
    appended(s, n, s->ring.publish(n));
    record_done(s);
    return;
  }
  emit(s, r);
}

// Writes the PyCode records of a new Python stack's code objects this thread has not described.
void emit_python_codes(ThreadState* s, uint32_t n) {
  char filename[1024], name[1024];
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t code_id = s->py_frames[i].code_id;
    if (s->py_codes.seen_or_insert(code_id)) continue;
    fmtrec::PyCodeRecord code;
    describe_python_code(s->py_code_objects[i], code_id, code, filename, name, sizeof filename);
    size_t bytes = fmtrec::encode(s->scratch, sizeof s->scratch, code);
    if (bytes == 0) {  // a huge line table: lines then fall back to the first line
      code.line_table = {};
      bytes = fmtrec::encode(s->scratch, sizeof s->scratch, code);
    }
    commit(s, bytes);
  }
}

// This thread's Python frames into s->py_frames (0 when it runs no Python or they are off).
inline uint32_t capture_python(ThreadState* s) {
  return g_config.python_stacks
             ? capture_python_stack(s->py_frames, s->py_code_objects, kMaxPythonFrames)
             : 0;
}

// The id of the stack just captured (n native frames in s->frames, py Python frames in
// s->py_frames; 0 when both are empty), its definition written the first time this thread sees it.
inline uint64_t intern_stack(ThreadState* s, uint32_t n, uint32_t py) {
  if (n == 0 && py == 0) return 0;
  uint64_t id = StackInterner::hash(s->frames, n);
  if (py) id = hash_python_frames(id, s->py_frames, py);
  if (!s->stacks.seen_or_insert(id)) {
    if (py) emit_python_codes(s, py);
    emit(s, fmtrec::StackRecord{id, n, s->frames});
    if (py) emit(s, fmtrec::PyStackRecord{id, py, s->py_frames});
  }
  return id;
}

inline uint32_t capture_native(ThreadState* s) {
  return g_config.native_stacks ? capture_native_stack(s->frames, g_config.depth) : 0;
}

// Captures this thread's native stack (and its Python frames, if it runs Python). The id covers both.
inline uint64_t current_stack(ThreadState* s) {
  uint32_t n = capture_native(s);
  return intern_stack(s, n, capture_python(s));
}

// A stack named by a label (a grad_fn's type name, whose address is unique per type): one
// StackLabel record per label, native stack and thread. Usually no unwinding (n == 0); with the n
// native frames in s->frames the analyzer shows the label under the library that allocated.
inline uint64_t labeled_stack(ThreadState* s, const char* label, uint32_t n = 0) {
  uint64_t id = StackInterner::hash(s->frames, n) ^
                (reinterpret_cast<uintptr_t>(label) * 0x9E3779B97F4A7C15ull) ^ 0x5ab1e15ab1e1ull;
  if (!s->stacks.seen_or_insert(id)) {
    emit(s, fmtrec::StackRecord{id, n, s->frames});
    emit(s, fmtrec::StackLabelRecord{id, std::string_view(label, strnlen(label, 256))});
  }
  return id;
}

// For PyTorch's tensor events: the Python stack alone when this thread runs Python (the native
// frames between the script and the caching allocator are PyTorch's dispatcher and allocator,
// which the analyzer drops anyway, and walking them is most of a tensor event's cost); else the
// grad_fn the bridge named (autograd's device threads run no Python); else the native stack.
inline uint64_t python_or_native_stack(ThreadState* s, const char* grad_fn) {
  if (uint32_t py = capture_python(s)) return intern_stack(s, 0, py);
  if (grad_fn) return labeled_stack(s, grad_fn);
  return intern_stack(s, capture_native(s), 0);
}

// For a tensor event the bridge asks to walk (a block that may be a library's workspace): its
// native frames always, which name the library's call, with its Python frames or else the grad_fn.
inline uint64_t walked_stack(ThreadState* s, const char* grad_fn) {
  uint32_t n = capture_native(s);
  uint32_t py = capture_python(s);
  if (py || !grad_fn) return intern_stack(s, n, py);
  return labeled_stack(s, grad_fn, n);
}

inline uint64_t now() { return monotonic_ns() - g_start_mono_ns; }

// A timed record's time, published as in flight until commit() buffers the record (in_flight.h);
// past the flush's due time, commit() flushes in the flusher's place.
inline uint64_t record_time(ThreadState* s) {
  const uint64_t time = s->in_flight.begin(now);
  if (time > g_flush_due.load(std::memory_order_relaxed)) [[unlikely]] s->flush_overdue = true;
  return time;
}

}  // namespace

void set_paused(bool paused) { g_paused.store(paused, std::memory_order_relaxed); }

bool recording_off() {
  int s = g_status.load(std::memory_order_relaxed);
  if (s == kUninit) read_config_once();
  return g_status.load(std::memory_order_relaxed) == kOff;
}

void record_alloc(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address,
                  uint64_t size) {
  ThreadState* s = recording_thread();
  if (!s) return;
  uint64_t stack = current_stack(s);
  emit_hot(s, fmtrec::AllocRecord{record_time(s), s->thread_id, device, stream, api, kind, address,
                                  size, stack});
  if (kind != MemoryKind::kPinnedHost && kind != MemoryKind::kMapping &&
      kind != MemoryKind::kReservation)
    note_device_memory(device);
}

void record_free(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address) {
  ThreadState* s = recording_thread();
  if (!s) return;
  uint64_t stack = current_stack(s);
  emit_hot(s, fmtrec::FreeRecord{record_time(s), s->thread_id, device, stream, api, kind, address,
                                 stack, 0});
}

void record_free_failed(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address,
                        uint32_t error) {
  ThreadState* s = recording_thread();
  if (!s) return;
  uint64_t stack = current_stack(s);
  emit(s, fmtrec::FreeRecord{record_time(s), s->thread_id, device, stream, api, kind, address, stack, error});
}

void record_alloc_failed(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t size,
                         uint32_t error) {
  ThreadState* s = recording_thread();
  if (!s) return;
  uint64_t stack = current_stack(s);
  emit(s, fmtrec::AllocFailedRecord{record_time(s), s->thread_id, device, stream, api, kind, size, error,
                                    stack});
}

void record_torch_event(fmtrec::TorchAction action, int device, uint64_t stream, uint64_t address,
                        uint64_t size, const char* grad_fn, bool walk) {
  ThreadState* s = recording_thread();
  if (!s) return;
  // Only a block's allocation (and an OOM) needs a stack: frees are matched by address, and a
  // segment's allocation is also a cudaMalloc/cuMemCreate event with its own stack.
  bool wants_stack = action == fmtrec::TorchAction::kAlloc || action == fmtrec::TorchAction::kOom;
  uint64_t stack = !wants_stack ? 0
                   : walk       ? walked_stack(s, grad_fn)
                                : python_or_native_stack(s, grad_fn);
  emit_hot(s, fmtrec::TorchEventRecord{record_time(s), s->thread_id, device, stream, action,
                                       address, size, stack});
}

void record_mem_info(int device, uint64_t free_bytes, uint64_t total_bytes) {
  ThreadState* s = recording_thread();
  if (!s) return;
  emit(s, fmtrec::MemInfoRecord{record_time(s), device, free_bytes, total_bytes});
}

void record_process_memory(int device, MeasureFn measure, void* ctx) {
  ThreadState* s = recording_thread();
  if (!s) return;
  fmtrec::ProcessMemoryRecord r;
  r.time_ns = record_time(s);
  r.device = device;
  if (measure(ctx, r))
    emit(s, r);
  else
    s->in_flight.end();
}

void record_marker(fmtrec::MarkerKind kind, const char* name) {
  ThreadState* s = recording_thread();
  if (!s) return;
  // Markers are rare (steps, regions, backward passes): their caller's stack is worth its cost; it
  // places regions in the source and gives autograd threads' allocations their backward() site.
  uint64_t stack = current_stack(s);
  emit(s, fmtrec::MarkerRecord{record_time(s), s->thread_id, kind, name ? name : "", stack});
}

void record_attribute(const char* key, const char* value) {
  ThreadState* s = recording_thread();
  if (!s || !key || !*key) return;
  emit(s,
       fmtrec::AttributeRecord{std::string_view(key, strnlen(key, kMaxAttributeBytes)),
                               value ? std::string_view(value, strnlen(value, kMaxAttributeBytes))
                                     : std::string_view()});
}

}  // namespace gpumemshim::shim

namespace gpumemshim::shim {
void flush_all_threads() {
  if (g_status.load() == kRecording && !g_ending.load()) write_everything(false);
}

void end_trace_before_exit() {
  if (end_trace(true)) g_flusher_running.store(false);
}

bool end_trace_before_exec() { return end_trace(false); }

void resume_trace_after_failed_exec() {
  g_file.blocks().reopen_after_end();
  g_finalized.store(false);
  g_ending.store(false);
}
}  // namespace gpumemshim::shim
