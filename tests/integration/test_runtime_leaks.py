"""A leaky CUDA program run under the shim on the fake runtime is reported exactly."""
import signal
import subprocess
import time

from conftest import SCENARIOS, base_env, frame_at, shim_preload, site_line
from trace_records import ALLOC, records

MIB = 1 << 20


def test_planted_leak_reported_with_bytes_count_and_line(run):
    r = run.program([SCENARIOS, "leak"])
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert r.stderr == ""
    traces = run.traces()
    assert len(traces) == 1
    report = run.report(*traces)
    assert report["schema"] == "gpumemshim-report/1"
    summary = report["summary"]
    assert summary["allocations"] == 13 and summary["frees"] == 10
    assert summary["failed_allocations"] == 0
    assert summary["leaked_bytes"] == 3 * MIB
    assert summary["peak_bytes"] == 3 * MIB  # the 64 KiB buffers are freed before the leak
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["count"], leak["api"]) == (3 * MIB, 3, "cudaMalloc")
    top = frame_at(leak, "cuda_scenarios.cpp", site_line("planted leak"))
    assert "leak_three_buffers" in top["function"]
    text = run.cli("report", *traces)
    assert text.returncode == 0
    assert f"cuda_scenarios.cpp:{site_line('planted leak')}" in text.stdout
    assert "3145728" in text.stdout
    check = run.cli("check", *traces)
    assert check.returncode == 1, check.stdout + check.stderr


def test_clean_twin_reports_nothing(run):
    r = run.program([SCENARIOS, "clean"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["leaks"] == []
    assert report["summary"]["leaked_bytes"] == 0
    assert report["summary"]["allocations"] == report["summary"]["frees"] == 10
    assert run.cli("check", trace).returncode == 0


def test_sixteen_threads_ten_thousand_pairs_each_counted_exactly(run):
    r = run.program([SCENARIOS, "threads", 16, 10000], timeout=300)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    summary = run.report(trace)["summary"]
    assert summary["allocations"] == 160000
    assert summary["frees"] == 160000
    assert summary["unmatched_frees"] == 0
    assert summary["leaked_bytes"] == 0


def test_injected_oom_passes_through_unchanged_and_is_counted(run):
    env = {"FAKECUDA_OOM_AFTER": 16 * MIB}
    bare = run.program([SCENARIOS, "oom"], shim=False, **env)
    shimmed = run.program([SCENARIOS, "oom"], **env)
    assert bare.returncode == shimmed.returncode == 4
    assert bare.stdout == shimmed.stdout
    assert "second=2 " in shimmed.stdout
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["failed_allocations"] == 1
    [failure] = report["failures"]
    assert failure["size"] == 64 * MIB and failure["error"] == 2 and failure["api"] == "cudaMalloc"
    frame_at(failure, "cuda_scenarios.cpp", site_line("oom"))
    assert report["leaks"] == []


def allocs_written(folder):
    """Alloc records in the traces written to `folder` so far (a partial last record is not read)."""
    count = 0
    for path in folder.glob("*.trace*"):
        if path.stat().st_size >= 16:
            count += sum(1 for kind, _ in records(path) if kind == ALLOC)
    return count


def test_sigkilled_process_leaves_readable_trace_with_what_was_alive(run, tmp_path):
    env = base_env(LD_PRELOAD=shim_preload(), GPUMEMSHIM_OUTPUT=tmp_path / "killed.%p.trace")
    proc = subprocess.Popen([str(SCENARIOS), "killed"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        # The shim's periodic flush (every 50 ms) writes the leaks while the process runs: wait for
        # them in the file (a loaded machine may delay the flusher past any fixed sleep).
        deadline = time.monotonic() + 20
        while allocs_written(tmp_path) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    [trace] = run.traces()
    report = run.report(trace)
    [process] = report["processes"]
    assert process["clean_exit"] is False
    assert process["integrity"]["status"] == "incomplete" and process["integrity"]["ended"] is False
    assert report["integrity"]["trusted"] is False
    # Killed, it never exited: its buffers were alive when the trace ended, not leaked at exit.
    [alive] = report["leaks"]
    assert alive["kind"] == "alive" and "alive when the trace ended" in alive["reason"]
    assert (alive["bytes"], alive["count"]) == (3 * MIB, 3)
    frame_at(alive, "cuda_scenarios.cpp", site_line("planted leak"))
    assert report["summary"]["leaked_bytes"] == 0
    assert report["summary"]["alive_at_trace_end_bytes"] == 3 * MIB

    # The CI gate refuses the trace with one line naming it, unless told to judge what it recorded.
    refused = run.cli("check", trace)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"gpumemshim: error: {trace}: incomplete")
    assert refused.stderr.count("\n") == 1
    allowed = run.cli("check", trace, "--allow-incomplete", "--max-leak-bytes", "0")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "incomplete" in allowed.stdout and "alive when the trace ended" in allowed.stdout


def test_forked_child_writes_its_own_trace(run):
    r = run.program([SCENARIOS, "fork"])
    assert r.returncode == 0, r.stderr
    traces = run.traces()
    assert len(traces) == 2
    report = run.report(*traces)
    assert len(report["processes"]) == 2
    pids = {p["pid"] for p in report["processes"]}
    assert len(pids) == 2
    by_bytes = {leak["bytes"]: leak for leak in report["leaks"]}
    assert set(by_bytes) == {3 * MIB, 2 * MIB}
    frame_at(by_bytes[2 * MIB], "cuda_scenarios.cpp", site_line("child leak"))
    assert by_bytes[2 * MIB]["pid"] != by_bytes[3 * MIB]["pid"]
    assert report["summary"]["leaked_bytes"] == 5 * MIB


def test_every_runtime_api_is_recorded(run):
    r = run.program([SCENARIOS, "all-apis"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    summary = report["summary"]
    assert summary["allocations"] == 8 and summary["frees"] == 7
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["api"], leak["memory"]) == (6000, "cudaMallocHost", "pinned_host")
    frame_at(leak, "cuda_scenarios.cpp", site_line("pinned leak"))
    stats = run.cli("stats", trace)
    assert stats.returncode == 0
    for api in ("cudaMalloc", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocFromPoolAsync",
                "cudaMallocManaged", "cudaMallocPitch", "cudaMalloc3D", "cudaHostAlloc",
                "cudaFreeHost", "cudaMallocHost", "cudaMemGetInfo"):
        assert api in stats.stdout, api


def test_record_command_runs_program_and_passes_exit_code(run):
    r = run.cli("record", "-o", run.dir / "rec.%p.trace", "--", SCENARIOS, "leak")
    assert r.returncode == 0, r.stderr
    assert "done" in r.stdout
    [trace] = run.traces()
    assert run.report(trace)["summary"]["leaked_bytes"] == 3 * MIB
    assert run.cli("record", "--", SCENARIOS, "no-such-scenario").returncode == 2
    missing = run.cli("record", "--", run.dir / "does-not-exist")
    assert missing.returncode == 127
    assert missing.stderr.startswith("gpumemshim:")
