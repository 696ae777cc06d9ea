// Advice: each rule needs a finding and the numbers that justify it; no finding, no
// advice. A trace cannot show tensor dtypes, so mixed precision is advised on the evidence that
// activations dominate a peak near the device's capacity (it halves them when they are fp32), and
// says so. Which tensors are optimizer state is not visible either; a peak between the end of
// backward() and the end of optimizer.step() (the package's markers) is the evidence for the
// optimizer advice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct Frame;
struct ProcessReport;
struct Report;

// Where advice on a site points the user: "file:line" of its innermost Python frame with a line,
// else of any frame with one, else its first frame's function, else "an unknown site".
std::string user_place(const std::vector<Frame>& stack);

// A peak is near what the process may use above this share of it.
inline constexpr double kNearCapacity = 0.9;

// part as a percentage of whole (0 when whole is 0).
double pct(uint64_t part, uint64_t whole);

// The device's capacity as the process's trace knows it (Device records, else cudaMemGetInfo
// samples); 0 when unknown.
uint64_t device_total(const ProcessReport& p);

// The advice for one process, from its findings.
std::vector<Advice> advise(const ProcessReport& p);
// Advice that needs several processes: processes of one host sharing a device whose peaks add up
// to nearly all of it get "memory-fraction" (appended to their own advice).
void advise_shared_devices(Report& report);

}  // namespace gpumemshim::analyzer
