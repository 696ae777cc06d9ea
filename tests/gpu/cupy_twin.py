"""CuPy scenarios of issue 23, no gpumemshim import. Usage: cupy_twin.py MODE
  keep     arrays kept across iterations (a leak at its line)
  release  the same arrays dropped each iteration: the pool keeps their blocks and reuses them
           (cached at exit, no leak, no growth)
  fill     the pool's cache fills the device, then PyTorch cannot allocate: free_all_blocks advice"""
import sys

import cupy as cp

mode = sys.argv[1]
kept = []
if mode in ("keep", "release"):
    for step in range(30):
        a = cp.ones((1024, 1024), dtype=cp.float32)  # site: cupy_alloc
        b = a * 2  # site: cupy_result
        if mode == "keep":
            kept.append(b)  # site: cupy_keep
        del a, b
    print("done", len(kept))
elif mode == "fill":
    import torch

    free, total = cp.cuda.runtime.memGetInfo()
    chunk = 1 << 30
    arrays = [cp.empty(chunk // 4, dtype=cp.float32) for _ in range(int(free * 0.9) // chunk)]  # site: cupy_fill
    del arrays  # back to CuPy's pool, not to the device
    try:
        t = torch.empty(int(total * 0.5) // 4, dtype=torch.float32, device="cuda")  # site: torch_after
        print("allocated", t.numel())
    except torch.OutOfMemoryError as e:
        print("oom", str(e).splitlines()[0][:100])
