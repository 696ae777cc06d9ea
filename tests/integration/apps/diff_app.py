"""The same small program run twice with different sizes, for test_diff.py: a scratch buffer that
sets the peak, a steady buffer and a leak, on the (fake) CUDA runtime through ctypes.
    diff_app.py <libcudart path> <scratch bytes> <leak bytes>"""
import ctypes
import sys

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
scratch_bytes, leak_bytes = int(sys.argv[2]), int(sys.argv[3])


def steady():
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0  # site: steady
    return ptr


def scratch():
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(scratch_bytes)) == 0  # site: scratch
    return ptr


def leak():
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(leak_bytes)) == 0  # site: leak
    return ptr


kept = steady()
buf = scratch()
assert cudart.cudaFree(buf) == 0
if leak_bytes:
    leak()
assert cudart.cudaFree(kept) == 0
print("done")
