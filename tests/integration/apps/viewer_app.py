"""A training-like loop for test_viewers.py, on the (fake) CUDA runtime loaded with ctypes:
weights allocated once, activations allocated and freed every step, and one buffer per step kept
in a list (memory that rises step over step, never freed: the leak).
    viewer_app.py <libcudart path> <steps>
Prints one JSON line: the leaked buffers' addresses and sizes, and the weights' size."""
import ctypes
import json
import sys
import time

import gpumemshim

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
steps = int(sys.argv[2])
MIB = 1 << 20


def malloc(size):
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0  # site: viewer malloc
    return ptr


def free(ptr):
    assert cudart.cudaFree(ptr) == 0


def load_weights():
    return malloc(24 * MIB)  # site: weights


def forward():
    return [malloc(4 * MIB) for _ in range(3)]  # site: activations


def remember(history):
    history.append(malloc(1 * MIB))  # site: history


gpumemshim.mark("start")  # an event, so even a run without allocations leaves a trace
weights = load_weights() if steps else None
history = []
for i in range(steps):
    activations = forward()
    remember(history)
    time.sleep(0.02)  # the step's compute: gives the chart its width
    for a in activations:
        free(a)
    gpumemshim.step()
if weights:
    free(weights)
print(json.dumps({"leaked": [[p.value, MIB] for p in history]}))
