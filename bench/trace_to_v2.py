#!/usr/bin/env python3
"""Writes a format 3.0 trace's records as a 2.0 trace (the same records after a 16-byte header):
the same recorded events for a build from before format 3, for side-by-side timings
(bench/shim_trace_throughput.sh).

    python3 bench/trace_to_v2.py IN.trace OUT.trace
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "integration"))
import trace_records  # noqa: E402  (the tests' reader of format 3's blocks)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    with dst.open("wb") as out:
        out.write(b"GMSTRACE" + (2).to_bytes(2, "little") + (0).to_bytes(2, "little") + bytes(4))
        for block in trace_records.blocks(src):
            out.write(block["payload"])


if __name__ == "__main__":
    main()
