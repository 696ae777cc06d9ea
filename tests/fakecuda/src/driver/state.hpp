// Shared state of the fake driver: devices, contexts and the registry of
// linear allocations with per-device usage accounting.
#pragma once

#define FAKECUDA_NO_API_REDIRECT
#include <fakecuda/cuda.h>

#include <cstddef>

#include "../common/config.hpp"

// Returns the injected error (FAKECUDA_FAIL) for this call of `name`, if any.
#define FAKECUDA_INJECT(name)                                    \
  do {                                                           \
    if (int fakecuda_code_ = ::fakecuda::injected_failure(name)) \
      return static_cast<CUresult>(fakecuda_code_);              \
  } while (0)

struct CUctx_st {
  int device;
};

namespace fakecuda::drv {

enum class Kind { Device, Pitch, Managed, Async, Host };

constexpr int kMaxDevices = 64;
constexpr std::size_t kGranularity = std::size_t{2} << 20;

bool valid_device(int dev);
CUctx_st* primary_ctx(int dev);
CUctx_st* current_ctx();
void set_current_ctx(CUctx_st* ctx);
int current_device();

// Device-memory accounting: fails with CUDA_ERROR_OUT_OF_MEMORY when the
// device total or FAKECUDA_OOM_AFTER would be exceeded.
CUresult charge(int dev, std::size_t bytes);
void uncharge(int dev, std::size_t bytes);
std::size_t used_on(int dev);
// Whether memory was ever charged to `dev`: a real process has a context there from then on.
bool ever_used(int dev);

// Linear allocations (mmap-backed). Host kind is not charged to any device.
CUresult allocate(std::size_t bytes, Kind kind, int dev, void** out);
// Frees a registered allocation; host selects pinned-host vs device kinds.
CUresult release(void* ptr, bool host);
// Frees every device allocation of `dev` (primary context reset).
void release_all_on(int dev);

}  // namespace fakecuda::drv
