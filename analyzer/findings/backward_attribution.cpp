#include "findings/backward_attribution.h"

#include <algorithm>

namespace gpumemshim::analyzer {

uint64_t attributed_stack_id(uint64_t own, uint64_t caller) {
  // splitmix64 of the pair: shim stack ids are hashes too, collisions are as unlikely.
  uint64_t z = own ^ (caller * 0x9E3779B97F4A7C15ull) ^ 0xB4C4D0A7A11B7Dull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void BackwardAttribution::marker(const format::MarkerRecord& r) {
  if (r.name != kBackwardRange) return;
  if (r.kind == format::MarkerKind::kRangePush) {
    open_.push_back(Open{r.thread_id, r.stack_id});
  } else if (r.kind == format::MarkerKind::kRangePop) {
    auto it = std::find_if(open_.rbegin(), open_.rend(),
                           [&](const Open& o) { return o.thread == r.thread_id; });
    if (it != open_.rend()) open_.erase(std::next(it).base());
  }
}

uint64_t BackwardAttribution::attribute_in_backward(uint64_t thread, uint64_t stack_id) {
  const Open& o = open_.back();  // the most recent backward pass still running
  if (o.thread == thread || o.caller_stack == 0 || has_python_(stack_id)) return stack_id;
  uint64_t id = attributed_stack_id(stack_id, o.caller_stack);
  out_.try_emplace(id, stack_id, o.caller_stack);
  return id;
}

}  // namespace gpumemshim::analyzer
