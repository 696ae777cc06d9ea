// The few CUDA types the hooks need, declared here so the shim builds without the toolkit and never
// takes a CUDA soname. Layouts and values are the CUDA 13 ABI.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {
typedef int cudaError_t;  // enum cudaError: 0 is cudaSuccess
typedef struct CUstream_st* cudaStream_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;
struct cudaPitchedPtr {
  void* ptr;
  size_t pitch;
  size_t xsize;
  size_t ysize;
};
struct cudaExtent {
  size_t width;
  size_t height;
  size_t depth;
};
}

namespace gpumemshim::shim {
inline constexpr cudaError_t kCudaSuccess = 0;
inline constexpr cudaError_t kCudaErrorInitializationError = 3;
// Frees carry no device: looking it up would cost a call per free, and the allocation has it.
inline constexpr int kFreeDeviceUnknown = -1;
}  // namespace gpumemshim::shim

// Driver API types (cuda.h, CUDA 13).
extern "C" {
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUstream_st* CUstream;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef int CUdriverProcAddressQueryResult;
typedef int cudaDriverEntryPointQueryResult;
// Only the leading fields the shim reads; the caller owns the full struct.
struct CUmemLocationPrefix {
  int type;
  int id;
};
struct CUmemAllocationPropPrefix {
  int type;
  int requestedHandleTypes;
  CUmemLocationPrefix location;
};
}

namespace gpumemshim::shim {
inline constexpr CUresult kCuSuccess = 0;
inline constexpr CUresult kCuErrorNotInitialized = 3;
inline constexpr unsigned long long kCuGetProcAddressPerThreadDefaultStream = 2;
}  // namespace gpumemshim::shim
