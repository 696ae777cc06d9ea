"""Every byte accounted: the shim samples NVML (here the fake libnvidia-ml.so.1 of
tests/fakecuda/src/nvml, whose figure for a process is the fake driver's bytes plus a context
overhead) and the report holds that view against what the trace explains. Without NVML nothing is
recorded and nothing is claimed. The sampler must never hang or slow an exit, an _exit or a fork."""
import subprocess
import time

import pytest

from conftest import BUILD, FAKECUDA
from trace_records import late_records, records

APP = BUILD / "tests" / "integration" / "accounting_app"
NVML_DIR = FAKECUDA / "nvml"
WITH_NVML = f"{FAKECUDA}:{NVML_DIR}"
MIB = 1 << 20
PROCESS_MEMORY = 17
CONTEXT = 123 * MIB  # FAKECUDA_NVML_CONTEXT_BYTES in these tests


def nvml_env(**extra):
    return dict(LD_LIBRARY_PATH=WITH_NVML, FAKECUDA_NVML_CONTEXT_BYTES=CONTEXT, **extra)


def samples(trace):
    return sum(1 for kind, _ in records(trace) if kind == PROCESS_MEMORY)


def run_app(run, args, **env):
    start = time.monotonic()
    r = run.program([APP, *args], timeout=60, **env)
    elapsed = time.monotonic() - start
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == "", r.stderr  # no NVML, or a slow one, is never worth a line on stderr
    return r, elapsed


def points(report, at=None):
    [process] = report["processes"]
    return [p for p in process["accounting"] if at is None or p["at"] == at]


@pytest.mark.parametrize("end", ["exit", "_exit"])
def test_not_explained_is_the_context_the_device_adds(run, end):
    run_app(run, [end, 0], **nvml_env())
    [trace] = run.traces()
    assert samples(trace) >= 2
    rep = run.report(trace)
    [peak] = points(rep, "peak")
    [last] = points(rep, "end")
    assert peak["traced_bytes"] == 256 * MIB
    # The app frees 64 MiB right before it ends: exit's own sample sees it; after _exit the last
    # sample is the flusher's, from before (unless the flusher happened to sample in between).
    if end == "exit":
        assert last["traced_bytes"] == 64 * MIB
    else:
        assert last["traced_bytes"] in (64 * MIB, 128 * MIB)
    for p in (peak, last):
        assert p["source"] == "nvml" and p["device_wide"] is False and p["device"] == 0
        assert p["device_view_bytes"] == p["traced_bytes"] + CONTEXT
        assert p["not_explained_bytes"] == CONTEXT
        assert p["likely_owners"] == ["CUDA context"]
    text = run.cli("report", trace).stdout
    traced = last["traced_bytes"]
    assert (f"device view at the end, device 0 (NVML, this process, " in text
            and f"= {traced // MIB}.00 MiB traced + 123.00 MiB not explained (CUDA context); "
                f"nvidia-smi: {(traced + CONTEXT) >> 20} MiB for this pid" in text), text
    assert late_records(trace)[0] == 0, "the samples keep the flush marks' rule"


def test_devices_are_matched_by_pci_bus_id(run):
    # The fake NVML lists the devices in the reverse of CUDA's order: by index, device 1 would be
    # NVML's device 0, where this process has nothing.
    run_app(run, ["exit", 1], FAKECUDA_DEVICES=2, **nvml_env())
    rep = run.report(*run.traces())
    assert {p["device"] for p in points(rep)} == {1}
    [last] = points(rep, "end")
    assert last["source"] == "nvml" and last["not_explained_bytes"] == CONTEXT


def test_a_pid_nvml_does_not_list_gives_the_whole_device(run):
    # A container: NVML reports the processes with pids of another namespace.
    other = 1024 * MIB
    run_app(run, ["exit", 0], FAKECUDA_NVML_PID=1, FAKECUDA_NVML_OTHER_BYTES=other, **nvml_env())
    [last] = points(run.report(*run.traces()), "end")
    assert last["source"] == "nvml_device" and last["device_wide"] is True
    assert last["not_explained_bytes"] == CONTEXT + other
    assert last["likely_owners"] == ["CUDA context", "other processes"]


@pytest.mark.parametrize("env", [
    dict(),                                                    # no libnvidia-ml.so.1 to find
    dict(LD_LIBRARY_PATH=WITH_NVML, FAKECUDA_NVML=0),          # NVML will not start
    dict(LD_LIBRARY_PATH=WITH_NVML, GPUMEMSHIM_NVML=0),        # turned off
    dict(LD_LIBRARY_PATH=WITH_NVML, FAKECUDA_NVML_MIG=1),      # no per-process figure under MIG
], ids=["absent", "init-fails", "off", "mig"])
def test_without_a_device_view_nothing_is_recorded_or_claimed(run, env):
    run_app(run, ["exit", 0], **env)
    [trace] = run.traces()
    assert samples(trace) == 0
    rep = run.report(trace)
    assert points(rep) == []
    text = run.cli("report", trace).stdout
    assert "not explained" not in text and "device view" not in text, text


def test_nvml_is_started_only_once_the_program_has_device_memory(run):
    mark = run.dir / "nvml-started"
    run_app(run, ["host-only", 0], FAKECUDA_NVML_INIT_MARK=mark, **nvml_env())
    assert not mark.exists()
    run_app(run, ["exit", 0], FAKECUDA_NVML_INIT_MARK=mark, **nvml_env())
    assert mark.read_text().split() != []


def test_a_fork_child_of_a_sampling_parent_leaves_nvml_alone(run):
    mark = run.dir / "nvml-started"
    r, _ = run_app(run, ["fork", 0], FAKECUDA_NVML_INIT_MARK=mark, **nvml_env())
    assert len(mark.read_text().split()) == 1, "started by the parent alone"
    assert "child done" in r.stdout and "parent done" in r.stdout
    traces = run.traces()
    assert len(traces) == 2
    by_samples = sorted(traces, key=samples)
    child, parent = by_samples
    assert samples(child) == 0 and samples(parent) >= 2
    for t in traces:
        rep = run.report(t)
        assert rep["processes"][0]["clean_exit"] and rep["integrity"]["trusted"]


def test_a_child_forked_before_the_parent_used_cuda_samples_on_its_own(run):
    run_app(run, ["fork-first", 0], **nvml_env())
    traces = run.traces()
    assert len(traces) == 2
    for t in traces:
        assert samples(t) >= 1, t
    reports = [run.report(t) for t in traces]
    child = next(r for r in reports if r["summary"]["allocations"] == 1)
    [last] = points(child, "end")
    assert last["traced_bytes"] == 32 * MIB and last["not_explained_bytes"] == CONTEXT


@pytest.mark.parametrize("delay", ["FAKECUDA_NVML_INIT_DELAY_MS", "FAKECUDA_NVML_QUERY_DELAY_MS"])
@pytest.mark.parametrize("end", ["exit", "_exit"])
def test_a_slow_nvml_never_holds_up_the_end(run, delay, end):
    # NVML stuck in its init or in a query on the flusher when the program ends: exit waits a
    # bounded moment for the flusher's call, _exit not at all; the trace is complete either way.
    bare_start = time.monotonic()
    run_app(run, [end, 0, 100], GPUMEMSHIM_NVML=0)
    bare = time.monotonic() - bare_start
    for t in run.traces():
        t.unlink()
    _, elapsed = run_app(run, [end, 0, 100], **nvml_env(**{delay: 5000}))
    assert elapsed < bare + 1.5, (elapsed, bare)
    [trace] = run.traces()
    rep = run.report(trace)
    assert rep["processes"][0]["clean_exit"] and rep["integrity"]["trusted"]


def test_the_pace_of_the_samples(run):
    # Idle: about one sample a second; the app holds still for 2 x 1.2 s.
    run_app(run, ["exit", 0, 1200], **nvml_env())
    [trace] = run.traces()
    assert 2 <= samples(trace) <= 8, samples(trace)


def test_the_samples_go_where_the_threads_records_go(run):
    # A busy program: samples at most once per flush, each in time order with the threads' records.
    threads = BUILD / "tests" / "integration" / "cuda_scenarios"
    start = time.monotonic()
    r = run.program([threads, "threads", 4, 4000, 50], **nvml_env())
    elapsed = time.monotonic() - start
    assert r.returncode == 0 and r.stderr == "", r.stderr
    [trace] = run.traces()
    n = samples(trace)
    assert 1 <= n <= elapsed / 0.05 + 3, (n, elapsed)
    assert late_records(trace)[0] == 0
    subprocess.run([str(BUILD / "bin" / "gpumemshim"), "report", str(trace)], check=True,
                   capture_output=True)


@pytest.mark.parametrize("devices,device", [(1, 0), (2, 0), (2, 1)])
def test_each_allocation_is_tagged_with_the_device_it_was_made_on(run, devices, device):
    # With one device the shim tags without asking the runtime per allocation; with more it asks.
    run_app(run, ["exit", device, 10], FAKECUDA_DEVICES=devices)
    [leak] = run.report(*run.traces())["leaks"]
    assert leak["device"] == device and leak["bytes"] == 64 * MIB
