"""Reading a tablebase file, trusting nothing (:class:`TablebaseFile`).

On open, the attributes' names, types and CRC, the dataset names, dtypes, shapes, chunking and
filter pipelines are checked against :mod:`~dobutsu_tb.tablebase.schema`'s layout and the
metadata, the index and the chunk table against their CRCs and their order, and the start
position's stored value against the metadata. Chunks are read raw at the offsets of the chunk
table (a probe then costs one small read, not a walk of HDF5's chunk index) and decoded by our
own pipeline (:func:`~dobutsu_tb.tablebase.chunks.inflate_chunk`); a chunk is refused if its
bytes fail the CRC-32 of its place in the chunk table (format version 4: a chunk moved, swapped
or copied over another is an error, never a value), if its zlib stream or the stream's Adler-32
fails, if it inflates to the wrong size, if its keys are out of order or disagree with the
index, or if a value byte is out of range. Whole-file reads
(verify, statistics, in-memory probing) also check each chunk's fletcher32 (it covers the same
bytes as the zlib checks, so a single probe skips it) and the counts of the metadata. The
verifier (``dobutsu-tb verify``) also checks HDF5's own chunk index against the chunk table,
filter masks included, so that any HDF5 reader reads what we read. Each failure raises
:class:`~dobutsu_tb.tablebase.schema.TablebaseFileError` naming the place.
"""

from __future__ import annotations

import math
import os
import zlib
from pathlib import Path

import h5py
import numpy as np
from h5py import h5z

from dobutsu_tb.encoding import config
from dobutsu_tb.tablebase.chunks import (
    CHECKSUM_BYTES,
    ChunkError,
    checksum_matches,
    hdf5_chunk_table,
    inflate_chunk,
    inflate_chunks,
    place_crc,
    stored_bound,
)
from dobutsu_tb.tablebase.schema import (
    CHUNK_TABLE_COLUMNS,
    FILTER_NAMES,
    KEY_DTYPE,
    KEY_FILTERS,
    MAX_CHUNK,
    MEMBERS,
    STATS_MEMBERS,
    VALUE_DTYPE,
    VALUE_FILTERS,
    TablebaseFileError,
    code_histogram,
    read_metadata,
    value_counts,
)
from dobutsu_tb.tablebase.values import MAX_STORED_DTM, MAX_WIDE_DTM

#: Bits that hold any chunk's stored size (at most stored_bound(8 * MAX_CHUNK) bytes).
_SIZE_BITS = 24


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
                from dobutsu_tb.tablebase.output import describe_os_error  # builds' module: imported when needed

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
                                 + ", ".join(FILTER_NAMES[code] for code in filters) + ", in this order)")
        return dset

    def _checked_table(self, name: str, dtype: str, shape: tuple, crc_attr: str) -> np.ndarray:
        dset = self._dataset(name, dtype, shape)
        try:
            data, crc = self._contiguous(dset), int(self._file.attrs[crc_attr])
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"/{name} is unreadable ({' '.join(str(exc).split())})") from None
        if zlib.crc32(data) != crc:
            raise self._fail(f"/{name} fails its CRC-32 check: the file is damaged")
        return data

    def _contiguous(self, dset: h5py.Dataset) -> np.ndarray:
        """A small table's data (int64): one ``preadv`` where HDF5 stores it contiguously in the
        file (as we write them: a third of h5py's time for the 5x3 board's 100 MB chunk table),
        else through h5py. The caller checks the CRC either way."""
        offset = dset.id.get_offset() if dset.chunks is None else None
        nbytes = int(np.prod(dset.shape, dtype=np.int64)) * 8
        if offset is not None and hasattr(os, "preadv") and 0 <= offset and offset + nbytes <= self._size:
            data = np.empty(dset.shape, "<i8")
            if os.preadv(self._fd, [data], offset) == nbytes:
                return data
        return np.ascontiguousarray(dset[()], np.int64)

    def _check_layout(self) -> None:
        try:
            members = set(self._file.keys())
            stats = set(self._file["stats"].keys()) if "stats" in members else set()
        except Exception:  # noqa: BLE001
            raise self._fail("the list of datasets is unreadable: the file is damaged") from None
        for found, expected, where in ((members, MEMBERS, "/"), (stats, STATS_MEMBERS, "/stats/")):
            if found != expected:
                extra, missing = sorted(found - expected), sorted(expected - found)
                raise self._fail(f"unexpected dataset {where}{extra[0]}" if extra
                                 else f"dataset {where}{missing[0]} is missing")
        n = self.metadata.nonterminal
        self._keys = self._dataset("keys", "<i8", (n,), KEY_FILTERS)
        # One byte a value, or two for a variant whose longest DTM is 254 plies or more.
        wide = self.metadata.value_bits == 16
        self.value_dtype = np.dtype("<u2" if wide else VALUE_DTYPE)
        self._values = self._dataset("values", self.value_dtype.str, (n,), VALUE_FILTERS)
        self.n = n
        self.key_chunk, self.value_chunk = int(self._keys.chunks[0]), int(self._values.chunks[0])
        # Value bytes in range: up to the longest DTM; a loss in 0 only for positions without moves.
        self._top_code = self.metadata.max_dtm + 1
        self._forbidden_code = -1 if self.metadata.no_moves else 1
        for name in STATS_MEMBERS:
            length = self._dataset(f"stats/{name}", "<i8", None).shape
            if len(length) != 1 or not 1 <= length[0] <= (MAX_WIDE_DTM if wide else MAX_STORED_DTM) + 1:
                raise self._fail(f"/stats/{name} has shape {length}; expected one DTM count per ply")
        m = math.ceil(n / self.key_chunk)
        index = self._checked_table("index", "<i8", (m,), "index_crc32")
        if m and (index[0] <= 0 or (m > 1 and not np.all(index[1:] > index[:-1]))):
            raise self._fail("/index is not strictly ascending: the file is damaged")
        self.index = index
        m_values = math.ceil(n / self.value_chunk)
        columns = CHUNK_TABLE_COLUMNS[self.metadata.format_version]
        table = self._checked_table("chunk_table", "<i8", (m + m_values, columns), "chunk_table_crc32")
        value_bytes = self.value_chunk * self.value_dtype.itemsize
        offsets, sizes = np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])
        if table.size and (offsets.min() <= 0 or sizes.min() <= CHECKSUM_BYTES
                           or sizes[:m].max(initial=0) > stored_bound(self.key_chunk * 8)
                           or sizes[m:].max(initial=0) > stored_bound(value_bytes)
                           or (offsets + sizes).max() > self._size):
            raise self._fail("/chunk_table points outside the file or holds impossible sizes: the file is damaged")
        # No two chunks share a byte. A build writes them in order, so the offsets usually ascend
        # already; else (HDF5 may place a chunk in free space before earlier ones) sorted by
        # offset, with the size in the low bits, a radix sort of one array.
        if not (offsets[1:] >= offsets[:-1] + sizes[:-1]).all():
            packed = np.sort((offsets << _SIZE_BITS) | sizes, kind="stable")
            starts, ends = packed >> _SIZE_BITS, (packed >> _SIZE_BITS) + (packed & ((1 << _SIZE_BITS) - 1))
            if (starts[1:] < ends[:-1]).any():
                raise self._fail("/chunk_table has chunks that overlap: the file is damaged")
        # Per dataset: offsets, sizes, the place CRCs (None before format version 4), the first row.
        crcs = np.ascontiguousarray(table[:, 2]) if columns > 2 else None
        self._chunks = {"keys": (offsets[:m], sizes[:m], None if crcs is None else crcs[:m], 0),
                        "values": (offsets[m:], sizes[m:], None if crcs is None else crcs[m:], m)}

    def _check_start_value(self) -> None:
        """The start position is stored with the value the metadata give it (one probe)."""
        from dobutsu_tb.tablebase.game.position import Position

        m = self.metadata
        key = Position.from_text(m.start, m.variant).key()
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
        """The stored bytes of chunk ``c`` of /keys or /values, read at the chunk table's offset
        and checked against the chunk's place (:meth:`_check_place`)."""
        offsets, sizes, crcs, row = self._chunks[name]
        offset, size = int(offsets[c]), int(sizes[c])
        try:
            data = os.pread(self._fd, size, offset) if hasattr(os, "pread") else self._read_at(offset, size)
        except OSError as exc:
            raise self._fail(f"chunk {c} of /{name} is unreadable ({exc})") from None
        if len(data) != size:
            raise self._fail(f"chunk {c} of /{name} is cut short: the file is truncated")
        if crcs is not None and place_crc(row + c, data) != crcs[c]:
            raise self._misplaced(name, c, data)
        return data

    def _misplaced(self, name: str, c: int, data) -> TablebaseFileError:
        """The error for chunk ``c`` whose bytes fail the CRC-32 of its place: damaged, if its
        zlib stream says so, else out of place."""
        keys = name == "keys"
        try:
            inflate_chunk(data, KEY_DTYPE if keys else VALUE_DTYPE, self.key_chunk if keys else self.value_chunk, keys)
        except ValueError as exc:
            return self._fail(f"chunk {c} of /{name} is damaged: {exc}")
        return self._fail(f"chunk {c} of /{name} fails the CRC-32 of its place in /chunk_table (a chunk moved, "
                          f"swapped, copied or damaged): the file is damaged")

    def _check_places(self, name: str, chunks: range, raws: list) -> None:
        """The place CRCs of several chunks read by :meth:`_raw_group` (format version 4)."""
        _, _, crcs, row = self._chunks[name]
        if crcs is None:
            return
        for c, raw, crc in zip(chunks, raws, crcs[chunks.start:chunks.stop].tolist()):
            if place_crc(row + c, raw) != crc:
                raise self._misplaced(name, c, raw)

    def _raw_group(self, name: str, chunks: range) -> list:
        """The stored bytes of several chunks of /keys or /values (memoryviews), read with one
        ``pread`` when they lie close together in the file (as a build writes them), else one by
        one; the caller checks their places (:meth:`_check_places`)."""
        offsets, sizes = self._chunks[name][:2]
        at, size = offsets[chunks.start:chunks.stop], sizes[chunks.start:chunks.stop]
        lo, hi = int(at.min()), int((at + size).max())
        if hi - lo > 2 * int(size.sum()) + (1 << 16) or not hasattr(os, "pread"):
            return [self._raw(name, c) for c in chunks]
        try:
            block = os.pread(self._fd, hi - lo, lo)
        except OSError:
            return [self._raw(name, c) for c in chunks]  # the message names the chunk
        if len(block) != hi - lo:
            return [self._raw(name, c) for c in chunks]
        view = memoryview(block)
        return [view[a - lo:a - lo + n] for a, n in zip(at.tolist(), size.tolist())]

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
            keys = inflate_chunk(raw if raw is not None else self._raw("keys", c), KEY_DTYPE,
                                 self.key_chunk, True)[:count]
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /keys is damaged: {exc}") from None
        index = self.index
        # One comparison of neighbours, counted (count_nonzero is the cheapest reduction).
        if count <= 0 or keys[0] != index[c] or np.count_nonzero(keys[1:] <= keys[:-1]) \
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
            values = inflate_chunk(raw if raw is not None else self._raw("values", c), self.value_dtype,
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
        values = np.empty(self.n, self.value_dtype)
        step = 2048
        groups = [(name, range(first, min(first + step, total)))  # chunks of one dataset
                  for name, total in (("keys", self.chunk_count()), ("values", self.chunk_count(True)))
                  for first in range(0, total, step)]
        jobs = sum(len(chunks) for _, chunks in groups)

        def work(name, chunks, raws):
            first = chunks.start
            self._check_places(name, chunks, raws)
            sums = checksums([memoryview(r)[:-CHECKSUM_BYTES] for r in raws])
            for c, raw, ours in zip(chunks, raws, sums.tolist()):
                if not checksum_matches(raw, ours):
                    raise self._fail(f"chunk {c} of /{name} is damaged: fletcher32 checksum mismatch")
            shuffled, chunk, dtype, out = ((True, self.key_chunk, KEY_DTYPE, keys) if name == "keys"
                                        else (False, self.value_chunk, self.value_dtype, values))
            try:
                data = inflate_chunks(raws, dtype, chunk, shuffled)
            except ChunkError as exc:
                raise self._fail(f"chunk {first + exc.index} of /{name} is damaged: {exc}") from None
            start = first * chunk
            end = min(self.n, start + data.shape[0])
            out[start:end] = data[:end - start]
            return len(chunks)

        with ThreadPoolExecutor(config.THREADS) as pool:
            pending = []
            for name, chunks in groups:
                pending.append(pool.submit(work, name, chunks, self._raw_group(name, chunks)))
                while len(pending) > 2 * config.THREADS:
                    done = pending.pop(0).result()
                    if progress is not None:
                        progress(done, jobs)
            for task in pending:
                done = task.result()
                if progress is not None:
                    progress(done, jobs)
        self._check_all(keys, values)
        if self._check_counts:
            counts = value_counts(code_histogram(values))
            for name, count in counts.items():
                if getattr(self.metadata, name) != count:
                    raise self._fail(f"inconsistent metadata: {name} is {getattr(self.metadata, name):,} but the "
                                     f"data have {count:,}")
        return keys, values

    def _check_all(self, keys: np.ndarray, values: np.ndarray) -> None:
        """What :meth:`read_keys` and :meth:`read_values` check chunk by chunk, for whole arrays."""
        step = self.key_chunk
        piece = 1 << 26  # entries compared at a time: the temporary arrays stay small on big files
        last = max(keys.shape[0] - 1, 0)  # keys[i + 1] <= keys[i] for some i < last: out of order
        bad = next((lo + int(b[0]) for lo in range(0, last, piece)
                    if (b := np.flatnonzero(keys[lo + 1:min(last, lo + piece) + 1]
                                            <= keys[lo:min(last, lo + piece)])).size), None)
        firsts = keys[::step]
        wrong = np.flatnonzero(firsts != self.index[:firsts.shape[0]])
        places = [(bad + 1) // step] if bad is not None else []
        places += [int(wrong[0])] if wrong.size else []
        places += [min(firsts.shape[0], self.index.shape[0])] if firsts.shape[0] != self.index.shape[0] else []
        if places:
            c = min(places)
            raise self._fail(f"chunk {c} of /keys is out of order or disagrees with /index: the file is damaged")
        for lo in range(0, values.shape[0], piece):
            part = values[lo:lo + piece]
            out = np.flatnonzero((part > self._top_code) | (part == self._forbidden_code))
            if out.size:
                raise self._fail(f"chunk {(lo + int(out[0])) // self.value_chunk} of /values holds a value byte "
                                 f"out of range: the file is damaged")

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
            ours = np.stack(self._chunks[name][:2], axis=1)
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
