#include "findings/regions.h"

#include <iterator>
#include <string_view>

namespace gpumemshim::analyzer {

namespace {
constexpr std::string_view kRegionPrefix = "expect_no_leak:";
}  // namespace

void RegionTracker::push(const format::MarkerRecord& r) {
  if (!r.name.starts_with(kRegionPrefix) || regions_.size() >= kNone) return;
  open_.push_back(static_cast<uint32_t>(regions_.size()));
  regions_.push_back(
      Region{std::string(r.name.substr(kRegionPrefix.size())), r.thread_id, r.time_ns, UINT64_MAX});
}

// The region API names its pops; close the innermost open region of that name, preferring the
// same thread. Unnamed pops (NVTX) never close a region.
void RegionTracker::pop(const format::MarkerRecord& r) {
  if (!r.name.starts_with(kRegionPrefix)) return;
  std::string_view name = r.name.substr(kRegionPrefix.size());
  auto pick = open_.rend();
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    const Region& g = regions_[*it];
    if (g.name != name) continue;
    if (g.thread_id == r.thread_id) {
      pick = it;
      break;
    }
    if (pick == open_.rend()) pick = it;
  }
  if (pick != open_.rend()) {
    regions_[*pick].end_ns = r.time_ns;
    open_.erase(std::next(pick).base());
  }
}

}  // namespace gpumemshim::analyzer
