"""Step markers: NVTX ranges through injection, the Python package, and the report."""
import json
import os
import pathlib
import sys

import pytest

from conftest import FAKECUDA, NVTX_APP, SHIM, SOURCES

PYTHON_PKG = pathlib.Path(__file__).parents[2] / "python"
needs_nvtx = pytest.mark.skipif(not NVTX_APP.exists(), reason="built without the NVTX v3 headers")


@pytest.fixture(autouse=True)
def no_inherited_nvtx_tool(monkeypatch):
    # A profiler (nsys) running the test suite would own the variable; each test sets its own.
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)


def markers(report):
    return [(m["kind"], m["name"]) for m in report["markers"]]


def nvtx_expected(iterations):
    one = [("range_push", "forward"), ("range_pop", ""), ("range_push", "backward"),
           ("range_pop", ""), ("mark", "checkpoint")]
    return one * iterations + [("mark", "done")]


@needs_nvtx
def test_nvtx_ranges_and_marks_are_recorded_in_order(run):
    r = run.program([NVTX_APP, 3])
    assert r.returncode == 0, r.stderr
    # The injection keeps NVTX's return values: push gives the depth before, pop the depth after.
    assert "iteration 2 depth 0 popped 0" in r.stdout
    [trace] = run.traces()
    report = run.report(trace)
    assert markers(report) == nvtx_expected(3)
    [process] = report["processes"]
    assert all(m["pid"] == process["pid"] and m["thread"] == process["pid"] for m in report["markers"])
    times = [m["time_s"] for m in report["markers"]]
    assert times == sorted(times)
    assert "markers_truncated" not in report
    s = report["summary"]
    assert (s["markers"], s["steps"], s["ranges"]) == (16, 0, 6)
    assert (s["allocations"], s["frees"]) == (3, 3)  # the ranges do not disturb the hooks
    text = run.cli("report", trace)
    assert "   markers: 16 (steps: 0, ranges: 6)\n" in text.stdout, text.stdout


@needs_nvtx
def test_nvtx_owned_by_another_tool_is_left_alone(run):
    # A library without InitializeInjectionNvtx2: NVTX declines it and turns every call into a
    # no-op; the shim must neither replace the variable nor break the program.
    other = FAKECUDA / "libcudart.so.13"
    bare = run.program([NVTX_APP, 2], shim=False, NVTX_INJECTION64_PATH=other)
    r = run.program([NVTX_APP, 2], NVTX_INJECTION64_PATH=other, GPUMEMSHIM_LOG="info")
    assert r.returncode == bare.returncode == 0, r.stderr
    assert r.stdout == bare.stdout
    notes = [line for line in r.stderr.splitlines() if "NVTX_INJECTION64_PATH" in line]
    assert len(notes) == 1 and str(other) in notes[0], r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["markers"] == [] and report["summary"]["markers"] == 0
    assert report["summary"]["allocations"] == 2


@needs_nvtx
def test_shim_sets_nvtx_injection_path_only_when_unset(run):
    show = [sys.executable, "-c", "import os; print(os.environ.get('NVTX_INJECTION64_PATH', ''))"]
    r = run.program(show)
    assert r.returncode == 0 and pathlib.Path(r.stdout.strip()).resolve() == SHIM.resolve()
    r = run.program(show, NVTX_INJECTION64_PATH="/opt/other/libinjection.so")
    assert r.stdout.strip() == "/opt/other/libinjection.so"
    r = run.program(show, GPUMEMSHIM_DISABLE=1)
    assert r.stdout.strip() == ""


@needs_nvtx
def test_process_that_inherits_the_path_without_the_preload_records_nothing(run):
    # E.g. a child started with a clean LD_PRELOAD: NVTX loads the shim privately; it declines.
    r = run.program([NVTX_APP, 1], shim=False, NVTX_INJECTION64_PATH=SHIM,
                    GPUMEMSHIM_OUTPUT=run.dir / "child.%p.trace")
    assert r.returncode == 0, r.stderr
    assert run.traces() == []


def python_app(run, shim, steps=4, **env):
    runtime = os.environ.get("GPUMEMSHIM_TEST_PRELOAD")  # sanitizer builds: the fake CUDA needs it
    if not shim and runtime:
        env["LD_PRELOAD"] = runtime
    r = run.program([sys.executable, SOURCES / "markers_app.py", FAKECUDA / "libcudart.so.13", steps],
                    shim=shim, PYTHONPATH=PYTHON_PKG, **env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_python_steps_marks_and_regions(run):
    out = python_app(run, shim=True, steps=4)
    assert out["active"] is True
    [trace] = run.traces()
    report = run.report(trace)
    # Only the markers: a ctypes-loaded runtime's calls are a separate concern.
    assert markers(report) == [
        ("mark", "start"),
        ("step", "step 0"), ("step", ""), ("step", "step 2"), ("step", ""),
        ("range_push", "expect_no_leak:expect_no_leak"), ("range_pop", "expect_no_leak:expect_no_leak"),
        ("range_push", "expect_no_leak:eval"), ("range_pop", "expect_no_leak:eval"),
        ("range_push", "expect_no_leak:decorated"), ("range_pop", "expect_no_leak:decorated"),
    ]
    s = report["summary"]
    assert (s["markers"], s["steps"], s["ranges"]) == (11, 4, 3)


def test_python_package_without_the_shim_is_a_no_op(run):
    out = python_app(run, shim=False, steps=3)
    assert out["active"] is False
    assert run.traces() == []
    # Import stays cheap: nothing heavy comes with it.
    assert not any(m.split(".")[0] in ("torch", "numpy") for m in out["imported"]), out["imported"]


def test_python_package_with_recording_disabled(run):
    out = python_app(run, shim=True, steps=2, GPUMEMSHIM_DISABLE=1)
    assert out["active"] is False
    assert run.traces() == []


def test_report_markers_are_capped(run, tmp_path):
    # More markers than the report lists: the earliest are kept and the cap is flagged.
    script = tmp_path / "many.py"
    script.write_text("import gpumemshim\nfor i in range(10050):\n    gpumemshim.mark(str(i))\n")
    r = run.program([sys.executable, script], PYTHONPATH=PYTHON_PKG)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["markers"] == 10050
    assert len(report["markers"]) == 10000 and report["markers_truncated"] is True
    assert [m["name"] for m in report["markers"][:3]] == ["0", "1", "2"]
    assert report["markers"][-1]["name"] == "9999"


def test_long_marker_names_are_cut_not_dropped(run, tmp_path):
    # A record must fit the thread's scratch: names are cut to 1024 bytes (a dropped range push
    # would leave its pop unmatched), through the marker API and NVTX alike.
    script = tmp_path / "long.py"
    script.write_text("import gpumemshim\ngpumemshim.mark('m' * 3000)\ngpumemshim.mark('short')\n")
    r = run.program([sys.executable, script], PYTHONPATH=PYTHON_PKG)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    assert markers(run.report(trace)) == [("mark", "m" * 1024), ("mark", "short")]


@needs_nvtx
def test_long_nvtx_names_are_cut_not_dropped(run):
    r = run.program([NVTX_APP, 1, "long"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    assert markers(run.report(trace)) == nvtx_expected(1)[:-1] + [("mark", "n" * 1024), ("mark", "done")]


PAUSE_APP = """
import ctypes, sys
import gpumemshim
cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
kept = []
def alloc(size):
    p = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    kept.append(p)
    return rc
print(alloc(1 << 20), end=" ")
gpumemshim.pause()
print(alloc(2 << 20), end=" ")  # runs, is not recorded
gpumemshim.resume()
print(alloc(4 << 20))
"""


def test_pause_and_resume(run):
    r = run.program([sys.executable, "-c", PAUSE_APP, FAKECUDA / "libcudart.so.13"], shim=True,
                    PYTHONPATH=PYTHON_PKG)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0", "0"]  # every call returned what the runtime said
    [trace] = run.traces()
    report = run.report(trace)
    assert sorted(l["bytes"] for l in report["leaks"]) == [1 << 20, 4 << 20]
    assert report["summary"]["allocations"] == 2


def step_markers(report):
    return [m["name"] for m in report["markers"] if m["kind"] == "step"]


def nvtx_leak_line():
    text = (SOURCES / "nvtx_app.cpp").read_text().splitlines()
    return next(i for i, l in enumerate(text, 1) if l.rstrip().endswith("// site: nvtx_step_leak"))


@needs_nvtx
def test_nvtx_ranges_named_like_steps_are_step_boundaries(run):
    r = run.program([NVTX_APP, 12, "steps"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert step_markers(report) == [f"Step {i}" for i in range(12)]
    # Growth per step needs no gpumemshim call in the program: 4096 bytes kept per NVTX step.
    [g] = report["growth"]
    assert g["basis"] == "steps" and abs(g["bytes_per_step"] - 4096) <= 16
    assert g["stack"][0]["file"].endswith("nvtx_app.cpp") and g["stack"][0]["line"] == nvtx_leak_line()


@needs_nvtx
def test_the_programs_own_steps_replace_nvtx_steps(run):
    r = run.program([NVTX_APP, 10, "steps+api"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    # NVTX steps 0..2 (the program's first gpumemshim_step comes after step 2's range), then only
    # the program's own steps: never both for one iteration.
    assert step_markers(run.report(trace)) == ["Step 0", "Step 1", "Step 2"] + [""] * 8
