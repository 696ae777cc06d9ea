// The analysis of one loaded trace, and the entry points of the findings it assembles into a
// ProcessReport (leaks.cpp, growth_sites.cpp, fragmentation.cpp, advice.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/report.h"
#include "replay/load.h"

namespace gpumemshim::analyzer {

class StackView;

// With `stacks` (a view of this trace made with options.max_frames), its symbolized stacks are
// used and kept; without, the analysis makes its own.
ProcessReport analyze_trace(const LoadedTrace& trace, const AnalyzeOptions& options,
                            Suppressions* suppressions, StackView* stacks = nullptr);

// The site id of a symbolized stack key and api (leaks and growth share it).
std::string site_id(const std::string& stack_key, Api api);
std::string site_id_of(const std::string& stack_key, Api api, bool torch_block);

// Findings of one process.
void group_survivors(const LoadedTrace& trace, StackView& stacks, std::vector<SiteGroup>& leaks,
                     std::vector<SiteGroup>& address_space);
std::vector<Growth> find_growth(const LoadedTrace& trace, StackView& stacks);
std::vector<DeviceFragmentation> find_fragmentation(const LoadedTrace& trace, StackView& stacks);
std::vector<Advice> advise(const ProcessReport& p);
// Memory by category (findings/categories.h); none without PyTorch's allocator events.
std::optional<MemoryCategories> find_categories(const LoadedTrace& trace, StackView& stacks);
// Advice that needs several processes: processes of one host sharing a device whose peaks add up
// to nearly all of it get "memory-fraction" (appended to their own advice).
void advise_shared_devices(Report& report);

}  // namespace gpumemshim::analyzer
