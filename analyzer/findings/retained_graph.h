// Growth that an autograd graph kept past its step holds: the growing site's blocks were made by a
// forward pass and outlived the backward pass after it (memory by category,
// MemoryCategories::kept_sites), step after step — a loss summed as a tensor, losses or outputs
// kept in a list or dict, backward(retain_graph=True) on a graph that is then kept.
#pragma once
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct ProcessReport;

// Sets Growth::cause and the graph_* fields of the growth such a graph holds: the loop line whose
// forward pass made the kept blocks (the innermost Python frame all kept sites share) and the line
// that keeps the graph (findings/graph_keeper.h).
void find_retained_graphs(ProcessReport& p);

// "retained-graph" advice for each growth find_retained_graphs marked.
void advise_retained_graphs(const ProcessReport& p, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer
