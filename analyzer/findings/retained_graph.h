// Advice for growth that an autograd graph kept past its step holds: the growing site's blocks
// were made by a forward pass and outlived the backward pass after it (memory by category,
// MemoryCategories::kept_sites), step after step — a loss summed as a tensor, losses or outputs
// kept in a list or dict, backward(retain_graph=True) on a graph that is then kept.
#pragma once
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct ProcessReport;

void advise_retained_graphs(const ProcessReport& p, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer
