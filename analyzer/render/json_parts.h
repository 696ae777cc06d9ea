// Pieces of the JSON report (docs/report-json.md) that other writers show as they are: stacks,
// timelines and the ranks block.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// A stack as the reports list it: one object per frame (function, file, line, module, python,
// inlined, pc as "0x..." in lowercase hex).
nlohmann::json frames_to_json(const std::vector<Frame>& frames);
// processes[].timeline.
nlohmann::json timeline_json(const Timeline& timeline);
// processes[].categories.
nlohmann::json categories_json(const MemoryCategories& categories);
// The "ranks" block (report.ranks.present() only).
nlohmann::json ranks_json(const Ranks& ranks);
// ranks.per_rank[].findings.
nlohmann::json rank_findings_json(const RankEntry& entry);

}  // namespace gpumemshim::analyzer
