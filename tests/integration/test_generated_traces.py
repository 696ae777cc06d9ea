"""The benchmark generator's traces (bench/gen_trace) read as the shim's do: the same events as a
format 2.0 and a format 3 trace give the same findings; the 3.x trace's flush marks hold (no event
replayed late), and a trace whose marks do not hold says so in every report; the threads that
decompress blocks ahead of the reader, the reader taking blocks itself when they fall behind, and
the replay thread taking them between its batches never change the report."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, CLI, cli_env

GEN_TRACE = BUILD / "bench" / "gen_trace"
pytestmark = pytest.mark.skipif(not GEN_TRACE.exists(), reason="built without bench/")
EVENTS = "400000"


def generate(path, *flags):
    g = subprocess.run([str(GEN_TRACE), str(path), EVENTS, *flags], capture_output=True, text=True,
                       timeout=300)
    assert g.returncode == 0, g.stderr
    return path


def cli(*args, cpus=None, **env):
    e = cli_env()
    e.update(env)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300,
                       env=e, preexec_fn=pin)
    assert r.returncode == 0, r.stderr
    return r.stdout


def findings(trace, cpus=None, **env):
    """The JSON report without what names the file and its format."""
    report = json.loads(cli("report", "--format", "json", trace, cpus=cpus, **env))
    del report["integrity"]
    for p in report["processes"]:
        for key in ("trace", "trace_bytes", "format_version", "integrity"):
            p.pop(key, None)
    return report


def test_format_2_and_format_3_give_the_same_findings(tmp_path):
    v2 = generate(tmp_path / "v2.trace", "--format-2")
    v3 = generate(tmp_path / "v3.trace")
    a, b = findings(v2), findings(v3)
    assert b["summary"]["unmatched_frees"] == 0, b["summary"]
    assert a == b
    stats = cli("stats", v3)
    assert "streamed" in stats and "late events" not in stats, stats


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the reader decompresses alone")
def test_read_threads_do_not_change_the_report(tmp_path):
    trace = generate(tmp_path / "blocks.trace", "--block-bytes", "65536")
    alone = findings(trace, GPUMEMSHIM_READ_THREADS="0")
    assert alone["summary"]["allocations"] > 100000
    for threads in ("1", "3"):
        assert findings(trace, GPUMEMSHIM_READ_THREADS=threads) == alone, threads
    # Two cores: no read thread; the replay thread takes blocks between its batches.
    assert findings(trace, cpus=sorted(os.sched_getaffinity(0))[:2]) == alone


def test_late_events_are_declared_in_every_report(tmp_path):
    # Marks that records made before them follow (a thread stalled past a flush interval): the
    # reader replays those where it reads them, and the report says so rather than give numbers
    # whose order it could not keep in silence.
    trace = generate(tmp_path / "late.trace", "--late")
    report = json.loads(cli("report", "--format", "json", trace))
    integrity = report["processes"][0]["integrity"]
    assert integrity["late_events"] > 0 and integrity["max_lateness_ms"] >= 0, integrity
    text = cli("report", trace)
    note = f"note: {integrity['late_events']} events were buffered after a later flush mark"
    assert note in text
    html = tmp_path / "late.html"
    cli("report", "--format", "html", "-o", html, trace)
    assert note in html.read_text()
    clean = generate(tmp_path / "clean.trace")
    integrity = json.loads(cli("report", "--format", "json", clean))["processes"][0]["integrity"]
    assert integrity["late_events"] == 0, integrity
    assert "buffered after a later flush mark" not in cli("report", clean)
