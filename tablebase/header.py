"""The probe header (format version 5): what a probe needs to read a tablebase file, in HDF5's
user block at the start of the file, so that a probe opens the file without h5py or numpy.

HDF5 leaves the file's first bytes to its user (the *user block*, ``h5py.File(...,
userblock_size=...)``; the HDF5 file proper follows it and stays readable by every HDF5 reader).
The writer (:mod:`~dobutsu_tb.tablebase.writer`) records there, once HDF5 has closed the file::

    bytes 0 .. 30   MAGIC, "dobutsu-tablebase probe header\\n"
    bytes 31 .. 34  the payload's length in bytes, little-endian
    bytes 35 .. 38  the payload's CRC-32, little-endian
    bytes 39 ..     the payload: UTF-8 JSON, an object with
        attrs        the root attributes, as HDF5 holds them (names and values)
        keys, values {"chunk": entries per chunk, "dtype": "<i8", "u1" or "<u2"}
        index        [byte offset, entries] of /index
        chunk_table  [byte offset, rows, columns] of /chunk_table
        file_size    the file's size in bytes
        regions      [[start, end, crc32], ...]: the bytes of HDF5's own metadata (superblock,
                     object headers, the attributes) before the first chunk and after the last,
                     /index and /chunk_table left out, with the CRC-32 of each range
    zero bytes to the end of the user block (a power of two, at least 512 bytes)

A reader (:class:`~dobutsu_tb.tablebase.reader.TablebaseFile`) trusts the header when its CRC
holds and the file is still what it describes: the same size, every region's CRC the same.
Otherwise (an HDF5 tool changed the file after the build, or the metadata are damaged) it
reads the file through h5py, checking everything as for a file without the header. A header
whose magic is there but whose CRC fails is a damaged file.
"""

from __future__ import annotations

import json
import os
import zlib

#: The header's first bytes.
MAGIC = b"dobutsu-tablebase probe header\n"
#: Bytes before the payload: the magic, the payload's length and CRC-32.
PREFIX = len(MAGIC) + 8
#: Bytes a reader reads at once to find the header (more only for a longer payload).
FIRST_READ = 4096
#: The payload's members.
FIELDS = ("attrs", "keys", "values", "index", "chunk_table", "file_size", "regions")


class HeaderError(ValueError):
    """A header whose magic is there but whose bytes are damaged (the message says how)."""


def user_block_size(attrs: dict) -> int:
    """The user block a file needs for a header of these attributes: a power of two, at least
    512 bytes, with room to spare for the offsets, sizes and regions written last.

    Parameters
    ----------
    attrs : dict of str to int, float or str
        The root attributes (their final values, or values of the same length).

    Returns
    -------
    int
    """
    need = PREFIX + len(json.dumps(attrs, ensure_ascii=False).encode("utf-8")) + 1024
    size = 512
    while size < need:
        size *= 2
    return size


def encode(payload: dict, block: int) -> bytes:
    """The header's bytes for ``payload`` (the members of :data:`FIELDS`), zero-padded to
    ``block`` bytes.

    Raises
    ------
    ValueError
        If they do not fit in ``block`` bytes.
    """
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    out = MAGIC + len(data).to_bytes(4, "little") + zlib.crc32(data).to_bytes(4, "little") + data
    if len(out) > block:
        raise ValueError(f"the probe header needs {len(out)} bytes; the user block has {block}")
    return out + bytes(block - len(out))


def read(fd: int) -> dict | None:
    """The payload of the header of the open file ``fd``, or None if the file has none (no
    magic: a file of format version 4 or older, or not ours).

    Raises
    ------
    HeaderError
        If the magic is there but the payload is cut short, fails its CRC-32 or is not the
        object :data:`FIELDS` describes.
    OSError
        If the file cannot be read.
    """
    first = os.pread(fd, FIRST_READ, 0)
    if not first.startswith(MAGIC):
        return None
    if len(first) < PREFIX:
        raise HeaderError("the probe header is cut short")
    length = int.from_bytes(first[len(MAGIC):len(MAGIC) + 4], "little")
    crc = int.from_bytes(first[len(MAGIC) + 4:PREFIX], "little")
    data = first[PREFIX:PREFIX + length]
    if len(data) < length:
        data += os.pread(fd, length - len(data), PREFIX + len(data))
    if len(data) != length:
        raise HeaderError("the probe header is cut short")
    if zlib.crc32(data) != crc:
        raise HeaderError("the probe header fails its CRC-32 check")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: arrays nested hundreds deep
        payload = None
    if not _well_formed(payload):
        raise HeaderError("the probe header is malformed")
    return payload


def _ints(value, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(type(v) is int and v >= 0 for v in value)


def _well_formed(p) -> bool:
    """Whether ``p`` has the members and types of :data:`FIELDS` (their values are the reader's
    to check)."""
    return (isinstance(p, dict) and set(p) == set(FIELDS) and isinstance(p["attrs"], dict)
            and all(isinstance(p[name], dict) and set(p[name]) == {"chunk", "dtype"}
                    and type(p[name]["chunk"]) is int and isinstance(p[name]["dtype"], str)
                    for name in ("keys", "values"))
            and _ints(p["index"], 2) and _ints(p["chunk_table"], 3) and type(p["file_size"]) is int
            and isinstance(p["regions"], list) and all(_ints(r, 3) for r in p["regions"]))


def regions_match(fd: int, payload: dict, size: int, crc32=zlib.crc32) -> bool:
    """Whether the file ``fd`` of ``size`` bytes is still the one its header describes: the same
    size, and every region of HDF5's metadata the same bytes (their CRC-32).

    Parameters
    ----------
    crc32 : callable, optional
        A function with the signature of ``zlib.crc32`` (zlib-ng's is quicker).
    """
    if payload["file_size"] != size:
        return False
    for start, end, crc in payload["regions"]:
        if not start <= end <= size:
            return False
        try:
            data = os.pread(fd, end - start, start) if end > start else b""
        except OSError:
            return False
        if len(data) != end - start or crc32(data) != crc:
            return False
    return True


def regions(path, block: int, guarded_end: int, data_start: int, data_end: int, skip) -> list:
    """The regions of a header for the file at ``path`` as HDF5 left it: its bytes from the end
    of the user block to the first chunk and from the end of the last chunk to the end of the
    file, less the ranges of ``skip`` (/index and /chunk_table, which have CRC-32s of their
    own), each with its CRC-32.

    Parameters
    ----------
    path : str or Path
    block : int
        The user block's size (where HDF5's superblock starts).
    guarded_end : int
        The file's size.
    data_start, data_end : int
        The first byte of the first chunk and the byte after the last one.
    skip : iterable of (int, int)
        Byte ranges ``[start, end)`` left out.

    Returns
    -------
    list of [int, int, int]
    """
    spans = [(block, max(block, data_start)), (max(block, data_end), guarded_end)]
    for lo, hi in sorted(skip):
        cut = []
        for a, b in spans:
            if hi <= a or lo >= b:
                cut.append((a, b))
                continue
            if a < lo:
                cut.append((a, lo))
            if hi < b:
                cut.append((hi, b))
        spans = cut
    out = []
    with open(path, "rb") as f:
        for a, b in spans:
            if b > a:
                f.seek(a)
                out.append([a, b, zlib.crc32(f.read(b - a))])
    return out
