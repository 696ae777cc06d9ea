// Memory over time of one process, for the HTML report and the exports: live device bytes sampled
// (at most ~kMaxSamples points, every bucket's lowest and highest point kept so the peak survives
// downsampling), split by the top call sites, with the step marks and, when PyTorch's allocator
// reported its events, reserved (segments) and allocated (tensor blocks) bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/load.h"
#include "gpumemshim/analyzer/model.h"

namespace gpumemshim::analyzer {

class StackView;

struct TimelineSite {
  std::string id;     // the leak report's site id (same stack and api → same id)
  std::string label;  // "file:line function" of the innermost user frame
  std::vector<Frame> stack;
  uint64_t peak_bytes = 0;  // the site's own highest live bytes
};

struct TimelineSample {
  uint64_t time_ns = 0;
  uint64_t live_bytes = 0;
  uint64_t reserved_bytes = 0;   // meaningful when Timeline::has_torch
  uint64_t allocated_bytes = 0;
  std::vector<uint64_t> sites;   // per Timeline::sites, then "other" last
};

struct PeakSite {
  size_t site = 0;  // index into Timeline::all_sites
  uint64_t bytes = 0;
};

struct Timeline {
  std::vector<TimelineSite> sites;      // the top sites by peak_bytes, descending
  std::vector<TimelineSite> all_sites;  // every site (for the peak breakdown)
  std::vector<TimelineSample> samples;  // in time order
  std::vector<uint64_t> steps_ns;       // step markers
  bool has_torch = false;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;
  std::vector<PeakSite> at_peak;  // sites alive at the (first) peak, bytes descending
};

inline constexpr size_t kMaxTimelineSamples = 2 * (TimelineSampler::kMaxBuckets + 1);  // 2000
inline constexpr size_t kTimelineTopSites = 8;
inline constexpr size_t kMaxTimelineSteps = Replay::kMaxStepTimes;

// From the loaded trace's replay (no second read of the file unless a call site is made of
// several raw stacks: see timeline.cpp). `stacks`, a view of this trace, is used when its stacks
// are as long as the timeline's (kMaxOutputFrames); otherwise the timeline makes its own.
Timeline build_timeline(const LoadedTrace& trace, size_t max_samples = kMaxTimelineSamples,
                        size_t top_sites = kTimelineTopSites, StackView* stacks = nullptr);

// docs/report-json.md "Timeline".
nlohmann::json timeline_json(const Timeline& timeline);

// Loads each trace (report["processes"][i] is paths[i], as analyze() orders them) and sets
// processes[i].timeline.
void add_timelines(nlohmann::json& report, const std::vector<std::string>& paths);

// The innermost frame as "file:line function" (file without its directory).
std::string frame_label(const std::vector<Frame>& stack);
// A stack as the reports list it: one object per frame (function, file, line, module, python,
// inlined, pc as "0x..." in lowercase hex).
nlohmann::json frames_to_json(const std::vector<Frame>& frames);
// A pc as the reports write it: fmt's "{:#x}" ("0x7f12ab", "0x0").
std::string pc_hex(uint64_t pc);

}  // namespace gpumemshim::analyzer
