"""A minimal stand-in for torch, enough for gpumemshim's automatic attach (CI has no torch):
torch.cuda's lazy-initialisation queue, torch.optim's global step post hooks, torch.autograd, and
tensors that name a block of the fake bridge (the memory categories' tags)."""
import os

__version__ = os.environ.get("FAKE_TORCH_VERSION", "0.0.0+fake")


class _Storage:
    def __init__(self, address):
        self._address = address

    def data_ptr(self):
        return self._address


class Tensor:
    """A tensor of `nbytes` at `address` (its storage's start; `offset` bytes into it for a view)."""

    def __init__(self, address, nbytes, cuda=True, offset=0, device=0):
        self._address = address
        self._offset = offset
        self.nbytes = nbytes
        self.is_cuda = cuda
        self._device = device if cuda else -1
        self.grad = None

    def data_ptr(self):
        return self._address + self._offset

    def storage_offset(self):
        return self._offset // 4  # in elements of float32

    def get_device(self):
        return self._device

    def untyped_storage(self):
        return _Storage(self._address)


from . import cuda  # noqa: E402,F401  (real torch imports torch.cuda while importing torch)
from . import autograd  # noqa: E402,F401
from . import optim  # noqa: E402,F401
