#include "nvml_sampler.h"

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "../interpose/cuda_abi.h"
#include "../interpose/driver_table.h"
#include "../interpose/hook_scope.h"
#include "../interpose/next_symbol.h"
#include "../log.h"
#include "../record/clock.h"
#include "../record/recorder.h"
#include "nvml_abi.h"

namespace gpumemshim::shim {

namespace {

using nvml_detail::g_devices;

// kIdle: not opened yet; kLoading: the flusher opens it; kReady; kUnavailable: no NVML, or it
// would not start (never tried again); kClosed: exit took its last sample; kOff: GPUMEMSHIM_NVML=0,
// or a fork child whose parent had begun to open it.
enum State : int { kIdle, kLoading, kReady, kUnavailable, kClosed, kOff };
std::atomic<int> g_state{kIdle};
// Held by whoever calls into NVML: the flusher, or exit's last sample. Never by a hook.
std::atomic<bool> g_busy{false};
pid_t g_loaded_by = 0;  // the process whose exit samples (fork children inherit the atexit entry)

struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_bus_id)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, void*) = nullptr;
  size_t stride = 0;  // of `processes`' entries; 0: _v3's, told apart by this process's pid
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;  // optional
};
NvmlApi g_nvml;

// Per CUDA ordinal: its NVML device, looked up by PCI bus id on first use (CUDA ordinals follow
// CUDA_VISIBLE_DEVICES and CUDA's device order; NVML's indexes do neither).
constexpr int kMaxDevices = 64;
enum class Mapping : uint8_t { kUnknown, kMapped, kNone };
Mapping g_mapping[kMaxDevices];
nvmlDevice_t g_handle[kMaxDevices];
std::atomic<void*> g_cu_device_get{nullptr};
std::atomic<void*> g_cu_device_pci_bus_id{nullptr};

// NVML's process list, one device at a time (under g_busy): no heap.
constexpr size_t kProcessBytes = 256 * nvml::kStrideV3Wide;
alignas(8) unsigned char g_processes[kProcessBytes];

// Sampling pace: once per flush while the program records, about once a second while it idles,
// and never more than 1/kCostShare of the flusher's time.
constexpr uint64_t kActiveIntervalNs = 50'000'000;
constexpr uint64_t kIdleIntervalNs = 1'000'000'000;
constexpr uint64_t kCostShare = 20;
uint64_t g_last_sample_ns = 0;
uint64_t g_last_cost_ns = 0;
// At exit the flusher may be inside NVML; exit waits this long for it, then goes on without the
// last sample.
constexpr int kExitWaitSteps = 200;
constexpr long kExitWaitStepNs = 1'000'000;

bool try_busy() {
  bool expected = false;
  return g_busy.compare_exchange_strong(expected, true, std::memory_order_acquire);
}
void release_busy() {
  g_busy.store(false, std::memory_order_release);
}

void* lookup(void* lib, const char* name, const char* fallback = nullptr) {
  void* p = real_symbol(lib, name);
  return p || !fallback ? p : real_symbol(lib, fallback);
}

// Opens NVML and resolves what the sampler calls; false (debug log) when it cannot be used.
bool open_nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    log_debug("no NVML, no device view of this process's memory: %s", why ? why : "not found");
    return false;
  }
  NvmlApi a;
  a.init = reinterpret_cast<decltype(a.init)>(lookup(lib, "nvmlInit_v2", "nvmlInit"));
  a.by_bus_id = reinterpret_cast<decltype(a.by_bus_id)>(
      lookup(lib, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"));
  a.memory = reinterpret_cast<decltype(a.memory)>(lookup(lib, "nvmlDeviceGetMemoryInfo"));
  a.mig_mode = reinterpret_cast<decltype(a.mig_mode)>(lookup(lib, "nvmlDeviceGetMigMode"));
  // The fixed layouts first; _v3's entry size changed between drivers under one name.
  struct Variant {
    const char* name;
    size_t stride;
  };
  for (Variant v : {Variant{"nvmlDeviceGetComputeRunningProcesses_v2", nvml::kStrideV2},
                    Variant{"nvmlDeviceGetComputeRunningProcesses", nvml::kStrideV1},
                    Variant{"nvmlDeviceGetComputeRunningProcesses_v3", 0}}) {
    if (void* p = lookup(lib, v.name)) {
      a.processes = reinterpret_cast<decltype(a.processes)>(p);
      a.stride = v.stride;
      break;
    }
  }
  if (!a.init || !a.by_bus_id || !a.memory || !a.processes) {
    log_debug("NVML lacks the functions the device view needs; not sampled");
    dlclose(lib);
    return false;
  }
  if (nvmlReturn_t rc = a.init(); rc != nvml::kSuccess) {
    log_debug("nvmlInit failed (%d); no device view of this process's memory", rc);
    dlclose(lib);
    return false;
  }
  g_nvml = a;  // the library stays loaded: NVML is reference counted, the host may use it too
  return true;
}

// The NVML device of CUDA device `ordinal`, looked up once; null when it has none this sampler
// can use. A driver call that fails is tried again next time.
nvmlDevice_t device_handle(int ordinal) {
  Mapping& m = g_mapping[ordinal];
  if (m == Mapping::kMapped) return g_handle[ordinal];
  if (m == Mapping::kNone) return nullptr;
  auto get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(
      real_driver_function("cuDeviceGet", g_cu_device_get));
  auto bus_id = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(
      real_driver_function("cuDeviceGetPCIBusId", g_cu_device_pci_bus_id));
  if (!get || !bus_id) {
    log_debug("device %d: no cuDeviceGetPCIBusId; its memory is not sampled", ordinal);
    m = Mapping::kNone;
    return nullptr;
  }
  CUdevice dev = 0;
  char bus[64] = {};
  if (get(&dev, ordinal) != kCuSuccess || bus_id(bus, sizeof bus - 1, dev) != kCuSuccess)
    return nullptr;
  nvmlDevice_t h = nullptr;
  if (g_nvml.by_bus_id(bus, &h) != nvml::kSuccess || !h) {
    log_debug("device %d (%s): not an NVML device; its memory is not sampled", ordinal, bus);
    m = Mapping::kNone;
    return nullptr;
  }
  unsigned current = 0, pending = 0;
  if (g_nvml.mig_mode && g_nvml.mig_mode(h, &current, &pending) == nvml::kSuccess &&
      current == nvml::kMigEnabled) {
    // NVML's figures are the whole GPU's, not the MIG instance this process runs on.
    log_debug("device %d (%s): MIG; no per-process memory, not sampled", ordinal, bus);
    m = Mapping::kNone;
    return nullptr;
  }
  g_handle[ordinal] = h;
  m = Mapping::kMapped;
  return h;
}

// This process's entry among `count` entries of `stride` bytes; false when it is not listed.
bool find_pid(size_t count, size_t stride, unsigned pid, uint64_t& used) {
  for (size_t i = 0; i < count && (i + 1) * stride <= kProcessBytes; ++i) {
    unsigned p = 0;
    std::memcpy(&p, g_processes + i * stride + nvml::kPidOffset, sizeof p);
    if (p != pid) continue;
    unsigned long long u = 0;
    std::memcpy(&u, g_processes + i * stride + nvml::kUsedOffset, sizeof u);
    used = u;
    return true;
  }
  return false;
}

// This process's used bytes on the device, when NVML lists this pid with a value.
bool process_used(nvmlDevice_t h, uint64_t& used) {
  const size_t stride = g_nvml.stride ? g_nvml.stride : nvml::kStrideV3Wide;  // room for either
  unsigned count = static_cast<unsigned>(kProcessBytes / stride);
  if (g_nvml.processes(h, &count, g_processes) != nvml::kSuccess) return false;
  const unsigned pid = static_cast<unsigned>(getpid());
  bool found = false;
  if (g_nvml.stride) {
    found = find_pid(count, g_nvml.stride, pid, used);
  } else {  // _v3: whichever layout lists this pid (the first entry is the same in both)
    uint64_t narrow = 0, wide = 0;
    const bool in_narrow = find_pid(count, nvml::kStrideV2, pid, narrow);
    const bool in_wide = find_pid(count, nvml::kStrideV3Wide, pid, wide);
    found = in_narrow != in_wide || (in_narrow && narrow == wide);
    used = in_narrow ? narrow : wide;
  }
  return found && used != nvml::kValueNotAvailable;
}

bool measure(void* ctx, format::ProcessMemoryRecord& r) {
  auto h = static_cast<nvmlDevice_t>(ctx);
  uint64_t used = 0;
  if (process_used(h, used)) {
    r.flags |= format::kProcessUsedKnown;
    r.process_used_bytes = used;
  }
  nvmlMemory_t mem{};
  if (g_nvml.memory(h, &mem) != nvml::kSuccess) return false;
  r.device_used_bytes = mem.used;
  r.device_total_bytes = mem.total;
  return true;
}

// One record per device the process allocated on. The caller holds g_busy.
void sample_all() {
  HookScope scope;  // any CUDA call NVML or the driver makes from here is not the program's event
  uint64_t devices = g_devices.load(std::memory_order_relaxed);
  while (devices) {
    const int d = __builtin_ctzll(devices);
    devices &= devices - 1;
    if (nvmlDevice_t h = device_handle(d)) record_process_memory(d, measure, h);
  }
}

void at_exit() {
  if (getpid() != g_loaded_by) return;
  bool held = try_busy();
  for (int i = 0; !held && i < kExitWaitSteps; ++i) {
    timespec step{0, kExitWaitStepNs};
    nanosleep(&step, nullptr);
    held = try_busy();
  }
  if (held && g_state.load(std::memory_order_acquire) == kReady) sample_all();
  // From here NVML may be finalized with the other libraries: the flusher leaves it alone.
  g_state.store(kClosed, std::memory_order_release);
  if (held) release_busy();
}

// The flusher: NVML opened the first time a device allocation was seen.
void start() {
  if (!try_busy()) return;
  int idle = kIdle;
  if (!g_state.compare_exchange_strong(idle, kLoading)) {
    release_busy();
    return;
  }
  const bool ok = open_nvml();
  int loading = kLoading;
  if (g_state.compare_exchange_strong(loading, ok ? kReady : kUnavailable) && ok) {
    // Exit's handlers run in reverse order of registration, and all of them before the libraries'
    // destructors: this one, registered after the CUDA runtime started, samples while the
    // process's context and NVML are still there.
    g_loaded_by = getpid();
    if (std::atexit(at_exit) != 0)
      log_debug("no exit handler: the last NVML sample is the flusher's");
  }
  release_busy();
}

}  // namespace

void nvml_configure(bool enabled) {
  if (!enabled) g_state.store(kOff, std::memory_order_relaxed);
}

void nvml_tick(bool active) {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kIdle && g_devices.load(std::memory_order_relaxed) != 0) {
    start();
    state = g_state.load(std::memory_order_acquire);
    g_last_sample_ns = 0;
  }
  if (state != kReady) return;
  const uint64_t now = monotonic_ns();
  uint64_t interval = active ? kActiveIntervalNs : kIdleIntervalNs;
  if (interval < kCostShare * g_last_cost_ns) interval = kCostShare * g_last_cost_ns;
  if (g_last_sample_ns != 0 && now - g_last_sample_ns < interval) return;
  if (!try_busy()) return;
  if (g_state.load(std::memory_order_acquire) == kReady) sample_all();
  release_busy();
  g_last_sample_ns = now;
  g_last_cost_ns = monotonic_ns() - now;
}

void nvml_after_fork_child() {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state == kLoading || state == kReady || state == kClosed) g_state.store(kOff);
  g_busy.store(false);
  g_devices.store(0, std::memory_order_relaxed);
  g_last_sample_ns = g_last_cost_ns = 0;
}

}  // namespace gpumemshim::shim
