"""Growth without step markers is measured in windows of each thread's allocations, so a program
gets the same findings on an idle and on a loaded machine: sixteen threads that each end holding
one 4 KiB buffer are a leak and never growth, run after run with every core busy; the same threads
keeping one more buffer as they go are growth on every run, in a unit the report says."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, site_line

APP = BUILD / "tests" / "integration" / "threads_growth_app"
SRC = "threads_growth_app.cpp"
THREADS = 16
# Sanitizer builds run the program many times slower: fewer pairs, the same ten runs.
SANITIZED = bool(os.environ.get("GPUMEMSHIM_TEST_PRELOAD"))
PAIRS = 1000 if SANITIZED else 10000


@pytest.fixture
def busy_cores():
    """One busy loop per core plus one, for as long as the test runs."""
    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range((os.cpu_count() or 1) + 1)]
    yield len(loads)
    for p in loads:
        p.kill()
    for p in loads:
        p.wait()


def top_line(entry):
    frame = entry["stack"][0] if entry["stack"] else {}
    return f"{os.path.basename(frame.get('file', ''))}:{frame.get('line', 0)}"


def check_verdict(run, trace):
    """`check`'s exit code and what it prints, without what differs between any two processes: the
    pid, the trace's path, and the addresses of unsymbolized frames (where libraries were loaded)."""
    r = run.cli("check", trace)
    out = re.sub(r"pid \d+", "pid N", r.stdout + r.stderr).replace(str(trace), "TRACE")
    out = re.sub(r"0x[0-9a-f]{8,} \(", "PC (", out)
    return r.returncode, out


def record_and_judge(run, n, *args):
    """Records one run of the program in a folder of its own, and what a user would compare."""
    folder = run.dir / f"run{n}"
    folder.mkdir()
    r = run.program([APP, *map(str, args)], timeout=300, GPUMEMSHIM_OUTPUT=str(folder / "app.%p.trace"))
    assert r.returncode == 0, r.stderr
    [trace] = sorted(folder.glob("*.trace*"))
    report = run.report(trace)
    growth = [(top_line(g), g["basis"], g["unit"], g["bytes_per_step"]) for g in report["growth"]]
    leaks = [(top_line(l), l["kind"], l["bytes"], l["count"]) for l in report["leaks"]]
    advice = sorted((a["id"], a["finding"]) for a in report["recommendations"])
    return report, growth, leaks, advice, check_verdict(run, trace)


def test_a_leak_at_each_threads_end_is_the_same_leak_and_no_growth_on_ten_loaded_runs(run, busy_cores):
    last = f"{SRC}:{site_line('last_buffer', SRC)}"
    runs = [record_and_judge(run, n, THREADS, PAIRS)[1:] for n in range(10)]
    growth, leaks, advice, verdict = runs[0]
    assert growth == []
    assert leaks == [(last, "leak", THREADS * 4096, THREADS)]
    assert not [a for a in advice if a[0] == "del-references"]
    assert verdict[0] == 1 and "leak" in verdict[1]
    for n, other in enumerate(runs[1:], start=1):
        assert other == runs[0], f"run {n} differs from run 0"


def test_threads_that_keep_more_buffers_grow_on_every_loaded_run_in_windows_of_allocations(run, busy_cores):
    keep_every = PAIRS // 100  # a hundred more buffers a thread, a few in every window
    kept = f"{SRC}:{site_line('kept_buffer', SRC)}"
    for n in range(3):
        report, growth, _, advice, _ = record_and_judge(run, n, THREADS, PAIRS, keep_every)
        assert [g[0] for g in growth] == [kept], growth
        [g] = [g for g in report["growth"] if top_line(g) == kept]
        # Each thread makes PAIRS + PAIRS / keep_every + 1 allocations: windows of a power of two
        # of them, 33 to 64 windows in all.
        per_thread = PAIRS + PAIRS // keep_every + 1
        window = g["window_allocations"]
        assert g["basis"] == "allocations" and window & (window - 1) == 0
        assert 32 < -(-per_thread // window) <= 64
        assert g["unit"] == f"window of {window} allocations per thread"
        # A thread keeps 4096 bytes every keep_every + 1 of its allocations; all threads together:
        expected = THREADS * 4096 * window / (keep_every + 1)
        assert abs(g["bytes_per_step"] - expected) <= 0.25 * expected, (g["bytes_per_step"], expected)
        assert ("del-references", "growth:" + g["id"]) in advice
        text = run.cli("report", sorted((run.dir / f"run{n}").glob("*.trace*"))[0]).stdout
        assert f"per window of {window} allocations per thread over " in text
