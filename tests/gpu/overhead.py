"""The shim's overhead on PyTorch training steps (targets and figures: docs/benchmarks.md). One
step of each kind, timed per step with torch.cuda.synchronize(), in a process of one configuration:
  alloc    allocation-bound: 200 chained 64x64 matmuls, forward and backward (~1200 tensor allocs)
  compute  compute-bound: 4 chained 8192x8192 bf16 matmuls, forward and backward
  optim    a training step of 100 Linear(64, 64) layers with AdamW (zero_grad, forward, backward,
           step): what the memory categories' tags cost (GPUMEMSHIM_CATEGORIES=0 against 1)
Configurations (the driver, run_overhead.py, starts one process per configuration and round):
  base (nothing), shim (run under LD_PRELOAD=libgpumemshim.so: bridge + Python stacks),
  torch (torch.cuda.memory._record_memory_history(stacks="python")),
  profiler (the steps inside torch.profiler.profile(profile_memory=True, with_stack=True,
  record_shapes=True): what torch.profiler's memory timeline needs).
  interleaved (under the shim): base, shim, shim-nocat and torch alternate step by step in this one
  process, the shim paused (gpumemshim.pause()) for base and torch steps, recording without the
  memory categories' tagging for shim-nocat steps.
Prints one JSON line per configuration: {"kind", "config", "median_ms", "steps", "allocs_per_step"}.
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
elif kind == "optim":
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(100)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x0 = torch.randn(64, 64, device=dev)
else:
    weights = [torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(4)]
    x0 = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)


def step():
    if kind == "optim":
        opt.zero_grad(set_to_none=True)
        model(x0).sum().backward()
        opt.step()
        return
    x = x0
    for w in weights:
        x = x @ w
    x.sum().backward()
    for w in weights:
        w.grad = None


def timed():
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


if config == "torch":
    torch.cuda.memory._record_memory_history(stacks="python")
for _ in range(10):  # warm-up: cuBLAS handles, the allocator's cache
    step()
torch.cuda.synchronize()
before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
step()
torch.cuda.synchronize()
allocs = torch.cuda.memory_stats().get("allocation.all.allocated", 0) - before

if config == "profiler":
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True,
                 with_stack=True, record_shapes=True):
        times = [timed() for _ in range(steps)]
    print(json.dumps({"kind": kind, "config": config, "median_ms": statistics.median(times),
                      "steps": steps, "allocs_per_step": allocs}))
    sys.exit(0)
if config != "interleaved":
    times = [timed() for _ in range(steps)]
    print(json.dumps({"kind": kind, "config": config, "median_ms": statistics.median(times),
                      "steps": steps, "allocs_per_step": allocs}))
    sys.exit(0)

# In one process under the shim, step by step: base (shim paused), shim (recording), shim-nocat
# (recording, the categories' tagging paused), torch (shim paused, PyTorch's recorder on for that
# step only). Same process, same allocator state, alternating every step: the machine's drift
# hits all four alike.
import gpumemshim  # noqa: E402  (the shim's boot copy; no-op without the shim)
from gpumemshim import _categories  # noqa: E402

assert gpumemshim.active(), "interleaved needs the shim"
variants = ("base", "shim", "shim-nocat", "torch")
times = {v: [] for v in variants}
for i in range(len(variants) * steps):
    which = variants[i % len(variants)]
    if which.startswith("shim"):
        gpumemshim.resume()
        _categories.set_paused(which == "shim-nocat")
    else:
        gpumemshim.pause()
    if which == "torch":
        torch.cuda.memory._record_memory_history(stacks="python")
    times[which].append(timed())
    if which == "torch":
        torch.cuda.memory._record_memory_history(enabled=None)
gpumemshim.resume()
for which, t in times.items():
    print(json.dumps({"kind": kind, "config": "in-process " + which, "median_ms": statistics.median(t),
                      "steps": steps, "allocs_per_step": allocs}))
