// Fragmentation: the caching allocator's reserved vs allocated bytes per device,
// free space inside its segments, memory outside any tracked allocator (cudaMemGetInfo), and each
// OOM judged by what stopped it: fragmentation (the cache's free bytes would have held it, no block
// could), the process's own memory cap (memory_limit.h), or a full device.
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
