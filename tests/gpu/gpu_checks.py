"""What the H200 check scripts (check_gpu.py, check_torch.py) share: the build's paths, PASS/FAIL
lines, running a program under the shim, and the analyzer's reports. Both are called by
run_all.sh as SCRIPT WORK OUT with GPUMEMSHIM_BUILD_DIR set."""
import json
import os
import pathlib
import subprocess
import sys

work, out = map(pathlib.Path, sys.argv[1:3])
build = pathlib.Path(os.environ["GPUMEMSHIM_BUILD_DIR"])
here = pathlib.Path(__file__).parent
shim = build / "lib" / "libgpumemshim.so"
cli = build / "bin" / "gpumemshim"
reports = work / "reports"
reports.mkdir(parents=True, exist_ok=True)
failed = []
MIB = 1 << 20


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        failed.append(name)


def site_line(path, name):
    """The line of PATH marked `// site: NAME` or `# site: NAME`."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.rstrip().endswith((f"// site: {name}", f"# site: {name}")):
            return n
    raise SystemExit(f"no site {name}")


def run(name, argv, env=None, shim_on=True, record=False, timeout=600):
    """Runs ARGV (preloaded with the shim, or through `gpumemshim record` one trace per rank);
    returns the finished process and its traces."""
    e = dict(os.environ, **(env or {}))
    tdir = work / "traces" / name
    tdir.mkdir(parents=True, exist_ok=True)
    if record:
        argv = [str(cli), "record", "-o", str(tdir / "rank%r.%p.trace"), "--", *map(str, argv)]
    elif shim_on:
        e["LD_PRELOAD"] = str(shim)
        e["GPUMEMSHIM_OUTPUT"] = str(tdir / "t.%p.trace")
    r = subprocess.run([str(a) for a in argv], env=e, capture_output=True, text=True, timeout=timeout)
    return r, sorted(tdir.glob("*.trace*"))


def report(name, traces):
    """The JSON report of TRACES (None when the analyzer failed); JSON and text kept in WORK."""
    r = subprocess.run([cli, "report", "--format", "json", *traces], capture_output=True, text=True)
    (reports / f"{name}.json").write_text(r.stdout or r.stderr)
    text = subprocess.run([cli, "report", *traces], capture_output=True, text=True).stdout
    (reports / f"{name}.txt").write_text(text)
    if r.returncode != 0:
        print(r.stderr)
        return None
    return json.loads(r.stdout)


def is_trace(path):
    with open(path, "rb") as f:
        return f.read(8) == b"GMSTRACE"


def check_flush_marks():
    """The shim's rule for every trace this script left: no timed record after a flush mark is older
    than the mark (shim/record/in_flight.h)."""
    sys.path.insert(0, str(here.parent / "integration"))
    from trace_records import late_records
    traces = sorted(p for p in (work / "traces").rglob("*") if p.is_file() and is_trace(p))
    counts = {str(p.relative_to(work / "traces")): late_records(p) for p in traces}
    late = {name: c for name, c in counts.items() if c[0]}
    marks = sum(m for _, m in counts.values())
    check("every trace: no record older than a flush mark before it", traces and not late,
          f"{len(traces)} traces, {marks} marks, late: {late}")


def finish():
    check_flush_marks()
    print(f"== {len(failed)} failed: {failed}")
    sys.exit(1 if failed else 0)
