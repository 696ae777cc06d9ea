"""Overhead benchmark of issue 4 (d), DESIGN.md §9. One step of each kind, timed per step with
torch.cuda.synchronize(), in a process of one configuration:
  alloc    allocation-bound: 200 chained 64x64 matmuls, forward and backward (~1200 tensor allocs)
  compute  compute-bound: 4 chained 8192x8192 bf16 matmuls, forward and backward
Configurations (the driver, run_overhead.py, starts one process per configuration and round):
  base (nothing), shim (run under LD_PRELOAD=libgpumemshim.so: bridge + Python stacks),
  torch (torch.cuda.memory._record_memory_history(stacks="python")).
Prints one JSON line: {"kind", "config", "median_ms", "steps", "allocs_per_step"}.
Usage: python overhead.py KIND CONFIG STEPS"""
import json
import statistics
import sys
import time

import torch

kind, config, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
dev = torch.device("cuda")
torch.manual_seed(0)
if kind == "alloc":
    weights = [torch.randn(64, 64, device=dev, requires_grad=True) for _ in range(200)]
    x0 = torch.randn(64, 64, device=dev)
else:
    weights = [torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(4)]
    x0 = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)


def step():
    x = x0
    for w in weights:
        x = x @ w
    x.sum().backward()
    for w in weights:
        w.grad = None


if config == "torch":
    torch.cuda.memory._record_memory_history(stacks="python")
for _ in range(10):  # warm-up: cuBLAS handles, the allocator's cache
    step()
torch.cuda.synchronize()
before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
step()
torch.cuda.synchronize()
allocs = torch.cuda.memory_stats().get("allocation.all.allocated", 0) - before
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"kind": kind, "config": config, "median_ms": statistics.median(times),
                  "steps": steps, "allocs_per_step": allocs}))
