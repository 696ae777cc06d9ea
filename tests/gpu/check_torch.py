"""H200 scenarios of issues 4, 6 and 22 under the shim with the torch bridge attached by itself:
(a)-(c) training loops, the allocator configurations with the bridge, the libraries' own memory
and an OOM at the memory-fraction cap, the overhead table (d), and two DDP ranks on one GPU. Prints PASS/FAIL lines; traces and reports go to WORK for the analyzer
to read again later. Called by run_all.sh: check_torch.py WORK OUT"""
import json
import os
import pathlib
import re
import subprocess
import sys

from gpu_checks import check, cli, finish, here, report, reports, run, shim, site_line, work


def script_frames(stack, script):
    return [f for f in stack if f.get("python") and f.get("file", "").endswith(script)]


# GMS_TORCH_CHECKS=overhead: only the overhead table (d); =scenarios: everything but it.
only_overhead = os.environ.get("GMS_TORCH_CHECKS") == "overhead"
# GMS_TORCH_GROUPS: the scenario groups to run (default all): train categories bridge libs cause ddp.
groups = set(os.environ.get("GMS_TORCH_GROUPS", "train categories bridge libs cause ddp").split())


def skip(group):
    return only_overhead or group not in groups

skip_overhead = os.environ.get("GMS_TORCH_CHECKS") == "scenarios"

# (a)-(c): the training loops.
train = here / "torch_training.py"
for mode in () if skip("train") else ("leak_loss", "keep_outputs", "clean"):
    bare, _ = run(f"train_{mode}_bare", [sys.executable, train, mode], shim_on=False)
    r, traces = run(f"train_{mode}", [sys.executable, train, mode])
    check(f"train_{mode}: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
          repr((r.stdout[-300:], r.stderr[-1500:])))
    rep = report(f"train_{mode}", traces) if traces else None
    check(f"train_{mode}: trace", rep is not None, str(traces))
    if not rep:
        continue
    # Format 1.1: the flusher marks each flush; the analyzer then holds about two flushes of events.
    stats = subprocess.run([str(cli), "stats", *map(str, traces)], capture_output=True, text=True).stdout
    marks = re.search(r"flush mark\s+(\d+)", stats)
    window = re.search(r"order window\s+(\d+)", stats)
    check(f"train_{mode}: flush marks written", marks is not None and int(marks.group(1)) >= 2,
          f"marks {marks and marks.group(1)}, order window {window and window.group(1)}")
    torch_counts = rep["summary"]["torch"]
    steps = [m for m in rep.get("markers", []) if m["kind"] == "step"]
    print(f"   torch: {torch_counts} steps: {len(steps)} stderr: {r.stderr.strip()[-300:]}")
    check(f"train_{mode}: bridge attached (tensor events)", torch_counts["allocs"] > 100, str(torch_counts))
    check(f"train_{mode}: optimizer steps marked", len(steps) == 40, str(len(steps)))
    torch_leaks = [l for l in rep["leaks"] if l["api"] == "torch.alloc" and l["kind"] == "leak"]
    growth = [g for g in rep.get("growth", []) if not g.get("suppressed")]
    print("   growth: " + json.dumps([(g["bytes_per_step"], g["steps"], g["stack"][:1]) for g in growth])[:1200])
    print("   kinds: " + json.dumps([(l["kind"], l["bytes"], l["count"]) for l in rep["leaks"]])[:800])
    print("   advice: " + json.dumps([a["id"] for a in rep.get("recommendations", [])]))
    if mode == "clean":
        check("train_clean: no growth", growth == [], json.dumps(growth)[:1500])
        check("train_clean: no leak", rep["summary"]["leaked_bytes"] == 0, json.dumps(torch_leaks)[:1500])
        check("train_clean: the allocator's segments reported as cached",
              any(l["kind"] == "cached" for l in rep["leaks"]))
        named = [l["stack"][0]["function"] for l in rep["leaks"]
                 if l["stack"] and l["stack"][0].get("module") == "grad_fn"]
        check("train_clean: backward blocks named by their grad_fn", any(n.endswith("Backward0") for n in named),
              str(named))
        continue
    site = "loss_accumulation" if mode == "leak_loss" else "forward"
    line = site_line(train, site)
    pinned = [g for g in growth if (script_frames(g["stack"], "torch_training.py") or [{}])[0].get("line") == line
              and g["stack"][0].get("python")]
    check(f"train_{mode}: growth pinned to torch_training.py:{line}", bool(pinned),
          json.dumps(growth)[:1500])
    want = "item-or-detach" if mode == "leak_loss" else "del-references"
    advice = [a["id"] for a in rep.get("recommendations", [])]
    check(f"train_{mode}: advice {want}", want in advice and "set-to-none" not in advice, str(advice))

# Memory by category at the peak (issue 22): parameters, gradients and AdamW's state as the model's
# sizes say, activations seen; the categories add up to the peak; GPUMEMSHIM_CATEGORIES=0 tags
# nothing.
cat_script = here / "torch_categories.py"
for name, env in () if skip("categories") else (("categories", {}), ("categories_off", {"GPUMEMSHIM_CATEGORIES": "0"})):
    r, traces = run(name, [sys.executable, cat_script, "6"], env)
    rep = report(name, traces) if traces else None
    check(f"{name}: runs", r.returncode == 0 and rep is not None, r.stderr[-800:])
    if not rep:
        continue
    info = json.loads(r.stdout.strip().splitlines()[-1])
    proc = rep["processes"][0]
    cats = proc.get("categories") or {}
    peak = (cats.get("peak") or {}).get("bytes", {})
    print(f"   {name}: params {info['param_bytes']} at the peak {json.dumps(cats.get('peak'))} "
          f"tags {cats.get('tags')} unmatched {cats.get('unmatched_tags')}")
    print("   sites: " + json.dumps([(s["category"], s["bytes"], s["stack"][:1]) for s in cats.get("peak_sites", [])])[:1500])
    p_bytes = info["param_bytes"]
    if name == "categories_off":
        check(f"{name}: no tags", cats.get("tags") == 0 and peak.get("parameter") == 0, json.dumps(cats.get("peak")))
        continue
    near = lambda v, want: abs(v - want) <= 0.01 * want + 64 * 1024  # noqa: E731 (block rounding)
    check(f"{name}: parameters at the peak = the model's", near(peak.get("parameter", 0), p_bytes), str(peak))
    check(f"{name}: gradients at the peak = the parameters", near(peak.get("gradient", 0), p_bytes), str(peak))
    check(f"{name}: optimizer state at the peak = 2 x the parameters (AdamW)",
          near(peak.get("optimizer_state", 0), 2 * p_bytes), str(peak))
    check(f"{name}: activations at the peak", peak.get("activation", 0) > 0, str(peak))
    check(f"{name}: the categories add up to the peak",
          cats["peak"]["total_bytes"] == proc["summary"]["peak_bytes"],
          f"{cats['peak']['total_bytes']} vs {proc['summary']['peak_bytes']}")
    check(f"{name}: a window per step", cats.get("basis") == "steps" and len(cats.get("windows", [])) >= 6,
          str(len(cats.get("windows", []))))
    forward = site_line(cat_script, "forward")
    acts = [s for s in cats.get("peak_sites", []) if s["category"] == "activation"]
    check(f"{name}: an activation site in torch_categories.py", any(
        f.get("file", "").endswith("torch_categories.py") for s in acts for f in s["stack"][:3]),
        f"forward line {forward}: " + json.dumps([s["stack"][:2] for s in acts])[:800])

# The allocator configurations with the bridge: expandable segments (SEGMENT_MAP events) and the
# cudaMallocAsync backend (the bridge declines, runtime-level events stay).
alloc = here / "torch_alloc.py"
for name, conf in () if skip("bridge") else (("bridge_expandable", "expandable_segments:True"),
                                            ("bridge_async", "backend:cudaMallocAsync")):
    r, traces = run(name, [sys.executable, alloc, str(work / f"{name}.json")], {"PYTORCH_CUDA_ALLOC_CONF": conf})
    rep = report(name, traces) if traces else None
    check(f"{name}: runs", r.returncode == 0 and rep is not None, r.stderr[-800:])
    if not rep:
        continue
    t = rep["summary"]["torch"]
    print(f"   torch: {t} stderr: {r.stderr.strip()[-300:]}")
    if name == "bridge_expandable":
        check(f"{name}: tensor events with expandable segments", t["allocs"] > 50, str(t))
    else:
        check(f"{name}: bridge declined with one line", "not attached" in r.stderr and t["allocs"] == 0, r.stderr[-400:])
        check(f"{name}: cudaMallocAsync still seen", rep["summary"]["by_api"].get("cudaMallocAsync", {}).get("allocations", 0) >= 100)

# Issue 22: the libraries' own memory, and an OOM at the process's memory-fraction cap.
libs = here / "torch_libraries.py"
if not skip("libs"):
    bare, _ = run("libs_bench_bare", [sys.executable, libs, "bench"], shim_on=False)
    r, traces = run("libs_bench", [sys.executable, libs, "bench"])
    check("libs_bench: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
          repr((r.stdout[-300:], r.stderr[-1500:])))
    rep = report("libs_bench", traces) if traces else None
    check("libs_bench: trace", rep is not None, str(traces))
    if rep:
        library = [l for l in rep["leaks"] if l["kind"] == "library"]
        print("   library: " + json.dumps([(l["owner"], l.get("owner_call"), l["api"], l["bytes"], l["count"],
                                            [f.get("function") for f in l["stack"][:3]]) for l in library])[:2000])
        print("   kinds: " + json.dumps([(l["kind"], l["bytes"], l["count"]) for l in rep["leaks"]])[:800])
        print("   attributes: " + json.dumps(rep["processes"][0]["attributes"]))
        check("libs_bench: nothing leaked", rep["summary"]["leaked_bytes"] == 0,
              json.dumps([l for l in rep["leaks"] if l["kind"] == "leak"])[:2000])
        check("libs_bench: cuBLAS's handles are library memory",
              any(l["owner"] in ("cublas", "cublaslt") for l in library), json.dumps(library)[:1500])
        check("libs_bench: PyTorch's cuBLAS workspaces are library memory",
              any(l["owner"] == "torch" and l["api"] == "torch.alloc" for l in library), json.dumps(library)[:1500])
        check("libs_bench: library bytes on the summary",
              rep["summary"]["library_bytes"] == sum(l["bytes"] for l in library) > 0, str(rep["summary"]))
        # Made while autograd ran MmBackward0: the grad_fn is shown under the library's frames.
        labelled = [l for l in library if any(f.get("module") == "grad_fn" for f in l["stack"])]
        check("libs_bench: a grad_fn never hides the library's frames",
              labelled and all(l["stack"][0].get("module") != "grad_fn" for l in labelled),
              json.dumps([l["stack"][:3] for l in labelled])[:1500])
        gate = subprocess.run([str(cli), "check", "--max-leak-bytes", "0", *map(str, traces)],
                              capture_output=True, text=True)
        check("libs_bench: check --max-leak-bytes 0 passes", gate.returncode == 0,
              gate.stdout[-1500:] + gate.stderr[-500:])
        check("libs_bench: check names the library memory", "kept by libraries for themselves" in gate.stdout,
              gate.stdout[-500:])
        text = (reports / "libs_bench.txt").read_text()
        check("libs_bench: text report lists the library memory", "library (not leaks):" in text and "LIBRARY " in text)

    bare, _ = run("libs_oom_cap_bare", [sys.executable, libs, "oom_cap"], shim_on=False)
    r, traces = run("libs_oom_cap", [sys.executable, libs, "oom_cap"])
    check("libs_oom_cap: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
          repr((r.stdout[-300:], r.stderr[-1500:])))
    rep = report("libs_oom_cap", traces) if traces else None
    check("libs_oom_cap: trace", rep is not None, str(traces))
    if rep:
        fraction = rep["processes"][0]["attributes"].get("torch.memory_fraction.0")
        check("libs_oom_cap: the fraction recorded", fraction is not None and abs(float(fraction) - 0.03) < 1e-9,
              str(rep["processes"][0]["attributes"]))
        devices = [d for d in rep["fragmentation"]["per_device"] if d["torch"]]
        ooms = [o for d in devices for o in d["ooms"] if o["source"] == "torch"]
        print("   ooms: " + json.dumps([(o["cause"], o["verdict"]) for o in ooms])[:1500])
        total, limit = (devices[0]["device_total_bytes"], devices[0]["limit_bytes"]) if devices else (None, None)
        check("libs_oom_cap: the cap is fraction x device total",
              bool(total and limit and abs(limit - 0.03 * total) <= 1 << 20), json.dumps(devices)[:1000])
        check("libs_oom_cap: OOM judged at the cap, not by the device's free memory",
              ooms and ooms[0]["cause"] == "memory_limit" and "memory-fraction cap of 3%" in ooms[0]["verdict"]
              and ooms[0]["device_free_bytes"] > 10 * ooms[0]["limit_bytes"], json.dumps(ooms)[:1500])
        line = site_line(libs, "cap_oom")
        check(f"libs_oom_cap: OOM pinned to torch_libraries.py:{line}",
              ooms and (script_frames(ooms[0]["stack"], "torch_libraries.py") or [{}])[0].get("line") == line,
              json.dumps(ooms[:1])[:1500])
        advice = [a["id"] for a in rep.get("recommendations", [])]
        check("libs_oom_cap: cap advice, no allocator-settings advice",
              "raise-memory-fraction" in advice and "expandable-segments" not in advice
              and "max-split-size" not in advice, str(advice))

# Issue 22: OOMs under a 3 % cap that activations filled (activation advice, no allocator
# settings) and that weights filled (none of the activation advice), one that fragmentation caused
# (expandable_segments advice kept); the retained-graph loops and
# a clean one (growth, and its advice, only where a graph or outputs are kept).
cause = here / "torch_cause.py"
for mode in () if skip("cause") else ("activation_oom", "weights_oom", "fragmentation_oom"):
    r, traces = run(f"cause_{mode}", [sys.executable, cause, mode])
    check(f"cause_{mode}: the OOM was raised and caught", r.returncode == 0 and "OutOfMemoryError" in r.stdout,
          repr((r.stdout[-300:], r.stderr[-1500:])))
    rep = report(f"cause_{mode}", traces) if traces else None
    if not rep:
        check(f"cause_{mode}: trace", False, str(traces))
        continue
    cats = rep["processes"][0].get("categories") or {}
    print(f"   {mode} categories at the OOM: " + json.dumps(cats.get("ooms", [])[:1])[:1200])
    advice = {a["id"]: a for a in rep.get("recommendations", [])}
    print(f"   {mode} advice: " + json.dumps({k: (a["action"], a["evidence"]) for k, a in advice.items()})[:2500])
    wanted = {"activation-checkpointing", "mixed-precision", "micro-batch"}
    if mode == "activation_oom":
        check("cause_activation_oom: checkpointing, mixed precision and a micro-batch advised",
              wanted <= advice.keys(), str(list(advice)))
        check("cause_activation_oom: no allocator-settings advice",
              "expandable-segments" not in advice and "max-split-size" not in advice, str(list(advice)))
    elif mode == "weights_oom":
        check("cause_weights_oom: none of the activation advice", not (wanted & advice.keys()), str(list(advice)))
    else:
        ooms = [o for d in rep["fragmentation"]["per_device"] for o in d["ooms"] if o["source"] == "torch"]
        print("   fragmentation ooms: " + json.dumps([(o["cause"], o["verdict"]) for o in ooms])[:1200])
        check("cause_fragmentation_oom: judged fragmentation", ooms and ooms[0]["cause"] == "fragmentation",
              json.dumps(ooms)[:1500])
        check("cause_fragmentation_oom: expandable_segments advised, no cap or activation advice",
              "expandable-segments" in advice and "raise-memory-fraction" not in advice
              and not (wanted & advice.keys()), str(list(advice)))
for mode in () if skip("cause") else ("retain_accumulate", "list_losses", "dict_outputs", "clean"):
    bare, _ = run(f"cause_{mode}_bare", [sys.executable, cause, mode], shim_on=False)
    r, traces = run(f"cause_{mode}", [sys.executable, cause, mode])
    check(f"cause_{mode}: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
          repr((r.stdout[-300:], r.stderr[-1500:])))
    rep = report(f"cause_{mode}", traces) if traces else None
    if not rep:
        check(f"cause_{mode}: trace", False, str(traces))
        continue
    growth = [g for g in rep.get("growth", []) if not g.get("suppressed")]
    print(f"   {mode} growth: " + json.dumps([(g["bytes_per_step"], [(f.get('file', '')[-30:], f.get('line'))
                                                                   for f in g["stack"][:4]]) for g in growth])[:2000])
    print(f"   {mode} advice: " + json.dumps([a["id"] for a in rep.get("recommendations", [])]))
    if mode == "clean":
        check("cause_clean: no growth", growth == [], json.dumps(growth)[:1500])
    else:
        check(f"cause_{mode}: growth found", bool(growth), json.dumps(rep["summary"])[:800])
        advice = {a["id"]: a for a in rep.get("recommendations", [])}
        check(f"cause_{mode}: retained-graph advised", "retained-graph" in advice,
              json.dumps({k: a["evidence"] for k, a in advice.items()})[:1500])
        # The growth says why: the loop line that ran the kept forward pass, and the line that
        # keeps its graph (the sum, the list append, the dict store).
        made, held = {"retain_accumulate": ("train_loss", "accumulate"), "list_losses": ("val_loss", "append"),
                      "dict_outputs": ("dict_store", "dict_store")}[mode]
        causes = [g["cause"] for g in growth if g.get("cause")]
        print(f"   {mode} causes: " + json.dumps(causes)[:1200])
        at = lambda place, site: place is not None and place.endswith(f"torch_cause.py:{site_line(cause, site)}")  # noqa: E731
        check(f"cause_{mode}: growth caused by a retained graph made at torch_cause.py:{site_line(cause, made)}",
              any(c["kind"] == "retained_graph" and at(c["made_at"], made) for c in causes), json.dumps(causes)[:1500])
        check(f"cause_{mode}: kept by torch_cause.py:{site_line(cause, held)}",
              any(at(c["held_at"], held) for c in causes), json.dumps(causes)[:1500])
        kept = (rep["processes"][0].get("categories") or {}).get("kept_sites", [])
        forward = site_line(cause, "forward_hidden")
        check(f"cause_{mode}: kept blocks at the forward line torch_cause.py:{forward}",
              any(f.get("line") == forward and f.get("file", "").endswith("torch_cause.py")
                  for s in kept for f in s["stack"][:4]), json.dumps(kept)[:1500])

# Several ranks on one GPU: two DDP ranks (gloo) under gpumemshim record, rank 1 heavier.
ddp = here / "ddp_ranks.py"
if only_overhead:
    rc = subprocess.run([sys.executable, here / "run_overhead.py", str(shim), str(work / "overhead.json"), os.environ.get("GMS_OVERHEAD_ROUNDS", "4"), "60"]).returncode
    check("overhead: measured", rc == 0 and (work / "overhead.json").exists())
    finish()
torchrun = pathlib.Path(sys.executable).parent / "torchrun"
launcher = [torchrun] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
rep = None
if not skip("ddp"):
    r, traces = run("ddp_gloo", [*launcher, "--nproc-per-node", "2", ddp, "gloo"], record=True)
    check("ddp_gloo: ranks ran", r.returncode == 0, r.stderr[-1500:])
    rank_traces = [t for t in traces if t.name.startswith(("rank0.", "rank1."))]
    check("ddp_gloo: one trace per rank", len(rank_traces) == 2, str([t.name for t in traces]))
    rep = report("ddp_gloo", traces) if traces else None
if rep:
    line = site_line(ddp, "rank1_extra")
    rank1 = [l for l in rep["leaks"] if any(f.get("line") == line and f.get("file", "").endswith("ddp_ranks.py")
                                           for f in l["stack"][:3])]
    check(f"ddp_gloo: rank 1's extra buffer at ddp_ranks.py:{line}", bool(rank1), json.dumps(rep["leaks"])[:1500])

# (d) overhead, last: the longest.
if skip_overhead:
    finish()
rc = subprocess.run([sys.executable, here / "run_overhead.py", str(shim), str(work / "overhead.json"), os.environ.get("GMS_OVERHEAD_ROUNDS", "5"), "60"]).returncode
check("overhead: measured", rc == 0 and (work / "overhead.json").exists())
finish()
