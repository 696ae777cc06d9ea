"""Records the traces that report_integrity_test damages byte by byte: integration apps run under
the shim on the fake CUDA, one trace each, written to the directory given as the only argument.

Each app pauses between its steps, so the shim's periodic flushes cut its trace into several
blocks, and each trace stays a few KiB, so that every one of its bytes can be damaged in turn.

Stacks are recorded only as deep as the build's own binaries: an analysis that meets a pc in the
C library opens its separate debug information, which takes ~30 ms where it is installed and
compressed, against ~1 ms for the rest of the analysis of such a trace. The depth that stops short
of it depends on the build (a sanitizer build's shim has more frames of its own), so each app is
recorded again one frame shallower until no recorded pc is outside the build directory."""
import pathlib
import subprocess
import sys

from conftest import BUILD, FAKECUDA, SCENARIOS, VMM, base_env, shim_preload
from trace_records import _record_areas, frames, varint

FINDINGS = BUILD / "tests" / "integration" / "findings_app"
MODULE, STACK = 2, 3

# name: the app's command line. steps: step markers, a per-step leak that grows, weights retained,
# device memory info; threads: three threads' allocations and frees interleaved across flushes;
# torch: caching-allocator events, an OOM judged for fragmentation; vmm: reservations, physical
# memory created, mapped, unmapped and released.
SCENARIOS_TO_RECORD = {
    "steps": [FINDINGS, "growth", 20, 6000],
    "threads": [SCENARIOS, "threads", 3, 30, 5000],
    "torch": [FINDINGS, "frag"],
    "vmm": [VMM, "vmm"],
}


def svarint(data, pos):
    value, pos = varint(data, pos)
    return (value >> 1) ^ -(value & 1), pos


def foreign_pcs(trace):
    """Recorded pcs that lie in a module outside the build directory."""
    modules, pcs = [], set()
    for data in _record_areas(trace)[1]:
        for kind, at, _ in frames(data):
            if kind == MODULE:
                _, at = varint(data, at)  # load bias
                start, at = varint(data, at)
                size, at = varint(data, at)
                n, at = varint(data, at)  # build id
                n, at = varint(data, at + n)
                modules.append((start, size, data[at:at + n].decode(errors="replace")))
            elif kind == STACK:
                _, at = varint(data, at)  # id
                count, at = varint(data, at)
                pc = 0
                for _ in range(count):
                    delta, at = svarint(data, at)
                    pc += delta
                    pcs.add(pc)
    build = str(BUILD.resolve())
    return {pc for pc in pcs for start, size, path in modules
            if start <= pc < start + size and not str(pathlib.Path(path).resolve()).startswith(build)}


def record(name, args, out):
    trace = out / f"{name}.trace"
    for depth in range(8, 0, -1):
        trace.unlink(missing_ok=True)
        env = base_env(LD_PRELOAD=shim_preload(), GPUMEMSHIM_OUTPUT=trace, GPUMEMSHIM_DEPTH=depth)
        r = subprocess.run([str(a) for a in args], env=env, capture_output=True, text=True, timeout=120,
                           cwd=out)
        if r.returncode != 0 or not trace.exists():
            sys.exit(f"{name}: {args} exited {r.returncode} without a trace: {r.stderr}")
        if not foreign_pcs(trace):
            print(f"{name}: {trace.stat().st_size} bytes, stacks {depth} frames deep")
            return
    sys.exit(f"{name}: every recorded stack reaches outside {BUILD}")


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    assert FAKECUDA.is_dir(), FAKECUDA
    for name, args in SCENARIOS_TO_RECORD.items():
        record(name, args, out)


if __name__ == "__main__":
    main()
