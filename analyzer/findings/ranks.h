// Several processes (torchrun ranks, fork children) reported together: a summary per rank, the
// imbalance between the heaviest and the lightest, and the call sites that explain it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

struct LoadedTrace;
class StackView;

// The symbolized sites a trace's process held at its device-memory peak, bytes descending.
std::vector<SiteBytes> sites_at_peak(const LoadedTrace& trace, StackView& stacks);

// Needs every process's report (peak_sites included).
Ranks compute_ranks(const Report& report);

}  // namespace gpumemshim::analyzer
