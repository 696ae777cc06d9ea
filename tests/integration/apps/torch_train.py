"""A 'training script' with no gpumemshim import: under the shim the bridge must attach by
itself (zero code change). Runs on the fake torch and the fake cudart (ctypes)."""
import ctypes
import os
import sys

import torch

cudart = ctypes.CDLL(os.environ["FAKECUDART"], mode=ctypes.RTLD_GLOBAL)
if os.environ.get("TRAIN_MEMORY_FRACTION"):  # before CUDA is initialised, as scripts often do
    torch.cuda.set_per_process_memory_fraction(float(os.environ["TRAIN_MEMORY_FRACTION"]))
torch.cuda._lazy_init()  # site: cuda_init
opt = torch.optim.Optimizer()
kept = []
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), 1024)  # site: step_leak
    kept.append(p)
    torch.autograd.backward(4096)  # site: backward_call
    opt.step()
    if os.environ.get("TRAIN_USER_STEPS"):  # the script marks its own steps too
        import gpumemshim

        gpumemshim.step()
print("sitecustomize" in sys.modules, "gpumemshim" in sys.modules)
