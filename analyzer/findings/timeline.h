// Memory over time of one process, for the HTML report and the exports: live device bytes sampled
// (at most ~kMaxSamples points, every bucket's lowest and highest point kept so the peak survives
// downsampling), split by the top call sites, with the step marks and, when PyTorch's allocator
// reported its events, reserved (segments) and allocated (tensor blocks) bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "replay/load.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

class StackView;

inline constexpr size_t kMaxTimelineSamples = 2 * (TimelineSampler::kMaxBuckets + 1);  // 2000
inline constexpr size_t kTimelineTopSites = 8;
inline constexpr size_t kMaxTimelineSteps = Replay::kMaxStepTimes;

// From the loaded trace's replay (no second read of the file unless a call site is made of
// several raw stacks: see timeline.cpp). `stacks`, a view of this trace, is used when its stacks
// are as long as the timeline's (kMaxOutputFrames); otherwise the timeline makes its own.
Timeline build_timeline(const LoadedTrace& trace, size_t max_samples = kMaxTimelineSamples,
                        size_t top_sites = kTimelineTopSites, StackView* stacks = nullptr);

// The innermost frame as "file:line function" (file without its directory).
std::string frame_label(const std::vector<Frame>& stack);

}  // namespace gpumemshim::analyzer
