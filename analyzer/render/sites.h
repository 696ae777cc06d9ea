// Pieces of text that several writers show for a call site or a frame, so that a site reads the
// same in the text report, the HTML page, the CI outputs and diff.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// The first frame with a file and a line (the innermost user frame), or null.
const Frame* user_frame(const std::vector<Frame>& stack);
// "file:line" of user_frame, else the first frame's function, else "module+pc", else
// "unknown site".
std::string site_label(const std::vector<Frame>& stack);
// One frame per line: "    #0 function file:line (module)".
std::string stack_text(const std::vector<Frame>& stack);
// The frame's function, or its pc when the function is unknown.
std::string function_or_pc(const Frame& frame);
// "function at file:line" ("at file" without a line); without a file, " (module)" after the
// function when with_module.
std::string frame_at(const Frame& frame, bool with_module);

// The api and memory kind of a finding as the reports name them: tensor blocks are "torch.alloc"
// and "torch_block" whatever the api that made their segment.
std::string api_label(bool torch_block, Api api);
std::string memory_label(bool torch_block, MemoryKind memory);

// A memory category as the reports' prose names it: "parameters", "optimizer state", "outside
// PyTorch", ...
std::string category_label(MemoryCategory category);

// Why a growth grows, as one sentence ("an autograd graph kept past its step: ..."); empty when
// its cause is not known.
std::string growth_cause(const Growth& g);

// "1 step", "2 steps".
std::string plural(uint64_t n, const char* word);

}  // namespace gpumemshim::analyzer
