"""The analyzer's findings on fake-CUDA scenarios, judged through the CLI: leak kinds with their
reasons, growth at the right line with the right bytes/step, fragmentation with an OOM that had
enough free memory in total, advice, and `check`'s exit codes and suppressions."""
import json
import pathlib
import sys

import pytest

from conftest import BUILD, FAKECUDA, site_line

APP = BUILD / "tests" / "integration" / "findings_app"
SRC = "findings_app.cpp"
STEPS = 30


def record(run, *args, **env):
    r = run.program([APP, *args], **env)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    return trace


def at_line(entries, name):
    line = site_line(name, SRC)
    return [e for e in entries if e["stack"] and e["stack"][0]["file"].endswith(SRC)
            and e["stack"][0]["line"] == line]


def test_growth_found_at_the_leaking_line_with_its_bytes_per_step(run):
    trace = record(run, "growth", STEPS)
    report = run.report(trace)
    [growth] = report["growth"]  # the steady work of each step (alloc/free) grows nothing
    assert at_line([growth], "step_leak") == [growth], growth["stack"][:2]
    assert abs(growth["bytes_per_step"] - 4096) <= 16
    assert growth["basis"] == "steps" and growth["confidence"] >= 0.9
    assert growth["warmup_steps"] >= 1 and growth["steps"] + growth["warmup_steps"] == STEPS
    assert growth["last_live_bytes"] - growth["first_live_bytes"] == 4096 * (growth["steps"] - 1)
    # The device total comes from cudaMemGetInfo: the projection is the step where it runs out.
    assert growth["projected_oom_step"] > STEPS
    # The same site in the leak list has the same id, and it is a leak: it accumulates.
    leaks = [l for l in at_line(report["leaks"], "step_leak") if l["kind"] == "leak"]
    assert [l["id"] for l in leaks] == [growth["id"]]
    assert "accumulate step over step" in leaks[0]["reason"]
    advice = [a for a in report["recommendations"] if a["finding"] == "growth:" + growth["id"]]
    assert advice and advice[0]["id"] == "del-references" and "4096 bytes per step" in advice[0]["evidence"]
    # A C++ program gets C++ words, and the line itself as evidence.
    assert "cudaFree" in advice[0]["action"] and "detach" not in advice[0]["action"]
    assert "the line reads `check(cudaMalloc(&p, 4096)" in advice[0]["evidence"]
    text = run.cli("report", trace).stdout
    assert f"GROWTH +4.00 KiB (4096 bytes) per step" in text
    assert f"{SRC}:{site_line('step_leak', SRC)}" in text


def test_steady_twin_has_no_growth_and_passes_check(run):
    trace = record(run, "steady", STEPS)
    report = run.report(trace)
    assert report["growth"] == []
    assert report["summary"]["leaked_bytes"] == 0
    [weights] = at_line(report["leaks"], "weights")
    assert weights["kind"] == "retained"
    assert weights["reason"] == "allocated before the first step and alive at exit"
    assert report["summary"]["retained_bytes"] == weights["bytes"] == 1 << 20
    r = run.cli("check", trace, "--max-growth-bytes-per-step", 0)
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_fails_on_growth_only_when_asked(run):
    trace = record(run, "growth", STEPS)
    # The leak itself fails the default check; allow it to look at growth alone.
    allow = ["--max-leak-bytes", 1 << 30]
    assert run.cli("check", trace, *allow).returncode == 0
    r = run.cli("check", trace, *allow, "--max-growth-bytes-per-step", 4000)
    assert r.returncode == 1
    assert f"{SRC}:{site_line('step_leak', SRC)}" in r.stdout and "growing faster" in r.stderr
    assert run.cli("check", trace, *allow, "--max-growth-bytes-per-step", 5000).returncode == 0
    bad = run.cli("check", trace, "--max-growth-bytes-per-step", "fast")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_last_step_output_is_retained_not_leaked(run):
    trace = record(run, "retained", STEPS)
    report = run.report(trace)
    [last] = at_line(report["leaks"], "last_output")
    assert last["kind"] == "retained" and "not accumulating" in last["reason"]
    assert report["summary"]["leaked_bytes"] == 0
    assert run.cli("check", trace).returncode == 0


def test_expect_no_leak_region_leak(run):
    trace = record(run, "region", 5)
    report = run.report(trace)
    [leak] = at_line(report["leaks"], "region_leak")
    assert leak["kind"] == "leak" and leak["region"] == "eval" and leak["bytes"] == 16384
    assert leak["reason"] == "allocated inside expect_no_leak region 'eval' and alive at its end"
    assert report["summary"]["leaked_bytes"] == 16384
    assert run.cli("check", trace).returncode == 1


def test_without_step_markers_growth_is_per_window_of_allocations(run):
    # 40 allocations, 2 ms apart: 40 windows of one allocation each, whatever the pauses.
    trace = record(run, "timegrowth", 40)
    report = run.report(trace)
    [growth] = at_line(report["growth"], "step_leak")
    assert growth["basis"] == "allocations" and growth["window_allocations"] == 1
    assert growth["unit"] == "window of 1 allocation per thread"
    assert growth["bytes_per_step"] == 4096 and growth["steps"] + growth["warmup_steps"] == 40
    assert growth["projected_oom_step"] > 40
    assert "GROWTH +4.00 KiB (4096 bytes) per window of 1 allocation per thread over" in run.cli("report", trace).stdout
    # Alive at exit without step markers: a leak (LeakSanitizer's meaning).
    [leak] = at_line(report["leaks"], "step_leak")
    assert leak["kind"] == "leak" and leak["reason"] == "alive at exit in a trace without step markers"


def test_fragmentation_oom_with_enough_total_free_gets_expandable_segments(run):
    trace = record(run, "frag")
    report = run.report(trace)
    [dev] = [d for d in report["fragmentation"]["per_device"] if d["torch"]]
    assert dev["reserved_peak_bytes"] == 20 << 20
    assert dev["allocated_at_reserved_peak_bytes"] == 20 << 20
    assert dev["max_reserved_minus_allocated_bytes"] >= 10 << 20
    assert dev["blocks_at"] == "oom"
    assert (dev["inactive_split_blocks"], dev["inactive_split_bytes"]) == (5, 10 << 20)
    assert dev["largest_free_block_bytes"] == 2 << 20
    [oom] = dev["ooms"]
    assert oom["requested_bytes"] == 4 << 20 and oom["device_free_bytes"] == 1 << 20
    assert (oom["reserved_bytes"], oom["allocated_bytes"]) == (20 << 20, 10 << 20)
    assert oom["enough_total_free"] is True and oom["cause"] == "fragmentation"
    assert oom["limit_bytes"] is None and oom["memory_fraction"] is None
    assert at_line([oom], "torch_oom") == [oom]
    ids = {a["id"]: a for a in report["recommendations"]}
    finding = f"fragmentation:{report['processes'][0]['pid']}:0"
    assert ids["expandable-segments"]["finding"] == finding
    assert "expandable_segments:True" in ids["expandable-segments"]["action"]
    assert "largest free block 2.00 MiB" in ids["expandable-segments"]["evidence"]
    assert "max-split-size" in ids
    # The segment is the allocator's cache, never a leak.
    cached = [l for l in report["leaks"] if l["kind"] == "cached"]
    assert cached and cached[0]["reason"] == "segment held by PyTorch's caching allocator"
    text = run.cli("report", trace).stdout
    assert ("10.00 MiB free in the cache would have held the 4.00 MiB asked, but its largest free block "
            "was 2.00 MiB: fragmentation") in text
    assert "ADVICE expandable-segments" in text and "raise-memory-fraction" not in text


def test_runtime_only_trace_has_null_allocator_fields(run):
    trace = record(run, "steady", 10)
    report = run.report(trace)
    for d in report["fragmentation"]["per_device"]:
        assert d["torch"] is False and d["reserved_peak_bytes"] is None and d["ooms"] == []
        assert d["untracked_bytes"] is not None  # a cudaMemGetInfo sample exists
    assert [a for a in report["recommendations"] if a["id"] == "expandable-segments"] == []


@pytest.mark.parametrize("kind", ["growth", "leak", "retained", "fragmentation"])
def test_suppressions_of_every_finding_kind(run, kind):
    mode = {"growth": "growth", "leak": "region", "retained": "steady", "fragmentation": "frag"}[kind]
    trace = record(run, mode, *([] if mode == "frag" else [STEPS if mode != "region" else 5]))
    fn = {"growth": "keep_history", "leak": "evaluate_and_forget", "retained": "load_weights",
          "fragmentation": "torch_oom"}[kind]
    supp = run.dir / "s.supp"
    supp.write_text(f"# known\n{kind}:{fn}\n")
    report = run.cli("report", "--format", "json", "--suppressions", supp, trace)
    assert report.returncode == 0, report.stderr
    r = json.loads(report.stdout)
    if kind == "growth":
        [g] = r["growth"]
        assert g["suppressed"] and g["suppressed_by"] == fn
        # A suppressed growth neither fails check nor gets advice.
        assert run.cli("check", trace, "--max-leak-bytes", 1 << 30, "--max-growth-bytes-per-step", 1,
                       "--suppressions", supp).returncode == 0
        assert not [a for a in r["recommendations"] if a["finding"] == "growth:" + g["id"]]
    elif kind == "leak":
        [leak] = at_line(r["leaks"], "region_leak")
        assert leak["suppressed"] and r["summary"]["leaked_bytes"] == 0
        assert run.cli("check", trace, "--suppressions", supp).returncode == 0
    elif kind == "retained":
        [w] = at_line(r["leaks"], "weights")
        assert w["kind"] == "retained" and w["suppressed"] and r["summary"]["retained_bytes"] == 0
    else:
        [oom] = [o for d in r["fragmentation"]["per_device"] for o in d["ooms"]]
        assert oom["suppressed"] and oom["suppressed_by"] == fn
        assert not [a for a in r["recommendations"] if a["id"] == "expandable-segments"]
    # A suppression of one kind does not silence another kind at the same site.
    other = run.dir / "o.supp"
    other.write_text(f"{'retained' if kind != 'retained' else 'leak'}:{fn}\n")
    r2 = json.loads(run.cli("report", "--format", "json", "--suppressions", other, trace).stdout)
    flagged = [e for e in r2["growth"] + r2["leaks"] if e.get("suppressed")]
    if kind != "retained":
        assert all(e.get("kind") == "retained" for e in flagged)
    else:
        assert flagged == []


def test_unknown_suppression_kind_is_a_one_line_error(run):
    trace = record(run, "steady", 5)
    supp = run.dir / "bad.supp"
    supp.write_text("leak:x\nrace:y\n")
    for cmd in (["check"], ["report"]):
        r = run.cli(*cmd, trace, "--suppressions", supp)
        assert r.returncode == 2
        assert r.stderr.startswith("gpumemshim: error:") and r.stderr.count("\n") == 1
        assert "bad.supp:2" in r.stderr


def test_peak_near_the_device_total_advises_accumulation_and_checkpointing(run):
    trace = record(run, "peak", 5, FAKECUDA_TOTAL_MEM=16 << 20)
    report = run.report(trace)
    pid = report["processes"][0]["pid"]
    ids = {a["id"]: a for a in report["recommendations"]}
    assert ids["gradient-accumulation"]["finding"] == f"peak:{pid}"
    assert "of 16.00 MiB on the device" in ids["gradient-accumulation"]["evidence"]
    # 14 MiB of the ~15 MiB peak was allocated during the step in progress.
    assert "allocated in the step in progress" in ids["gradient-checkpointing"]["evidence"]
    # Mixed precision on the same evidence, saying what the trace cannot know.
    assert ids["amp"]["evidence"] == ids["gradient-checkpointing"]["evidence"]
    assert "autocast" in ids["amp"]["action"] and "dtypes" in ids["amp"]["action"]
    # The same program on a large device gets none of it: no advice without evidence.
    run2 = type(run)(run.dir / "big")
    run2.dir.mkdir()
    big = record(run2, "peak", 5, FAKECUDA_TOTAL_MEM=1 << 34)
    assert run2.report(big)["recommendations"] == []


def test_large_cache_at_the_end_advises_empty_cache(run):
    trace = record(run, "cache")
    report = run.report(trace)
    [dev] = [d for d in report["fragmentation"]["per_device"] if d["torch"]]
    assert (dev["reserved_end_bytes"], dev["allocated_end_bytes"]) == (128 << 20, 0)
    [advice] = [a for a in report["recommendations"] if a["id"] == "del-and-empty-cache"]
    assert "128.00 MiB reserved" in advice["evidence"] and "100% unused" in advice["evidence"]
    assert report["summary"]["cached_bytes"] == 128 << 20 and report["summary"]["leaked_bytes"] == 0


def test_processes_sharing_a_device_get_memory_fraction_advice(run):
    # Each process alone peaks at ~2 MiB of a 4 MiB device (no advice); two of them on one device
    # together need more than it has.
    for rank in (0, 1):
        r = run.program([APP, "steady", "5"], FAKECUDA_TOTAL_MEM=4 << 20, RANK=rank)
        assert r.returncode == 0, r.stderr
    traces = run.traces()
    assert len(traces) == 2
    assert run.report(traces[0])["recommendations"] == []
    report = run.report(*traces)
    advice = [a for a in report["recommendations"] if a["id"] == "memory-fraction"]
    assert len(advice) == 2, report["recommendations"]
    pids = sorted(p["pid"] for p in report["processes"])
    assert sorted(a["finding"] for a in advice) == sorted(f"peak:{pid}" for pid in pids)
    assert "set_per_process_memory_fraction(0.45)" in advice[0]["action"]
    assert "2 processes on host" in advice[0]["evidence"] and "of 4.00 MiB" not in advice[0]["evidence"]
    assert "(4.00 MiB)" in advice[0]["evidence"]


NCCL_APP = BUILD / "tests" / "integration" / "nccl_app"


@pytest.mark.parametrize("with_steps", [True, False])
def test_nccl_buffers_are_not_the_scripts_leak(run, with_steps):
    r = run.program([NCCL_APP, "steps" if with_steps else "plain"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    nccl = [l for l in report["leaks"] if l.get("owner") == "nccl"]
    assert len(nccl) == 1 and nccl[0]["bytes"] == 4 << 20 and nccl[0]["count"] == 4, report["leaks"]
    # NCCL's own memory is kind "library", named by the call that made it and the script's line.
    assert nccl[0]["kind"] == "library" and nccl[0]["owner_call"] == "fakeNcclCommInit"
    assert "NCCL's communicator buffers, made by fakeNcclCommInit for " in nccl[0]["reason"]
    assert f"nccl_app.cpp:{site_line('comm_init', 'nccl_app.cpp')}" in nccl[0]["reason"]
    assert "libnccl.so.2" in nccl[0]["stack"][0]["module"]
    assert report["summary"]["library_bytes"] == 4 << 20
    assert report["summary"]["library_allocations"] == 4
    # The script's own leak stays a leak at its line (with steps: the 4 made after the first step
    # accumulate; the one made before it is retained).
    leaked = 4 * 4096 if with_steps else 5 * 4096
    [mine] = [l for l in report["leaks"] if l["kind"] == "leak"]
    assert mine["bytes"] == leaked and "owner" not in mine
    assert mine["stack"][0]["line"] == site_line("script_leak", "nccl_app.cpp")
    assert report["summary"]["leaked_bytes"] == leaked
    check = run.cli("check", trace)
    assert check.returncode == 1  # the script's leak fails CI; NCCL's buffers alone would not


LIBS_APP = BUILD / "tests" / "integration" / "libs_app"


@pytest.mark.parametrize("with_steps", [True, False])
@pytest.mark.parametrize("mode", ["clean", "leak"])
def test_cublas_handles_are_library_memory_not_leaks(run, mode, with_steps):
    r = run.program([LIBS_APP, mode] + (["steps"] if with_steps else []))
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    # One handle per thread, each made by cuMemAlloc inside cublasCreate_v2: kind "library", named
    # by the library, its call and the script's line that made the handle.
    library = [l for l in report["leaks"] if l["kind"] == "library"]
    assert len(library) == 2 and all(l["owner"] == "cublas" for l in library), report["leaks"]
    line = site_line("create_handle", "libs_app.cpp")
    for l in library:
        assert l["bytes"] == 4 << 20 and l["api"] == "cuMemAlloc_v2"
        assert l["owner_call"] == "cublasCreate_v2" and l["stack"][0]["function"] == "cublasCreate_v2"
        assert l["reason"].startswith(f"cuBLAS's handle, made by cublasCreate_v2 for ")
        assert f"libs_app.cpp:{line}: kept by the library" in l["reason"]
    assert report["summary"]["library_bytes"] == 8 << 20
    assert report["summary"]["library_allocations"] == 2
    # The GEMMs' temporaries were freed; what is left of the script is its own leak.
    leaked = 8192 if mode == "leak" else 0
    assert report["summary"]["leaked_bytes"] == leaked
    mine = [l for l in report["leaks"] if l["kind"] == "leak"]
    assert [l["bytes"] for l in mine] == ([8192] if leaked else []), report["leaks"]
    assert all(l["stack"][0]["line"] == site_line("script_leak", "libs_app.cpp") and "owner" not in l
               for l in mine)
    check = run.cli("check", "--max-leak-bytes", "0", trace)
    assert check.returncode == (1 if leaked else 0), check.stdout + check.stderr
    if not leaked:
        assert "8388608 bytes kept by libraries for themselves (not leaks)" in check.stdout
    text = run.cli("report", trace).stdout
    assert "library (not leaks): 8.00 MiB (8388608 bytes) in 2 allocations" in text
    assert text.count("LIBRARY 4.00 MiB") == 2


def test_oom_at_the_memory_fraction_cap_gets_the_cap_verdict(run):
    # 64 MiB device, fraction 0.5 (the attribute the Python package writes): a 32 MiB cap.
    trace = record(run, "capped", FAKECUDA_TOTAL_MEM=64 << 20)
    report = run.report(trace)
    [process] = report["processes"]
    assert process["attributes"]["torch.memory_fraction.0"] == "0.5"
    [dev] = [d for d in report["fragmentation"]["per_device"] if d["torch"]]
    assert dev["limit_bytes"] == 32 << 20 and dev["memory_fraction"] == 0.5
    [oom] = dev["ooms"]
    assert oom["cause"] == "memory_limit" and oom["enough_total_free"] is False
    assert oom["limit_bytes"] == 32 << 20 and oom["device_free_bytes"] == 30 << 20
    assert oom["verdict"] == ("the process's memory-fraction cap of 50% (32.00 MiB of 64.00 MiB) was "
                              "reached: reserved 30.00 MiB, 0 B free in the cache, 4.00 MiB asked "
                              "(the device had 30.00 MiB free)")
    assert at_line([oom], "capped_oom") == [oom]
    ids = [a["id"] for a in report["recommendations"]]
    assert "raise-memory-fraction" in ids, ids
    assert "expandable-segments" not in ids and "max-split-size" not in ids, ids
    [cap] = [a for a in report["recommendations"] if a["id"] == "raise-memory-fraction"]
    assert "set_per_process_memory_fraction(0.5)" in cap["action"] and oom["verdict"] in cap["evidence"]
    text = run.cli("report", trace).stdout
    assert "capped at 32.00 MiB (33554432 bytes) (memory fraction 0.5)" in text, text
    assert "ADVICE raise-memory-fraction" in text and "ADVICE expandable-segments" not in text


def test_growth_on_a_loss_accumulation_line_advises_item_or_detach(run):
    script = pathlib.Path(__file__).parent / "apps" / "python_growth.py"
    r = run.program([sys.executable, script, FAKECUDA / "libcudart.so.13", 12],
                    PYTHONPATH=pathlib.Path(__file__).parents[2] / "python")
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    [g] = report["growth"]
    assert abs(g["bytes_per_step"] - (256 << 10)) <= 16 and g["stack"][0]["python"]
    [advice] = [a for a in report["recommendations"] if a["finding"] == "growth:" + g["id"]]
    # 256 KiB a step is no scalar: the line's text is the evidence.
    assert advice["id"] == "item-or-detach", advice
    assert "the line reads `total_loss += cudart.cudaMalloc(" in advice["evidence"]
