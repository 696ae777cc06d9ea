"""A training loop on the fake cudart (ctypes) whose growth comes from summing a 'loss' across
steps as device memory, the classic `total_loss += loss`: the analyzer should read the line and
advise .item()/.detach(). Usage: python_growth.py <libcudart> <steps>"""
import ctypes
import sys

import gpumemshim

cudart = ctypes.CDLL(sys.argv[1])
total_loss = 0.0
for step in range(int(sys.argv[2])):
    total_loss += cudart.cudaMalloc(ctypes.byref(ctypes.c_void_p()), ctypes.c_size_t(256 << 10)) or 1.0
    gpumemshim.step()
print(total_loss)
