"""What tensor blocks are to training, for the analyzer's memory by category (zero code change).

Installed by _autoattach.py once the torch bridge is attached. It tells the shim, through
``gpumemshim_tensor_tags`` (a TorchEvent record of action tag each, docs/trace-format.md), which
CUDA tensor blocks are

- parameters: the ``param_groups`` of every ``torch.optim`` optimizer, when the optimizer is made
  (``Optimizer.__init__`` is wrapped) and after its steps;
- gradients: the ``.grad`` of those parameters after every backward pass (one that runs out of
  memory included) and after the optimizer's steps;
- optimizer state: the tensors of ``optimizer.state`` after its steps.

After an optimizer's first FULL_STEPS steps only every FULL_EVERY-th step looks at all of them
again (every backward pass still looks at the gradients): parameters and state live long, so a
block swapped in between is told at the next look and counts from its allocation all the same,
and a look costs a few Python calls per tensor. What one look finds goes to the shim in one call:
a call through ctypes costs about as much as the Python that finds a gradient, and a set_to_none
zero_grad makes every gradient new at each backward pass.

A block is named by its storage's data pointer, the block the caching allocator handed out; the
analyzer applies a tag to the block live there for its whole life, so a tag that comes late still
counts from the block's allocation on. A tensor already told with the same storage and category is
skipped (its identity held by a weak reference: a new tensor at a reused address is told again).

Activations saved for backward are not tagged here: the analyzer takes them from the backward
passes _autoattach.py marks (findings/categories.h). Saved-tensor hooks would name them exactly,
but pushed as defaults for the whole program they change it: torch.func.grad, vjp, jacrev and
hessian refuse to run under them, a pack hook that returns its input keeps a saved output alive
through a reference cycle (one that returns a detached copy costs a tensor per saved tensor), and
every saved tensor then costs a Python call in forward and another, under the GIL, on autograd's
device threads in backward.

GPUMEMSHIM_CATEGORIES=0 turns all of this off. Nothing here raises into the program.
"""

import os
import sys
import weakref

PARAMETER = 1
GRADIENT = 2
OPTIMIZER_STATE = 3
ACTIVATION = 4

FULL_STEPS = 4
FULL_EVERY = 8


def enabled():
    return os.environ.get("GPUMEMSHIM_CATEGORIES", "1").strip() != "0"


class Tagger:
    """Tells the shim what CUDA tensor blocks are, each once.

    tags(batch) tells the shim a list of (device, address, category) triples (_shim_tags);
    tensor_type is the class of tensors (torch.Tensor) that optimizer state is searched for."""

    _MIN_PRUNE = 1024

    def __init__(self, tags, tensor_type):
        self.paused = False  # set_paused: nothing is looked at or told meanwhile
        self._tags = tags
        self._batch = []
        self._tensor_type = tensor_type
        self._seen = {}  # id(tensor) -> (weak reference, data_ptr, category)
        self._prune_at = self._MIN_PRUNE
        self._optimizers = weakref.WeakSet()
        self._steps = weakref.WeakKeyDictionary()  # optimizer -> steps seen

    def tensor(self, t, category):
        """Tags the block of t unless it was told already; never raises."""
        if self.paused:
            return
        self._add((t,), category)
        self._flush()

    def _add(self, tensors, category):
        """Adds the blocks of tensors (None skipped) not told already to the batch; never raises.

        One loop over all of a look's tensors, not a call per tensor: the per-gradient cost of a
        backward pass is a few tensor calls, and a Python call per tensor would double it."""
        seen, batch, ref = self._seen, self._batch, weakref.ref
        told = seen.get
        for t in tensors:
            if t is None:
                continue
            try:
                key = id(t)
                ptr = t.data_ptr()
                old = told(key)
                if old is not None and old[1] == ptr and old[2] == category and old[0]() is t:
                    continue
                if not ptr or not t.is_cuda:
                    continue
                # A tensor at its storage's start (every gradient the engine makes) is the block's
                # pointer itself; asking for the storage makes a Python object.
                base = ptr if t.storage_offset() == 0 else _storage_address(t)
                if base:
                    batch.append((t.get_device(), base, category))
                    seen[key] = (ref(t), ptr, category)
            except Exception:
                pass
        if len(seen) > self._prune_at:
            self._prune()

    def _flush(self):
        batch, self._batch = self._batch, []
        if batch:
            try:
                self._tags(batch)
            except Exception:
                pass

    def optimizer(self, opt):
        """Parameters, gradients and state of one optimizer, after its step (see FULL_EVERY)."""
        if self.paused:
            return
        try:
            self._optimizers.add(opt)
            steps = self._steps.get(opt, 0) + 1
            self._steps[opt] = steps
            if steps > FULL_STEPS and steps % FULL_EVERY != 0:
                return
            tensor_type = self._tensor_type
            params = [p for group in opt.param_groups for p in group["params"]]
            self._add(params, PARAMETER)
            self._add([p.grad for p in params], GRADIENT)
            state = getattr(opt, "state", None)
            get = getattr(state, "get", None)  # not state[p]: a defaultdict would grow an entry
            if get is not None:
                self._add([v for p in params for v in (get(p) or {}).values()
                           if isinstance(v, tensor_type)], OPTIMIZER_STATE)
        except Exception:
            pass
        self._flush()

    def new_optimizer(self, opt):
        """An optimizer just made: its parameters (before any step tells them)."""
        try:
            self._optimizers.add(opt)  # also while paused: gradients() looks at it later
            if self.paused:
                return
            self._add([p for group in opt.param_groups for p in group["params"]], PARAMETER)
        except Exception:
            pass
        self._flush()

    def gradients(self):
        """The gradients of every known optimizer's parameters (after a backward pass)."""
        if self.paused:
            return
        try:
            self._add([p.grad for opt in list(self._optimizers) for group in opt.param_groups
                       for p in group["params"]], GRADIENT)
        except Exception:
            pass
        self._flush()

    def _prune(self):
        self._seen = {k: v for k, v in self._seen.items() if v[0]() is not None}
        self._prune_at = max(self._MIN_PRUNE, 2 * len(self._seen))


def _storage_address(t):
    """The data pointer of t's storage (the block), 0 when there is none to name."""
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        local = getattr(t, "_local_tensor", None)  # a DTensor: its shard on this rank
        if local is not None and local is not t:
            return _storage_address(local)
        return 0


def _shim_tags():
    """A function that tells the shim a batch of (device, address, category) triples in one call
    to gpumemshim_tensor_tags, or None without the shim."""
    try:
        import array
        import ctypes
        import itertools

        fn = ctypes.CDLL(None).gpumemshim_tensor_tags
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        fn.restype = None
    except (ImportError, AttributeError, OSError):
        return None
    chain = itertools.chain.from_iterable

    def tags(batch):
        flat = array.array("Q", chain(batch))
        address, length = flat.buffer_info()
        fn(address, length // 3)

    return tags


_installed = None  # install()'s Tagger


def set_paused(paused):
    """While the shim is paused (gpumemshim.pause()) nothing is tagged: the blocks made then are
    not in the trace, and the program should not pay for telling them."""
    if _installed is not None:
        _installed.paused = bool(paused)


def install(tags=None):
    """A Tagger for this process, with torch.optim.Optimizer's constructor wrapped to tell each new
    optimizer's parameters; None when categories are off, torch is not loaded or the shim is
    absent. tags: what tells the shim a batch of tags (tests pass their own)."""
    if not enabled():
        return None
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None)
    if tensor_type is None:
        return None
    tags = tags or _shim_tags()
    if tags is None:
        return None
    global _installed
    tagger = Tagger(tags, tensor_type)
    _wrap_optimizer_init(tagger)
    _installed = tagger
    return tagger


def _wrap_optimizer_init(tagger):
    optimizer = sys.modules.get("torch.optim.optimizer")
    cls = getattr(optimizer, "Optimizer", None)
    init = getattr(cls, "__init__", None)
    if init is None or getattr(init, "__gpumemshim_wrapped__", False):
        return
    import functools

    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        init(self, *args, **kwargs)
        tagger.new_optimizer(self)

    wrapped.__gpumemshim_wrapped__ = True
    try:
        cls.__init__ = wrapped
    except Exception:
        pass
