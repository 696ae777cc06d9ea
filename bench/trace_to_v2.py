#!/usr/bin/env python3
"""Rewrites a format 3 trace as format 2.0: the same records, unframed after a 16-byte 2.0 header
(a 3.x block's payload is 2.0's records, docs/trace-format.md), so that the analyzer's time on a
trace the shim wrote can be set beside its time on the same records without blocks, checksums and
compression, and beside a build from before format 3 (bench/analyzer_throughput.sh, docs/benchmarks.md
"2.0 against 3.x").

    python3 bench/trace_to_v2.py IN.trace OUT.trace

Blocks are read as tests/integration/trace_records.py reads them (a block cut short ends the
copy); the End record is kept, so the 2.0 trace reads as "unchecked (format 2)"."""
import pathlib
import struct
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "integration"))
import trace_records  # noqa: E402  (the tests' reader of format 3's blocks)

if len(sys.argv) != 3:
    sys.exit(__doc__.split("\n\n")[1].strip())
source, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(major, _), _, _ = trace_records.header(source)
if major != 3:
    sys.exit(f"{source}: format {major}, not 3")
with open(target, "wb") as out:
    out.write(b"GMSTRACE" + struct.pack("<HHI", 2, 0, 0))
    for block in trace_records.blocks(source):
        out.write(block["payload"])
