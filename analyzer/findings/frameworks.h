// Which allocator each framework used and what that lets the trace show. JAX's choice comes from
// the attributes the Python package writes when jax is imported (python/gpumemshim/_jax.py), else
// it is inferred from XLA's allocations (one allocation of a large share of the device is its
// preallocated pool). A pool hides the arrays inside it: the report says so instead of reporting
// nothing in silence, and advises the allocator that shows each buffer.
#pragma once
#include <cstdint>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// From the process's attributes and "by library" rows (libraries.h); `device_total` 0: unknown.
std::vector<FrameworkMode> find_framework_modes(const ProcessReport& p, uint64_t device_total);

// "jax-platform-allocator" for a JAX pool that hides its arrays.
void advise_framework_modes(const ProcessReport& p, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer
