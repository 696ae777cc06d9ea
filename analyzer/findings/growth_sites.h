// Growth findings of one process: the sampled live bytes of raw sites summed per symbolized site,
// fitted, and kept when they rise steadily.
#pragma once
#include <vector>

namespace gpumemshim::analyzer {

struct Growth;
struct LoadedTrace;
class StackView;

// The call sites whose live bytes rise steadily, bytes per step descending.
std::vector<Growth> find_growth(const LoadedTrace& trace, StackView& stacks);

}  // namespace gpumemshim::analyzer
