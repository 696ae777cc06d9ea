// Cost of one cudaMalloc+cudaFree pair on the fake CUDA, called from a given stack depth. Run it
// bare and under the shim (bench/hook_cost.sh does both, side by side) to get the hook's cost.
#include <benchmark/benchmark.h>
#include <fakecuda/cuda_runtime_api.h>

namespace {

void alloc_free_at_depth(int depth, benchmark::State& state);
// Calls through a volatile pointer cannot be turned into a loop: each level is a real frame.
void (*volatile recurse)(int, benchmark::State&) = alloc_free_at_depth;

__attribute__((noinline)) void alloc_free_at_depth(int depth, benchmark::State& state) {
  if (depth > 1) {
    recurse(depth - 1, state);
    benchmark::ClobberMemory();  // keeps the recursion from becoming a tail call
    return;
  }
  for (auto _ : state) {
    void* p = nullptr;
    cudaMalloc(&p, 4096);
    benchmark::DoNotOptimize(p);
    cudaFree(p);
  }
}

void BM_MallocFreePair(benchmark::State& state) {
  alloc_free_at_depth(static_cast<int>(state.range(0)), state);
}
BENCHMARK(BM_MallocFreePair)->Arg(1)->Arg(30);

}  // namespace

BENCHMARK_MAIN();
