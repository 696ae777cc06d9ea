"""The self-contained HTML report (opened in headless Chromium and judged by the
screenshot's pixels) and the exports (Chrome/Perfetto trace JSON, PyTorch memory_viz pickle),
through the CLI on traces of viewer_app.py (weights, per-step activations, one buffer kept per
step) and torch_events_app (the caching allocator's events)."""
import json
import pathlib
import pickle
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

from conftest import BUILD, FAKECUDA, SOURCES

APP = SOURCES / "viewer_app.py"
CUDART = FAKECUDA / "libcudart.so.13"
TORCH_APP = BUILD / "tests" / "integration" / "torch_events_app"
PYTHON_PKG = pathlib.Path(__file__).parents[2] / "python"
MIB = 1 << 20
STEPS = 10


def app_line(name):
    for number, text in enumerate(APP.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# site: {name}"):
            return number
    raise AssertionError(f"no site {name!r} in viewer_app.py")


def record(run, steps=STEPS, script=APP):
    r = run.program([sys.executable, script, CUDART, steps], PYTHONPATH=PYTHON_PKG)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    return trace, json.loads(r.stdout)


def run_ok(run, *args):
    r = run.cli(*args)
    assert r.returncode == 0, r.stderr
    return r


def test_json_report_has_the_timeline(run):
    trace, _ = record(run)
    report = run.report(trace)
    [process] = report["processes"]
    tl = process["timeline"]
    assert 0 < len(tl["samples"]) <= 2000
    assert max(s["live_bytes"] for s in tl["samples"]) == process["summary"]["peak_bytes"]
    for s in tl["samples"]:
        assert sum(s["sites"].values()) == s["live_bytes"], s
    assert len(tl["steps"]) == STEPS
    labels = [s["label"] for s in tl["sites"]]
    assert len(labels) == 3 and len(set(labels)) == 3, labels  # one allocation helper, three callers
    weights = tl["sites"][0]  # the largest site first
    assert weights["peak_bytes"] == 24 * MIB and weights["label"].endswith(f"viewer_app.py:{app_line('weights')} load_weights")
    peak = tl["peak"]
    assert peak["live_bytes"] == process["summary"]["peak_bytes"]
    assert sum(s["bytes"] for s in peak["sites"]) == peak["live_bytes"]


def test_chrome_export_counters_markers_and_failures(run):
    trace, _ = record(run)
    report = run.report(trace)
    run_ok(run, "export", trace, "--to", "chrome", "-o", run.dir / "t.json")
    with open(run.dir / "t.json") as f:
        events = json.load(f)["traceEvents"]
    [process] = report["processes"]
    total = [e for e in events if e["ph"] == "C" and e["name"] == "device memory"]
    assert total and all(e["pid"] == process["pid"] for e in total)
    assert max(e["args"]["live_bytes"] for e in total) == report["summary"]["peak_bytes"]
    ts = [e["ts"] for e in total]
    assert ts == sorted(ts) and ts[-1] <= process["duration_s"] * 1e6 + 1
    sites = [e for e in events if e["ph"] == "C" and e["name"].startswith("site ") and "load_weights" in e["name"]]
    assert max(e["args"]["bytes"] for e in sites) == 24 * MIB
    steps = [e for e in events if e["ph"] == "i" and e.get("cat") == "step"]
    assert len(steps) == STEPS and all(e["tid"] == process["pid"] for e in steps)


def test_chrome_export_of_an_oom(run):
    from conftest import SCENARIOS
    r = run.program([SCENARIOS, "oom"], FAKECUDA_OOM_AFTER=16 * MIB)
    [trace] = run.traces()
    report = run.report(trace)
    assert report["failures"], (r.stderr, report["summary"])
    events = json.loads(run_ok(run, "export", trace, "--to", "chrome").stdout)["traceEvents"]
    failures = [e for e in events if e.get("cat") == "failure"]
    assert [e["args"]["size"] for e in failures] == [f["size"] for f in report["failures"]]


def test_memory_viz_pickle_has_the_leaked_blocks(run):
    trace, printed = record(run)
    run_ok(run, "export", trace, "--to", "memory-viz", "-o", run.dir / "snap.pickle")
    with open(run.dir / "snap.pickle", "rb") as f:
        snap = pickle.load(f)
    segments = {s["address"]: s for s in snap["segments"]}
    assert len(printed["leaked"]) == STEPS
    for address, size in printed["leaked"]:
        seg = segments[address]  # still alive at exit: in the final state
        assert seg["total_size"] == size
        [block] = seg["blocks"]
        assert (block["address"], block["size"], block["state"]) == (address, size, "active_allocated")
        top = block["frames"][0]
        assert top["filename"].endswith("viewer_app.py") and top["line"] == app_line("viewer malloc")
        assert any(fr["name"] == "remember" and fr["line"] == app_line("history") for fr in block["frames"])
    assert len(snap["segments"]) == STEPS  # weights and activations were freed
    [trace_events] = snap["device_traces"]
    actions = [e["action"] for e in trace_events]
    assert actions.count("alloc") == 1 + 4 * STEPS and actions.count("free_completed") == 1 + 3 * STEPS
    assert all({"action", "addr", "size", "stream", "time_us", "frames"} <= e.keys() for e in trace_events)


def test_memory_viz_from_torch_allocator_events(run):
    r = run.program([TORCH_APP])
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    [trace] = run.traces()
    snap = pickle.loads(subprocess.run([str(BUILD / "bin" / "gpumemshim"), "export", str(trace), "--to",
                                        "memory-viz"], capture_output=True, check=True).stdout)
    [seg] = snap["segments"]
    assert seg["total_size"] == 20 << 20
    assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
    active = [b for b in seg["blocks"] if b["state"] == "active_allocated"]
    assert [(b["address"] - seg["address"], b["size"]) for b in active] == [(0x200000, 4096)]
    assert active[0]["frames"] and any(f["name"].endswith("keep_block") or "keep_block" in f["name"]
                                       for f in active[0]["frames"])
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions[0] == "segment_alloc" and "oom" in actions


def test_export_rejects_unknown_targets_and_bad_traces(run):
    trace, _ = record(run, steps=1)
    assert run.cli("export", trace, "--to", "svg").returncode == 2
    bad = run.dir / "bad.trace"
    bad.write_bytes(b"not a trace")
    for to in ("chrome", "memory-viz"):
        r = run.cli("export", bad, "--to", to)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert run.cli("export", trace, trace, "--to", "memory-viz").returncode == 2


# ---- HTML ----

def html_of(run, trace, name="report.html"):
    out = run.dir / name
    run_ok(run, "report", trace, "--format", "html", "-o", out)
    return out, out.read_text()


def test_html_is_self_contained_and_has_the_sections(run):
    trace, _ = record(run)
    _, html = html_of(run, trace)
    assert not re.search(r"https?://", html)
    assert not re.search(r"<(script|link|img|iframe)\b", html)
    assert not re.search(r"url\(|@import", html)
    assert "<svg" in html and html.count('class="layer"') == 3
    assert "At the peak" in html and "Leaks and survivors" in html
    stdout = run_ok(run, "report", trace, "--format", "html").stdout  # without -o: stdout
    assert stdout == html


def test_html_escapes_a_malicious_file_name(run):
    evil = run.dir / '"><img src=x onerror=alert(1)>.py'
    shutil.copy(APP, evil)
    trace, _ = record(run, script=evil)
    _, html = html_of(run, trace)
    assert "<img" not in html and "onerror=alert(1)>" not in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.py" in html


def read_png(path):
    """RGB(A) pixels of a PNG (8-bit, colour type 2 or 6), with the five row filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colour_share(png, rgb):
    width, height, bpp, rows = read_png(png)
    target = bytes(rgb)
    hits = 0
    for row in rows:
        # exact matches (fills are flat colour); a pixel's RGB starts at a multiple of bpp
        start = row.find(target)
        while start != -1:
            if start % bpp == 0:
                hits += 1
            start = row.find(target, start + 1)
    return hits / (width * height)


def screenshot(html_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (tools/install-deps.sh installs it)")
    png = html_path.with_suffix(".png")
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={png}", "--window-size=1280,1600", html_path.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert png.exists(), r.stderr
    return png


def test_html_chart_renders_in_chromium(run, tmp_path_factory):
    trace, _ = record(run)
    page, html = html_of(run, trace)
    first = re.search(r'<polygon class="layer" fill="#([0-9a-f]{6})"', html).group(1)
    rgb = tuple(int(first[i:i + 2], 16) for i in (0, 2, 4))
    share = colour_share(screenshot(page), rgb)
    assert share > 0.02, share  # the weights' layer: a large flat area of the plot

    # A trace with no allocations: the page says so and nothing of that colour is drawn.
    empty_run = type(run)(tmp_path_factory.mktemp("empty"))
    empty_trace, _ = record(empty_run, steps=0)
    empty_page, empty_html = html_of(empty_run, empty_trace)
    assert "nothing to plot" in empty_html and 'class="layer"' not in empty_html
    assert colour_share(screenshot(empty_page), rgb) < 0.001
