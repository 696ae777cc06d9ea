// A fake libnvidia-ml.so.1 over the fake driver: each device's compute processes are this
// process (when it ever used the device) with the fake driver's charged bytes plus a fixed context
// overhead, and optionally one other process. Devices are listed in the reverse of the CUDA order,
// found by the PCI bus ids the fake driver gives (cuDeviceGetPCIBusId). Signatures and struct
// layouts are NVML's (nvml.h).
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "../common/config.hpp"

extern "C" {
typedef int nvmlReturn_t;
struct FakeNvmlDevice {
  int ordinal;  // the CUDA device it is
};
typedef FakeNvmlDevice* nvmlDevice_t;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
}

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr unsigned kOtherPid = 0x7ffffff0;  // the other process FAKECUDA_NVML_OTHER_BYTES adds
constexpr unsigned kInvalidGiId = 0xFFFFFFFF;

std::atomic<int> g_inits{0};
FakeNvmlDevice g_devices[64];

const fakecuda::Config& cfg() {
  return fakecuda::config();
}

void sleep_ms(std::uint64_t ms) {
  if (ms == 0) return;
  timespec t{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  nanosleep(&t, nullptr);
}

// The fake driver's accounting of a device: whether this process ever used it, and its bytes now.
bool driver_usage(int ordinal, unsigned long long* used) {
  using Fn = int (*)(int, unsigned long long*);
  static std::atomic<Fn> fn{nullptr};
  Fn f = fn.load();
  if (!f) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return false;  // CUDA never loaded: no process on any device
    f = reinterpret_cast<Fn>(dlsym(lib, "fakecuda_device_usage"));
    dlclose(lib);
    if (!f) return false;
    fn.store(f);
  }
  *used = 0;
  return f(ordinal, used) != 0;
}

bool initialized() {
  return g_inits.load() > 0;
}

// This process's row on a device: its pid as NVML reports it and its used bytes.
bool own_process(const FakeNvmlDevice* d, unsigned* pid, unsigned long long* used) {
  unsigned long long charged = 0;
  if (!driver_usage(d->ordinal, &charged)) return false;
  *pid = cfg().nvml_pid ? static_cast<unsigned>(cfg().nvml_pid) : static_cast<unsigned>(getpid());
  *used = charged + cfg().nvml_context_bytes;
  return true;
}

// The compute processes of a device, the other process (if any) first.
template <typename Info>
nvmlReturn_t processes(nvmlDevice_t device, unsigned* count, Info* infos) {
  if (!initialized()) return kUninitialized;
  if (device == nullptr || count == nullptr) return kInvalidArgument;
  sleep_ms(cfg().nvml_query_delay_ms);
  Info rows[2]{};
  unsigned n = 0;
  if (cfg().nvml_other_bytes) {
    rows[n].pid = kOtherPid;
    rows[n++].usedGpuMemory = cfg().nvml_other_bytes;
  }
  unsigned pid = 0;
  unsigned long long used = 0;
  if (own_process(device, &pid, &used)) {
    rows[n].pid = pid;
    rows[n++].usedGpuMemory = used;
  }
  if constexpr (sizeof(Info) == sizeof(nvmlProcessInfo_v2_t))
    for (unsigned i = 0; i < n; ++i)
      rows[i].gpuInstanceId = rows[i].computeInstanceId = kInvalidGiId;
  const unsigned room = *count;
  *count = n;
  if (n > room || (n > 0 && infos == nullptr)) return kInsufficientSize;
  for (unsigned i = 0; i < n; ++i) infos[i] = rows[i];
  return kSuccess;
}

nvmlDevice_t by_index(unsigned index) {
  const int n = cfg().devices;
  if (index >= static_cast<unsigned>(n)) return nullptr;
  FakeNvmlDevice* d = &g_devices[index];
  d->ordinal = n - 1 - static_cast<int>(index);  // the reverse of the CUDA order
  return d;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  if (!cfg().nvml_init_mark.empty()) {  // a test's evidence of when NVML was started, and by whom
    if (std::FILE* f = std::fopen(cfg().nvml_init_mark.c_str(), "a")) {
      std::fprintf(f, "%d\n", static_cast<int>(getpid()));
      std::fclose(f);
    }
  }
  if (!cfg().nvml) return kDriverNotLoaded;
  sleep_ms(cfg().nvml_init_delay_ms);
  g_inits.fetch_add(1);
  return kSuccess;
}

nvmlReturn_t nvmlInit() {
  return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown() {
  if (!initialized()) return kUninitialized;
  g_inits.fetch_sub(1);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (!initialized()) return kUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned>(cfg().devices);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  if (!initialized()) return kUninitialized;
  if (device == nullptr) return kInvalidArgument;
  *device = by_index(index);
  return *device ? kSuccess : kInvalidArgument;
}

// "domain:bus:device.function", hexadecimal, as cuDeviceGetPCIBusId writes it.
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_t* device) {
  if (!initialized()) return kUninitialized;
  if (bus_id == nullptr || device == nullptr) return kInvalidArgument;
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4)
    return kInvalidArgument;
  const int ordinal = static_cast<int>(bus) - 0x10;
  if (domain != 0 || dev != 0 || function != 0 || ordinal < 0 || ordinal >= cfg().devices)
    return kNotFound;
  *device = by_index(static_cast<unsigned>(cfg().devices - 1 - ordinal));
  return kSuccess;
}

// "FakeCUDA Device <ordinal>", the name the fake driver's cuDeviceGetName gives.
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  if (!initialized()) return kUninitialized;
  if (device == nullptr || name == nullptr) return kInvalidArgument;
  int n = std::snprintf(name, length, "FakeCUDA Device %d", device->ordinal);
  return n >= 0 && static_cast<unsigned>(n) < length ? kSuccess : kInsufficientSize;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (!initialized()) return kUninitialized;
  if (version == nullptr) return kInvalidArgument;
  int n = std::snprintf(version, length, "%s", "580.00.fake");
  return n >= 0 && static_cast<unsigned>(n) < length ? kSuccess : kInsufficientSize;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!initialized()) return kUninitialized;
  if (device == nullptr || memory == nullptr) return kInvalidArgument;
  unsigned pid = 0;
  unsigned long long own = 0;
  if (!own_process(device, &pid, &own)) own = 0;
  memory->total = cfg().total_mem;
  memory->used = own + cfg().nvml_other_bytes;
  memory->free = memory->used < memory->total ? memory->total - memory->used : 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  return processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned* count,
                                                     nvmlProcessInfo_v2_t* infos) {
  return processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                                     nvmlProcessInfo_v2_t* infos) {
  return processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned* current, unsigned* pending) {
  if (!initialized()) return kUninitialized;
  if (device == nullptr || current == nullptr || pending == nullptr) return kInvalidArgument;
  *current = *pending = cfg().nvml_mig ? 1 : 0;
  return kSuccess;
}

}  // extern "C"
