// Growth findings of one process: the sampled live bytes of raw sites summed per symbolized site,
// fitted, and kept when they rise steadily.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpumemshim::analyzer {

struct Growth;
struct LoadedTrace;
class StackView;

// What a growth's bytes_per_step is per: "step" (window_allocations 0: step markers), else
// "window of N allocations per thread".
std::string growth_unit(uint64_t window_allocations);

// The call sites whose live bytes rise steadily, bytes per step (or window) descending.
std::vector<Growth> find_growth(const LoadedTrace& trace, StackView& stacks);

}  // namespace gpumemshim::analyzer
