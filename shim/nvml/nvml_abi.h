// The few NVML types and values the sampler needs, declared here so the shim builds without NVML's
// header and never links libnvidia-ml: it is opened at run time, when present. Layouts are NVML's
// ABI (nvml.h), which keeps every versioned function's argument layout fixed.
#pragma once
#include <cstddef>

extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlMemory_t {  // nvmlDeviceGetMemoryInfo (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
}

namespace gpumemshim::shim::nvml {

inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr unsigned kMigEnabled = 1;  // nvmlDeviceGetMigMode's NVML_DEVICE_MIG_ENABLE
// usedGpuMemory when the driver cannot tell (Windows WDDM, some MIG setups).
inline constexpr unsigned long long kValueNotAvailable = ~0ull;

// nvmlProcessInfo entries, read by offset: every layout starts with u32 pid, then (aligned) u64
// usedGpuMemory. nvmlDeviceGetComputeRunningProcesses (v1) fills 16-byte entries, _v2 24-byte
// ones (+ u32 gpuInstanceId, u32 computeInstanceId); _v3 fills the _v2 layout, except R535
// drivers, which append u64 usedGpuCcProtectedMemory (32 bytes) under the same name.
inline constexpr size_t kPidOffset = 0;
inline constexpr size_t kUsedOffset = 8;
inline constexpr size_t kStrideV1 = 16;
inline constexpr size_t kStrideV2 = 24;
inline constexpr size_t kStrideV3Wide = 32;

}  // namespace gpumemshim::shim::nvml
