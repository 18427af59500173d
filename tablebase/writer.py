"""Writing a tablebase file: sort records, checked, then written chunk by chunk into a temporary
file that :func:`reserve_output` holds (locked against other builds, leftovers of killed ones
removed), compressed in parallel and written with HDF5's direct chunk writes, then renamed into
place when complete, so a failed or interrupted write never leaves a file that looks complete.
The layout is :mod:`~dobutsu_tb.tablebase.schema`'s.
"""

from __future__ import annotations

import collections
import datetime as _dt
import errno
import math
import os
import time
import zlib
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase import chunk_kernels, header
from dobutsu_tb.tablebase.chunks import encode_chunks, hdf5_chunk_table, place_crc
from dobutsu_tb.tablebase.game.layout import RECORD_VALUE_BITS, WIDE_VALUE_BITS
from dobutsu_tb.tablebase.output import OutputError, ReservedOutput, describe_os_error
from dobutsu_tb.tablebase.schema import (
    COUNT_FIELDS,
    FORMAT,
    FORMAT_VERSION,
    KEY_LAYOUT,
    RULES,
    VALUE_LAYOUT,
    WIDE_VALUE_LAYOUT,
    Metadata,
    metadata_crc32,
)
from dobutsu_tb.tablebase.values import LONG, MAX_STORED_DTM


class LongValues(NamedTuple):
    """The values of the positions whose DTM needs two bytes (254 plies or more), by key: a sort
    record's value byte says only :data:`~dobutsu_tb.tablebase.values.LONG` for them, so that a
    record keeps 56 bits for the key's code whatever the values' width (the analysis keeps
    these DTMs in a list of its own, too).

    Attributes
    ----------
    codes : numpy.ndarray of int64, shape (m,)
        Their keys' codes (``key >> KEY_SHIFT``), strictly ascending.
    values : numpy.ndarray of uint16, shape (m,)
        Their value codes (DTM + 1: at least ``LONG``, save where the tests lower
        ``retrograde.LONG_DTM``).
    """

    codes: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, codes: np.ndarray, values: np.ndarray) -> "LongValues":
        """From codes and value codes in any order (sorted here)."""
        codes = np.asarray(codes, np.int64)
        order = np.argsort(codes, kind="stable")
        return cls(np.ascontiguousarray(codes[order]), np.ascontiguousarray(np.asarray(values, np.uint16)[order]))


def pack_records(keys: np.ndarray, values: np.ndarray, key_shift: int) -> np.ndarray:
    """Sort records (uint64, shape (n,)) of keys (int64) and value codes: ``code << 8 | byte``,
    where ``code = key >> key_shift`` (the variant's ``KEY_SHIFT``) and the byte is the value
    code, or :data:`~dobutsu_tb.tablebase.values.LONG` for one of two bytes (:func:`long_values`
    gives those)."""
    keys, values = np.asarray(keys, np.int64), np.asarray(values)
    if values.dtype != np.uint8:  # (a byte's codes are the bytes: no temporary for the standard game's)
        values = np.minimum(values, LONG)
    return ((keys >> key_shift).astype(np.uint64) << np.uint64(RECORD_VALUE_BITS)) | values.astype(np.uint64)


def long_values(keys: np.ndarray, values: np.ndarray, key_shift: int) -> LongValues:
    """The :class:`LongValues` of keys (int64) and value codes (a DTM of 254 plies or more: a
    value code of ``LONG`` or more)."""
    long = np.asarray(values) >= LONG
    return LongValues.of(np.asarray(keys, np.int64)[long] >> key_shift, np.asarray(values)[long])


def record_keys(records: np.ndarray, key_shift: int) -> np.ndarray:
    """The keys (int64) of sort records (``key_shift``: the variant's ``KEY_SHIFT``)."""
    return (records >> np.uint64(RECORD_VALUE_BITS)).astype(np.int64) << key_shift


def record_values(records: np.ndarray, longs: LongValues | None = None) -> np.ndarray:
    """The value codes of sort records: uint8, or with ``longs`` uint16, the two-byte ones
    (a byte ``LONG``) taken from it.

    Raises
    ------
    ValueError
        If a record's byte is ``LONG`` and ``longs`` has no value for its code.
    """
    codes = (records & np.uint64(0xFF)).astype(np.uint8)
    if longs is None:
        return codes
    out = codes.astype(np.uint16)
    at = np.flatnonzero(codes == LONG)
    if at.shape[0]:
        wanted = (records[at] >> np.uint64(RECORD_VALUE_BITS)).astype(np.int64)
        where = np.minimum(np.searchsorted(longs.codes, wanted), max(0, longs.codes.shape[0] - 1))
        if longs.codes.shape[0] == 0 or not np.array_equal(longs.codes[where], wanted):
            raise ValueError("a record's value needs two bytes, and the long values have none for its key")
        out[at] = longs.values[where]
    return out


class RecordBlocks:
    """Sort records given as blocks, each ascending and above the one before: how a build too big
    to hold every record at once hands them over (:mod:`~dobutsu_tb.tablebase.memory`).

    Parameters
    ----------
    n : int
        Records in all.
    blocks : callable
        ``blocks()`` yields the blocks (uint64 arrays), in order, once.
    longs : LongValues, optional
        The values of two bytes: given, the file stores two-byte values (even if it is empty).
    """

    def __init__(self, n: int, blocks, longs: LongValues | None = None):
        self.n = int(n)
        self.blocks = blocks
        self.longs = longs

    @classmethod
    def of(cls, records: np.ndarray, longs: LongValues | None = None) -> "RecordBlocks":
        """One block: a whole array of records."""
        records = np.asarray(records, np.uint64)
        return cls(records.shape[0], lambda: iter([records]), longs)


def _encode_group(records: np.ndarray, first: int, count: int, chunk: int, keys: bool, key_shift: int,
                  longs: LongValues | None, row: int):
    """Chunks ``first`` .. ``first + count - 1`` of ``records`` for /keys or /values (of two bytes
    with ``longs``), stored, with their :func:`place_crc` values (the chunk's row in /chunk_table
    is ``row + first + k``): the ``(out, sizes, crcs)`` of
    :func:`~dobutsu_tb.tablebase.chunk_kernels.encode_span`, made by it when it can run here,
    else by :func:`encode_chunks` (the same bytes)."""
    if chunk_kernels.AVAILABLE:
        return chunk_kernels.encode_span(records, first, count, chunk, keys, key_shift, longs, row + first)
    n = records.shape[0]
    lo, hi = first * chunk, min(n, (first + count) * chunk)
    dtype = np.int64 if keys else (np.uint8 if longs is None else np.uint16)
    full = np.zeros(count * chunk, dtype)  # the last chunk is padded
    full[: hi - lo] = record_keys(records[lo:hi], key_shift) if keys else record_values(records[lo:hi], longs)
    stored = encode_chunks(full.reshape(count, chunk), shuffle=keys)
    out = np.zeros((count, max(map(len, stored))), np.uint8)
    for k, data in enumerate(stored):
        out[k, :len(data)] = np.frombuffer(data, np.uint8)
    sizes = np.array([len(data) for data in stored], np.int64)
    crcs = np.array([place_crc(row + first + k, data) for k, data in enumerate(stored)], np.int64)
    return out, sizes, crcs


class _ChunkWriter:
    """Chunks compressed in a thread pool (:func:`_encode_group`, tasks of ``task_chunks``
    chunks) and written by this thread in the order they were asked for, with their
    :func:`place_crc` values, up to ``ahead`` tasks in flight: the compressing keeps on while this
    thread writes, with no pause between groups of tasks or between the datasets. With the
    compiled chunks (:data:`~dobutsu_tb.tablebase.chunk_kernels.AVAILABLE`) the pool has one
    thread, whose tasks use every thread; else one a thread, each compressing in Python's zlib."""

    def __init__(self, progress):
        from concurrent.futures import ThreadPoolExecutor

        native = chunk_kernels.AVAILABLE
        self.pool = ThreadPoolExecutor(1 if native else config.THREADS)
        self.task_chunks = _NATIVE_TASK_CHUNKS if native else _TASK_CHUNKS
        self.ahead = 2 if native else 4 * config.THREADS
        self.progress = progress
        self.pending: collections.deque = collections.deque()
        self.waited = self.written = 0.0  # seconds this thread waited for tasks, and spent in HDF5's writes
        self.writes: list = []  # (dataset, its first chunk, the chunks' sizes) in the order written

    def __enter__(self) -> "_ChunkWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(wait=True)

    def submit(self, dset, records: np.ndarray, first: int, count: int, chunk: int, keys: bool, key_shift: int,
               longs: LongValues | None, base: int, row: int, crcs: np.ndarray) -> None:
        """Compress chunks ``first`` .. ``first + count - 1`` of ``records`` (a span that starts at
        chunk ``base`` of ``dset``, whose first chunk is row ``row`` of /chunk_table)."""
        task = self.pool.submit(_encode_group, records, first, count, chunk, keys, key_shift, longs, row + base)
        entries = min(count * chunk, records.shape[0] - first * chunk)
        self.pending.append((dset, base + first, chunk, crcs, entries, task))
        while len(self.pending) > self.ahead:
            self.write_next()

    def write_next(self) -> None:
        """Write the oldest task's chunks (waiting for them)."""
        dset, first, chunk, crcs, entries, task = self.pending.popleft()
        t = time.perf_counter()
        out, sizes, place = task.result()
        write = dset.id.write_direct_chunk
        t2 = time.perf_counter()
        for k in range(sizes.shape[0]):
            write(((first + k) * chunk,), out[k, :sizes[k]], 0)
        self.writes.append((dset, first, sizes.astype(np.int64)))
        self.waited += t2 - t
        self.written += time.perf_counter() - t2
        crcs[first:first + sizes.shape[0]] = place
        if self.progress is not None:
            self.progress(entries)

    def chunk_table(self, dsets: list) -> np.ndarray:
        """Where the chunks of ``dsets`` (every chunk of each written once, in order) lie in the
        file, as :func:`~dobutsu_tb.tablebase.chunks.hdf5_chunk_table` gives them (offset, size,
        filter mask 0; the datasets' rows one after the other), without reading HDF5's chunk
        index back whole (0.35-0.6 s for the standard file's 291,462 chunks, on one thread).

        With the file's free space never reused (:func:`_create_hdf5`), HDF5 puts each chunk at
        the end of the file as it is written, and only around the first chunk of a dataset does
        it put metadata of its own (the chunk index, made as that chunk is written: HDF5 2.0
        puts it after the chunk). So each chunk lies where the one written before it ends,
        except each dataset's first two, whose places are asked. Checked: the last chunk
        written, and the one written before each place asked, are where HDF5 says (anything else
        put between two chunks would push every later one further: a sum of sizes that ends
        right proves every place before it), and a few others besides. Where a check fails,
        HDF5's index is read back whole."""
        index = {id(dset): d for d, dset in enumerate(dsets)}
        rows = np.concatenate([[0], np.cumsum([math.ceil(d.shape[0] / d.chunks[0]) for d in dsets])]).astype(np.int64)
        table = np.full((int(rows[-1]), 3), -1, np.int64)
        checks, asked = [], [0] * len(dsets)
        at, last = 0, None
        for dset, first, sizes in self.writes:
            d, n = index[id(dset)], sizes.shape[0]
            k = 0
            while k < n and asked[d] < 2:  # (its chunk index goes before it or after it)
                if last is not None:
                    checks.append(last)
                at = self._offset(dset, first + k)
                table[rows[d] + first + k, :2] = at, sizes[k]
                at, last = at + int(sizes[k]), (d, first + k)
                asked[d] += 1
                k += 1
            if k == n:
                continue
            ends = at + np.cumsum(sizes[k:])
            table[rows[d] + first + k:rows[d] + first + n, 0] = ends - sizes[k:]
            table[rows[d] + first + k:rows[d] + first + n, 1] = sizes[k:]
            at, last = int(ends[-1]), (d, first + n - 1)
        if last is not None:
            checks.append(last)
        for r in range(0, int(rows[-1]), max(1, int(rows[-1]) // 4)):  # (and a few others: HDF5 finds a chunk
            d = int(np.searchsorted(rows, r, side="right")) - 1  # by its place in a walk: 8 ms for the 100,000th)
            checks.append((d, r - int(rows[d])))
        table[:, 2] = 0
        if (table[:, 0] >= 0).all() and all(self._place(dsets[d], c) == tuple(table[rows[d] + c]) for d, c in checks):
            return table
        return np.concatenate([hdf5_chunk_table(dset) for dset in dsets])

    @staticmethod
    def _place(dset, chunk: int) -> tuple:
        """HDF5's record of chunk ``chunk`` of ``dset``: (offset, size, filter mask)."""
        info = dset.id.get_chunk_info_by_coord((chunk * dset.chunks[0],))
        return info.byte_offset, info.size, info.filter_mask

    @classmethod
    def _offset(cls, dset, chunk: int) -> int:
        return int(cls._place(dset, chunk)[0])

    def drain(self) -> None:
        """Write every task's chunks."""
        while self.pending:
            self.write_next()

    def cancel(self) -> None:
        """Drop the tasks not started (after an error or an interrupt: the pool need not finish them)."""
        for *_, task in self.pending:
            task.cancel()
        self.pending.clear()


#: Chunks a compression task makes (of /keys: 128 Ki positions), in Python's zlib; and in
#: compiled code (512 Ki positions: a task shared by every thread).
_TASK_CHUNKS = 256
_NATIVE_TASK_CHUNKS = 1024


def write_tablebase(path, records: np.ndarray, meta: Metadata, progress=None, force: bool = False,
                    longs: LongValues | None = None) -> Path:
    """Write a tablebase file atomically (:func:`reserve_output`, then :func:`write_file`).

    Parameters
    ----------
    path : str or Path
        Target file; replaced if it exists, only once the new file is complete.
    records : numpy.ndarray of uint64, shape (n,)
        Sort records (:func:`pack_records`), strictly ascending by key.
    meta : Metadata
        Written as attributes; its counts must agree with the records.
    progress : callable, optional
        Called as ``progress(entries)`` as chunks are written (each dataset counts n entries).
    force : bool, optional
        Replace an existing file at ``path`` even if it is not a dobutsu tablebase.
    longs : LongValues, optional
        The values of two bytes (the records' bytes ``LONG``): given, the file stores two-byte
        values.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    ValueError
        If the keys are not strictly ascending or a value byte is out of range.
    OutputError
        If the file cannot be written (:class:`~dobutsu_tb.tablebase.output.ReservedOutput`):
        nothing is written then.
    """
    with reserve_output(path, force) as out:
        write_file(out.tmp, RecordBlocks.of(records, longs), meta, progress)
        return out.commit()


def is_tablebase_file(path) -> bool:
    """Whether ``path`` is an HDF5 file that says it is a dobutsu tablebase (of any format
    version, damaged or not): the files a build may replace without ``--force``."""
    try:
        with h5py.File(path, "r") as f:
            fmt = f.attrs.get("format")
    except Exception:  # noqa: BLE001 (anything unreadable is not known to be ours)
        return False
    return (fmt.decode("utf-8", "replace") if isinstance(fmt, bytes) else fmt) == FORMAT


def reserve_output(path, force: bool = False) -> ReservedOutput:
    """Hold ``path`` for writing a tablebase (:class:`~dobutsu_tb.tablebase.output.ReservedOutput`):
    locked against other builds, leftovers of killed builds removed, the temporary file created
    in the target folder; an existing file that is not a dobutsu tablebase is kept unless
    ``force``. Use as a context manager; write with :func:`write_file` into its ``tmp``, then
    call its ``commit()``.

    Raises
    ------
    OutputError
        When entering, if ``path`` cannot be written.
    """
    return ReservedOutput(path, is_tablebase_file, force)


@njit(parallel=True)
def _value_counts(records, out):
    """``out[p, v]``: the records of part p of ``records`` (``out.shape[0]`` equal parts, a thread
    each) whose value byte is ``v``."""
    n = records.shape[0]
    parts = out.shape[0]
    mask = np.uint64((1 << RECORD_VALUE_BITS) - 1)
    for p in prange(parts):
        for i in range(p * n // parts, (p + 1) * n // parts):
            out[p, np.int64(records[i] & mask)] += 1


@njit(parallel=True)
def _descents(records, parts):
    """How many parts of ``records`` (``parts`` equal ones, a thread each) hold a record whose
    code is not above the one before it (0: the codes strictly ascend)."""
    n = records.shape[0]
    shift = np.uint64(RECORD_VALUE_BITS)
    bad = 0
    for p in prange(parts):
        for i in range(max(1, p * n // parts), (p + 1) * n // parts):
            if records[i] >> shift <= records[i - 1] >> shift:
                bad += 1
                break
    return bad


def _in_parts(records: np.ndarray) -> tuple:
    """``records`` as the kernels above take them (contiguous uint64), and how many parts they split
    them in (a thread each, at least one)."""
    return np.ascontiguousarray(records, np.uint64), max(1, min(config.THREADS, records.shape[0]))


def value_counts_of(records: np.ndarray) -> np.ndarray:
    """Records per value byte, counted on every thread without temporaries.

    Parameters
    ----------
    records : numpy.ndarray of uint64, shape (n,)
        Sort records (:func:`pack_records`).

    Returns
    -------
    numpy.ndarray of int64, shape (256,)
    """
    records, parts = _in_parts(records)
    out = np.zeros((parts, 1 << RECORD_VALUE_BITS), np.int64)
    _value_counts(records, out)
    return out.sum(axis=0)


def check_records(records: np.ndarray, counts: np.ndarray, wide: bool = False) -> None:
    """Refuse sort records that no tablebase may hold.

    Parameters
    ----------
    records : numpy.ndarray of uint64, shape (n,)
    counts : numpy.ndarray of int64, shape (256,)
        Records per value byte (:func:`value_counts_of`).
    wide : bool, optional
        Whether the file stores two-byte values: then a byte ``LONG`` stands for one of them.

    Raises
    ------
    ValueError
        If the keys are not strictly ascending or a value byte is out of range.
    """
    records, parts = _in_parts(records)
    if _descents(records, np.int64(parts)):
        raise ValueError("keys must be strictly ascending")
    # A byte above MAX_STORED_DTM + 1 is LONG, the analysis's mark of a DTM that needs two bytes.
    if not wide and counts[MAX_STORED_DTM + 2:].any():
        raise ValueError(f"a value byte is out of range (above {MAX_STORED_DTM + 1}: a DTM that needs two bytes)")


def _wide_counts(counts: np.ndarray, longs: LongValues) -> np.ndarray:
    """Positions per two-byte value code (int64, shape (65536,)) of records counted per byte
    (``counts``, shape (256,)) and their long values.

    Raises
    ------
    ValueError
        If the records' bytes ``LONG`` are not as many as the long values (checked otherwise by
        :func:`checked_longs`).
    """
    if counts[LONG] != longs.codes.shape[0]:
        raise ValueError(f"{int(counts[LONG]):,} records say their value needs two bytes, and "
                         f"{longs.codes.shape[0]:,} long values are given")
    wide = np.bincount(longs.values.astype(np.int64), minlength=1 << WIDE_VALUE_BITS)
    wide[:LONG] += counts[:LONG]
    return wide


def _create_hdf5(tmp, user_block: int) -> h5py.File:
    """A new HDF5 file whose every piece of HDF5 metadata carries a checksum: superblock and
    object headers of version 2 or later, the root's attributes kept in its object header
    (compact storage, up to 64 of them) rather than in an unchecked fractal heap. It starts with
    a user block of ``user_block`` bytes for the probe header (:mod:`~dobutsu_tb.tablebase.header`),
    and HDF5 allocates every new piece at the end of the file (no free-space reuse, no
    aggregation): what HDF5 writes after the chunks (the small datasets, the attributes, and
    any later change by an HDF5 tool) lands after them."""
    from h5py import h5f, h5p

    fcpl = h5p.create(h5p.FILE_CREATE)
    fcpl.set_attr_phase_change(64, 48)
    fcpl.set_userblock(user_block)
    fcpl.set_file_space_strategy(h5f.FSPACE_STRATEGY_NONE, False, 1)
    fapl = h5p.create(h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5f.LIBVER_V110, h5f.LIBVER_LATEST)
    return h5py.File(h5f.create(os.fsencode(tmp), h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl))


#: Bytes of HDF5's own metadata (object headers, the chunk indexes' nodes, the attributes) that
#: the end of a write needs besides the small datasets: a generous bound.
METADATA_ROOM = 64 * 1024


def _free_bytes(path) -> int | None:
    """The bytes free for us on the disk of ``path``, None where the system cannot tell."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # (no statvfs here)
        return None
    return st.f_bavail * st.f_frsize


def _room_for_metadata(tmp, data_bytes: int) -> None:
    """Refuse to go on when the disk cannot hold the file's last ``data_bytes`` and its metadata:
    HDF5 writes those when it closes datasets (also from h5py's destructors, where a failure
    cannot be passed on) and when it closes the file, and a write that fails there leaves HDF5
    unable to close the file cleanly (at a full disk the process could crash at its exit).

    Raises
    ------
    OSError
        When the folder has less room than that: the message says how many bytes are needed
        where, and how many are free (a disk of 64 KiB cannot hold even an 8 KiB tablebase,
        because of the :data:`METADATA_ROOM` set aside).
    """
    free = _free_bytes(tmp)
    if free is None:  # HDF5's own errors say it
        return
    need = data_bytes + METADATA_ROOM
    if free < need:
        raise OSError(f"{os.strerror(errno.ENOSPC)}: the end of the write needs {need:,} bytes in {Path(tmp).parent}, "
                      f"where {free:,} are free: {data_bytes:,} for the last data and {METADATA_ROOM:,} set aside "
                      f"for HDF5's metadata")


def _attributes(meta: Metadata, value_bits: int, created: str, index_crc: int, table_crc: int) -> dict:
    """The root attributes of a file (``metadata_crc32`` last): its metadata, layout and the
    CRC-32s of /index and /chunk_table."""
    attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "rules": RULES, "key_layout": KEY_LAYOUT,
             "value_layout": VALUE_LAYOUT if value_bits == RECORD_VALUE_BITS else WIDE_VALUE_LAYOUT,
             "start": meta.start, "variant": meta.variant.to_json(),
             **{name: int(getattr(meta, name)) for name in COUNT_FIELDS},
             **{f"seconds_{phase}": float(secs) for phase, secs in meta.seconds.items()},
             "created": created, "index_crc32": index_crc, "chunk_table_crc32": table_crc}
    attrs["metadata_crc32"] = metadata_crc32(attrs)
    return attrs


def _write_header(tmp, block: int, payload: dict, data_start: int, data_end: int, places) -> None:
    """Write the probe header (:mod:`~dobutsu_tb.tablebase.header`) into the user block of
    ``tmp``, which HDF5 has closed: ``payload`` (its attributes and layout) with the file's size
    and the regions of HDF5's metadata around the chunks ``[data_start, data_end)``, less the
    byte ranges ``places`` ((offset, size) of /index and /chunk_table).

    Raises
    ------
    OSError
        If the file cannot be read or written.
    """
    size = os.path.getsize(tmp)
    skip = [(offset, offset + nbytes) for offset, nbytes in places]
    payload = {**payload, "file_size": size, "regions": header.regions(tmp, block, size, data_start, data_end, skip)}
    data = header.encode(payload, block)
    with open(tmp, "r+b") as out:
        out.write(data)


def checked_longs(longs) -> LongValues:
    """``longs`` as the writer takes them (int64 codes, uint16 values, contiguous), refused
    before anything is written if they cannot be a file's long values.

    Raises
    ------
    ValueError
        If the codes and values are not integer arrays of one dimension and one length, a code
        is negative or wider than a sort record holds (56 bits), a value is not in 1 .. 65535,
        or the codes are not strictly ascending.
    """
    try:
        codes, values = longs.codes, longs.values
    except AttributeError:
        raise ValueError("the long values must be a LongValues (their codes and values)") from None
    codes, values = np.asarray(codes), np.asarray(values)
    if codes.ndim != 1 or values.ndim != 1 or codes.shape != values.shape:
        raise ValueError(f"the long values' codes and values must be two arrays of one length; "
                         f"shapes {codes.shape} and {values.shape} given")
    for name, a in (("codes", codes), ("values", values)):
        if a.shape[0] and not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"the long values' {name} must be integers, not {a.dtype}")
    if codes.shape[0]:
        if int(codes.min()) < 0 or int(codes.max()) >= 1 << (64 - RECORD_VALUE_BITS):
            raise ValueError(f"a long value's code is out of range (0 .. 2**{64 - RECORD_VALUE_BITS} - 1)")
        if int(values.min()) < 1 or int(values.max()) >= 1 << WIDE_VALUE_BITS:
            raise ValueError(f"a long value is out of range (a value code 1 .. {(1 << WIDE_VALUE_BITS) - 1})")
    codes, values = np.ascontiguousarray(codes, np.int64), np.ascontiguousarray(values, np.uint16)
    if codes.shape[0] > 1 and (np.diff(codes) <= 0).any():
        raise ValueError("the long values' keys must be strictly ascending")
    return LongValues(codes, values)


def write_file(tmp, records, meta: Metadata, progress=None, profile: dict | None = None) -> None:
    """Write a tablebase into ``tmp`` (a temporary file that :func:`reserve_output` created);
    the arguments are those of :func:`write_tablebase`, and ``records`` may also be
    :class:`RecordBlocks`. Stops at :func:`~dobutsu_tb.encoding.interrupt.check` between chunk
    groups. Given ``profile``, it adds the wall seconds of the write's parts on this thread:
    ``blocks`` (making the blocks of records), ``waiting`` (for the compressed chunks),
    ``hdf5`` (HDF5's chunk writes, with the loop that makes them), ``chunk_table`` (the chunks'
    places, :meth:`_ChunkWriter.chunk_table`) and
    ``finish`` (the small datasets, the attributes and the header).

    The file's values are one byte each, or two when the records' :class:`RecordBlocks` carry
    long values (for DTMs of 254 plies or more).

    Raises
    ------
    ValueError
        If the keys are not strictly ascending, a value is out of range, or ``longs`` cannot be
        long values (:func:`checked_longs`: before anything is written).
    OutputError
        If HDF5 cannot write the file (a full disk: its message, in one line).
    """
    blocks = records if isinstance(records, RecordBlocks) else RecordBlocks.of(records)
    n = blocks.n
    longs = None if blocks.longs is None else checked_longs(blocks.longs)
    value_bits = RECORD_VALUE_BITS if longs is None else WIDE_VALUE_BITS
    from dobutsu_tb.tablebase.game.game import game_of

    key_shift = game_of(meta.variant).layout["KEY_SHIFT"]
    # HDF5 refuses chunks larger than the dataset: a small tablebase has one chunk of each.
    key_chunk, value_chunk = max(1, min(config.KEY_CHUNK, n)), max(1, min(config.VALUE_CHUNK, n))
    unit = math.lcm(key_chunk, value_chunk)  # blocks are written in whole units of both chunks
    value_dtype = "u1" if value_bits == RECORD_VALUE_BITS else "<u2"
    created = meta.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    user_block = header.user_block_size(_attributes(meta, value_bits, created, 0xFFFFFFFF, 0xFFFFFFFF))
    try:
        with _create_hdf5(tmp, user_block) as f, _ChunkWriter(progress) as chunks:
            dsets = {}
            for name, dtype, chunk, shuffle in (("keys", "<i8", key_chunk, True),
                                                ("values", value_dtype, value_chunk, False)):
                dsets[name] = f.create_dataset(name, shape=(n,), dtype=dtype, chunks=(max(1, chunk),),
                                               compression="gzip", compression_opts=config.GZIP_LEVEL, shuffle=shuffle,
                                               fletcher32=True)
            counts = np.zeros(1 << RECORD_VALUE_BITS, np.int64)
            m_keys, m_values = math.ceil(n / key_chunk), math.ceil(n / value_chunk)
            crcs = {"keys": np.zeros(m_keys, np.int64), "values": np.zeros(m_values, np.int64)}
            rows = {"keys": 0, "values": m_keys}  # each dataset's first row in /chunk_table
            index_parts = []
            written = 0
            carry = np.zeros(0, np.uint64)
            last = None  # the code of the last record so far, for the order across blocks

            step = chunks.task_chunks * unit  # a task of the larger chunks, two of the smaller (powers of two)

            def write_span(span):
                """Hand ``span``'s chunks to the pool, keys and values in turns; writes those done."""
                nonlocal written
                for lo in range(0, span.shape[0], step):
                    interrupt.check()
                    for name, chunk in (("keys", key_chunk), ("values", value_chunk)):
                        end = math.ceil(min(span.shape[0], lo + step) / chunk)
                        for first in range(lo // chunk, end, chunks.task_chunks):
                            chunks.submit(dsets[name], span, first, min(chunks.task_chunks, end - first), chunk,
                                          name == "keys", key_shift, longs, written // chunk, rows[name],
                                          crcs[name])
                index_parts.append(record_keys(span[::key_chunk], key_shift).astype("<i8"))
                written += span.shape[0]

            def take(block):
                nonlocal counts, carry, last
                block = np.asarray(block, np.uint64)
                if block.shape[0] == 0:
                    return
                counts += value_counts_of(block)
                check_records(block, counts, longs is not None)
                if last is not None and (block[0] >> np.uint64(RECORD_VALUE_BITS)) <= last:
                    raise ValueError("keys must be strictly ascending")
                last = block[-1] >> np.uint64(RECORD_VALUE_BITS)
                if carry.shape[0]:
                    head = np.concatenate([carry, block[: unit - carry.shape[0]]])
                    block = block[unit - carry.shape[0]:]
                    if head.shape[0] < unit:
                        carry = head
                        return
                    write_span(head)
                full = block.shape[0] // unit * unit
                if full:
                    write_span(block[:full])
                carry = block[full:].copy()

            made = 0.0
            try:
                t = time.perf_counter()
                for block in blocks.blocks():
                    made += time.perf_counter() - t
                    take(block)
                    chunks.drain()  # before the next block is made: one block in memory at a time
                    del block
                    t = time.perf_counter()
                if carry.shape[0]:
                    write_span(carry)
                chunks.drain()
            except BaseException:
                chunks.cancel()
                raise
            if written != n:
                raise ValueError(f"{written:,} records given, {n:,} announced")
            if longs is not None:
                counts = _wide_counts(counts, longs)
            dtm_counts = counts[1:]  # counts[d + 1] = positions with DTM d
            dtm_wins = np.where(np.arange(dtm_counts.shape[0]) % 2 == 1, dtm_counts, 0)
            dtm_losses = np.where(np.arange(dtm_counts.shape[0]) % 2 == 0, dtm_counts, 0)
            top = int(np.flatnonzero(dtm_counts).max()) + 1 if dtm_counts.any() else 1
            index = np.concatenate(index_parts) if index_parts else np.zeros(0, "<i8")
            _room_for_metadata(tmp, 8 * index.shape[0] + 24 * (m_keys + m_values))
            f.create_dataset("index", data=index)
            t = time.perf_counter()
            table = chunks.chunk_table([dsets["keys"], dsets["values"]])
            t_table = time.perf_counter() - t
            t = time.perf_counter()
            table[:, 2] = np.concatenate([crcs["keys"], crcs["values"]])  # the filter masks (all 0) give way to
            table = np.ascontiguousarray(table).astype("<i8")              # the place CRCs
            f.create_dataset("chunk_table", data=table)  # contiguous: quick to open
            stats = f.create_group("stats")
            stats.create_dataset("dtm_wins", data=dtm_wins[:top].astype("<i8"))
            stats.create_dataset("dtm_losses", data=dtm_losses[:top].astype("<i8"))
            attrs = _attributes(meta, value_bits, created, zlib.crc32(index.tobytes()), zlib.crc32(table.tobytes()))
            for name, value in attrs.items():
                if isinstance(value, str):  # fixed-length UTF-8: no global heap (module docstring)
                    data = value.encode("utf-8")
                    f.attrs.create(name, data=data, dtype=h5py.string_dtype("utf-8", max(1, len(data))))
                else:
                    f.attrs[name] = np.int64(value) if isinstance(value, int) else np.float64(value)
            places = {"index": (f["index"].id.get_offset(), index.nbytes),
                      "chunk_table": (f["chunk_table"].id.get_offset(), table.nbytes)}
            data_start = int(table[:, 0].min()) if table.shape[0] else user_block
            data_end = int((table[:, 0] + table[:, 1]).max()) if table.shape[0] else user_block
        payload = {"attrs": attrs, "keys": {"chunk": key_chunk, "dtype": "<i8"},
                   "values": {"chunk": value_chunk, "dtype": np.dtype(value_dtype).str},
                   "index": [places["index"][0], m_keys],
                   "chunk_table": [places["chunk_table"][0], *table.shape]}
        _write_header(tmp, user_block, payload, data_start, data_end, places.values())
        if profile is not None:
            for part, seconds in (("blocks", made), ("waiting", chunks.waited), ("hdf5", chunks.written),
                                  ("chunk_table", t_table), ("finish", time.perf_counter() - t)):
                profile[part] = profile.get(part, 0.0) + seconds
    except (OSError, RuntimeError) as exc:  # h5py's types for a write that failed (a full disk)
        raise OutputError(f"writing the tablebase into {Path(tmp).parent} failed ({describe_os_error(exc)}); "
                          f"nothing was written") from None
