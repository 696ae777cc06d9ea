// Which line of the user's loop keeps an autograd graph past its step. The trace shows where the
// graph's tensors were made (the loop line that ran the forward pass); what keeps them is Python
// that allocates nothing (a list append, a dict store, `total = total + loss`), so it is read from
// the source when the file is at hand: the line itself, or a later line of the same block that
// stores, appends or sums a name the line assigned — not its .item() or .detach().
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gpumemshim::analyzer {

struct GraphKeeper {
  uint32_t line = 0;
  std::string text;  // the line, trimmed
  std::string how;  // "sums it across steps", "appends it to a list", "stores it in a dict or list"
};

// The keeper of what `file`:`line` makes; none when the file cannot be read or no line of the
// block keeps it.
std::optional<GraphKeeper> find_graph_keeper(const std::string& file, uint32_t line);

}  // namespace gpumemshim::analyzer
