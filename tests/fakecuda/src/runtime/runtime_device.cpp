// Runtime device, stream, version, error and entry-point API.
#include <mutex>
#include <unordered_set>

#include "driver_api.hpp"

using namespace fakecuda::rt;

struct CUstream_st {
  int device;
};

namespace {

struct Streams {
  std::mutex mu;
  std::unordered_set<cudaStream_t> live;
};

Streams& streams() {
  static Streams* s = new Streams();
  return *s;
}

bool known_stream(cudaStream_t s) {
  if (s == nullptr) return true;  // legacy default stream
  Streams& st = streams();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.live.count(s) != 0;
}

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorAlreadyMapped, "cudaErrorAlreadyMapped", "resource already mapped"},
    {cudaErrorNotMapped, "cudaErrorNotMapped", "resource not mapped"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const ErrorText* find_error(cudaError_t code) {
  for (const ErrorText& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

cudaError_t entry_point(const Driver* d, const char* symbol, void** funcPtr,
                        unsigned int cudaVersion, unsigned long long flags,
                        enum cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr) return record(cudaErrorInvalidValue);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult rc =
      d->get_proc_address(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &st);
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_FOUND) return finish(rc);
  // Like the real runtime: a missing symbol is success with a null pointer
  // and the reason in driverStatus.
  if (rc == CUDA_ERROR_NOT_FOUND) *funcPtr = nullptr;
  if (driverStatus != nullptr) *driverStatus = static_cast<cudaDriverEntryPointQueryResult>(st);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaDeviceReset(void) {
  FAKECUDA_RT_ENTER("cudaDeviceReset", d);
  return finish(d->primary_ctx_reset(current_device()));
}

cudaError_t cudaDeviceSynchronize(void) {
  FAKECUDA_RT_ENTER("cudaDeviceSynchronize", d);
  (void)d;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  FAKECUDA_RT_ENTER("cudaGetDeviceCount", d);
  return finish(d->device_get_count(count));
}

cudaError_t cudaSetDevice(int device) {
  FAKECUDA_RT_ENTER("cudaSetDevice", d);
  CUcontext ctx = nullptr;
  const CUresult rc = d->primary_ctx_retain(&ctx, device);
  if (rc == CUDA_ERROR_INVALID_DEVICE) return record(cudaErrorInvalidDevice);
  if (rc != CUDA_SUCCESS) return finish(rc);
  if (cudaError_t err = finish(d->ctx_set_current(ctx)); err != cudaSuccess) return err;
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  FAKECUDA_RT_ENTER("cudaGetDevice", d);
  (void)d;
  if (device == nullptr) return record(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  return take_last_error(true);
}
cudaError_t cudaPeekAtLastError(void) {
  return take_last_error(false);
}

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* e = find_error(error);
  return e != nullptr ? e->name : "unrecognized error code";
}

const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* e = find_error(error);
  return e != nullptr ? e->text : "unrecognized error code";
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  FAKECUDA_RT_ENTER("cudaDriverGetVersion", d);
  return finish(d->driver_get_version(driverVersion));
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (cudaError_t inj = injected("cudaRuntimeGetVersion")) return inj;
  if (runtimeVersion == nullptr) return record(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  FAKECUDA_RT_ENTER("cudaStreamCreate", d);
  (void)d;
  if (pStream == nullptr) return record(cudaErrorInvalidValue);
  auto* s = new CUstream_st{current_device()};
  Streams& st = streams();
  std::lock_guard<std::mutex> lock(st.mu);
  st.live.insert(s);
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  FAKECUDA_RT_ENTER("cudaStreamDestroy", d);
  (void)d;
  Streams& st = streams();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (stream == nullptr || st.live.erase(stream) == 0)
      return record(cudaErrorInvalidResourceHandle);
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  FAKECUDA_RT_ENTER("cudaStreamSynchronize", d);
  (void)d;
  return known_stream(stream) ? cudaSuccess : record(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult* driverStatus) {
  FAKECUDA_RT_ENTER("cudaGetDriverEntryPoint", d);
  return entry_point(d, symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult* driverStatus) {
  FAKECUDA_RT_ENTER("cudaGetDriverEntryPointByVersion", d);
  return entry_point(d, symbol, funcPtr, cudaVersion, flags, driverStatus);
}

}  // extern "C"
