"""`gpumemshim diff BASE NEW` on two fake-CUDA runs of one program with different
sizes: peak, leaked bytes, the call sites that got worse (by file:line) and the exit codes."""
import json
import sys

from conftest import FAKECUDA, SOURCES

APP = SOURCES / "diff_app.py"
CUDART = FAKECUDA / "libcudart.so.13"
MIB = 1 << 20


def line_of(name):
    for number, text in enumerate(APP.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# site: {name}"):
            return number
    raise AssertionError(name)


def record(run, name, scratch, leak):
    r = run.program([sys.executable, APP, CUDART, scratch, leak], GPUMEMSHIM_OUTPUT=run.dir / f"{name}.trace")
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    return run.dir / f"{name}.trace"


def diff(run, base, new, *args):
    r = run.cli("diff", base, new, "--format", "json", *args)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_bigger_leak_and_scratch_name_their_lines_and_fail_over_ten_percent(run):
    base = record(run, "base", 4 * MIB, 1 * MIB)
    new = record(run, "new", 8 * MIB, 3 * MIB)
    code, d = diff(run, base, new, "--fail-on-regression", 10)
    assert code == 1
    assert (d["base"]["peak_bytes"], d["new"]["peak_bytes"]) == (5 * MIB, 9 * MIB)
    assert (d["base"]["leaked_bytes"], d["new"]["leaked_bytes"]) == (1 * MIB, 3 * MIB)
    assert d["leaked_change_pct"] == 200.0 and d["peak_change_pct"] == 80.0
    assert d["regression"] is True and d["new_leak_sites"] == 0
    worse = {(c["what"], c["label"].rsplit("/", 1)[-1]): c for c in d["worse"]}
    leak = worse[("leak", f"diff_app.py:{line_of('leak')}")]
    assert (leak["base_bytes"], leak["new_bytes"], leak["delta_bytes"]) == (MIB, 3 * MIB, 2 * MIB)
    # At the peak the scratch buffer is alive: its contribution doubled; the steady one did not move.
    assert d["peak_sites_known"] is True
    scratch = worse[("peak", f"diff_app.py:{line_of('scratch')}")]
    assert (scratch["base_bytes"], scratch["new_bytes"]) == (4 * MIB, 8 * MIB)
    assert not any(c["label"].endswith(f":{line_of('steady')}") for c in d["worse"] + d["better"])
    assert d["better"] == []

    text = run.cli("diff", base, new, "--fail-on-regression", 10)
    assert text.returncode == 1
    assert f"diff_app.py:{line_of('leak')}" in text.stdout and "+2.00 MiB" in text.stdout, text.stdout
    assert text.stderr.startswith("gpumemshim: diff: regression over 10")

    # The same change within a generous limit passes; without a limit diff only reports.
    assert diff(run, base, new, "--fail-on-regression", 1000)[0] == 0
    assert diff(run, base, new)[0] == 0
    # The other way round the sites got better.
    code, back = diff(run, new, base, "--fail-on-regression", 0)
    assert code == 0
    assert {c["what"] for c in back["better"]} == {"leak", "peak"} and back["worse"] == []


def test_identical_runs_do_not_regress(run):
    a = record(run, "a", 4 * MIB, MIB)
    b = record(run, "b", 4 * MIB, MIB)
    code, d = diff(run, a, b, "--fail-on-regression", 0)
    assert code == 0, d
    assert d["worse"] == [] and d["better"] == [] and d["peak_change_pct"] == 0.0


def test_a_new_leak_fails_whatever_the_percentage(run):
    base = record(run, "base", 4 * MIB, 0)
    new = record(run, "new", 4 * MIB, 4096)
    code, d = diff(run, base, new, "--fail-on-regression", 1000)
    assert code == 1 and d["new_leak_sites"] == 1
    [leak] = [c for c in d["worse"] if c["what"] == "leak"]
    assert leak["base_bytes"] == 0 and leak["new_bytes"] == 4096
    assert leak["label"].endswith(f"diff_app.py:{line_of('leak')}")


def test_unusable_input_exits_2(run):
    good = record(run, "good", MIB, 0)
    bad = run.dir / "bad.trace"
    bad.write_bytes(b"not a trace")
    for args in ([good, bad], [run.dir / "missing.trace", good], [good, good, "--fail-on-regression", "-5"],
                 [good, good, "--format", "xml"]):
        r = run.cli("diff", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("gpumemshim: error:") and r.stderr.count("\n") == 1, r.stderr
