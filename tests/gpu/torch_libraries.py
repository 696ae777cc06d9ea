"""H200 scenarios of issue 22 (zero code change: the shim's sitecustomize attaches the bridge):
  bench    a no-step benchmark: matmuls forward and backward on four threads, no optimizer. It keeps
           nothing, so what is alive at exit is cuBLAS's (a handle per thread) and PyTorch's (its
           cuBLAS/cuBLASLt workspaces): memory the libraries keep, not a leak
  oom_cap  torch.cuda.set_per_process_memory_fraction(0.03), then 32 MiB tensors until the caching
           allocator refuses one at the cap while the device still has most of its memory free
Usage: python torch_libraries.py MODE"""
import sys
import threading

import torch

mode = sys.argv[1]
dev = torch.device("cuda")
torch.manual_seed(0)

if mode == "bench":

    def work():
        a = torch.randn(512, 512, device=dev, requires_grad=True)
        b = torch.randn(512, 512, device=dev)
        for _ in range(5):
            y = (a @ b).relu() @ b  # site: matmul
            y.sum().backward()
            a.grad = None

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    print(f"bench done on {len(threads)} threads")
elif mode == "oom_cap":
    torch.cuda.set_per_process_memory_fraction(0.03)
    kept = []
    try:
        while True:
            kept.append(torch.empty(32 << 20, dtype=torch.uint8, device=dev))  # site: cap_oom
    except torch.cuda.OutOfMemoryError:
        print("oom_cap: refused at the cap")
else:
    raise SystemExit(f"unknown mode {mode}")
