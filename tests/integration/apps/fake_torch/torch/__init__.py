"""A minimal stand-in for torch, enough for gpumemshim's automatic attach (CI has no torch):
torch.cuda's lazy-initialisation queue, torch.optim's global step post hooks, torch.autograd."""
import os

__version__ = os.environ.get("FAKE_TORCH_VERSION", "0.0.0+fake")

from . import cuda  # noqa: E402,F401  (real torch imports torch.cuda while importing torch)
from . import autograd  # noqa: E402,F401
from . import optim  # noqa: E402,F401
