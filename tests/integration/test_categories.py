"""Memory by category from the Python side: the package's tagger on stand-in tensors (what it tags,
once, and what it leaves alone), and end to end under the shim on the fake torch, with no change
to the script: the report's categories at the peak."""
import collections
import importlib
import os
import pathlib
import sys

import pytest

from conftest import SOURCES
from test_torch_autoattach import BRIDGE, FAKE_TORCH, train

PACKAGE = pathlib.Path(__file__).parents[2] / "python"
sys.path.insert(0, str(FAKE_TORCH))  # `torch` below is the stand-in
sys.path.insert(0, str(PACKAGE))
categories = importlib.import_module("gpumemshim._categories")


class FakeTensor:
    def __init__(self, address, cuda=True, offset=0):
        self.address, self.offset, self.is_cuda = address, offset, cuda
        self.grad = None

    def data_ptr(self):
        return self.address + self.offset

    def storage_offset(self):
        return self.offset // 4  # in elements of float32

    def get_device(self):
        return 0 if self.is_cuda else -1

    def untyped_storage(self):
        address = self.address

        class Storage:
            def data_ptr(self):
                return address

        return Storage()


class FakeOptimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = collections.defaultdict(dict)


@pytest.fixture
def tags():
    return []


@pytest.fixture
def calls():
    return []


@pytest.fixture
def tagger(tags, calls):
    def tell(batch):
        calls.append(len(batch))
        tags.extend((address, category) for device, address, category in batch)

    return categories.Tagger(tell, FakeTensor)


def test_optimizer_tags_parameters_gradients_and_state(tagger, tags):
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    frozen = FakeTensor(0x3000)  # no gradient yet
    opt = FakeOptimizer([p, frozen])
    opt.state[p] = {"exp_avg": FakeTensor(0x4000), "step": FakeTensor(0x5000, cuda=False), "lr": 0.1}
    tagger.optimizer(opt)
    assert sorted(tags) == [(0x1000, categories.PARAMETER), (0x2000, categories.GRADIENT),
                            (0x3000, categories.PARAMETER), (0x4000, categories.OPTIMIZER_STATE)]
    assert frozen not in opt.state  # read with get(): the defaultdict did not grow


def test_a_view_is_named_by_its_storage(tagger, tags):
    p = FakeTensor(0x1000, offset=256)  # e.g. a gradient that is a view into a bucket
    tagger.tensor(p, categories.GRADIENT)
    assert tags == [(0x1000, categories.GRADIENT)]


def test_each_block_is_told_once(tagger, tags):
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    opt = FakeOptimizer([p])
    opt.state[p] = {"exp_avg": FakeTensor(0x4000)}
    for _ in range(5):
        tagger.optimizer(opt)
        tagger.gradients()
    assert len(tags) == 3


def test_a_new_tensor_or_a_new_storage_is_told_again(tagger, tags):
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    opt = FakeOptimizer([p])
    tagger.optimizer(opt)
    p.grad = FakeTensor(0x2000)  # set_to_none, then a new gradient where the old one was
    tagger.gradients()
    p.address = 0x9000  # p.data replaced
    tagger.optimizer(opt)
    assert tags == [(0x1000, 1), (0x2000, 2), (0x2000, 2), (0x9000, 1)]


def test_new_optimizer_and_gradients(tagger, tags):
    p = FakeTensor(0x1000)
    opt = FakeOptimizer([p])
    tagger.new_optimizer(opt)
    assert tags == [(0x1000, categories.PARAMETER)]
    p.grad = FakeTensor(0x2000)
    tagger.gradients()
    assert tags[-1] == (0x2000, categories.GRADIENT)
    del opt  # known weakly: a dropped optimizer is forgotten
    tagger.gradients()
    assert len(tags) == 2


def test_a_backward_pass_tells_its_gradients_in_one_call(tagger, tags, calls):
    params = [FakeTensor(0x10000 + 0x100 * i) for i in range(200)]
    opt = FakeOptimizer(params)
    tagger.new_optimizer(opt)
    assert calls == [200]
    for step in range(3):  # set_to_none: every backward pass makes new gradients
        for i, p in enumerate(params):
            p.grad = FakeTensor(0x80000 + 0x100 * i + 0x40000 * step)
        tagger.gradients()
        assert calls[-1] == 200
    assert len(calls) == 4
    tagger.gradients()  # the same gradients again: nothing to tell, no call
    assert len(calls) == 4 and len(tags) == 800


def test_a_tagging_that_fails_is_dropped_and_never_raises(tags):
    def tell(batch):
        raise OSError("the shim went away")

    tagger = categories.Tagger(tell, FakeTensor)
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    opt = FakeOptimizer([p])
    tagger.new_optimizer(opt)
    tagger.gradients()
    tagger.optimizer(opt)
    assert tagger._batch == []


def test_the_shims_batch_entry_checks_each_tag(run):
    # Through the preloaded shim's gpumemshim_tensor_tags, as the package calls it: a valid tag
    # names no live block here (an unmatched tag); the others are dropped by the shim.
    script = run.dir / "tags.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(PACKAGE)!r})\n"
        "from gpumemshim import _categories\n"
        "tags = _categories._shim_tags()\n"
        "assert tags is not None, 'no gpumemshim_tensor_tags in the process'\n"
        "tags([(0, 0x7f0000001000, 2), (0, 0x7f0000002000, 1), (0, 0, 2), (0, 0x7f0000003000, 0),\n"
        "      (0, 0x7f0000004000, 5), (2**64 - 1, 0x7f0000005000, 2)])\n"
        "tags([])\n"
        "print('done')\n")
    r = run.program([sys.executable, script])
    assert r.returncode == 0 and "done" in r.stdout, r.stderr
    [trace] = run.traces()
    c = run.report(trace)["processes"][0]["categories"]
    assert c["tags"] == 2 and c["unmatched_tags"] == 2, c


def test_never_raises(tagger, tags):
    class Broken:
        is_cuda = True

        def data_ptr(self):
            raise RuntimeError("no storage")

    tagger.tensor(Broken(), categories.PARAMETER)
    tagger.optimizer(object())
    opt = FakeOptimizer([Broken()])
    tagger.new_optimizer(opt)
    tagger.gradients()
    assert tags == []


def test_seen_tensors_are_pruned(tagger, tags):
    for i in range(3 * categories.Tagger._MIN_PRUNE):
        tagger.tensor(FakeTensor(0x1000 + 16 * i), categories.GRADIENT)  # each dies at once
    assert len(tagger._seen) <= categories.Tagger._MIN_PRUNE + 1


def test_install_is_off_with_gpumemshim_categories_0(monkeypatch, tags):
    # The stand-in loads the fake bridge at import; this test calls none of its functions. A
    # sanitizer build's bridge cannot load into this interpreter (its runtime must come first), so
    # there any library does.
    sanitized = bool(os.environ.get("GPUMEMSHIM_TEST_PRELOAD"))
    monkeypatch.setenv("FAKE_TORCH_BRIDGE", "libc.so.6" if sanitized else str(BRIDGE))
    import torch  # the stand-in: an Optimizer class and a Tensor type

    record = lambda batch: tags.extend((a, c) for d, a, c in batch)  # noqa: E731
    monkeypatch.setenv("GPUMEMSHIM_CATEGORIES", "0")
    assert categories.install(record) is None
    monkeypatch.delenv("GPUMEMSHIM_CATEGORIES")
    init = torch.optim.Optimizer.__init__
    try:
        tagger = categories.install(record)
        assert tagger is not None
        torch.optim.Optimizer([torch.Tensor(0x1000, 64)])  # the wrapped constructor tells it
        assert tags == [(0x1000, categories.PARAMETER)]
        assert categories.install(record) is not None  # a second install does not wrap twice
        torch.optim.Optimizer([torch.Tensor(0x1000, 64)])
        assert len(tags) == 2
    finally:
        torch.optim.Optimizer.__init__ = init


# End to end: the script names no gpumemshim; its tensors are blocks of the fake bridge.
def run_script(run, **env):
    r = train(run, **env, script=SOURCES / "torch_categories.py")
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout, r.stdout
    [trace] = run.traces()
    return run.report(trace)["processes"][0]["categories"]


def test_categories_at_the_peak_with_no_code_change(run):
    c = run_script(run)
    assert c["tagged"]
    # The weight at construction, its gradient after the first backward, two state tensors after the
    # first step; every later pass finds them told (the CPU step count is not a block).
    assert c["tags"] == 4 and c["unmatched_tags"] == 0, c
    peak = c["peak"]["bytes"]
    assert peak["parameter"] == 4096, peak
    assert peak["gradient"] == 4096, peak
    assert peak["optimizer_state"] == 8192, peak
    assert peak["activation"] == 8192, peak  # the forward tensor backward freed
    assert c["basis"] == "steps" and len(c["windows"]) == 4, c["windows"]
    [site] = [s for s in c["peak_sites"] if s["category"] == "activation"]
    assert site["stack"][0]["file"].endswith("torch_categories.py"), site["stack"][:3]


def test_categories_off(run):
    c = run_script(run, GPUMEMSHIM_CATEGORIES=0)
    assert c["tags"] == 0
    peak = c["peak"]["bytes"]
    assert peak["parameter"] == peak["gradient"] == peak["optimizer_state"] == 0, peak
    # Activations come from the marked backward passes, which stay.
    assert peak["activation"] == 8192, peak


def test_after_the_first_steps_only_every_few_steps_look_again(tagger, tags):
    p = FakeTensor(0x1000)
    opt = FakeOptimizer([p])
    opt.state[p] = {"exp_avg": FakeTensor(0x4000)}
    for _ in range(categories.FULL_STEPS):
        tagger.optimizer(opt)
    assert len(tags) == 2
    opt.state[p]["exp_avg"] = FakeTensor(0x8000)  # a state tensor replaced
    looked = []
    for step in range(categories.FULL_STEPS + 1, categories.FULL_EVERY + 1):
        tagger.optimizer(opt)
        looked.append(len(tags))
    assert looked[:-1] == [2] * (len(looked) - 1)  # not looked at in between
    assert tags[-1] == (0x8000, categories.OPTIMIZER_STATE)  # told at the next full look
    other = FakeOptimizer([FakeTensor(0x2000)])
    tagger.optimizer(other)  # each optimizer counts its own steps
    assert tags[-1] == (0x2000, categories.PARAMETER)


def test_a_backward_pass_that_fails_still_tells_its_gradients(monkeypatch):
    import types

    import gpumemshim
    from gpumemshim import _autoattach

    ranges = []
    api = types.SimpleNamespace(range_push=lambda n: ranges.append(("push", n)),
                                range_pop=lambda n: ranges.append(("pop", n)))
    monkeypatch.setattr(gpumemshim, "_lookup", lambda: api)
    autograd = types.ModuleType("torch.autograd")

    def backward(*args, **kwargs):
        raise MemoryError("CUDA out of memory")  # as torch.OutOfMemoryError out of backward

    autograd.backward = backward
    autograd.grad = lambda *a, **k: None
    monkeypatch.setitem(sys.modules, "torch.autograd", autograd)
    told = []
    tagger = types.SimpleNamespace(gradients=lambda: told.append(True))
    _autoattach._wrap_backward(gpumemshim, tagger)
    with pytest.raises(MemoryError):
        autograd.backward()
    assert told == [True] and ranges == [("push", b"torch.backward"), ("pop", b"torch.backward")]
    autograd.grad()  # torch.autograd.grad leaves .grad alone: nothing to tell
    assert told == [True]


def test_a_new_tensor_where_a_dead_one_was_is_told_again(tagger, tags):
    # A gradient freed (set_to_none) and a new one made at the same address whose Python object
    # takes the dead one's id: only the weak reference tells them apart.
    old = FakeTensor(0x2000)
    tagger.tensor(old, categories.GRADIENT)
    dead_id = id(old)
    del old
    kept = []
    for _ in range(10000):
        new = FakeTensor(0x2000)
        if id(new) == dead_id:
            break
        kept.append(new)
    else:
        pytest.skip("the interpreter gave no object the dead one's id")
    tagger.tensor(new, categories.GRADIENT)
    assert tags == [(0x2000, categories.GRADIENT)] * 2


def test_a_paused_tagger_tells_nothing(tagger, tags):
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    opt = FakeOptimizer([p])
    tagger.paused = True
    tagger.new_optimizer(opt)
    tagger.optimizer(opt)
    tagger.gradients()
    tagger.tensor(FakeTensor(0x3000), categories.ACTIVATION)
    assert tags == []
    tagger.paused = False
    tagger.gradients()  # the optimizer made while paused is known all the same
    assert tags == [(0x2000, categories.GRADIENT)]


def test_pausing_the_shim_pauses_the_tagging(monkeypatch, tagger, tags):
    import types

    import gpumemshim

    states = []
    monkeypatch.setattr(gpumemshim, "_lookup", lambda: types.SimpleNamespace(pause=states.append))
    monkeypatch.setattr(categories, "_installed", tagger)
    p = FakeTensor(0x1000)
    p.grad = FakeTensor(0x2000)
    opt = FakeOptimizer([p])
    tagger.new_optimizer(opt)
    gpumemshim.pause()
    tagger.gradients()  # a backward pass while paused: its gradients are not in the trace
    assert tags == [(0x1000, categories.PARAMETER)]
    gpumemshim.resume()
    tagger.gradients()
    assert tags[-1] == (0x2000, categories.GRADIENT) and states == [1, 0]
