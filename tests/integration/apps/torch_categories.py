"""A 'training loop' on the fake torch for the memory categories, with no gpumemshim import: a
parameter, its gradient (kept from step to step), two tensors of optimizer state made by the first
step and a CPU step count, and a forward tensor saved for backward each step. Tensors are blocks of
the fake bridge at fixed addresses (fake_torch_alloc / fake_torch_free)."""
import ctypes
import os
import sys

import torch

cudart = ctypes.CDLL(os.environ["FAKECUDART"], mode=ctypes.RTLD_GLOBAL)
bridge = ctypes.CDLL(os.environ["FAKE_TORCH_BRIDGE"])
bridge.fake_torch_alloc.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
bridge.fake_torch_free.argtypes = [ctypes.c_uint64]
torch.cuda._lazy_init()
BASE = 0x7f0000100000


def tensor(offset, nbytes):
    bridge.fake_torch_alloc(BASE + offset, nbytes)
    return torch.Tensor(BASE + offset, nbytes)


def state(p):
    return {"exp_avg": tensor(0x30000, 4096), "exp_avg_sq": tensor(0x40000, 4096),
            "step": torch.Tensor(0x1000, 8, cuda=False)}


weight = tensor(0, 4096)
opt = torch.optim.Optimizer([weight], make_state=state)
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    saved = tensor(0x10000, 8192)  # forward: saved for backward

    def graph():
        bridge.fake_torch_free(BASE + 0x10000)  # backward frees what forward saved
        if weight.grad is None:
            weight.grad = tensor(0x20000, 4096)

    torch.autograd.backward(4096, then=graph)
    del saved
    opt.step()
print("done")
