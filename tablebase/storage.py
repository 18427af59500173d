"""HDF5 storage of a tablebase (one file, readable by any HDF5 reader), format version 3.

Layout::

    /keys     int64 <i8, (n,)  canonical keys of the non-terminal positions, strictly ascending;
                               chunks of KEY_CHUNK entries, shuffle + deflate + fletcher32
    /values   uint8, (n,)      the value byte of each key (values.py): 0 draw, else DTM + 1,
                               a win when the DTM is odd; chunks of VALUE_CHUNK, deflate + fletcher32
    /index    int64 <i8, (m,)  the first key of each chunk of /keys (m = ceil(n / KEY_CHUNK));
                               its CRC-32 is the attribute index_crc32
    /chunk_table  int64 <i8, (m + m', 2)   byte offset and size in the file of each chunk of
                               /keys, then of /values, as HDF5's chunk index records them (no
                               two overlapping); its CRC-32 is the attribute chunk_table_crc32
    /stats/dtm_wins, /stats/dtm_losses   int64 <i8: positions per DTM (index = plies)

The root attributes hold the metadata (:class:`Metadata`): format and version, rules, start
position, counts per class and per value, the longest DTM, the start position's value and the
seconds of each build phase, and ``metadata_crc32``, the CRC-32 of all the others
(:func:`metadata_crc32`). Strings are fixed-length UTF-8 and the attributes are kept in the root
group's object header, so every byte of HDF5's own metadata is covered by one of HDF5's
checksums (superblock, object headers, the chunk index) and the file has no global heap (HDF5
can loop forever on a damaged one). Terminal positions are not stored: the rules answer them.
Version 3 differs from version 2 only by ``metadata_crc32`` and the string attributes' storage;
version 2 files are still read, with every check but the metadata CRC.

Reading trusts nothing (:class:`TablebaseFile`): on open, the attributes' names, types and CRC,
the dataset names, dtypes, shapes, chunking and filter pipelines are checked against this
layout and the metadata, the index and the chunk table against their CRCs and their order, and
the start position's stored value against the metadata. Chunks are read raw at the offsets of
the chunk table (a probe then costs one small read, not a walk of HDF5's chunk index) and
decoded by our own pipeline, so a damaged filter mask in HDF5's index cannot make us skip a
filter; a chunk is refused if its zlib stream or the stream's Adler-32 fails, if it inflates to
the wrong size, if its keys are out of order or disagree with the index, or if a value byte is
out of range. Whole-file reads (verify, statistics, in-memory probing) also check each chunk's fletcher32 (it covers the same bytes as the zlib checks, so a
single probe skips it). Each failure raises :class:`TablebaseFileError` naming the place.

Files are written (:func:`write_file`) into a temporary file that :func:`reserve_output` holds
(locked against other builds, leftovers of killed ones removed), chunk by chunk (compressed in
parallel, written with HDF5's direct chunk writes), and renamed into place when complete, so a
failed or interrupted write never leaves a file that looks complete. The verifier
(``dobutsu-tb verify``) also checks HDF5's own chunk index against the chunk table, filter
masks included, so that any HDF5 reader can read the file.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from h5py import h5z

try:  # zlib-ng inflates the same streams two to three times faster (a probe inflates two chunks)
    from zlib_ng import zlib_ng as _inflater
except ImportError:  # pragma: no cover - zlib-ng is a dependency; stay correct without it
    _inflater = zlib

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.tablebase.game.key import KEY_SHIFT
from dobutsu_tb.tablebase.output import OutputError, ReservedOutput, describe_os_error
from dobutsu_tb.tablebase.values import MAX_STORED_DTM

FORMAT = "dobutsu-tablebase"
FORMAT_VERSION = 3
RULES = ("dobutsu shogi (SPEC §1): catch and try (Tanaka's convention: catch-terminal and "
         "try-terminal positions are not stored), side to move normalised, mirrors folded")
KEY_LAYOUT = "Huffman-style 64-bit canonical key, first code bit at bit 62 (SPEC §1.3)"
VALUE_LAYOUT = "uint8: 0 draw, otherwise DTM + 1 in plies; an odd DTM is a win, an even one a loss"
#: A sort record (uint64): a key's code bits above its value byte.
RECORD_VALUE_BITS = 8
RECORD_VALUE_MASK = (1 << RECORD_VALUE_BITS) - 1
_KEY_DTYPE, _VALUE_DTYPE = np.dtype("<i8"), np.dtype("u1")
#: The fletcher32 filter appends this many checksum bytes to a chunk.
_CHECKSUM_BYTES = 4


#: Datasets of a tablebase file, at the root and in /stats.
_MEMBERS = {"keys", "values", "index", "chunk_table", "stats"}
_STATS_MEMBERS = {"dtm_wins", "dtm_losses"}
#: The filter pipelines of /keys and /values, in order (what encode_chunks applies).
_KEY_FILTERS = (h5z.FILTER_SHUFFLE, h5z.FILTER_DEFLATE, h5z.FILTER_FLETCHER32)
_VALUE_FILTERS = (h5z.FILTER_DEFLATE, h5z.FILTER_FLETCHER32)
_FILTER_NAMES = {h5z.FILTER_SHUFFLE: "shuffle", h5z.FILTER_DEFLATE: "deflate", h5z.FILTER_FLETCHER32: "fletcher32"}
#: Most entries in a chunk of a file we read (ours have KEY_CHUNK and VALUE_CHUNK).
MAX_CHUNK = 1 << 16
#: Bits that hold any chunk's stored size (at most _stored_bound(8 * MAX_CHUNK) bytes).
_SIZE_BITS = 24


def _stored_bound(raw_bytes: int) -> int:
    """Most bytes a chunk of ``raw_bytes`` can take once deflated (zlib's compressBound) and checksummed."""
    return raw_bytes + (raw_bytes >> 12) + (raw_bytes >> 14) + (raw_bytes >> 25) + 13 + _CHECKSUM_BYTES


class TablebaseFileError(OSError):
    """Raised for a missing, unreadable, corrupt or foreign tablebase file; the message says where."""


@dataclass
class Metadata:
    """What a tablebase file says about itself (its root attributes).

    Attributes
    ----------
    start : str
        Start position in SPEC §1.6 text form.
    reachable, nonterminal, catch_terminal, try_terminal : int
        Position counts (SPEC §1.4).
    wins, draws, losses : int
        Stored (non-terminal) positions per WDL.
    start_wdl, start_dtm : int
        The start position's value (DTM in plies).
    no_moves : int
        Non-terminal positions without a legal move (stored as losses in 0).
    max_dtm : int
        The longest DTM stored, in plies.
    seconds : dict of str to float
        Wall time of each build phase.
    """

    start: str
    reachable: int
    nonterminal: int
    catch_terminal: int
    try_terminal: int
    wins: int
    draws: int
    losses: int
    start_wdl: int
    start_dtm: int
    no_moves: int = 0
    max_dtm: int = 0
    seconds: dict = field(default_factory=dict)
    created: str = ""
    format_version: int = FORMAT_VERSION


_COUNT_FIELDS = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins",
                 "draws", "losses", "start_wdl", "start_dtm", "max_dtm")


def value_counts(per_code: np.ndarray) -> dict:
    """What the metadata say about the values, from the number of positions per value byte.

    Parameters
    ----------
    per_code : numpy.ndarray of int64, shape (256,)
        Positions per value byte (``np.bincount(values, minlength=256)``).

    Returns
    -------
    dict
        ``wins``, ``draws``, ``losses``, ``no_moves`` (losses in 0: the positions without a
        legal move) and ``max_dtm`` (plies), as ints.
    """
    decided = per_code[1:]
    dtm = np.arange(decided.shape[0])
    return {"wins": int(decided[dtm % 2 == 1].sum()), "draws": int(per_code[0]),
            "losses": int(decided[dtm % 2 == 0].sum()), "no_moves": int(decided[0]),
            "max_dtm": int(np.flatnonzero(decided).max()) if decided.any() else 0}


# --- chunk codec -----------------------------------------------------------------------------


def encode_chunks(data: np.ndarray, shuffle: bool, level: int = config.GZIP_LEVEL) -> list[bytes]:
    """The bytes HDF5 stores for each row of ``data`` (shape (chunks, entries), one full chunk a
    row): shuffled if asked (HDF5's shuffle filter), deflated (zlib), then the little-endian
    fletcher32 of the deflated bytes (HDF5's fletcher32 filter)."""
    from dobutsu_tb.encoding.checksums import checksums

    count, size = data.shape
    raw = data.view(np.uint8).reshape(count, size, data.itemsize)
    if shuffle and data.itemsize > 1:
        raw = raw.transpose(0, 2, 1)
    raw = np.ascontiguousarray(raw).reshape(count, -1)
    packed = [zlib.compress(raw[c], level) for c in range(count)]
    return [z + int(c).to_bytes(_CHECKSUM_BYTES, "little") for z, c in zip(packed, checksums(packed))]


def _checksum_matches(chunk: bytes, ours: int) -> bool:
    stored = int.from_bytes(chunk[-_CHECKSUM_BYTES:], "little")
    return stored == ours or stored == int.from_bytes(ours.to_bytes(_CHECKSUM_BYTES, "little"), "big")


def inflate_chunk(chunk: bytes, dtype: np.dtype, count: int, shuffle: bool) -> np.ndarray:
    """The ``count`` elements of one stored chunk, its zlib stream checked (Adler-32 included);
    its fletcher32 is checked by the caller (:meth:`TablebaseFile.read_all` checks it for many
    chunks at once). (Inflating is not bounded, which would cost a probe 6 %: the chunk's
    stored size is checked on open against zlib's bound for ``count`` elements of at most
    :data:`MAX_CHUNK`, so a forged stream inflates to at most about 1,000 times that size.)

    Raises
    ------
    ValueError
        If the zlib stream is damaged or cut short, or inflates to the wrong size.
    """
    if len(chunk) <= _CHECKSUM_BYTES:
        raise ValueError("too short")
    try:
        raw = _inflater.decompress(memoryview(chunk)[:-_CHECKSUM_BYTES])
    except (zlib.error, _inflater.error) as exc:
        raise ValueError(f"damaged deflate stream ({exc})") from None
    if len(raw) != count * dtype.itemsize:
        raise ValueError(f"inflates to {len(raw)} bytes, not {count * dtype.itemsize}")
    if shuffle and dtype.itemsize > 1:
        planes = np.frombuffer(raw, np.uint8).reshape(dtype.itemsize, count)
        return np.ascontiguousarray(planes.T).view(dtype).reshape(count)
    return np.frombuffer(raw, dtype)


# --- writing ---------------------------------------------------------------------------------


def pack_records(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sort records (uint64, shape (n,)) of keys (int64) and value bytes (uint8): ``code << 8 | value``."""
    keys = np.asarray(keys, np.int64)
    return ((keys >> KEY_SHIFT).astype(np.uint64) << np.uint64(RECORD_VALUE_BITS)) | np.asarray(values, np.uint64)


def record_keys(records: np.ndarray) -> np.ndarray:
    """The keys (int64) of sort records."""
    return (records >> np.uint64(RECORD_VALUE_BITS)).astype(np.int64) << KEY_SHIFT


def record_values(records: np.ndarray) -> np.ndarray:
    """The value bytes (uint8) of sort records."""
    return (records & np.uint64(RECORD_VALUE_MASK)).astype(np.uint8)


def _encode_group(records: np.ndarray, first: int, count: int, chunk: int, keys: bool) -> list[bytes]:
    n = records.shape[0]
    lo, hi = first * chunk, min(n, (first + count) * chunk)
    full = np.zeros(count * chunk, np.int64 if keys else np.uint8)  # the last chunk is padded
    full[: hi - lo] = record_keys(records[lo:hi]) if keys else record_values(records[lo:hi])
    return encode_chunks(full.reshape(count, chunk), shuffle=keys)


def _write_chunks(dset, records: np.ndarray, chunk: int, keys: bool, pool, progress) -> None:
    n_chunks = math.ceil(records.shape[0] / chunk)
    per_task = 256
    group = per_task * 8
    for g in range(0, n_chunks, group):
        interrupt.check()
        firsts = range(g, min(n_chunks, g + group), per_task)
        tasks = [pool.submit(_encode_group, records, f, min(per_task, n_chunks - f), chunk, keys) for f in firsts]
        for f, task in zip(firsts, tasks):
            for k, data in enumerate(task.result()):
                dset.id.write_direct_chunk(((f + k) * chunk,), data, 0)
            if progress is not None:
                progress(min(per_task * chunk, records.shape[0] - f * chunk))


def write_tablebase(path, records: np.ndarray, meta: Metadata, progress=None, force: bool = False) -> Path:
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
        write_file(out.tmp, records, meta, progress)
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


def check_records(records: np.ndarray, counts: np.ndarray) -> None:
    """Refuse sort records that no tablebase may hold.

    Parameters
    ----------
    records : numpy.ndarray of uint64, shape (n,)
    counts : numpy.ndarray of int64, shape (256,)
        Records per value byte.

    Raises
    ------
    ValueError
        If the keys are not strictly ascending or a value byte is out of range.
    """
    n = records.shape[0]
    step = 1 << 22  # the order check in slices: no temporaries the size of the records
    for lo in range(0, max(0, n - 1), step):
        part = records[lo: min(n, lo + step + 1)] >> np.uint64(RECORD_VALUE_BITS)
        if not (part[1:] > part[:-1]).all():
            raise ValueError("keys must be strictly ascending")
    if counts[MAX_STORED_DTM + 2:].any():
        raise ValueError("a value byte is out of range")


def _create_hdf5(tmp) -> h5py.File:
    """A new HDF5 file whose every piece of HDF5 metadata carries a checksum: superblock and
    object headers of version 2 or later, the root's attributes kept in its object header
    (compact storage, up to 64 of them) rather than in an unchecked fractal heap."""
    from h5py import h5f, h5p

    fcpl = h5p.create(h5p.FILE_CREATE)
    fcpl.set_attr_phase_change(64, 48)
    fapl = h5p.create(h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5f.LIBVER_V110, h5f.LIBVER_LATEST)
    return h5py.File(h5f.create(os.fsencode(tmp), h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl))


def write_file(tmp, records: np.ndarray, meta: Metadata, progress=None) -> None:
    """Write a tablebase into ``tmp`` (a temporary file that :func:`reserve_output` created);
    the arguments are those of :func:`write_tablebase`. Stops at
    :func:`~dobutsu_tb.encoding.interrupt.check` between chunk groups.

    Raises
    ------
    ValueError
        If the keys are not strictly ascending or a value byte is out of range.
    OutputError
        If HDF5 cannot write the file (a full disk: its message, in one line).
    """
    n = records.shape[0]
    records = np.asarray(records, np.uint64)
    counts = np.bincount(record_values(records), minlength=256)
    check_records(records, counts)
    dtm_counts = counts[1:]  # counts[d + 1] = positions with DTM d
    dtm_wins = np.where(np.arange(dtm_counts.shape[0]) % 2 == 1, dtm_counts, 0)
    dtm_losses = np.where(np.arange(dtm_counts.shape[0]) % 2 == 0, dtm_counts, 0)
    top = int(np.flatnonzero(dtm_counts).max()) + 1 if dtm_counts.any() else 1
    key_chunk, value_chunk = config.KEY_CHUNK, config.VALUE_CHUNK
    from concurrent.futures import ThreadPoolExecutor

    try:
        with _create_hdf5(tmp) as f, ThreadPoolExecutor(config.THREADS) as pool:
            for name, dtype, chunk, shuffle in (("keys", "<i8", key_chunk, True), ("values", "u1", value_chunk, False)):
                dset = f.create_dataset(name, shape=(n,), dtype=dtype, chunks=(max(1, chunk),), compression="gzip",
                                        compression_opts=config.GZIP_LEVEL, shuffle=shuffle, fletcher32=True)
                _write_chunks(dset, records, chunk, name == "keys", pool, progress)
            index = record_keys(records[::key_chunk]).astype("<i8")
            f.create_dataset("index", data=index)
            table = np.concatenate([hdf5_chunk_table(f["keys"]), hdf5_chunk_table(f["values"])])[:, :2]
            f.create_dataset("chunk_table", data=np.ascontiguousarray(table).astype("<i8"), compression="gzip",
                             shuffle=True)
            stats = f.create_group("stats")
            stats.create_dataset("dtm_wins", data=dtm_wins[:top].astype("<i8"))
            stats.create_dataset("dtm_losses", data=dtm_losses[:top].astype("<i8"))
            attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "rules": RULES, "key_layout": KEY_LAYOUT,
                     "value_layout": VALUE_LAYOUT, "start": meta.start,
                     **{name: int(getattr(meta, name)) for name in _COUNT_FIELDS},
                     **{f"seconds_{phase}": float(secs) for phase, secs in meta.seconds.items()},
                     "created": meta.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                     "index_crc32": zlib.crc32(index.tobytes()),
                     "chunk_table_crc32": zlib.crc32(np.ascontiguousarray(table).astype("<i8").tobytes())}
            attrs["metadata_crc32"] = metadata_crc32(attrs)
            for name, value in attrs.items():
                if isinstance(value, str):  # fixed-length UTF-8: no global heap (module docstring)
                    data = value.encode("utf-8")
                    f.attrs.create(name, data=data, dtype=h5py.string_dtype("utf-8", max(1, len(data))))
                else:
                    f.attrs[name] = np.int64(value) if isinstance(value, int) else np.float64(value)
    except (OSError, RuntimeError) as exc:  # h5py's types for a write that failed (a full disk)
        raise OutputError(f"writing the tablebase into {Path(tmp).parent} failed ({describe_os_error(exc)}); "
                          f"nothing was written") from None


# --- reading ---------------------------------------------------------------------------------


def hdf5_chunk_table(dset: h5py.Dataset) -> np.ndarray:
    """HDF5's own record of a one-dimensional chunked dataset's chunks, in chunk order.

    Returns
    -------
    numpy.ndarray of int64, shape (chunks, 3)
        Byte offset in the file, size in bytes and filter mask of each chunk (-1 rows for
        chunks that were never written).
    """
    n_chunks = math.ceil(dset.shape[0] / dset.chunks[0])
    out = np.full((n_chunks, 3), -1, np.int64)

    def take(info):
        c = info.chunk_offset[0] // dset.chunks[0]
        if 0 <= c < n_chunks:
            out[c] = (info.byte_offset, info.size, info.filter_mask)

    dset.id.chunk_iter(take)
    return out



def metadata_crc32(attrs: dict) -> int:
    """CRC-32 of a file's root attributes, ``metadata_crc32`` itself left out: of one line per
    attribute, sorted by name, ``name=value`` with integers in decimal, floats in hexadecimal
    (``float.hex``) and strings JSON-quoted (UTF-8).

    Parameters
    ----------
    attrs : dict of str to int, float or str

    Returns
    -------
    int
        In [0, 2**32).
    """
    import json

    lines = []
    for name in sorted(attrs):
        if name == "metadata_crc32":
            continue
        value = attrs[name]
        text = (json.dumps(value, ensure_ascii=False) if isinstance(value, str)
                else value.hex() if isinstance(value, float) else str(int(value)))
        lines.append(f"{name}={text}")
    return zlib.crc32("\n".join(lines).encode("utf-8"))


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string"}


def _attribute(value, name: str, kind: type, filename: str):
    """An attribute's value as ``kind`` (int, float or str); the type must match exactly (a
    number stored as text, an array or a float count is refused)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if kind is str:
        ok = isinstance(value, str)
    else:
        ok = (np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_, str))
              and isinstance(value, (int, np.integer) if kind is int else (int, float, np.integer, np.floating)))
    if not ok:
        raise TablebaseFileError(f"{filename}: metadata attribute {name!r} is not {_KIND_NAMES[kind]}")
    return kind(value)


#: Root attributes of each readable format version, by type (besides ``seconds_*``, floats).
_STRING_ATTRS = ("format", "rules", "key_layout", "value_layout", "start", "created")
_INT_ATTRS = ("format_version", *_COUNT_FIELDS, "index_crc32", "chunk_table_crc32")
#: Version 2 files have no metadata_crc32; they are read with every other check.
READABLE_VERSIONS = (2, FORMAT_VERSION)


def read_metadata(f: h5py.File, check_counts: bool = True) -> Metadata:
    """The :class:`Metadata` of an open tablebase file, checked: the attributes' names and types,
    their CRC-32 (``metadata_crc32``, format version 3), the start position, and (unless
    ``check_counts`` is false, as the verifier asks, to report the details itself) that the
    counts agree with each other.

    Raises
    ------
    TablebaseFileError
        If the file is not a tablebase of a readable format version, or its attributes are
        missing, unknown, of the wrong type, damaged or contradict each other.
    """
    name = f.filename
    try:
        a = f.attrs
        raw = {k: a[k] for k in a.keys()}
        fmt = raw.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode("utf-8", "replace")
        if not isinstance(fmt, str) or fmt != FORMAT:
            raise TablebaseFileError(f"{name}: not a dobutsu tablebase file")
        version = _attribute(raw.get("format_version"), "format_version", int, name)
        if version not in READABLE_VERSIONS:
            raise TablebaseFileError(f"{name}: format version {version} (this program reads version "
                                     f"{FORMAT_VERSION}; build the file again with 'dobutsu-tb build')")
        known = (*_STRING_ATTRS, *_INT_ATTRS) + (("metadata_crc32",) if version >= 3 else ())
        missing = [k for k in known if k not in raw and k != "created"]
        if missing:
            raise TablebaseFileError(f"{name}: metadata attribute {missing[0]!r} is missing (a damaged file?)")
        unknown = [k for k in raw if k not in known and not k.startswith("seconds_")]
        if unknown:
            raise TablebaseFileError(f"{name}: unknown metadata attribute {unknown[0]!r} (a damaged file?)")
        attrs = {k: _attribute(v, k, str if k in _STRING_ATTRS else float if k.startswith("seconds_") else int, name)
                 for k, v in raw.items()}
        if version >= 3 and attrs["metadata_crc32"] != metadata_crc32(attrs):
            raise TablebaseFileError(f"{name}: the metadata fail their CRC-32 check: the file is damaged")
    except TablebaseFileError:
        raise
    except Exception as exc:  # h5py raises assorted types for damaged attribute headers
        raise TablebaseFileError(f"{name}: unreadable metadata ({' '.join(str(exc).split())})") from None
    meta = Metadata(start=attrs["start"], created=attrs.get("created", ""), format_version=version,
                    seconds={k[len("seconds_"):]: v for k, v in attrs.items() if k.startswith("seconds_")},
                    **{k: attrs[k] for k in _COUNT_FIELDS})
    problem = _start_problem(meta.start) or (_metadata_problem(meta) if check_counts else None)
    if problem:
        raise TablebaseFileError(f"{name}: inconsistent metadata: {problem}")
    return meta


def _start_problem(text: str) -> str | None:
    from dobutsu_tb.tablebase.game.position import Position, PositionError
    from dobutsu_tb.tablebase.game.rules import NONTERMINAL, classify

    try:
        position = Position.from_text(text)
    except PositionError as exc:
        return f"the start position {text!r} is not a position ({exc})"
    if classify(position.state()) != NONTERMINAL:
        return f"the start position {text} is terminal"
    return None


def _metadata_problem(m: Metadata) -> str | None:
    if min(m.reachable, m.nonterminal, m.catch_terminal, m.try_terminal, m.no_moves, m.wins, m.draws, m.losses) < 0:
        return "a negative count"
    if m.reachable != m.nonterminal + m.catch_terminal + m.try_terminal:
        return "reachable is not non-terminal + catch-terminal + try-terminal"
    if m.wins + m.draws + m.losses != m.nonterminal:
        return "wins + draws + losses is not the number of non-terminal positions"
    if not 0 <= m.max_dtm <= MAX_STORED_DTM:
        return f"the longest DTM {m.max_dtm} is out of range"
    if m.start_wdl not in (-1, 0, 1) or not 0 <= m.start_dtm <= m.max_dtm:
        return "the start position's value is out of range"
    if (m.start_dtm != 0) if m.start_wdl == 0 else (m.start_dtm % 2 == 1) != (m.start_wdl == 1):
        return "the start position's DTM contradicts its WDL"
    return None


class TablebaseFile:
    """An open tablebase file whose layout has been checked; chunks are checked as they are read.

    Parameters
    ----------
    path : str or Path
    check_counts : bool, optional
        Refuse metadata whose counts contradict each other (default). The verifier turns it off
        and compares the counts with the data itself.

    Attributes
    ----------
    metadata : Metadata
    n : int
        Stored positions.
    key_chunk, value_chunk : int
        Entries per chunk of /keys and /values.
    index : numpy.ndarray of int64, shape (ceil(n / key_chunk),)
        The first key of each chunk of /keys.


    Raises
    ------
    TablebaseFileError
        If the file is missing, not HDF5, not a tablebase of this version, or its layout,
        metadata or index is damaged.
    """

    def __init__(self, path, check_counts: bool = True):
        self.path = Path(path)
        self._fd = None
        if not self.path.exists():
            raise TablebaseFileError(f"{self.path}: no such file (build one with 'dobutsu-tb build')")
        if self.path.is_dir():
            raise TablebaseFileError(f"{self.path} is a folder, not a tablebase file")
        self._open()
        self._check_counts = check_counts
        try:
            self.metadata = read_metadata(self._file, check_counts)
            self._check_layout()
            if check_counts:
                self._check_start_value()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        """Open the file twice, with h5py (the metadata) and as a descriptor (the chunks), and
        make sure both are the same file: one replaced in between (a build finishing) is reopened."""
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
            except OSError as exc:
                raise TablebaseFileError(f"{self.path}: cannot be read ({describe_os_error(exc)})") from None
            try:
                self._file = h5py.File(self.path, "r")
            except Exception as exc:  # noqa: BLE001 (h5py: OSError, or others for damaged superblocks)
                os.close(fd)
                raise TablebaseFileError(f"{self.path}: not a readable HDF5 file "
                                         f"({' '.join(str(exc).split())})") from None
            stat = os.fstat(fd)
            try:
                same = os.stat(self.path).st_ino == stat.st_ino
            except OSError:
                same = False
            if same:
                self._fd, self._size = fd, stat.st_size
                return
            self._file.close()
            os.close(fd)
        raise TablebaseFileError(f"{self.path}: the file keeps being replaced while it is opened")

    def _fail(self, what: str) -> TablebaseFileError:
        return TablebaseFileError(f"{self.path}: {what}")

    def _dataset(self, name: str, dtype: str, shape: tuple, filters: tuple | None = None) -> h5py.Dataset:
        """The dataset ``name``, checked: its dtype and shape, and for the chunked ones (``filters``
        given) one-dimensional chunks of at most :data:`MAX_CHUNK` entries with exactly these
        filters in this order (what :func:`inflate_chunk` undoes)."""
        try:
            dset = self._file[name]
            if not isinstance(dset, h5py.Dataset):
                raise self._fail(f"/{name} is not a dataset")
            dt, found_shape, chunks = dset.dtype, dset.shape, dset.chunks
            pipeline = None
            if filters is not None:
                plist = dset.id.get_create_plist()
                pipeline = tuple(plist.get_filter(k)[:3:2] for k in range(plist.get_nfilters()))
        except TablebaseFileError:
            raise
        except Exception:  # noqa: BLE001 (h5py: KeyError, OSError, RuntimeError for damaged headers)
            raise self._fail(f"dataset /{name} is missing or unreadable") from None
        if dt != np.dtype(dtype) or (shape is not None and found_shape != shape):
            raise self._fail(f"/{name} is {dt} of shape {found_shape}; expected {np.dtype(dtype)} of shape {shape}")
        if filters is not None:
            if chunks is None or len(chunks) != 1 or not 1 <= chunks[0] <= MAX_CHUNK:
                raise self._fail(f"/{name} is not chunked as a tablebase's is (chunks {chunks})")
            if tuple(code for code, _ in pipeline) != filters or any(
                    code == h5z.FILTER_SHUFFLE and tuple(values) != (dt.itemsize,) for code, values in pipeline):
                raise self._fail(f"/{name} does not have the filters of a tablebase ("
                                 + ", ".join(_FILTER_NAMES[code] for code in filters) + ", in this order)")
        return dset

    def _checked_table(self, name: str, dtype: str, shape: tuple, crc_attr: str) -> np.ndarray:
        dset = self._dataset(name, dtype, shape)
        try:
            data, crc = dset[()], int(self._file.attrs[crc_attr])
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"/{name} is unreadable ({' '.join(str(exc).split())})") from None
        if zlib.crc32(np.ascontiguousarray(data).tobytes()) != crc:
            raise self._fail(f"/{name} fails its CRC-32 check: the file is damaged")
        return np.asarray(data, np.int64)

    def _check_layout(self) -> None:
        try:
            members = set(self._file.keys())
            stats = set(self._file["stats"].keys()) if "stats" in members else set()
        except Exception:  # noqa: BLE001
            raise self._fail("the list of datasets is unreadable: the file is damaged") from None
        for found, expected, where in ((members, _MEMBERS, "/"), (stats, _STATS_MEMBERS, "/stats/")):
            if found != expected:
                extra, missing = sorted(found - expected), sorted(expected - found)
                raise self._fail(f"unexpected dataset {where}{extra[0]}" if extra
                                 else f"dataset {where}{missing[0]} is missing")
        n = self.metadata.nonterminal
        self._keys = self._dataset("keys", "<i8", (n,), _KEY_FILTERS)
        self._values = self._dataset("values", "u1", (n,), _VALUE_FILTERS)
        self.n = n
        self.key_chunk, self.value_chunk = int(self._keys.chunks[0]), int(self._values.chunks[0])
        # Value bytes in range: up to the longest DTM; a loss in 0 only for positions without moves.
        self._top_code = self.metadata.max_dtm + 1
        self._forbidden_code = -1 if self.metadata.no_moves else 1
        for name in _STATS_MEMBERS:
            length = self._dataset(f"stats/{name}", "<i8", None).shape
            if len(length) != 1 or not 1 <= length[0] <= MAX_STORED_DTM + 1:
                raise self._fail(f"/stats/{name} has shape {length}; expected one DTM count per ply")
        m = math.ceil(n / self.key_chunk)
        index = self._checked_table("index", "<i8", (m,), "index_crc32")
        if m and (index[0] <= 0 or (m > 1 and not np.all(index[1:] > index[:-1]))):
            raise self._fail("/index is not strictly ascending: the file is damaged")
        self.index = index
        m_values = math.ceil(n / self.value_chunk)
        table = self._checked_table("chunk_table", "<i8", (m + m_values, 2), "chunk_table_crc32")
        bound = np.repeat([_stored_bound(self.key_chunk * 8), _stored_bound(self.value_chunk)], [m, m_values])
        if table.size and (table[:, 0].min() <= 0 or table[:, 1].min() <= _CHECKSUM_BYTES
                           or (table[:, 1] > bound).any() or (table[:, 0] + table[:, 1]).max() > self._size):
            raise self._fail("/chunk_table points outside the file or holds impossible sizes: the file is damaged")
        # No two chunks share a byte. (HDF5 may place a chunk in free space before earlier ones:
        # sorted by offset, with the size in the low bits, a radix sort of one array.)
        packed = np.sort((table[:, 0] << _SIZE_BITS) | table[:, 1], kind="stable")
        starts, ends = packed >> _SIZE_BITS, (packed >> _SIZE_BITS) + (packed & ((1 << _SIZE_BITS) - 1))
        if (starts[1:] < ends[:-1]).any():
            raise self._fail("/chunk_table has chunks that overlap: the file is damaged")
        self._chunks = {"keys": (table[:m, 0].copy(), table[:m, 1].copy()),
                        "values": (table[m:, 0].copy(), table[m:, 1].copy())}

    def _check_start_value(self) -> None:
        """The start position is stored with the value the metadata give it (one probe)."""
        from dobutsu_tb.tablebase.game.key import canonical_key
        from dobutsu_tb.tablebase.game.position import Position

        m = self.metadata
        key = int(canonical_key(Position.from_text(m.start).state()))
        c = self.chunk_of(key)
        keys = self.read_keys(c) if c >= 0 else np.zeros(0, np.int64)
        i = int(keys.searchsorted(key))
        if i >= keys.shape[0] or keys[i] != key:
            raise self._fail(f"inconsistent metadata: the start position {m.start} is not stored")
        i += c * self.key_chunk
        code = self.check_value(int(self.read_values(i // self.value_chunk)[i % self.value_chunk]), i)
        if code != (0 if m.start_wdl == 0 else m.start_dtm + 1):
            raise self._fail(f"inconsistent metadata: the start position's value ({m.start_wdl}, {m.start_dtm}) "
                             f"is not the one stored")

    def close(self) -> None:
        self._file.close()
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "TablebaseFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def hdf5(self) -> h5py.File:
        """The open h5py file (for the statistics datasets)."""
        return self._file

    def _raw(self, name: str, c: int) -> bytes:
        """The stored bytes of chunk ``c`` of /keys or /values, read at the chunk table's offset."""
        offsets, sizes = self._chunks[name]
        offset, size = int(offsets[c]), int(sizes[c])
        try:
            data = os.pread(self._fd, size, offset) if hasattr(os, "pread") else self._read_at(offset, size)
        except OSError as exc:
            raise self._fail(f"chunk {c} of /{name} is unreadable ({exc})") from None
        if len(data) != size:
            raise self._fail(f"chunk {c} of /{name} is cut short: the file is truncated")
        return data

    def _read_at(self, offset: int, size: int) -> bytes:  # pragma: no cover - systems without pread
        import threading

        with self.__dict__.setdefault("_read_lock", threading.Lock()):
            os.lseek(self._fd, offset, os.SEEK_SET)
            return os.read(self._fd, size)

    def chunk_count(self, values: bool = False) -> int:
        """Chunks of /keys (or of /values)."""
        return math.ceil(self.n / (self.value_chunk if values else self.key_chunk))

    def read_keys(self, c: int, raw: bytes | None = None) -> np.ndarray:
        """The keys of chunk ``c`` of /keys (int64), checked: the zlib stream and its Adler-32,
        the order of the keys and their agreement with the index. (The chunk's fletcher32, which
        covers the same bytes, is checked by :meth:`read_all`.)

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        count = min(self.key_chunk, self.n - c * self.key_chunk)
        try:
            keys = inflate_chunk(raw if raw is not None else self._raw("keys", c), _KEY_DTYPE,
                                 self.key_chunk, True)[:count]
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /keys is damaged: {exc}") from None
        index = self.index
        if count <= 0 or keys[0] != index[c] or not (keys[1:] > keys[:-1]).all() \
                or (c + 1 < index.shape[0] and keys[-1] >= index[c + 1]):
            raise self._fail(f"chunk {c} of /keys is out of order or disagrees with /index: the file is damaged")
        return keys

    def read_values(self, c: int, raw: bytes | None = None) -> np.ndarray:
        """The value bytes of chunk ``c`` of /values (uint8), checked as :meth:`read_keys` checks
        keys, and against the longest DTM.

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        count = min(self.value_chunk, self.n - c * self.value_chunk)
        try:
            values = inflate_chunk(raw if raw is not None else self._raw("values", c), _VALUE_DTYPE,
                                   self.value_chunk, False)[:count]
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /values is damaged: {exc}") from None
        if count <= 0:
            raise self._fail(f"chunk {c} of /values is out of range: the file is damaged")
        return values

    def check_value(self, code: int, i: int) -> int:
        """``code``, the value byte of entry ``i``, after a range check.

        Raises
        ------
        TablebaseFileError
            If it is beyond the longest DTM of the metadata, or a loss in 0 in a file without
            positions that have no moves (the only stored positions lost in 0).
        """
        if code > self._top_code or code == self._forbidden_code:
            raise self._fail(f"the value byte of entry {i} ({code}) is out of range: the file is damaged")
        return code

    def chunk_of(self, key: int) -> int:
        """The chunk of /keys that would hold ``key``, or -1 if it is below every key."""
        return int(self.index.searchsorted(key, "right")) - 1

    def read_all(self, progress=None) -> tuple[np.ndarray, np.ndarray]:
        """Every key and value byte, each chunk checked, its fletcher32 included (in parallel).
        Whole-file readers also call :meth:`check_hdf5_index`.

        Returns
        -------
        keys : numpy.ndarray of int64, shape (n,)
        values : numpy.ndarray of uint8, shape (n,)

        Raises
        ------
        TablebaseFileError
            If a chunk is damaged, or (unless the file was opened with ``check_counts`` false)
            the counts of the metadata disagree with the values (:func:`value_counts`).
        """
        from concurrent.futures import ThreadPoolExecutor

        from dobutsu_tb.encoding.checksums import checksums

        keys = np.empty(self.n, np.int64)
        values = np.empty(self.n, np.uint8)
        jobs = [("keys", c) for c in range(self.chunk_count())] + [("values", c) for c in range(self.chunk_count(True))]
        step = 2048
        groups = [jobs[i:i + step] for i in range(0, len(jobs), step)]

        def fetch(part):
            return [self._raw(name, c) for name, c in part]

        def work(part, raws):
            sums = checksums([memoryview(r)[:-_CHECKSUM_BYTES] for r in raws])
            for (name, c), raw, ours in zip(part, raws, sums.tolist()):
                if not _checksum_matches(raw, ours):
                    raise self._fail(f"chunk {c} of /{name} is damaged: fletcher32 checksum mismatch")
                if name == "keys":
                    arr = self.read_keys(c, raw)
                    keys[c * self.key_chunk: c * self.key_chunk + arr.shape[0]] = arr
                else:
                    arr = self.read_values(c, raw)
                    if arr.max() > self._top_code or (arr == self._forbidden_code).any():
                        raise self._fail(f"chunk {c} of /values holds a value byte out of range: the file is damaged")
                    values[c * self.value_chunk: c * self.value_chunk + arr.shape[0]] = arr
            return len(part)

        with ThreadPoolExecutor(config.THREADS) as pool:
            pending = []
            for part in groups:
                pending.append(pool.submit(work, part, fetch(part)))
                while len(pending) > 2 * config.THREADS:
                    done = pending.pop(0).result()
                    if progress is not None:
                        progress(done, len(jobs))
            for task in pending:
                done = task.result()
                if progress is not None:
                    progress(done, len(jobs))
        if self._check_counts:
            counts = value_counts(np.bincount(values, minlength=256))
            for name, count in counts.items():
                if getattr(self.metadata, name) != count:
                    raise self._fail(f"inconsistent metadata: {name} is {getattr(self.metadata, name):,} but the "
                                     f"data have {count:,}")
        return keys, values

    def check_hdf5_index(self) -> list[str]:
        """Compare HDF5's own chunk index with the chunk table: offsets, sizes, filter masks.

        Returns
        -------
        list of str
            The disagreements (empty when every HDF5 reader reads what we read).
        """
        problems = []
        for name, dset in (("keys", self._keys), ("values", self._values)):
            try:
                theirs = hdf5_chunk_table(dset)
            except Exception as exc:
                return [f"HDF5's chunk index of /{name} is unreadable ({exc})"]
            ours = np.stack(self._chunks[name], axis=1)
            for c in np.flatnonzero((theirs[:, :2] != ours).any(axis=1))[:5]:
                problems.append(f"chunk {c} of /{name}: HDF5's index says offset {theirs[c, 0]}, size {theirs[c, 1]}; "
                                f"the chunk table says {ours[c, 0]}, {ours[c, 1]}")
            for c in np.flatnonzero(theirs[:, 2] != 0)[:5]:
                problems.append(f"chunk {c} of /{name}: HDF5's filter mask is {theirs[c, 2]:#x}, so HDF5 readers "
                                f"would skip some of its filters")
        return problems

    def read_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """/stats/dtm_wins and /stats/dtm_losses (int64, one count per DTM); their layout was
        checked on open, their values are the verifier's to compare with the data.

        Raises
        ------
        TablebaseFileError
            If they are unreadable.
        """
        out = []
        for name in ("stats/dtm_wins", "stats/dtm_losses"):
            try:
                out.append(np.asarray(self._file[name][()], np.int64).ravel())
            except Exception as exc:  # noqa: BLE001
                raise self._fail(f"/{name} is unreadable ({' '.join(str(exc).split())})") from None
        return out[0], out[1]
