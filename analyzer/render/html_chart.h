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

// Each memory category's colour (MemoryCategory order).
const char* category_color(MemoryCategory category);
// The <svg> element of memory by category over the windows (a bar per window of steps or time, its
// highest point stacked by category); fills legend. Empty without windows.
std::string category_chart_svg(const MemoryCategories& categories, ChartLegend& legend);

}  // namespace gpumemshim::analyzer
