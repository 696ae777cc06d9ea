"""Attaches the PyTorch bridge at CUDA initialisation, with no change to the user's script.

Run by the shim's sitecustomize (python/boot). When ``torch.cuda`` is imported, its
``_lazy_call`` queue gets a callback that runs right after torch has initialised CUDA and its
caching allocator; the callback loads ``libgpumemshim_torch.so`` (when its torch version matches),
attaches it, and adds

- a global optimizer step post hook: a step marker named ``optimizer.step`` after every
  ``torch.optim.Optimizer.step``;
- a range named ``torch.backward`` around ``torch.autograd.backward`` / ``torch.autograd.grad``:
  the analyzer gives allocations that autograd's device threads make inside it the stack of the
  ``backward()`` call (those threads run no Python), and tells activations from it;
- memory categories (_categories.py): parameters, gradients and optimizer state tagged at optimizer
  construction, after each backward pass and after each step (GPUMEMSHIM_CATEGORIES=0: off).

When ``torch.cuda`` is imported (before CUDA is initialised), ``set_per_process_memory_fraction`` is
wrapped: each call, and at attach each device's fraction below 1, writes the attribute
``torch.memory_fraction.<device>`` so that the analyzer judges an OOM against the process's own
cap (fraction x device total), not against the device's free memory.

With the cudaMallocAsync backend, a pluggable allocator, or no matching bridge: one info line,
and the trace keeps its runtime-level events.
"""

import os
import sys

_installed = False


def install():
    """Arms the hook once; the import of torch (now or later) triggers the rest."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from gpumemshim import _jax

        after_import("jax", _jax.record_allocator)
    except Exception:
        pass
    if os.environ.get("GPUMEMSHIM_TORCH", "1").strip() == "0":
        return
    after_import("torch.cuda", _arm)


def after_import(name, callback):
    """Runs callback(module) once module `name` has executed: now when it already has."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))


class _AfterImport:
    """A meta path finder that only watches for one module: it asks the other finders for the
    module's spec and runs the callback right after the module has executed."""

    def __init__(self, name, callback):
        self._name = name
        self._callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self._name:
            return None
        try:
            sys.meta_path.remove(self)  # once is enough, and it keeps imports untouched after
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        callback = self._callback

        def exec_and_arm(module):
            exec_module(module)
            try:
                callback(module)
            except Exception:
                pass

        try:
            loader.exec_module = exec_and_arm  # this loader instance serves this spec only
        except Exception:
            pass
        return spec


def _arm(cuda):
    try:
        _wrap_memory_fraction(cuda)
    except Exception:
        pass
    try:
        lazy_call = getattr(cuda, "_lazy_call", None)
        if lazy_call is None:
            import gpumemshim

            gpumemshim._info("this torch has no torch.cuda._lazy_call: call "
                             "gpumemshim.attach_torch() after CUDA is initialised")
            return
        lazy_call(_on_cuda_initialised)  # runs now when CUDA is already initialised
    except Exception:
        pass


_initialising = False


def _on_cuda_initialised():
    # Runs inside torch.cuda._lazy_init: it must never raise, and runs once even if a torch.cuda
    # call made here were to initialise CUDA again.
    global _initialising
    if _initialising:
        return
    _initialising = True
    try:
        import gpumemshim

        if gpumemshim._attach_torch(cuda_ready=True):
            tagger = _tagger()
            _add_step_hook(gpumemshim, tagger)
            _wrap_backward(gpumemshim, tagger)
        _record_memory_fractions(gpumemshim)
    except Exception:
        pass
    finally:
        _initialising = False


def _tagger():
    try:
        from gpumemshim import _categories

        return _categories.install()
    except Exception:
        return None


def _add_step_hook(gpumemshim, tagger=None):
    optimizer = sys.modules.get("torch.optim.optimizer")
    register = getattr(optimizer, "register_optimizer_step_post_hook", None)
    if register is None:
        gpumemshim._info("no torch.optim global step hook: no automatic step markers")
        return

    def after_step(opt, args, kwargs):
        if tagger is not None:
            tagger.optimizer(opt)  # before the marker: the step's own blocks belong to it
        gpumemshim.step("optimizer.step")

    register(after_step)


def _wrap_backward(gpumemshim, tagger=None):
    autograd = sys.modules.get("torch.autograd")
    if autograd is None:
        return
    api = gpumemshim._lookup()
    if not api:
        return
    push, pop = api.range_push, api.range_pop
    name = b"torch.backward"

    def wrap(fn, gradients):
        import functools

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            push(name)
            try:
                return fn(*args, **kwargs)
            finally:
                pop(name)
                if gradients is not None:  # also when it ran out of memory: what it made stands
                    gradients()

        traced.__gpumemshim_wrapped__ = True
        return traced

    for attr in ("backward", "grad"):
        fn = getattr(autograd, attr, None)
        if fn is not None and not getattr(fn, "__gpumemshim_wrapped__", False):
            gradients = tagger.gradients if tagger is not None and attr == "backward" else None
            setattr(autograd, attr, wrap(fn, gradients))


_FRACTION = "set_per_process_memory_fraction"


def _wrap_memory_fraction(cuda):
    """Wraps torch.cuda's set_per_process_memory_fraction (the same function is also
    torch.cuda.memory's) so that each call that torch accepts records the fraction set."""
    owners = [cuda]
    memory = sys.modules.get("torch.cuda.memory") or getattr(cuda, "memory", None)
    if memory is not None:
        owners.append(memory)
    wrapped = {}
    for owner in owners:
        fn = getattr(owner, _FRACTION, None)
        if fn is None or getattr(fn, "__gpumemshim_wrapped__", False):
            continue
        if id(fn) not in wrapped:
            wrapped[id(fn)] = _fraction_wrapper(fn)
        setattr(owner, _FRACTION, wrapped[id(fn)])


def _fraction_wrapper(fn):
    import functools

    @functools.wraps(fn)
    def set_per_process_memory_fraction(*args, **kwargs):
        result = fn(*args, **kwargs)  # torch's own errors reach the caller unchanged
        try:
            fraction = args[0] if args else kwargs.get("fraction")
            device = args[1] if len(args) > 1 else kwargs.get("device")
            _record_memory_fraction(_device_index(device), fraction)
        except Exception:
            pass
        return result

    set_per_process_memory_fraction.__gpumemshim_wrapped__ = True
    return set_per_process_memory_fraction


def _device_index(device):
    torch = sys.modules["torch"]
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int):
        return device
    utils = sys.modules.get("torch.cuda._utils")
    get_index = getattr(utils, "_get_device_index", None)
    if get_index is not None:
        return int(get_index(device))
    index = getattr(device, "index", None)
    return int(index) if index is not None else int(torch.cuda.current_device())


def _record_memory_fraction(index, fraction):
    """Writes torch.memory_fraction.<index> = the fraction given (torch accepted it: it checks the
    type and range first; its own getter gives back the cap in bytes over the total, rounded)."""
    import gpumemshim

    gpumemshim._attribute("torch.memory_fraction.%d" % index, repr(float(fraction)))


def _record_memory_fractions(gpumemshim):
    """At attach: the fraction of every device that already has one below 1 (set before the wrapper
    was in place, or through the allocator's settings)."""
    cuda = sys.modules["torch"].cuda
    get = getattr(cuda, "get_per_process_memory_fraction", None)
    count = getattr(cuda, "device_count", None)
    if get is None or count is None:
        return
    for index in range(int(count())):
        try:
            fraction = float(get(index))
        except Exception:
            continue
        if 0 < fraction < 1:
            gpumemshim._attribute("torch.memory_fraction.%d" % index, repr(fraction))
