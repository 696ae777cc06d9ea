#include "findings/timeline_tracker.h"

#include <utility>

namespace gpumemshim::analyzer {

TimelineTracker::GroupSums::GroupSums(const std::vector<uint32_t>& group_of) {
  uint32_t groups = 0;
  for (uint32_t g : group_of)
    if (g != kNoGroup) groups = std::max(groups, g + 1);
  live.assign(groups, 0);
  peak.assign(groups, 0);
}

void TimelineTracker::set_site_groups(std::vector<uint32_t> group_of) {
  groups_ = GroupSums(group_of);
  group_of_ = std::move(group_of);
}

std::vector<uint64_t> TimelineTracker::group_peaks_from_log(
    const std::vector<uint32_t>& group_of) const {
  GroupSums sums(group_of);
  for (const uint64_t change : log_) {
    const auto site = static_cast<uint32_t>(change >> kDeltaBits);
    const int64_t delta = static_cast<int64_t>(change << (64 - kDeltaBits)) >> (64 - kDeltaBits);
    if (site < group_of.size() && group_of[site] != kNoGroup)
      sums.change(group_of[site], static_cast<uint64_t>(delta));
  }
  return sums.peak;
}

}  // namespace gpumemshim::analyzer
