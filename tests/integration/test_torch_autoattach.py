"""Zero code change for PyTorch: under the shim a training script with no
gpumemshim import gets the torch bridge attached at CUDA initialisation, a step marker after every
optimizer step, and its backward-pass allocations attributed to the backward() line. CI has no
torch: a stand-in torch package (apps/fake_torch) and bridge (fake_torch_bridge) play them."""
import json
import os
import subprocess
import sys

from conftest import BUILD, CLI, FAKECUDA, SOURCES, base_env, cli_env, shim_preload

FAKE_TORCH = SOURCES / "fake_torch"
BRIDGE = BUILD / "tests" / "integration" / "libfake_torch_bridge.so"
SCRIPT = SOURCES / "torch_train.py"
CUDART = FAKECUDA / "libcudart.so.13"


def script_line(name):
    """The line of torch_train.py marked `# site: NAME`."""
    for number, text in enumerate(SCRIPT.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# site: {name}"):
            return number
    raise AssertionError(f"no site {name!r} in {SCRIPT}")


def train(run, *args, steps=3, pythonpath=None, via_record=False, script=SCRIPT, **env):
    settings = dict(PYTHONPATH=pythonpath or FAKE_TORCH, GPUMEMSHIM_TORCH_BRIDGE=BRIDGE,
                    FAKE_TORCH_BRIDGE=BRIDGE, FAKECUDART=CUDART)
    settings.update(env)
    e = base_env(**settings)
    command = [sys.executable, str(script), str(steps)]
    if via_record:
        ce = cli_env()
        ce.update({k: v for k, v in e.items() if k not in ("LD_PRELOAD",)})
        command = [str(CLI), "record", "-o", str(run.dir / "app.%p.trace"), "--"] + command
        return subprocess.run(command, env=ce, capture_output=True, text=True, timeout=120,
                              cwd=run.dir)
    e["LD_PRELOAD"] = shim_preload()
    e.setdefault("GPUMEMSHIM_OUTPUT", str(run.dir / "app.%p.trace"))
    return subprocess.run(command, env=e, capture_output=True, text=True, timeout=120, cwd=run.dir)


def markers(report, kind, name):
    return [m for m in report["markers"] if m["kind"] == kind and m["name"] == name]


def script_frames(stack):
    return [f for f in stack if f["python"] and f["file"].endswith("torch_train.py")]


def check_attached(run, r, steps=3):
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"], r.stdout  # sitecustomize ran, gpumemshim loaded
    [trace] = run.traces()
    report = run.report(trace)
    torch = report["summary"]["torch"]
    assert torch["segment_allocs"] == 1 and torch["allocs"] == 1 + steps, torch  # + backward blocks
    assert len(markers(report, "step", "optimizer.step")) == steps
    assert len(markers(report, "range_push", "torch.backward")) == steps
    return report


def test_bridge_attaches_with_no_change_to_the_script(run):
    report = check_attached(run, train(run))
    # The per-step leak is pinned to the script's line, not to gpumemshim's or torch's frames.
    [leak] = [l for l in report["leaks"] if l["bytes"] == 3 * 1024]
    assert leak["count"] == 3
    assert leak["stack"][0]["file"].endswith("torch_train.py"), leak["stack"][:3]
    assert leak["stack"][0]["line"] == script_line("step_leak")
    # A tensor event made under Python carries the Python stack alone (PyTorch's native frames
    # between the script and its allocator are not walked): the fake bridge's block, made while
    # torch initialised CUDA, is pinned to the script's line that did it.
    [block] = [l for l in report["leaks"] if l["api"] == "torch.alloc" and l["bytes"] == 512]
    assert block["bytes"] == 512 and all(f["python"] for f in block["stack"]), block["stack"]
    assert script_frames(block["stack"])[0]["line"] == script_line("cuda_init"), block["stack"]


def test_gpumemshim_record_attaches_too(run):
    check_attached(run, train(run, via_record=True))


def test_backward_allocations_carry_the_backward_call_site(run):
    report = check_attached(run, train(run))
    # fake_backward_alloc allocates on a native thread (no Python frames), like autograd's
    # device threads, while the script waits in torch.autograd.backward().
    [leak] = [l for l in report["leaks"] if l["bytes"] == 3 * 4096]
    assert leak["count"] == 3
    assert leak["stack"][0]["function"] == "autograd_thread_alloc", leak["stack"][:3]
    frames = script_frames(leak["stack"])
    assert frames and frames[0]["line"] == script_line("backward_call"), leak["stack"]
    # The wrapper that records the range is not shown as the site.
    assert not any("_autoattach" in f["file"] for f in leak["stack"])
    # A tensor block the bridge reported with its grad_fn: named by it (no native walk), then the
    # backward() line.
    blocks = [l for l in report["leaks"] if l["api"] == "torch.alloc" and l["bytes"] % 8192 == 0]
    assert sum(b["bytes"] for b in blocks) == 3 * 8192, report["leaks"]
    for block in blocks:
        assert block["stack"][0] == {**block["stack"][0], "function": "MmBackward0", "module": "grad_fn"}
        frames = script_frames(block["stack"])
        assert frames and frames[0]["line"] == script_line("backward_call"), block["stack"]


def test_bridge_for_another_torch_is_not_loaded(run):
    r = train(run, FAKE_TORCH_VERSION="9.9.9")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("gpumemshim:")]
    assert len(lines) == 1 and "built for torch 0.0.0+fake, this is torch 9.9.9" in lines[0], r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["torch"]["allocs"] == 0
    assert not markers(report, "step", "optimizer.step")
    assert report["summary"]["leaked_bytes"] == 3 * 1024 + 3 * 4096  # runtime-level events stay


def test_no_bridge_one_info_line_runtime_events_only(run, tmp_path):
    r = train(run, GPUMEMSHIM_TORCH_BRIDGE=tmp_path / "missing" / "libgpumemshim_torch.so")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("gpumemshim:")]
    assert len(lines) == 1 and "no torch bridge" in lines[0], r.stderr
    [trace] = run.traces()
    assert run.report(trace)["summary"]["allocations"] == 6


def test_declining_bridge_says_why(run):
    r = train(run, FAKE_BRIDGE_DECLINE=1)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("gpumemshim:")]
    assert len(lines) == 1 and "not attached" in lines[0] and "native" in lines[0], r.stderr


def test_users_own_sitecustomize_still_runs(run, tmp_path):
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import sys\nsys.stdout.write('user-site ')\n")
    r = train(run, pythonpath=f"{FAKE_TORCH}{os.pathsep}{user}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("user-site "), r.stdout
    [trace] = run.traces()
    assert run.report(trace)["summary"]["torch"]["allocs"] == 1 + 3  # attach + backward blocks


def test_disabled_shim_leaves_python_alone(run):
    r = train(run, GPUMEMSHIM_DISABLE=1)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"], r.stdout


def test_opt_out_of_the_python_boot(run):
    r = train(run, GPUMEMSHIM_PYTHON_BOOT=0)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"], r.stdout
    [trace] = run.traces()
    assert run.report(trace)["summary"]["torch"]["allocs"] == 0


def test_scripts_own_steps_replace_the_optimizer_steps(run):
    r = train(run, TRAIN_USER_STEPS=1)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    # The first optimizer step is marked before the script's first own step; after that only the
    # script's steps count, so a step is never counted twice.
    names = [m["name"] for m in report["markers"] if m["kind"] == "step"]
    assert names == ["optimizer.step", "", "", ""], names


def test_torch_bridge_opt_out(run):
    r = train(run, GPUMEMSHIM_TORCH=0)
    assert r.returncode == 0, r.stderr
    assert not [l for l in r.stderr.splitlines() if l.startswith("gpumemshim:")], r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["torch"]["allocs"] == 0
    assert report["summary"]["allocations"] == 6  # runtime-level events stay


def test_peak_during_the_optimizer_step_advises_set_to_none(run):
    r = train(run, FAKE_OPTIMIZER_BYTES=64 << 20)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    [advice] = [a for a in report["recommendations"] if a["id"] == "set-to-none"]
    assert "after backward() returned" in advice["evidence"] and "peak (64.0" in advice["evidence"]
    # Without the optimizer's temporaries the tensor peak is elsewhere: no such advice.
    run2 = type(run)(run.dir / "plain")
    run2.dir.mkdir()
    assert train(run2).returncode == 0
    [plain] = run2.traces()
    assert not [a for a in run2.report(plain)["recommendations"] if a["id"] == "set-to-none"]


def test_memory_fraction_set_before_cuda_init_is_recorded(run):
    report = check_attached(run, train(run, TRAIN_MEMORY_FRACTION="0.25"))
    [process] = report["processes"]
    assert process["attributes"].get("torch.memory_fraction.0") == "0.25", process["attributes"]


def test_memory_fraction_set_by_the_allocators_settings_is_read_at_attach(run):
    report = check_attached(run, train(run, FAKE_TORCH_MEMORY_FRACTION="0.5"))
    [process] = report["processes"]
    assert process["attributes"].get("torch.memory_fraction.0") == "0.5", process["attributes"]


def test_no_memory_fraction_no_attribute(run):
    report = check_attached(run, train(run))
    [process] = report["processes"]
    assert not [k for k in process["attributes"] if k.startswith("torch.memory_fraction")]


def test_library_memory_made_in_backward_is_named_by_library_and_grad_fn(run):
    # The first matmul of autograd's device thread makes its cuBLAS handle (cuMemAlloc inside
    # cublasCreate_v2) and PyTorch's cuBLASLt workspace (a 32 MiB block by
    # at::cuda::getCUDABlasLtWorkspace while MmBackward0 runs): both the libraries' for the process.
    r = train(run, FAKE_LIBRARY_MEMORY=1)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    library = {l["owner"]: l for l in report["leaks"] if l["kind"] == "library"}
    assert sorted(library) == ["cublas", "torch"], report["leaks"]
    workspace, handle = library["torch"], library["cublas"]
    assert workspace["api"] == "torch.alloc" and workspace["bytes"] == 32 << 20
    assert workspace["owner_call"] == "at::cuda::getCUDABlasLtWorkspace"
    assert workspace["reason"].startswith("PyTorch's cuBLASLt workspace, made by at::cuda::getCUDABlasLtWorkspace")
    # The grad_fn label does not hide the library's frame above it; the backward() line follows.
    assert workspace["stack"][0]["function"].startswith("at::cuda::getCUDABlasLtWorkspace"), workspace["stack"]
    assert workspace["stack"][1] == {**workspace["stack"][1], "function": "MmBackward0", "module": "grad_fn"}
    assert script_frames(workspace["stack"])[0]["line"] == script_line("backward_call")
    assert handle["api"] == "cuMemAlloc_v2" and handle["stack"][0]["function"] == "cublasCreate_v2"
    assert script_frames(handle["stack"])[0]["line"] == script_line("backward_call")
    assert report["summary"]["library_bytes"] == (32 << 20) + (4 << 20)
    # Nothing of it counts as leaked: the same run without it leaks the same.
    plain = type(run)(run.dir / "plain")
    plain.dir.mkdir()
    assert train(plain).returncode == 0
    [plain_trace] = plain.traces()
    assert report["summary"]["leaked_bytes"] == plain.report(plain_trace)["summary"]["leaked_bytes"]
