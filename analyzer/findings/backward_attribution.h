// Autograd's device threads run no Python: an allocation they make has only native frames. While
// a thread is inside a "torch.backward" range (the Python package's wrapper around
// torch.autograd.backward / grad records it with its caller's stack), such allocations on other
// threads are given that caller's stack too, so a backward-pass leak names the `loss.backward()`
// line. Events are fed in time order.
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

inline constexpr std::string_view kBackwardRange = "torch.backward";

// stack id of an attributed event -> (its own stack id, the backward caller's stack id)
using AttributedStacks = std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>>;

class BackwardAttribution {
 public:
  // `has_python(stack_id)`: whether a stack has Python frames (PyStack records).
  BackwardAttribution(std::function<bool(uint64_t)> has_python, AttributedStacks& out)
      : has_python_(std::move(has_python)), out_(out) {}

  void marker(const format::MarkerRecord& r);
  // The stack id an event of `thread` with `stack_id` is reported under.
  uint64_t attribute(uint64_t thread, uint64_t stack_id) {
    if (open_.empty() || stack_id == 0) return stack_id;  // every event outside a backward pass
    return attribute_in_backward(thread, stack_id);
  }

 private:
  uint64_t attribute_in_backward(uint64_t thread, uint64_t stack_id);
  struct Open {
    uint64_t thread;
    uint64_t caller_stack;
  };
  std::function<bool(uint64_t)> has_python_;
  AttributedStacks& out_;
  std::vector<Open> open_;  // innermost last
};

// The combined id of (event stack, caller stack): stable, and distinct from both.
uint64_t attributed_stack_id(uint64_t own, uint64_t caller);

}  // namespace gpumemshim::analyzer
