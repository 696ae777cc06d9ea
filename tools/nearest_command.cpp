// "did you mean" for a mistyped command: the command at the smallest edit distance, counting a swap
// of two neighbouring letters as one edit ("reprot" is one edit from "report").
#include <algorithm>
#include <string>
#include <vector>

#include "cli.h"

namespace gpumemshim::cli {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_command(const std::string& typed, const std::vector<std::string>& commands) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& c : commands) {
    size_t dist = edit_distance(typed, c);
    // At most two edits, and fewer than half the letters: "x" is near nothing.
    if (dist > 2 || 2 * dist >= std::max(typed.size(), c.size())) continue;
    if (best.empty() || dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

}  // namespace gpumemshim::cli
