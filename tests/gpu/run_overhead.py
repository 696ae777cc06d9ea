"""Drives overhead.py: configurations interleaved round by round in one run (base, shim, torch,
base, shim, torch, ...), each a fresh process; prints a table of the median of the per-process
step medians and the overhead against base. Usage: run_overhead.py SHIM OUT.json [ROUNDS STEPS]"""
import json
import os
import pathlib
import statistics
import subprocess
import sys

shim, out = sys.argv[1], pathlib.Path(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 60
script = pathlib.Path(__file__).parent / "overhead.py"
tdir = out.parent / "overhead-traces"
tdir.mkdir(parents=True, exist_ok=True)
results = []
for kind in ("alloc", "compute"):
    for r in range(rounds):
        for config in ("base", "shim", "torch"):
            env = dict(os.environ)
            if config == "shim":
                env["LD_PRELOAD"] = shim
                env["GPUMEMSHIM_OUTPUT"] = str(tdir / f"{kind}.{r}.%p.trace")
            p = subprocess.run([sys.executable, str(script), kind, config, str(steps)], env=env,
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(p.stderr[-2000:])
                continue
            results.append(json.loads(p.stdout.strip().splitlines()[-1]))
table = {}
for kind in ("alloc", "compute"):
    base = statistics.median(x["median_ms"] for x in results if x["kind"] == kind and x["config"] == "base")
    for config in ("base", "shim", "torch"):
        ms = [x["median_ms"] for x in results if x["kind"] == kind and x["config"] == config]
        allocs = [x["allocs_per_step"] for x in results if x["kind"] == kind and x["config"] == config]
        if not ms:
            continue
        m = statistics.median(ms)
        table[f"{kind}/{config}"] = {"median_ms": m, "overhead_pct": 100 * (m / base - 1),
                                     "process_medians": ms, "allocs_per_step": allocs[0]}
        print(f"{kind:8s} {config:6s} median {m:8.3f} ms  overhead {100 * (m / base - 1):+6.2f}%  "
              f"allocs/step {allocs[0]}  per-process {['%.3f' % v for v in ms]}")
out.write_text(json.dumps({"rounds": rounds, "steps": steps, "results": results, "table": table}, indent=1))
