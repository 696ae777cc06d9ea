// The test programs' one way to fail: a CUDA call that did not succeed ends the program with exit
// code 3 and a line naming the call, so a test sees which scenario step broke.
#pragma once
#include <fakecuda/cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

inline void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(rc));
    std::exit(3);
  }
}
