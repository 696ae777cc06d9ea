#pragma once
#include <cstdint>

namespace gpumemshim::shim {

// Called once per process before the first capture.
void init_native_unwinder();

// Innermost first, return addresses (libunwind's unw_backtrace: frame-pointer-free, cached
// per thread). Returns the number of frames written.
uint32_t capture_native_stack(uint64_t* frames, uint32_t max_frames);

}  // namespace gpumemshim::shim
