// The shim's C API for step markers, exported with C linkage so that the Python
// package (python/gpumemshim) finds it with ctypes in the global scope of a preloaded process,
// and C/C++ programs with dlsym(RTLD_DEFAULT, ...) (the installed header api/include/gpumemshim/
// markers.h does that for them). Every function is safe to call from any
// thread, never allocates and never fails; with recording off it does nothing.
#pragma once

#define GPUMEMSHIM_API extern "C" __attribute__((visibility("default")))

// A point event (MarkerKind::kMark).
GPUMEMSHIM_API void gpumemshim_mark(const char* name);
// A training-step boundary (MarkerKind::kStep); `name` may be NULL.
GPUMEMSHIM_API void gpumemshim_step(const char* name);
// An expect_no_leak region: a range push / pop named "expect_no_leak:<name>" (`name` may be NULL).
GPUMEMSHIM_API void gpumemshim_region_begin(const char* name);
GPUMEMSHIM_API void gpumemshim_region_end(const char* name);
// A plain named range (MarkerKind::kRangePush / kRangePop), e.g. "torch.backward" around a
// backward pass: allocations of other threads inside it are attributed to its caller's stack.
GPUMEMSHIM_API void gpumemshim_range_push(const char* name);
GPUMEMSHIM_API void gpumemshim_range_pop(const char* name);
// An Attribute record: a fact about the process that the analysis reads by key (e.g.
// "torch.memory_fraction.0" = "0.03", written by the Python package when the program caps PyTorch's
// memory). Key and value are cut to 256 bytes; an empty or NULL key is ignored, a NULL value is "".
// The last value written for a key counts.
GPUMEMSHIM_API void gpumemshim_attribute(const char* key, const char* value);
// 1 while the shim records (not disabled, trace writable so far), else 0.
GPUMEMSHIM_API int gpumemshim_active(void);
// Writes every thread's pending records to the trace now, so that an analysis of the trace while
// the process runs (the pytest plugin, after each test) sees everything recorded so far.
GPUMEMSHIM_API void gpumemshim_flush(void);
// 1: stop recording events until gpumemshim_pause(0) (allocations and frees made meanwhile are not
// in the trace, so a free of a block allocated while paused shows as unmatched). For measuring the
// shim's own cost step by step in one process.
GPUMEMSHIM_API void gpumemshim_pause(int paused);
