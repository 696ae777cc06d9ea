// Fragmentation: the caching allocator's reserved vs allocated bytes per device,
// free space inside its segments, memory outside any tracked allocator (cudaMemGetInfo), and OOMs
// that happened while enough memory was free in total.
#pragma once
#include <vector>

namespace gpumemshim::analyzer {

struct DeviceFragmentation;
struct LoadedTrace;
class StackView;

// The devices of the trace's process with something to say (allocator events, cudaMemGetInfo
// samples or OOMs), by device number.
std::vector<DeviceFragmentation> find_fragmentation(const LoadedTrace& trace, StackView& stacks);

}  // namespace gpumemshim::analyzer
