// The hot-path API the interposers call. Each call: one clock read, an optional stack capture, an
// encode into this thread's scratch and a copy into this thread's ring. No heap allocation, no
// lock shared with other recording threads, no symbolization, no stdio.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpumemshim/format/records.h"

namespace gpumemshim::shim {

using format::Api;
using format::MemoryKind;

void record_alloc(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address,
                  uint64_t size);
// Called before the real free: the address may be reused by another thread right after it.
void record_free(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address);
// Called after a free that failed: the analyzer puts the allocation back.
void record_free_failed(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t address,
                        uint32_t error);
void record_alloc_failed(Api api, MemoryKind kind, int device, uint64_t stream, uint64_t size,
                         uint32_t error);
void record_mem_info(int device, uint64_t free_bytes, uint64_t total_bytes);
// An event of PyTorch's caching allocator (through gpumemshim_torch_event). Runs under the
// allocator's lock: like every record_* call, takes no lock and allocates nothing.
// grad_fn: the autograd Node's type name when the bridge knows it (autograd's device thread), else
// null: such an allocation's stack is that label instead of a walk of ~30 native frames.
// walk: the native frames are walked anyway (with the Python frames or the label), for the few
// blocks whose native frames tell a library's own memory from the script's.
void record_torch_event(format::TorchAction action, int device, uint64_t stream, uint64_t address,
                        uint64_t size, const char* grad_fn = nullptr, bool walk = false);
// One sample of a device's memory as NVML sees it (nvml/nvml_sampler.cpp), from the flusher or
// exit, never a hook: the record's time is read first, then measure(ctx, record) fills the rest
// and says whether there is anything to write.
using MeasureFn = bool (*)(void* ctx, format::ProcessMemoryRecord& out);
void record_process_memory(int device, MeasureFn measure, void* ctx);
// While paused no event is recorded (the program runs on untouched); see gpumemshim_pause.
void set_paused(bool paused);
void record_marker(format::MarkerKind kind, const char* name);
// An Attribute record (key, value): a setting of the program that the analysis needs (PyTorch's
// memory fraction); each cut to kMaxAttributeBytes.
inline constexpr size_t kMaxAttributeBytes = 256;
void record_attribute(const char* key, const char* value);

// True when GPUMEMSHIM_DISABLE=1 or the trace could not be opened: hooks skip all work.
bool recording_off();

}  // namespace gpumemshim::shim

namespace gpumemshim::shim {
// Writes every thread's pending records now (gpumemshim_flush).
void flush_all_threads();
// _exit, _Exit, quick_exit: every thread's pending records and the End block, now (the image ends
// without exit's destructors). Only in the process that owns the trace; never waits long on a
// lock (it may run in a signal handler).
void end_trace_before_exit();
// exec: the same before the image is replaced; true when this call wrote the End block, and then
// resume_trace_after_failed_exec() must follow when exec returns (it failed: the process goes on).
bool end_trace_before_exec();
void resume_trace_after_failed_exec();
}  // namespace gpumemshim::shim
