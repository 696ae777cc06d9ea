// The device's own view of this process's memory: NVML's used bytes for this pid (what nvidia-smi
// lists) and the device's used and total, written as ProcessMemory records so that the analyzer
// can hold them against what the trace explains.
//
// NVML runs on the flusher thread only (and once at exit), never on a thread inside a hook: it is
// opened lazily, after the process made its first device allocation (its init can be slow, and it
// must not run in a program that never uses CUDA), sampled at most once per flush while the
// program records events and about once a second while it idles, and never for more than a small
// share of the flusher's time. Without libnvidia-ml.so.1, or where it cannot tell this process's
// devices apart (MIG), nothing is recorded (debug log only). GPUMEMSHIM_NVML=0 turns it off.
#pragma once
#include <atomic>
#include <cstdint>

namespace gpumemshim::shim {

namespace nvml_detail {
// Bit d: the process allocated device memory on CUDA device d (d < 64).
inline std::atomic<uint64_t> g_devices{0};
}  // namespace nvml_detail

// The hot path: a device memory allocation on `device`. One relaxed load once the device is known.
inline void note_device_memory(int device) {
  if (device < 0 || device >= 64) return;
  const uint64_t bit = uint64_t{1} << device;
  if (!(nvml_detail::g_devices.load(std::memory_order_relaxed) & bit)) [[unlikely]]
    nvml_detail::g_devices.fetch_or(bit, std::memory_order_relaxed);
}

// Once, with the settings (GPUMEMSHIM_NVML).
void nvml_configure(bool enabled);
// The flusher, on every wake while recording, outside the ordered flush's lock (exit must never
// wait on NVML through it). active: the last flush took records of the program's threads.
void nvml_tick(bool active);
// In a forked child: a parent that had begun to open NVML leaves the child without it (NVML's
// state, and any lock its threads held, belong to the parent); otherwise the child opens its own.
void nvml_after_fork_child();

}  // namespace gpumemshim::shim
