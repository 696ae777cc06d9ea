"""A user's test suite, run by test_pytest_plugin.py under `gpumemshim record -- python -m pytest
--gpumemshim`. Allocates on the (fake) CUDA runtime named by FAKE_CUDART through ctypes."""
import ctypes
import os

import pytest

if "FAKE_CUDART" not in os.environ:  # collected by a plain `pytest tests/integration`
    pytest.skip("run by test_pytest_plugin.py", allow_module_level=True)
cudart = ctypes.CDLL(os.environ["FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
MIB = 1 << 20


def malloc(size):
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0
    return ptr


@pytest.mark.no_gpu_leaks
def test_leaks():
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(3 * MIB)) == 0  # site: test leak


@pytest.mark.no_gpu_leaks
def test_clean():
    ptr = malloc(2 * MIB)
    assert cudart.cudaFree(ptr) == 0


@pytest.mark.limit_gpu_memory("4 MB")
def test_over_limit():
    ptr = malloc(6 * MIB)
    assert cudart.cudaFree(ptr) == 0


@pytest.mark.limit_gpu_memory("64 MiB")
def test_under_limit():
    ptr = malloc(6 * MIB)
    assert cudart.cudaFree(ptr) == 0


def test_unmarked_leak_is_not_checked():
    malloc(MIB)
