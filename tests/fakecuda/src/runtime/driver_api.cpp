#include "driver_api.hpp"

#include <dlfcn.h>

#include <cstdio>

namespace fakecuda::rt {
namespace {

thread_local cudaError_t t_last_error = cudaSuccess;

struct Loaded {
  Driver drv{};
  cudaError_t err = cudaSuccess;
};

Loaded load() {
  Loaded out;
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) {
    std::fprintf(stderr, "fakecuda runtime: cannot load libcuda.so.1: %s\n", dlerror());
    out.err = cudaErrorInsufficientDriver;
    return out;
  }
  Driver& d = out.drv;
  d.get_proc_address =
      reinterpret_cast<decltype(d.get_proc_address)>(dlsym(h, "cuGetProcAddress_v2"));
  if (d.get_proc_address == nullptr) {
    out.err = cudaErrorInsufficientDriver;
    return out;
  }
  bool ok = true;
#define FAKECUDA_RESOLVE_ENTRY(member, name, symbol, flags)                                  \
  {                                                                                          \
    void* fn = nullptr;                                                                      \
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                \
    if (d.get_proc_address(name, &fn, 13000, flags, &st) != CUDA_SUCCESS || fn == nullptr) { \
      std::fprintf(stderr, "fakecuda runtime: driver lacks %s\n", name);                     \
      ok = false;                                                                            \
    }                                                                                        \
    d.member = reinterpret_cast<decltype(d.member)>(fn);                                     \
  }
  FAKECUDA_DRIVER_ENTRIES(FAKECUDA_RESOLVE_ENTRY)
#undef FAKECUDA_RESOLVE_ENTRY
  if (!ok) {
    out.err = cudaErrorInsufficientDriver;
    return out;
  }
  if (CUresult rc = d.init(0); rc != CUDA_SUCCESS)
    out.err = rc == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : cudaErrorInitializationError;
  return out;
}

}  // namespace

const Driver* driver(cudaError_t* err) {
  static const Loaded loaded = load();
  if (loaded.err != cudaSuccess) {
    *err = record(loaded.err);
    return nullptr;
  }
  return &loaded.drv;
}

cudaError_t record(cudaError_t err) {
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

cudaError_t finish(CUresult rc) {
  switch (rc) {
    case CUDA_SUCCESS:
      return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
      return record(cudaErrorInvalidValue);
    case CUDA_ERROR_OUT_OF_MEMORY:
      return record(cudaErrorMemoryAllocation);
    default:
      return record(static_cast<cudaError_t>(rc));
  }
}

cudaError_t injected(const char* name) {
  const int code = injected_failure(name);
  return code == 0 ? cudaSuccess : finish(static_cast<CUresult>(code));
}

int& current_device() {
  thread_local int dev = 0;
  return dev;
}

cudaError_t take_last_error(bool reset) {
  const cudaError_t e = t_last_error;
  if (reset) t_last_error = cudaSuccess;
  return e;
}

}  // namespace fakecuda::rt
