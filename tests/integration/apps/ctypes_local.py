"""Calls the (fake) CUDA runtime through ctypes with the default RTLD_LOCAL, as a Python program
that loads libcudart itself would: the shim sees these calls only through its dlsym override."""
import ctypes
import sys

cudart = ctypes.CDLL(sys.argv[1])  # RTLD_LOCAL
ptr = ctypes.c_void_p()
for _ in range(4):
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 16)) == 0
    assert cudart.cudaFree(ptr) == 0
kept = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(kept), ctypes.c_size_t(3 << 20)) == 0
print("done")
