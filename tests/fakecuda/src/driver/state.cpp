#include "state.hpp"

#include <sys/mman.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fakecuda::drv {
namespace {

struct Allocation {
  std::size_t bytes;
  Kind kind;
  int device;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<std::uintptr_t, Allocation> live;
  std::array<std::size_t, kMaxDevices> used{};
  std::array<bool, kMaxDevices> ever_used{};
  std::size_t used_total = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: usable during exit
  return *r;
}

std::array<CUctx_st, kMaxDevices> make_contexts() {
  std::array<CUctx_st, kMaxDevices> ctxs{};
  for (int i = 0; i < kMaxDevices; ++i) ctxs[static_cast<std::size_t>(i)].device = i;
  return ctxs;
}

std::array<CUctx_st, kMaxDevices> g_contexts = make_contexts();
thread_local CUctx_st* t_current = nullptr;

void* map_pages(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

bool valid_device(int dev) {
  return dev >= 0 && dev < config().devices;
}

CUctx_st* primary_ctx(int dev) {
  return valid_device(dev) ? &g_contexts[static_cast<std::size_t>(dev)] : nullptr;
}

CUctx_st* current_ctx() {
  return t_current != nullptr ? t_current : primary_ctx(0);
}
void set_current_ctx(CUctx_st* ctx) {
  t_current = ctx;
}
int current_device() {
  CUctx_st* ctx = current_ctx();
  return ctx != nullptr ? ctx->device : 0;
}

CUresult charge(int dev, std::size_t bytes) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::size_t& used = r.used[static_cast<std::size_t>(dev)];
  if (bytes > config().total_mem - used) return CUDA_ERROR_OUT_OF_MEMORY;
  if (bytes > config().oom_after || r.used_total > config().oom_after - bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  used += bytes;
  r.used_total += bytes;
  r.ever_used[static_cast<std::size_t>(dev)] = true;
  return CUDA_SUCCESS;
}

void uncharge(int dev, std::size_t bytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.used[static_cast<std::size_t>(dev)] -= bytes;
  r.used_total -= bytes;
}

std::size_t used_on(int dev) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.used[static_cast<std::size_t>(dev)];
}

bool ever_used(int dev) {
  if (!valid_device(dev)) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.ever_used[static_cast<std::size_t>(dev)];
}

CUresult allocate(std::size_t bytes, Kind kind, int dev, void** out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const bool host = kind == Kind::Host;
  if (!host) {
    if (CUresult rc = charge(dev, bytes); rc != CUDA_SUCCESS) return rc;
  }
  void* p = map_pages(bytes);
  if (p == nullptr) {
    if (!host) uncharge(dev, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.live[reinterpret_cast<std::uintptr_t>(p)] = Allocation{bytes, kind, host ? -1 : dev};
  }
  *out = p;
  return CUDA_SUCCESS;
}

CUresult release(void* ptr, bool host) {
  Registry& r = registry();
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == r.live.end() || (it->second.kind == Kind::Host) != host)
      return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    r.live.erase(it);
    if (!host) {
      r.used[static_cast<std::size_t>(a.device)] -= a.bytes;
      r.used_total -= a.bytes;
    }
  }
  munmap(ptr, a.bytes);
  return CUDA_SUCCESS;
}

void release_all_on(int dev) {
  Registry& r = registry();
  std::vector<std::pair<std::uintptr_t, std::size_t>> doomed;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto it = r.live.begin(); it != r.live.end();) {
      if (it->second.kind != Kind::Host && it->second.device == dev) {
        doomed.emplace_back(it->first, it->second.bytes);
        r.used[static_cast<std::size_t>(dev)] -= it->second.bytes;
        r.used_total -= it->second.bytes;
        it = r.live.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [p, n] : doomed) munmap(reinterpret_cast<void*>(p), n);
}

}  // namespace fakecuda::drv

// For the fake NVML (src/nvml): the bytes charged to `dev` now, and 1 when the process ever used it
// (0: NVML lists no process there). Not a CUDA function: found with dlsym.
extern "C" int fakecuda_device_usage(int dev, unsigned long long* used_bytes) {
  if (used_bytes) *used_bytes = fakecuda::drv::valid_device(dev) ? fakecuda::drv::used_on(dev) : 0;
  return fakecuda::drv::ever_used(dev) ? 1 : 0;
}
