"""Allocates through the (fake) CUDA runtime via ctypes from known lines, nested through Python
functions, for test_python_stacks.py. argv: libcudart path, then "main" or "thread"."""
import ctypes
import sys
import threading

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)


def allocate(size):
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0  # site: py alloc
    return ptr


def scratch_buffers():
    for _ in range(3):
        p = allocate(1 << 16)
        assert cudart.cudaFree(p) == 0


def build_model():
    scratch_buffers()
    return allocate(5 << 20)  # site: py caller


def main():
    if sys.argv[2] == "thread":
        t = threading.Thread(target=build_model, name="worker")
        t.start()
        t.join()
    else:
        build_model()  # site: py main
    print("done")


main()
