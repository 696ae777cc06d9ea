"""The reader's memory on a long trace: bounded by what it holds (the live set, the sites, the order
window), not by the file. The shim writes a block per flush, a few hundred KiB on a busy program;
the reader's scan of their headers must not leave the whole mapped file resident."""
import os
import subprocess

import pytest

from conftest import BUILD, CLI, cli_env

GEN_TRACE = BUILD / "bench" / "gen_trace"


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory):
    """25.6 M events in 256 KiB blocks (about 240 MB), 4 threads, 16 stacks: the analysis itself
    needs a few tens of MB."""
    trace = tmp_path_factory.mktemp("reader_memory") / "long.trace"
    g = subprocess.run([str(GEN_TRACE), str(trace), "25600000", "--threads", "4", "--stacks", "16",
                        "--block-bytes", "262144"], capture_output=True, text=True, timeout=600)
    assert g.returncode == 0, g.stderr
    return trace


@pytest.mark.skipif(not GEN_TRACE.exists(), reason="built without bench/")
@pytest.mark.skipif(bool(os.environ.get("GPUMEMSHIM_TEST_PRELOAD")),
                    reason="a sanitizer's shadow memory is not the reader's")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_peak_rss_of_a_long_trace_is_far_below_its_size(long_trace, tmp_path, jobs):
    size = long_trace.stat().st_size
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:  # a file, not a pipe: wait4 below must not wait on a full pipe
        p = subprocess.Popen([str(CLI), "report", "--format", "json", "--jobs", jobs, "-o",
                              os.devnull, str(long_trace)], env=cli_env(), stderr=stderr)
        _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err.read_text()
    peak = usage.ru_maxrss * 1024
    assert peak < size // 2, f"peak RSS {peak >> 20} MiB for a {size >> 20} MiB trace"
