// Findings on the survivors of one process: every allocation alive at the end is a
// "leak", "cached", "retained", "library" or "alive" entry, grouped by call site, each with the
// reason for its kind; unreleased address space is listed apart.
#pragma once
#include <string>
#include <vector>

#include "replay/model.h"

namespace gpumemshim::analyzer {

struct LoadedTrace;
struct SiteGroup;
class StackView;

// Every survivor of the trace's replay in a group of its call site: memory in `leaks` (kinds
// "leak", "cached", "retained", "library", "alive"), address space in `address_space`, each bytes
// descending.
void group_survivors(const LoadedTrace& trace, StackView& stacks, std::vector<SiteGroup>& leaks,
                     std::vector<SiteGroup>& address_space);

// The site id of a symbolized stack key and api: leaks, growth, the timeline and ranks share it.
std::string site_id(const std::string& stack_key, Api api);
std::string site_id_of(const std::string& stack_key, Api api, bool torch_block);

}  // namespace gpumemshim::analyzer
