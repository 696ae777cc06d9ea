#include "render/html_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "gpumemshim/analyzer/units.h"
#include "render/escape.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

namespace {

// Site colours, bottom layer first; the last one is "other sites".
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f"};
constexpr const char* kOtherColor = "#bab0ac";
constexpr size_t kMaxStepLines = 300;

struct Chart {
  double w = 1180, h = 420, left = 92, right = 16, top = 16, bottom = 44;
  double t_max = 0, v_max = 0;
  double x(double t) const { return left + (t / t_max) * (w - left - right); }
  double y(double v) const { return top + (h - top - bottom) * (1.0 - v / v_max); }
};

double seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// A gridline's byte value: near 2^64 live bytes a double rounds up to 2^64, which no uint64_t
// holds (the conversion would be undefined).
uint64_t grid_bytes(double v) { return v >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(v); }

Chart scale(const Timeline& tl) {
  Chart c;
  for (const TimelineSample& s : tl.samples) {
    c.t_max = std::max(c.t_max, seconds(s.time_ns));
    c.v_max = std::max<double>(c.v_max, static_cast<double>(s.live_bytes));
    if (tl.has_torch) {
      c.v_max = std::max<double>(c.v_max, static_cast<double>(s.reserved_bytes));
      c.v_max = std::max<double>(c.v_max, static_cast<double>(s.allocated_bytes));
    }
  }
  if (c.t_max <= 0) c.t_max = 1;
  c.v_max = c.v_max > 0 ? c.v_max * 1.05 : 1;
  return c;
}

// Horizontal lines with their byte values.
std::string value_grid(const Chart& c) {
  std::string svg;
  for (int i = 0; i <= 5; ++i) {
    double v = c.v_max / 1.05 * i / 5;
    double yy = c.y(v);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       c.left, yy, c.w - c.right, yy, c.left - 6, yy + 4,
                       html_escape(human_bytes(grid_bytes(v))));
  }
  return svg;
}

std::string grid(const Chart& c) {
  std::string svg = value_grid(c);
  for (int i = 0; i <= 6; ++i) {
    double t = c.t_max * i / 6;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g} s</text>\n", c.x(t),
                       c.h - c.bottom + 16, t);
  }
  return svg;
}

// A sample's x and the next sample's (its own for the last): memory changes at events, so each
// value is drawn as a step until the next sample.
std::pair<double, double> step_span(const Chart& c, const Timeline& tl, size_t i) {
  double x0 = c.x(seconds(tl.samples[i].time_ns));
  double x1 = i + 1 < tl.samples.size() ? c.x(seconds(tl.samples[i + 1].time_ns)) : x0;
  return {x0, x1};
}

// Stacked layers: the top sites (layer k reads TimelineSample::sites[k]), then "other" last.
std::string layers(const Chart& c, const Timeline& tl, size_t count, const ChartLegend& legend) {
  const std::vector<TimelineSample>& samples = tl.samples;
  std::string svg;
  std::vector<double> below(samples.size(), 0.0);
  for (size_t k = 0; k < count; ++k) {
    const size_t column = k < tl.sites.size() ? k : tl.sites.size();
    std::vector<double> above(samples.size());
    for (size_t i = 0; i < samples.size(); ++i)
      above[i] = below[i] + static_cast<double>(samples[i].sites[column]);
    std::string pts;
    for (size_t i = 0; i < samples.size(); ++i) {
      auto [x0, x1] = step_span(c, tl, i);
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x0, c.y(above[i]), x1, c.y(above[i]));
    }
    for (size_t i = samples.size(); i-- > 0;) {
      auto [x0, x1] = step_span(c, tl, i);
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x1, c.y(below[i]), x0, c.y(below[i]));
    }
    svg += fmt::format("<polygon class=\"layer\" fill=\"{}\" points=\"{}\"><title>{}</title></polygon>\n",
                       legend[k].first, pts, html_escape(legend[k].second));
    below = std::move(above);
  }
  return svg;
}

template <typename Value>
std::string line(const Chart& c, const Timeline& tl, Value value, const char* color, const char* name) {
  std::string pts;
  for (size_t i = 0; i < tl.samples.size(); ++i) {
    auto [x0, x1] = step_span(c, tl, i);
    double yy = c.y(static_cast<double>(value(tl.samples[i])));
    pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x0, yy, x1, yy);
  }
  return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>\n",
                     color, pts, name);
}

// Step marks, thinned evenly when there are many.
std::string step_marks(const Chart& c, const Timeline& tl, ChartLegend& legend) {
  if (tl.steps_ns.empty()) return {};
  std::string svg;
  size_t stride = (tl.steps_ns.size() + kMaxStepLines - 1) / kMaxStepLines;
  for (size_t i = 0; i < tl.steps_ns.size(); i += stride)
    svg += fmt::format("<line class=\"step\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"#333\" stroke-opacity=\"0.45\" stroke-dasharray=\"3,3\"/>\n",
                       c.x(seconds(tl.steps_ns[i])), c.top, c.h - c.bottom);
  legend.emplace_back("#777", fmt::format("step marks ({}{})", tl.steps_ns.size(), stride > 1 ? ", thinned" : ""));
  return svg;
}

constexpr const char* kCategoryColors[kMemoryCategoryCount] = {
    "#2e7d32", "#1f77b4", "#d4a017", "#d62728", "#9467bd", "#c7c7c7", "#8c564b"};

}  // namespace

const char* category_color(MemoryCategory category) {
  return kCategoryColors[static_cast<size_t>(category)];
}

std::string category_chart_svg(const MemoryCategories& m, ChartLegend& legend) {
  if (m.windows.empty()) return {};
  const bool steps = m.basis == "steps";
  Chart c;
  c.h = 300;
  c.t_max = static_cast<double>(m.windows.size());
  for (const CategoryWindow& w : m.windows)
    c.v_max = std::max(c.v_max, static_cast<double>(w.at_peak.total()));
  c.v_max = c.v_max > 0 ? c.v_max * 1.05 : 1;
  std::string svg = fmt::format(
      "<svg class=\"chart categories\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\">\n",
      c.w, c.h);
  svg += value_grid(c);
  const double slot = (c.w - c.left - c.right) / c.t_max;
  const double bar = std::max(1.0, slot * 0.8);
  std::array<bool, kMemoryCategoryCount> used{};
  const size_t label_every = std::max<size_t>(1, m.windows.size() / 12);
  for (size_t i = 0; i < m.windows.size(); ++i) {
    const CategoryWindow& w = m.windows[i];
    const std::string name =
        steps ? (w.first == w.last ? fmt::format("step {}", w.first)
                                   : fmt::format("steps {}\u2013{}", w.first, w.last))
              : fmt::format("{:.3g}\u2013{:.3g} s", seconds(w.first), seconds(w.last));
    const double x = c.x(static_cast<double>(i)) + (slot - bar) / 2;
    double below = 0;
    for (size_t k = 0; k < kMemoryCategoryCount; ++k) {
      const uint64_t b = w.at_peak.bytes[k];
      if (b == 0) continue;
      used[k] = true;
      const double above = below + static_cast<double>(b);
      svg += fmt::format(
          "<rect class=\"cat\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"{}\">"
          "<title>{}: {} {}</title></rect>\n",
          x, c.y(above), bar, std::max(0.5, c.y(below) - c.y(above)), kCategoryColors[k],
          html_escape(name), html_escape(category_label(static_cast<MemoryCategory>(k))),
          html_escape(human_bytes(b)));
      below = above;
    }
    if (i % label_every == 0)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                         x + bar / 2, c.h - c.bottom + 16, html_escape(name));
  }
  for (size_t k = 0; k < kMemoryCategoryCount; ++k)
    if (used[k])
      legend.emplace_back(kCategoryColors[k], category_label(static_cast<MemoryCategory>(k)));
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>"
      "<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{3:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>\n",
      c.left, c.top, c.h - c.bottom, c.w - c.right);
  return svg + "</svg>\n";
}

std::string chart_svg(const Timeline& tl, ChartLegend& legend) {
  const Chart c = scale(tl);
  for (size_t k = 0; k < tl.sites.size(); ++k)
    legend.emplace_back(kPalette[std::min(k, std::size(kPalette) - 1)], tl.sites[k].label);
  const bool has_other = std::any_of(tl.samples.begin(), tl.samples.end(),
                                     [](const TimelineSample& s) { return s.sites.back() > 0; });
  if (has_other) legend.emplace_back(kOtherColor, "other sites");
  std::string svg = fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\">\n", c.w, c.h);
  svg += grid(c);
  svg += layers(c, tl, tl.sites.size() + (has_other ? 1 : 0), legend);
  if (tl.has_torch) {
    svg += line(c, tl, [](const TimelineSample& s) { return s.reserved_bytes; }, "#7a0019", "reserved (segments)");
    svg += line(c, tl, [](const TimelineSample& s) { return s.allocated_bytes; }, "#006d2c",
                "allocated (tensor blocks)");
    legend.emplace_back("#7a0019", "reserved (PyTorch segments)");
    legend.emplace_back("#006d2c", "allocated (PyTorch tensor blocks)");
  }
  svg += step_marks(c, tl, legend);
  svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>"
                     "<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{3:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>\n",
                     c.left, c.top, c.h - c.bottom, c.w - c.right);
  svg += "</svg>\n";
  return svg;
}

}  // namespace gpumemshim::analyzer
