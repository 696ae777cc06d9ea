// libgpumemshim_torch.so: the bridge from PyTorch's CUDA caching allocator to the shim. Loaded into
// a torch process (by python/gpumemshim attach_torch()), it attaches an allocator trace tracker and
// an OOM observer that forward every tensor-level event to the shim's entry point
// (shim/api/torch_api.h), found with dlsym in the global scope: the bridge does not link the shim,
// and without the shim it attaches nothing. It links torch's libc10/libc10_cuda, which a torch
// process has already loaded. Nothing here may throw into Python.
#include <c10/cuda/CUDACachingAllocator.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/function.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "shim/api/torch_api.h"
#include "translate.h"

namespace {

// The entry point's types come from its declarations, so a change of signature breaks this build.
using TorchEventFn = decltype(&gpumemshim_torch_event);
using TorchGradFnEventFn = decltype(&gpumemshim_torch_event_grad_fn);
using TorchWalkEventFn = decltype(&gpumemshim_torch_event_walk);
using AttributeFn = decltype(&gpumemshim_attribute);

// The names looked up are spelled from the declarations (C linkage: the symbol is the name), so a
// renamed entry point breaks this build too. sizeof keeps the name unevaluated: nothing links it.
#define GPUMEMSHIM_NAME_OF(fn) (static_cast<void>(sizeof(&fn)), #fn)
constexpr const char* kEventName = GPUMEMSHIM_NAME_OF(gpumemshim_torch_event);
constexpr const char* kGradFnEventName = GPUMEMSHIM_NAME_OF(gpumemshim_torch_event_grad_fn);
constexpr const char* kWalkEventName = GPUMEMSHIM_NAME_OF(gpumemshim_torch_event_walk);
constexpr const char* kAttributeName = GPUMEMSHIM_NAME_OF(gpumemshim_attribute);
#undef GPUMEMSHIM_NAME_OF

std::atomic<TorchEventFn> g_event{nullptr};
std::atomic<TorchGradFnEventFn> g_event_grad_fn{nullptr};  // null: an older shim
std::atomic<TorchWalkEventFn> g_event_walk{nullptr};       // null: an older shim
std::atomic<AttributeFn> g_attribute{nullptr};             // null: an older shim

// The sizes of PyTorch's cuBLAS and cuBLASLt workspaces (at::cuda::getChosenWorkspaceSize,
// getCUDABlasLtWorkspaceSize; 0 unknown). A block of one of these sizes gets its native stack
// walked: if at::cuda's workspace getters made it, it is the library's for the process's life, and
// only those frames can tell. Blocks of other sizes keep the cheap Python or grad_fn stack.
std::atomic<uint64_t> g_workspace_sizes[2] = {0, 0};

// at::cuda's size getters, found by their (C++) symbols in libtorch_cuda, so that a torch without
// them still attaches. Each parses its environment variable once and caches the answer. Python
// loads torch's libraries without RTLD_GLOBAL: they are looked up in libtorch_cuda itself first.
void find_workspace_sizes() noexcept {
  constexpr const char* kGetters[2] = {"_ZN2at4cuda22getChosenWorkspaceSizeEv",
                                       "_ZN2at4cuda26getCUDABlasLtWorkspaceSizeEv"};
  void* torch_cuda = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  for (size_t i = 0; i < 2; ++i) {
    try {
      void* sym = torch_cuda ? dlsym(torch_cuda, kGetters[i]) : nullptr;
      if (!sym) sym = dlsym(RTLD_DEFAULT, kGetters[i]);
      if (auto get = reinterpret_cast<size_t (*)()>(sym))
        g_workspace_sizes[i].store(get(), std::memory_order_relaxed);
    } catch (...) {
    }
  }
  if (torch_cuda) dlclose(torch_cuda);
}

bool is_workspace_size(uint64_t size) noexcept {
  return size != 0 && (size == g_workspace_sizes[0].load(std::memory_order_relaxed) ||
                       size == g_workspace_sizes[1].load(std::memory_order_relaxed));
}

// The autograd Node this thread runs (autograd's device threads during backward), as its C++ type
// name: a string in the binary, no allocation. Reading the thread-local current node copies a
// shared_ptr (an atomic increment); nothing else of torch is called under the allocator lock.
const char* current_grad_fn() noexcept {
  std::shared_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
  return node ? typeid(*node).name() : nullptr;
}
std::atomic<bool> g_attached{false};

// The trace tracker reports an OOM under the allocator lock, then the allocator calls its OOM
// observers on the same thread: record the OOM once, from whichever comes first.
// initial-exec: static TLS, so the first use on a thread allocates nothing (under the lock).
thread_local bool t_oom_recorded __attribute__((tls_model("initial-exec"))) = false;

namespace th = gpumemshim::torch_hooks;
using c10::CachingDeviceAllocator::TraceEntry;

// translate.h mirrors TraceEntry::Action without torch; torch must agree with the mirror.
constexpr bool same_action(TraceEntry::Action torch_value, th::TraceAction mirror) {
  return static_cast<int>(torch_value) == static_cast<int>(mirror);
}
static_assert(same_action(TraceEntry::ALLOC, th::TraceAction::kAlloc));
static_assert(same_action(TraceEntry::FREE_REQUESTED, th::TraceAction::kFreeRequested));
static_assert(same_action(TraceEntry::FREE_COMPLETED, th::TraceAction::kFreeCompleted));
static_assert(same_action(TraceEntry::SEGMENT_ALLOC, th::TraceAction::kSegmentAlloc));
static_assert(same_action(TraceEntry::SEGMENT_FREE, th::TraceAction::kSegmentFree));
static_assert(same_action(TraceEntry::SEGMENT_MAP, th::TraceAction::kSegmentMap));
static_assert(same_action(TraceEntry::SEGMENT_UNMAP, th::TraceAction::kSegmentUnmap));
static_assert(same_action(TraceEntry::SNAPSHOT, th::TraceAction::kSnapshot));
static_assert(same_action(TraceEntry::OOM, th::TraceAction::kOom));

void forward(TorchEventFn fn, const th::TorchEventArgs& a) noexcept {
  fn(static_cast<int>(a.action), a.device, a.address, a.size, a.stream);
}

// Under the per-device allocator lock: no locks, no heap, no GIL, no calls into torch.
void on_trace_entry(const TraceEntry& e) noexcept {
  TorchEventFn fn = g_event.load(std::memory_order_relaxed);
  if (!fn) return;
  th::TorchTraceEvent m;
  m.action_index = static_cast<int>(e.action_);
  m.device = static_cast<int>(e.device_);
  m.addr = static_cast<uint64_t>(e.addr_);
  m.size = static_cast<uint64_t>(e.size_);
  m.stream = reinterpret_cast<uintptr_t>(e.stream_);
  std::optional<th::TorchEventArgs> a = th::translate(m);
  if (!a) return;
  if (e.action_ == TraceEntry::OOM) t_oom_recorded = true;
  if (e.action_ == TraceEntry::ALLOC && is_workspace_size(a->size)) {
    if (TorchWalkEventFn walk = g_event_walk.load(std::memory_order_relaxed)) {
      walk(static_cast<int>(a->action), a->device, a->address, a->size, a->stream,
           current_grad_fn());
      return;
    }
  }
  if (e.action_ == TraceEntry::ALLOC) {
    TorchGradFnEventFn with_grad_fn = g_event_grad_fn.load(std::memory_order_relaxed);
    if (const char* grad_fn = with_grad_fn ? current_grad_fn() : nullptr) {
      with_grad_fn(static_cast<int>(a->action), a->device, a->address, a->size, a->stream, grad_fn);
      return;
    }
  }
  forward(fn, *a);
}

// The workspace sizes found, for the report's attributes: 0 says the getters were not found and
// PyTorch's workspaces will be reported as the script's blocks.
void record_workspace_sizes() noexcept {
  AttributeFn attribute = g_attribute.load(std::memory_order_relaxed);
  if (!attribute) return;
  constexpr const char* kKeys[2] = {"torch.cublas_workspace_bytes", "torch.cublaslt_workspace_bytes"};
  for (size_t i = 0; i < 2; ++i) {
    char value[24];
    std::snprintf(value, sizeof value, "%llu",
                  static_cast<unsigned long long>(g_workspace_sizes[i].load(std::memory_order_relaxed)));
    attribute(kKeys[i], value);
  }
}

// The allocator tells its OOM observers what it may use: its memory-fraction cap when one is set,
// else the device total. The analyzer judges the OOM against it (analyzer/findings/memory_limit.h).
void record_allowed_bytes(int64_t device, size_t allowed) noexcept {
  AttributeFn attribute = g_attribute.load(std::memory_order_relaxed);
  if (!attribute) return;
  char key[48], value[24];
  std::snprintf(key, sizeof key, "torch.allowed_bytes.%lld", static_cast<long long>(device));
  std::snprintf(value, sizeof value, "%llu", static_cast<unsigned long long>(allowed));
  attribute(key, value);
}

// Called after the allocator has released its lock.
void on_oom(int64_t device, size_t allocated, size_t allowed, size_t device_free) noexcept {
  record_allowed_bytes(device, allowed);
  if (t_oom_recorded) {  // the trace tracker recorded this one
    t_oom_recorded = false;
    return;
  }
  TorchEventFn fn = g_event.load(std::memory_order_relaxed);
  if (!fn) return;
  th::TorchTraceEvent m;
  m.action_index = static_cast<int>(TraceEntry::OOM);
  m.device = static_cast<int>(device);
  m.addr = static_cast<uint64_t>(device_free);
  m.size = static_cast<uint64_t>(allocated);
  if (std::optional<th::TorchEventArgs> a = th::translate(m)) forward(fn, *a);
}

}  // namespace

// The torch version this bridge was compiled against ("" when unknown): loading it into another
// torch would read TraceEntry with the wrong layout, so the Python package compares first. The
// tagged string lets `gpumemshim doctor` read the version from the file without loading it (loading
// needs torch's own libraries).
namespace {
constexpr char kVersionTag[] = "gpumemshim-torch-version=" GPUMEMSHIM_TORCH_VERSION;
constexpr size_t kVersionTagPrefix = sizeof "gpumemshim-torch-version=" - 1;
}  // namespace

extern "C" __attribute__((visibility("default"))) const char* gpumemshim_torch_version(void) {
  return kVersionTag + kVersionTagPrefix;
}

// 1: the tracker and the OOM observer are attached (now or by an earlier call); 0: not possible
// (no shim in the process, allocator not initialised, a backend other than the native caching
// allocator, or torch refused). Never throws.
extern "C" __attribute__((visibility("default"))) int gpumemshim_torch_attach(void) {
  if (g_attached.load()) return 1;
  static std::mutex attach_mutex;  // attaching is rare; never on the allocator's path
  try {
    std::lock_guard<std::mutex> lock(attach_mutex);
    if (g_attached.load()) return 1;
    auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, kEventName));
    if (!fn) return 0;  // the shim is not loaded: nothing to record into
    namespace alloc = c10::cuda::CUDACachingAllocator;
    alloc::CUDAAllocator* a = alloc::get();
    if (!a || !a->initialized()) return 0;  // torch asserts attaching before initialisation
    if (a->name() != "native") return 0;    // cudaMallocAsync or a pluggable allocator
    g_event_grad_fn.store(reinterpret_cast<TorchGradFnEventFn>(
        dlsym(RTLD_DEFAULT, kGradFnEventName)));
    g_event_walk.store(reinterpret_cast<TorchWalkEventFn>(dlsym(RTLD_DEFAULT, kWalkEventName)));
    g_attribute.store(reinterpret_cast<AttributeFn>(dlsym(RTLD_DEFAULT, kAttributeName)));
    find_workspace_sizes();
    record_workspace_sizes();
    g_event.store(fn);
    a->attachAllocatorTraceTracker([](const TraceEntry& e) { on_trace_entry(e); });
    g_attached.store(true);  // a tracker can not be detached: never attach a second one
    a->attachOutOfMemoryObserver(
        [](int64_t device, size_t allocated, size_t total, size_t free_bytes) {
          on_oom(device, allocated, total, free_bytes);
        });
    return 1;
  } catch (...) {
    return g_attached.load() ? 1 : 0;  // the tracker is on even if the OOM observer failed
  }
}
