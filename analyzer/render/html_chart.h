// The HTML report's chart of one process's timeline: an inline SVG of live bytes stacked by the
// top call sites, PyTorch's reserved and allocated bytes as lines, and the step marks.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// (colour, label) per layer and line of the chart, in drawing order.
using ChartLegend = std::vector<std::pair<std::string, std::string>>;

// The <svg> element of a timeline with samples; fills legend.
std::string chart_svg(const Timeline& timeline, ChartLegend& legend);

}  // namespace gpumemshim::analyzer
