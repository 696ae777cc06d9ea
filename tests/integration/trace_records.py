"""A trace's records as (type, time_ns) in file order, read with no help from the project's code
(docs/trace-format.md): what the flush-mark checks walk, here and on the H200
(tests/gpu/check_torch.py). Formats 1.1 and 2.0 (records after a 16-byte header) and 3.x (a 32-byte
header, then blocks: a 40-byte header and a raw, LZ4 (3.3 on) or zstd (3.0-3.2) payload of whole
2.0 records). The blocks' structure is checked; their XXH3 checksums are not
(tests/unit/shim_blocks_test.cpp does)."""
import struct

TIMED = {4, 5, 6, 7, 8, 14, 17}  # records whose payload starts with time_ns
UNTHREADED = {7, 17}  # timed records without a thread: MemInfo, ProcessMemory (NVML samples)
FIXED = {4, 5, 14}  # in a 2.x file: fixed layout, time_ns a u64 (little-endian) at offset 0
FLUSH = 16
ALLOC = 4
END = 11
BLOCK_MAGIC = b"GMSB"
WRITE_FAILED = 1  # format 3 header flags bit 0
RAW, ZSTD, LZ4 = 0, 1, 2  # a format 3 block's codec (format/block.h BlockCodec)


def header(path):
    """(major, minor), flags, write_error of a trace (flags and write_error: 0 before format 3)."""
    data = path.read_bytes()[:32]
    assert data[:8] == b"GMSTRACE"
    major, minor, flags = struct.unpack_from("<HHI", data, 8)
    write_error = struct.unpack_from("<I", data, 16)[0] if major >= 3 else 0
    return (major, minor), flags, write_error


def _zstd_decompress(data, size):
    """One zstd frame: with Debian's python3-zstandard, else through libzstd itself (the H200
    machine's Python has no zstandard module; every machine that runs the shim has libzstd)."""
    try:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    except ImportError:
        import ctypes
        import ctypes.util
        lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        lib.ZSTD_decompress.restype = ctypes.c_size_t
        lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        out = ctypes.create_string_buffer(max(size, 1))
        n = lib.ZSTD_decompress(out, size, data, len(data))
        assert not lib.ZSTD_isError(n), "zstd frame does not decompress"
        return out.raw[:n]


def _lz4_decompress(data, size):
    """One LZ4 block, through liblz4 itself: every machine that runs the shim has it (the shim links
    it), and Debian's Python has no LZ4 module by default."""
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("lz4") or "liblz4.so.1")
    lib.LZ4_decompress_safe.restype = ctypes.c_int
    lib.LZ4_decompress_safe.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    out = ctypes.create_string_buffer(max(size, 1))
    n = lib.LZ4_decompress_safe(data, out, len(data), size)
    assert n == size, "LZ4 block does not decompress to its raw size"
    return out.raw[:n]


def blocks(path):
    """A format 3 trace's blocks in file order: dicts of seq, stored_size, raw_size, record_count,
    codec, offset and payload (decompressed). Stops at a block cut short (a killed or write-failed
    process's last write)."""
    data = path.read_bytes()
    (major, _), _, _ = header(path)
    assert major == 3, major
    pos, out = 32, []
    while pos + 40 <= len(data):
        assert data[pos:pos + 4] == BLOCK_MAGIC, f"no block header at offset {pos}"
        seq, stored, raw, count, codec = struct.unpack_from("<IIIIB", data, pos + 4)
        assert codec in (RAW, ZSTD, LZ4) and (codec != RAW or raw == stored), (codec, raw, stored)
        start = pos + 40
        if start + stored > len(data):
            break
        payload = data[start:start + stored]
        if codec == ZSTD:
            payload = _zstd_decompress(payload, raw)
        elif codec == LZ4:
            payload = _lz4_decompress(payload, raw)
        assert len(payload) == raw, (len(payload), raw)
        out.append(dict(seq=seq, stored_size=stored, raw_size=raw, record_count=count, codec=codec,
                        offset=pos, payload=payload))
        pos = start + stored
    return out


def frames(data, pos=0):
    """(type, payload offset, length) of each whole record of data from pos."""
    while pos < len(data):
        kind = data[pos]
        length, payload = varint(data, pos + 1)
        if payload + length > len(data):  # a killed process's last, partly written record
            return
        yield kind, payload, length
        pos = payload + length


def end_record(path):
    """The End record's fields (time_ns, and in format 3 blocks, records, write_error), or None."""
    for data in _record_areas(path)[1]:
        for kind, payload, length in frames(data):
            if kind == END:
                fields, at = [], payload
                while at < payload + length:
                    value, at = varint(data, at)
                    fields.append(value)
                end = fields
    return locals().get("end")


def _record_areas(path):
    """(fixed layout?, the byte strings that hold the records: the file after its header, or each
    block's payload)."""
    (major, minor), _, _ = header(path)
    assert (major, minor) in {(1, 1), (2, 0), (3, 0), (3, 1), (3, 2), (3, 3)}, (major, minor)
    if major == 3:
        return True, [b["payload"] for b in blocks(path)]
    return major >= 2, [path.read_bytes()[16:]]


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def records(path, with_thread=False):
    """(type, time_ns or None) of every record, in file order; with_thread: (type, time, thread)."""
    fixed, areas = _record_areas(path)
    for data in areas:
        for kind, payload, length in frames(data):
            thread = None
            if fixed and kind in FIXED:
                time = int.from_bytes(data[payload:payload + 8], "little")
                thread = int.from_bytes(data[payload + 8:payload + 12], "little")
            elif kind in TIMED or kind == FLUSH:
                time, after = varint(data, payload)
                if kind != FLUSH and kind not in UNTHREADED:  # the thread next
                    thread = varint(data, after)[0]
            else:
                time = None
            yield (kind, time, thread) if with_thread else (kind, time)


def late_records(path):
    """How many timed records come after a flush mark whose time is later than theirs, and the
    number of marks: the shim's rule (shim/record/in_flight.h) is that there are none."""
    marks, late = [], 0
    for kind, time in records(path):
        if kind == FLUSH:
            marks.append(time)
        elif time is not None and marks and time < marks[-1]:
            late += 1
    return late, len(marks)


def alloc_sizes(path):
    """The sizes of a 2.x or 3.x trace's Alloc records, in file order."""
    fixed, areas = _record_areas(path)
    assert fixed
    return [int.from_bytes(data[payload + 24:payload + 32], "little")
            for data in areas for kind, payload, _ in frames(data) if kind == ALLOC]
