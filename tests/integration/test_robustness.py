"""Bad settings and bad traces: one clear line, the right exit code, nothing lost."""
from conftest import SCENARIOS

MIB = 1 << 20


def test_bad_setting_warns_once_and_program_runs_on(run):
    bare = run.program([SCENARIOS, "leak"], shim=False)
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_DEPTH="lots", GPUMEMSHIM_STACKS="all")
    assert r.returncode == bare.returncode == 0
    assert r.stdout == bare.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("gpumemshim: ") for line in lines), lines
    assert "GPUMEMSHIM_DEPTH" in lines[0] or "GPUMEMSHIM_DEPTH" in lines[1]
    [trace] = run.traces()
    assert run.report(trace)["summary"]["leaked_bytes"] == 3 * MIB


def test_unwritable_output_warns_once_and_program_runs_on(run):
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_OUTPUT=run.dir / "missing-dir" / "x.trace")
    assert r.returncode == 0 and r.stdout == "done\n"
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpumemshim: ") and "missing-dir" in lines[0]


def test_disabled_shim_records_nothing(run):
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_DISABLE=1)
    assert r.returncode == 0 and r.stdout == "done\n" and r.stderr == ""
    assert run.traces() == []


def test_no_stacks_still_counts_bytes(run):
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_STACKS="none")
    assert r.returncode == 0
    [trace] = run.traces()
    [leak] = run.report(trace)["leaks"]
    assert (leak["bytes"], leak["count"]) == (3 * MIB, 3)


def _one_line_error(result, code=2):
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpumemshim: error:"), result.stderr
    return lines[0]


def test_garbage_empty_and_newer_traces_are_rejected(run):
    garbage = run.dir / "garbage.bin"
    garbage.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)
    assert run.program([SCENARIOS, "leak"]).returncode == 0
    [real] = run.traces()
    empty = run.dir / "empty.bin"
    empty.write_bytes(b"")
    newer = run.dir / "newer.bin"
    data = bytearray(real.read_bytes())
    data[8] = 9  # major version 9
    newer.write_bytes(bytes(data))
    for path in (garbage, empty, newer, run.dir / "missing.trace"):
        for command in ("report", "check", "stats"):
            _one_line_error(run.cli(command, path))


def test_junk_between_blocks_is_declared_damage(run):
    """Bytes that are no block (a record of type 0, one claiming an impossible length) after the
    header: the reader skips them to the next good block and says so; check refuses the trace."""
    assert run.program([SCENARIOS, "leak"]).returncode == 0
    [real] = run.traces()
    data = real.read_bytes()
    for name, junk in (("corrupt", b"\x00\x03abc"), ("huge", b"\x04\xff\xff\xff\xff\x0f")):
        path = run.dir / f"{name}.bin"
        path.write_bytes(data[:32] + junk + data[32:])
        report = run.report(path)
        assert report["integrity"]["status"] == "damaged", report["integrity"]
        assert report["summary"]["leaked_bytes"] == 3 * MIB  # every block was still read
        line = _one_line_error(run.cli("check", path))
        assert "damaged" in line and name in line, line


def test_truncated_trace_is_read_up_to_the_cut(run):
    assert run.program([SCENARIOS, "leak"]).returncode == 0
    [real] = run.traces()
    data = real.read_bytes()
    cut = run.dir / "cut.bin"
    cut.write_bytes(data[:-3])  # inside the final record
    report = run.report(cut)
    assert report["processes"][0]["truncated"] is True
    assert report["summary"]["allocations"] == 13
