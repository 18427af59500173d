"""HDF5 storage of a tablebase (one file, readable by any HDF5 reader), format version 2.

Layout::

    /keys     int64 <i8, (n,)  canonical keys of the non-terminal positions, strictly ascending;
                               chunks of KEY_CHUNK entries, shuffle + deflate + fletcher32
    /values   uint8, (n,)      the value byte of each key (values.py): 0 draw, else DTM + 1,
                               a win when the DTM is odd; chunks of VALUE_CHUNK, deflate + fletcher32
    /index    int64 <i8, (m,)  the first key of each chunk of /keys (m = ceil(n / KEY_CHUNK));
                               its CRC-32 is the attribute index_crc32
    /chunk_table  int64 <i8, (m + m', 2)   byte offset and size in the file of each chunk of
                               /keys, then of /values, as HDF5's chunk index records them; its
                               CRC-32 is the attribute chunk_table_crc32
    /stats/dtm_wins, /stats/dtm_losses   int64 <i8: positions per DTM (index = plies)

The root attributes hold the metadata (:class:`Metadata`): format and version, rules, start
position, counts per class and per value, the longest DTM, the start position's value and the
seconds of each build phase. Terminal positions are not stored: the rules answer them.

Reading trusts nothing (:class:`TablebaseFile`): on open, the attributes, dataset names,
dtypes, shapes, chunking and filters are checked against this layout and the metadata, and the
index and the chunk table against their CRCs and their order. Chunks are read raw at the
offsets of the chunk table (a probe then costs one small read, not a walk of HDF5's chunk
index) and decoded by our own pipeline, so a damaged filter mask in HDF5's index cannot make us
skip a filter; a chunk is refused if its zlib stream or the stream's Adler-32 fails, if it inflates to the wrong size, if its keys are out of order or disagree with the
index, or if a value byte is out of range. Whole-file reads (verify, statistics, in-memory
probing) also check each chunk's fletcher32 (it covers the same bytes as the zlib checks, so a
single probe skips it). Each failure raises :class:`TablebaseFileError` naming the place.

Files are written to a temporary name in the target folder, chunk by chunk (compressed in
parallel, written with HDF5's direct chunk writes), and renamed into place when complete, so a
failed or interrupted write never leaves a file that looks complete. The verifier
(``dobutsu-tb verify``) also checks HDF5's own chunk index against the chunk table, filter
masks included, so that any HDF5 reader can read the file.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

try:  # zlib-ng inflates the same streams two to three times faster (a probe inflates two chunks)
    from zlib_ng import zlib_ng as _inflater
except ImportError:  # pragma: no cover - zlib-ng is a dependency; stay correct without it
    _inflater = zlib

from dobutsu_tb.encoding import config
from dobutsu_tb.tablebase.game.key import KEY_SHIFT
from dobutsu_tb.tablebase.values import MAX_STORED_DTM

FORMAT = "dobutsu-tablebase"
FORMAT_VERSION = 2
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
    chunks at once).

    Raises
    ------
    ValueError
        If the zlib stream is damaged or inflates to the wrong size.
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
        firsts = range(g, min(n_chunks, g + group), per_task)
        tasks = [pool.submit(_encode_group, records, f, min(per_task, n_chunks - f), chunk, keys) for f in firsts]
        for f, task in zip(firsts, tasks):
            for k, data in enumerate(task.result()):
                dset.id.write_direct_chunk(((f + k) * chunk,), data, 0)
            if progress is not None:
                progress(min(per_task * chunk, records.shape[0] - f * chunk))


def write_tablebase(path, records: np.ndarray, meta: Metadata, progress=None) -> Path:
    """Write a tablebase file atomically.

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

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    ValueError
        If the keys are not strictly ascending or a value byte is out of range.
    OSError
        If the folder is not writable.
    """
    path = Path(path)
    n = records.shape[0]
    records = np.asarray(records, np.uint64)
    step = 1 << 22  # the order check in slices: no temporaries the size of the records
    for lo in range(0, max(0, n - 1), step):
        part = records[lo: min(n, lo + step + 1)] >> np.uint64(RECORD_VALUE_BITS)
        if not (part[1:] > part[:-1]).all():
            raise ValueError("keys must be strictly ascending")
    counts = np.bincount(record_values(records), minlength=256)
    if counts[MAX_STORED_DTM + 2:].any():
        raise ValueError("a value byte is out of range")
    dtm_counts = counts[1:]  # counts[d + 1] = positions with DTM d
    dtm_wins = np.where(np.arange(dtm_counts.shape[0]) % 2 == 1, dtm_counts, 0)
    dtm_losses = np.where(np.arange(dtm_counts.shape[0]) % 2 == 0, dtm_counts, 0)
    top = int(np.flatnonzero(dtm_counts).max()) + 1 if dtm_counts.any() else 1
    key_chunk, value_chunk = config.KEY_CHUNK, config.VALUE_CHUNK
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent or ".")
    os.close(fd)
    try:
        from concurrent.futures import ThreadPoolExecutor

        with h5py.File(tmp, "w", libver=("v110", "latest")) as f, ThreadPoolExecutor(config.THREADS) as pool:
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
            a = f.attrs
            a["format"] = FORMAT
            a["format_version"] = FORMAT_VERSION
            a["rules"] = RULES
            a["key_layout"] = KEY_LAYOUT
            a["value_layout"] = VALUE_LAYOUT
            a["start"] = meta.start
            for name in _COUNT_FIELDS:
                a[name] = np.int64(getattr(meta, name))
            for phase, secs in meta.seconds.items():
                a[f"seconds_{phase}"] = float(secs)
            a["created"] = meta.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            a["index_crc32"] = np.int64(zlib.crc32(index.tobytes()))
            a["chunk_table_crc32"] = np.int64(zlib.crc32(np.ascontiguousarray(table).astype("<i8").tobytes()))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


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



def read_metadata(f: h5py.File, check_counts: bool = True) -> Metadata:
    """The :class:`Metadata` of an open tablebase file, checked for completeness and (unless
    ``check_counts`` is false, as the verifier asks, to report the details itself) consistency.

    Raises
    ------
    TablebaseFileError
        If the file is not a tablebase of this format version, or its attributes are missing,
        of the wrong type or contradict each other.
    """
    a = f.attrs
    try:
        fmt, version = a.get("format"), a.get("format_version", -1)
        if isinstance(fmt, bytes):
            fmt = fmt.decode("utf-8", "replace")
        if fmt != FORMAT:
            raise TablebaseFileError(f"{f.filename}: not a dobutsu tablebase file")
        if int(version) != FORMAT_VERSION:
            raise TablebaseFileError(f"{f.filename}: format version {version} (this program reads version "
                                     f"{FORMAT_VERSION}; build the file again with 'dobutsu-tb build')")
        missing = [name for name in ("start", *_COUNT_FIELDS) if name not in a]
        if missing:
            raise TablebaseFileError(f"{f.filename}: metadata attribute {missing[0]!r} is missing (a damaged file?)")
        values = {}
        for name in _COUNT_FIELDS:
            v = a[name]
            if np.ndim(v) != 0 or not np.issubdtype(np.asarray(v).dtype, np.integer):
                raise TablebaseFileError(f"{f.filename}: metadata attribute {name!r} is not an integer")
            values[name] = int(v)
        start = a["start"]
        start = start.decode("utf-8", "replace") if isinstance(start, bytes) else str(start)
        seconds = {k[len("seconds_"):]: float(v) for k, v in a.items() if k.startswith("seconds_")}
    except TablebaseFileError:
        raise
    except Exception as exc:  # h5py raises assorted types for damaged attribute headers
        raise TablebaseFileError(f"{f.filename}: unreadable metadata ({exc})") from None
    meta = Metadata(start=start, seconds=seconds, created=str(a.get("created", "")),
                    format_version=FORMAT_VERSION, **values)
    problem = _metadata_problem(meta) if check_counts else None
    if problem:
        raise TablebaseFileError(f"{f.filename}: inconsistent metadata: {problem}")
    return meta


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
        if not self.path.exists():
            raise TablebaseFileError(f"{self.path}: no such file (build one with 'dobutsu-tb build')")
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as exc:
            raise TablebaseFileError(f"{self.path}: not a readable HDF5 file ({exc})") from None
        try:
            self.metadata = read_metadata(self._file, check_counts)
            self._check_layout()
        except BaseException:
            self._file.close()
            raise

    def _fail(self, what: str) -> TablebaseFileError:
        return TablebaseFileError(f"{self.path}: {what}")

    def _dataset(self, name: str, dtype: str, shape: tuple, chunked: bool, shuffle: bool) -> h5py.Dataset:
        try:
            dset = self._file[name]
        except (KeyError, OSError, RuntimeError):
            raise self._fail(f"dataset /{name} is missing or unreadable") from None
        if not isinstance(dset, h5py.Dataset):
            raise self._fail(f"/{name} is not a dataset")
        if dset.dtype != np.dtype(dtype) or dset.shape != shape:
            raise self._fail(f"/{name} is {dset.dtype} of shape {dset.shape}; expected {np.dtype(dtype)} of shape {shape}")
        if chunked:
            if dset.chunks is None or len(dset.chunks) != 1 or dset.chunks[0] < 1:
                raise self._fail(f"/{name} is not chunked as a tablebase's is")
            if dset.compression != "gzip" or not dset.fletcher32 or bool(dset.shuffle) != shuffle:
                raise self._fail(f"/{name} does not have the filters of a tablebase (deflate, fletcher32"
                                 f"{', shuffle' if shuffle else ''})")
        return dset

    def _check_layout(self) -> None:
        n = self.metadata.nonterminal
        self._keys = self._dataset("keys", "<i8", (n,), True, True)
        self._values = self._dataset("values", "u1", (n,), True, False)
        self.n = n
        self.key_chunk, self.value_chunk = int(self._keys.chunks[0]), int(self._values.chunks[0])
        m = math.ceil(n / self.key_chunk)
        index_dset = self._dataset("index", "<i8", (m,), False, False)
        try:
            index = index_dset[()]
            crc = int(self._file.attrs["index_crc32"])
        except Exception as exc:
            raise self._fail(f"/index is unreadable ({exc})") from None
        if zlib.crc32(index.tobytes()) != crc:
            raise self._fail("/index fails its CRC-32 check: the file is damaged")
        if m and (index[0] <= 0 or (m > 1 and not np.all(index[1:] > index[:-1]))):
            raise self._fail("/index is not strictly ascending: the file is damaged")
        self.index = index.astype(np.int64)
        m_values = math.ceil(n / self.value_chunk)
        table_dset = self._dataset("chunk_table", "<i8", (m + m_values, 2), False, False)
        try:
            table = table_dset[()]
            crc = int(self._file.attrs["chunk_table_crc32"])
        except Exception as exc:
            raise self._fail(f"/chunk_table is unreadable ({exc})") from None
        if zlib.crc32(table.tobytes()) != crc:
            raise self._fail("/chunk_table fails its CRC-32 check: the file is damaged")
        size = self.path.stat().st_size
        if table.size and (table[:, 0].min() <= 0 or table[:, 1].min() <= _CHECKSUM_BYTES
                           or (table[:, 0] + table[:, 1]).max() > size):
            raise self._fail("/chunk_table points outside the file: the file is damaged")
        self._chunks = {"keys": (table[:m, 0].copy(), table[:m, 1].copy()),
                        "values": (table[m:, 0].copy(), table[m:, 1].copy())}
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

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
            If it is beyond the longest DTM of the metadata.
        """
        if code > self.metadata.max_dtm + 1:
            raise self._fail(f"the value byte of entry {i} ({code}) is beyond the longest DTM: the file is damaged")
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
            If a chunk is damaged.
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
                    if arr.max() > self.metadata.max_dtm + 1:
                        raise self._fail(f"chunk {c} of /values holds a value beyond the longest DTM: "
                                         f"the file is damaged")
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
        """/stats/dtm_wins and /stats/dtm_losses (int64), or empty arrays if missing."""
        out = []
        for name in ("stats/dtm_wins", "stats/dtm_losses"):
            try:
                out.append(np.asarray(self._file[name][()], np.int64).ravel())
            except Exception:
                out.append(np.zeros(0, np.int64))
        return out[0], out[1]
