"""Every allocation path is seen exactly once — driver API through cuGetProcAddress (the
static cudart's way), VMM through cudaGetDriverEntryPointByVersion (expandable segments), -lcuda
symbol binding, runtime calls that reach the driver, exec and fork."""
import sys

from conftest import FAKECUDA, SOURCES, STATIC_LIKE, VMM, frame_at, site_line

MIB = 1 << 20


def test_static_cudart_style_resolution_is_recorded(run):
    bare = run.program([STATIC_LIKE], shim=False)
    r = run.program([STATIC_LIKE])
    assert r.returncode == bare.returncode == 0, r.stderr
    assert r.stdout == bare.stdout
    assert r.stdout.splitlines() == ["old cuMemAlloc: rc=500 fn=null",
                                     "cuDeviceGetName is the driver's own: yes", "done"]
    [trace] = run.traces()
    report = run.report(trace)
    summary = report["summary"]
    assert summary["allocations"] == 3 and summary["frees"] == 2
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["count"], leak["api"]) == (5 * MIB, 1, "cuMemAlloc_v2")
    frame_at(leak, "static_cudart_like.cpp", site_line("static leak", "static_cudart_like.cpp"))
    stats = run.cli("stats", trace).stdout
    assert "cuMemAllocAsync" in stats and "cuMemFreeAsync" in stats


def test_vmm_physical_leak_counted_once_mappings_shown_apart(run):
    r = run.program([VMM, "vmm"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["count"], leak["api"]) == (2 * MIB, 1, "cuMemCreate")
    assert leak["memory"] == "vmm_physical"
    frame_at(leak, "vmm_scenarios.cpp", site_line("cuMemCreate", "vmm_scenarios.cpp"))
    # 3 physical chunks of 2 MiB were live at once; mappings and reservations are not memory.
    assert report["summary"]["peak_bytes"] == 6 * MIB
    assert report["summary"]["leaked_bytes"] == 2 * MIB
    kinds = {entry["memory"] for entry in report["address_space"]}
    assert kinds == {"vmm_mapping", "va_reservation"}
    by_kind = report["summary"]["by_kind"]
    assert by_kind["vmm_mapping"]["allocations"] == 3 and by_kind["vmm_mapping"]["frees"] == 2
    assert by_kind["va_reservation"]["allocations"] == 2
    assert by_kind["va_reservation"]["frees"] == 1


def test_vmm_released_while_mapped_counts_until_unmapped(run):
    r = run.program([VMM, "map-release"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    summary = report["summary"]
    # Each handle was released right after its mapping; all three were mapped at once.
    assert summary["peak_bytes"] == 6 * MIB
    assert summary["leaked_bytes"] == 0 and report["leaks"] == []
    assert report["address_space"] == []
    by_kind = summary["by_kind"]
    assert by_kind["vmm_physical"]["frees"] == 3 and by_kind["vmm_mapping"]["frees"] == 3
    assert run.cli("check", "--max-leak-bytes", "0", trace).returncode == 0


def test_vmm_released_but_still_mapped_leaks_at_the_mapping_line(run):
    r = run.program([VMM, "map-release-leak"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["peak_bytes"] == 6 * MIB
    assert report["summary"]["leaked_bytes"] == 2 * MIB
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["count"], leak["api"]) == (2 * MIB, 1, "cuMemMap")
    assert leak["memory"] == "vmm_physical"
    frame_at(leak, "vmm_scenarios.cpp", site_line("cuMemMap", "vmm_scenarios.cpp"))
    frame_at({"stack": leak["created_stack"]}, "vmm_scenarios.cpp",
             site_line("cuMemCreate", "vmm_scenarios.cpp"))
    text = run.cli("report", trace).stdout
    assert "created by cuMemCreate at:" in text
    check = run.cli("check", "--max-leak-bytes", "0", trace)
    assert check.returncode == 1, check.stdout + check.stderr


def test_runtime_call_reaching_the_driver_is_one_event(run):
    r = run.program([VMM, "runtime-once"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["allocations"] == 6 and report["summary"]["frees"] == 6
    stats = run.cli("stats", trace).stdout
    assert "cuMemAlloc_v2" not in stats and "cuMemAllocHost_v2" not in stats
    assert "cudaMalloc" in stats and "cudaMallocHost" in stats


def test_driver_called_by_symbol_binding(run):
    r = run.program([VMM, "driver-direct"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    [leak] = run.report(trace)["leaks"]
    assert (leak["bytes"], leak["api"]) == (9000, "cuMemAlloc_v2")
    frame_at(leak, "vmm_scenarios.cpp", site_line("driver direct leak", "vmm_scenarios.cpp"))


def test_exec_keeps_tracing_in_a_trace_of_its_own(run):
    r = run.program([VMM, "exec"])
    assert r.returncode == 0, r.stderr
    traces = run.traces()
    assert len(traces) == 2
    report = run.report(*traces)
    assert len({p["pid"] for p in report["processes"]}) == 1
    sites = {leak["bytes"]: leak for leak in report["leaks"]}
    assert set(sites) == {MIB, 9000}
    frame_at(sites[MIB], "vmm_scenarios.cpp", site_line("before exec", "vmm_scenarios.cpp"))


def test_runtime_loaded_privately_by_ctypes_is_recorded(run):
    script = SOURCES / "ctypes_local.py"
    r = run.program([sys.executable, script, FAKECUDA / "libcudart.so.13"])
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["allocations"] == 5 and report["summary"]["frees"] == 4
    [leak] = report["leaks"]
    assert (leak["bytes"], leak["count"], leak["api"]) == (3 * MIB, 1, "cudaMalloc")
