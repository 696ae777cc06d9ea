"""Zero code change for JAX: under the shim, importing jax writes JAX's allocator settings into the
trace, and the report says which allocator it saw, what that lets the trace show and, for a pool
that hides its arrays, how to see them. CI has no JAX: a stand-in package named jax plays it."""
import sys

from conftest import FAKECUDA

SCRIPT = """
import ctypes, sys
if sys.argv[2:] != ["nojax"]:
    import jax  # the stand-in
cudart = ctypes.CDLL(sys.argv[1])
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
assert cudart.cudaFree(p) == 0
print(sys.modules["jax"].__version__ if "jax" in sys.modules else "no jax")
"""


def run_jax(run, *args, **env):
    fake = run.dir / "fake_jax" / "jax"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text('__version__ = "0.0.fake"\n')
    script = run.dir / "jax_loop.py"
    script.write_text(SCRIPT)
    r = run.program([sys.executable, script, FAKECUDA / "libcudart.so.13", *args],
                    PYTHONPATH=run.dir / "fake_jax", **env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("no jax" if args else "0.0.fake")
    [trace] = run.traces()
    return run.report(trace)


def jax_mode(report):
    [mode] = [m for m in report["processes"][0]["frameworks"] if m["framework"] == "JAX"]
    return mode


def advice_ids(report):
    return [a["id"] for a in report["recommendations"]]


def test_default_preallocation_is_said_with_what_it_hides_and_how_to_see_buffers(run):
    report = run_jax(run)
    mode = jax_mode(report)
    assert mode["seen_from"] == "environment"
    assert mode["mode"].startswith("preallocated pool (JAX's default: 0.75 of the device"), mode
    assert "arrays inside the pool" in mode["cannot_show"]
    assert "jax-platform-allocator" in advice_ids(report)
    text = run.cli("report", run.traces()[0])
    assert "JAX allocator: preallocated pool" in text.stdout, text.stdout


def test_the_platform_allocator_is_said_and_needs_no_advice(run):
    report = run_jax(run, XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_PYTHON_CLIENT_ALLOCATOR="platform")
    mode = jax_mode(report)
    assert mode["mode"].startswith("platform allocator"), mode
    assert mode["cannot_show"] is None
    assert "jax-platform-allocator" not in advice_ids(report)


def test_a_pool_grown_on_demand_still_hides_its_arrays(run):
    report = run_jax(run, XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_PYTHON_CLIENT_MEM_FRACTION=".5")
    mode = jax_mode(report)
    assert mode["mode"].startswith("pool grown on demand"), mode
    assert "jax-platform-allocator" in advice_ids(report)


def test_no_jax_no_mode(run):
    report = run_jax(run, "nojax")
    assert report["processes"][0]["frameworks"] == []
    assert "jax-platform-allocator" not in advice_ids(report)
