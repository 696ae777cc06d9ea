"""What the memory categories' tagging costs a training step on real CUDA tensors: the optimizer
step of tests/gpu/overhead.py (100 Linear layers, AdamW, zero_grad(set_to_none=True): 200 new
gradients a step), with the package's Tagger (gpumemshim/_categories.py) telling a stand-in for the
shim, each of its two calls timed where the package makes them: gradients() after backward(),
optimizer() after the step. No shim needed; figures: docs/benchmarks.md "PyTorch step overhead".

    python3 bench/tagging_cost_torch.py [STEPS]"""
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import torch  # noqa: E402

from gpumemshim import _categories  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(100)]).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x0 = torch.randn(64, 64, device=dev)
told = []
tagger = _categories.Tagger(lambda batch: told.append(len(batch)), torch.Tensor)
tagger.new_optimizer(opt)
gradients_us, optimizer_us, step_ms, tags = [], [], [], []
for i in range(steps + 10):  # the first ten warm up: cuBLAS, the allocator's cache
    before = sum(told)
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    model(x0).sum().backward()
    t1 = time.perf_counter()
    tagger.gradients()
    t2 = time.perf_counter()
    opt.step()
    t3 = time.perf_counter()
    tagger.optimizer(opt)
    t4 = time.perf_counter()
    torch.cuda.synchronize()
    t5 = time.perf_counter()
    if i >= 10:
        gradients_us.append((t2 - t1) * 1e6)
        optimizer_us.append((t4 - t3) * 1e6)
        step_ms.append((t5 - t0 - (t2 - t1) - (t4 - t3)) * 1e3)
        tags.append(sum(told) - before)
g, o, s = (statistics.median(v) for v in (gradients_us, optimizer_us, step_ms))
print(f"step without tagging {s:.3f} ms (median of {steps}); gradients() {g:.1f} us, optimizer() "
      f"{o:.1f} us (mean {statistics.mean(optimizer_us):.1f}: a full look every "
      f"{_categories.FULL_EVERY} steps); tags a step {statistics.median(tags):.0f}; the tagging "
      f"{100 * (g + statistics.mean(optimizer_us)) / 1e3 / s:.2f} % of the step")
