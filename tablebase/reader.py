"""Reading a tablebase file, trusting nothing (:class:`TablebaseFile`).

A file of format version 5 is opened from its probe header (:mod:`~dobutsu_tb.tablebase.header`,
in HDF5's user block): the header's CRC-32, the file's size and the CRC-32s of HDF5's metadata
around the chunks say that the file is the one the build wrote, and then neither h5py nor numpy
is imported: a probe costs a few reads and a few milliseconds of imports. A file without the
header (versions 2 to 4), or one an HDF5 tool changed after the build, is opened through h5py:
the attributes' names, types and CRC, the dataset names, dtypes, shapes, chunking and filter
pipelines are checked against :mod:`~dobutsu_tb.tablebase.schema`'s layout. Either way the
metadata are checked, the index and the chunk table against their CRCs, the index's order, and
the start position's stored value against the metadata. Chunks are read raw at the offsets of
the chunk table (a probe then costs one small read, not a walk of HDF5's chunk index) and
decoded by our own pipeline (:func:`~dobutsu_tb.tablebase.chunks.inflate_key_bytes`); a chunk is
refused if its place in the chunk table is impossible (outside the file, a size beyond zlib's
bound), if its bytes fail the CRC-32 of its place (format version 4 and later: a chunk moved,
swapped or copied over another is an error, never a value), if its zlib stream or the stream's
Adler-32 fails, if it inflates to the wrong size, if its keys are out of order or disagree with
the index, or if a value byte is out of range. A probe inflates a chunk of /values only as far
as the value it reads (:meth:`TablebaseFile.value_code`): it checks that much of the stream and
not its Adler-32, when the CRC-32 of the chunk's place has checked all of its bytes. Whole-file
reads (verify, statistics, in-memory probing) also check each chunk's fletcher32 (it covers the
same bytes as the zlib checks, so a single probe skips it) and the counts of the metadata. The
verifier (``dobutsu-tb verify``) reads the layout through h5py even when the header is there,
compares the header with it (when it still describes the file: probes read it), and checks
HDF5's own chunk index against the chunk table, filter masks included, so that any HDF5 reader
reads what we read. Each failure raises :class:`~dobutsu_tb.tablebase.schema.TablebaseFileError`
naming the place.
"""

from __future__ import annotations

import math
import os
import re
import stat
import sys
import zlib
from bisect import bisect_left, bisect_right
from pathlib import Path

from dobutsu_tb.tablebase import header
from dobutsu_tb.tablebase.chunks import (
    CHECKSUM_BYTES,
    ChunkError,
    checksum_matches,
    crc32,
    inflate_key_bytes,
    inflate_key_planes,
    inflate_prefix,
    inflate_value_bytes,
    key_in_planes,
    keys_ascending,
    place_crc,
    stored_bound,
    unshuffle_keys,
)
from dobutsu_tb.tablebase.schema import (
    CHUNK_TABLE_COLUMNS,
    FILTER_NAMES,
    FILTER_SHUFFLE,
    KEY_FILTERS,
    MAX_CHUNK,
    MEMBERS,
    STATS_MEMBERS,
    VALUE_FILTERS,
    TablebaseFileError,
    metadata_from_attrs,
    read_metadata,
)
from dobutsu_tb.tablebase.values import MAX_STORED_DTM, MAX_WIDE_DTM

#: Bits that hold any chunk's stored size (at most stored_bound(8 * MAX_CHUNK) bytes).
_SIZE_BITS = 24
#: Whether int64s in memory are little-endian, as in the file.
_LITTLE = sys.byteorder == "little"
#: ``os.pread`` and ``os.preadv`` where the system has them.
_pread, _preadv = getattr(os, "pread", None), getattr(os, "preadv", None)
#: Keys of /index checked for order at a time (:meth:`TablebaseFile.check_index`).
INDEX_BLOCK = 1024
#: The first format version whose files carry the probe header (:mod:`~dobutsu_tb.tablebase.header`).
HEADER_VERSION = 5


def int64_view(data) -> memoryview:
    """Little-endian int64s (bytes-like, or a numpy array) as a memoryview of Python ints
    (format ``q``), without numpy: indexing it and :func:`bisect.bisect_right` read it in C.

    Parameters
    ----------
    data : bytes-like
        A whole number of 8-byte little-endian integers.

    Returns
    -------
    memoryview
    """
    if sys.byteorder == "little":
        view = memoryview(data)
        return view.cast("q") if view.format == "B" else view.cast("B").cast("q")
    from array import array  # pragma: no cover - big-endian machines

    out = array("q")  # pragma: no cover
    out.frombytes(bytes(memoryview(data).cast("B")))  # pragma: no cover
    out.byteswap()  # pragma: no cover
    return memoryview(out)  # pragma: no cover


class TablebaseFile:
    """An open tablebase file whose layout has been checked; chunks are checked as they are read.

    A file of format version 5 is opened from its probe header (:mod:`~dobutsu_tb.tablebase.header`)
    with one read of the header, of HDF5's metadata regions and of /index and /chunk_table, without
    h5py or numpy; a file without the header (format version 4 or older), or that an HDF5 tool
    changed after the build (its regions no longer the header's), through h5py, every piece of
    the layout checked against the schema.

    Parameters
    ----------
    path : str or Path
    check_counts : bool, optional
        Refuse metadata whose counts contradict each other (default). The verifier turns it off
        and compares the counts with the data itself.
    hdf5 : bool, optional
        Check the layout through h5py even when the probe header could be trusted, and compare
        the header with what HDF5 says (:attr:`header_problems`): the verifier's way.

    Attributes
    ----------
    metadata : Metadata
    n : int
        Stored positions.
    key_chunk, value_chunk : int
        Entries per chunk of /keys and /values.
    index : numpy.ndarray of int64, shape (ceil(n / key_chunk),)
        The first key of each chunk of /keys (made on first use; probes read it without numpy).
    value_dtype : numpy.dtype
        uint8, or uint16 for two-byte values (made on first use).
    header_problems : list of str
        Where the probe header, still describing the file (probes read it), disagrees with
        HDF5's metadata (only when opened with ``hdf5``).

    Raises
    ------
    TablebaseFileError
        If the file is missing, not HDF5, not a tablebase of this version, or its layout,
        metadata, probe header or index is damaged.
    """

    def __init__(self, path, check_counts: bool = True, hdf5: bool = False):
        self.path = Path(path)
        self._fd = None
        self._file = None
        self.header_problems: list[str] = []
        if not self.path.exists():
            if self.path.is_symlink():  # (exists() follows links: one to nowhere, or links in a loop)
                raise TablebaseFileError(f"{self.path}: a symbolic link to no file ({os.readlink(self.path)})")
            raise TablebaseFileError(f"{self.path}: no such file (build one with 'dobutsu-tb build')")
        if self.path.is_dir():
            raise TablebaseFileError(f"{self.path} is a folder, not a tablebase file")
        self._check_counts = check_counts
        self._index_array = None
        self._chunk_arrays = None
        try:
            self._fd, self._size = self._open_fd()
            payload = self._header()
            if payload is not None and not hdf5 and header.regions_match(self._fd, payload, self._size, crc32):
                self._from_header(payload)
            else:
                self._from_hdf5()
            if check_counts:
                self._check_start_value()
        except BaseException:
            self.close()
            raise

    def _header(self) -> dict | None:
        """The probe header's payload (:func:`~dobutsu_tb.tablebase.header.read`), or None."""
        try:
            return header.read(self._fd)
        except header.HeaderError as exc:
            raise self._fail(f"{exc}: the file is damaged") from None
        except OSError as exc:
            raise self._fail(f"cannot be read ({exc})") from None

    def _open_fd(self) -> tuple[int, int]:
        """The file's descriptor (the chunks and the header are read through it) and its size."""
        try:  # (a socket cannot be opened at all: said as the others are)
            regular = stat.S_ISREG(os.stat(self.path).st_mode)
        except OSError:
            regular = True  # the open below says why
        if not regular:
            raise TablebaseFileError(f"{self.path}: not a regular file (a named pipe, a device or a socket)")
        try:  # (not blocking: a named pipe would wait for a writer)
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            try:
                from dobutsu_tb.tablebase.output import describe_os_error  # builds' module: imported when needed

                said = describe_os_error(exc)
            except OSError:  # (no descriptor left to import it with: EMFILE)
                said = exc.strerror or str(exc)
            raise TablebaseFileError(f"{self.path}: cannot be read ({said})") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise TablebaseFileError(f"{self.path}: not a regular file (a named pipe, a device or a socket)")
        return fd, st.st_size

    def _open_hdf5(self):
        """The file opened with h5py, after making sure it is the file of the descriptor (one
        replaced in between, a build finishing, is reopened, descriptor and all)."""
        import h5py

        for _ in range(3):
            try:
                f = h5py.File(self.path, "r")
            except Exception as exc:  # noqa: BLE001 (h5py: OSError, or others for damaged superblocks)
                said = " ".join(str(exc).split())
                cut = re.search(r"truncated file: eof = \d+, sblock->base_addr = \d+, stored_eof = (\d+)", said)
                if cut:  # (HDF5 counts its eof from the superblock; stored_eof is the file's whole size)
                    raise TablebaseFileError(f"{self.path}: the file is truncated ({self._size:,} bytes; its HDF5 "
                                             f"superblock says {int(cut[1]):,}): copy or build it again") from None
                raise TablebaseFileError(f"{self.path}: not a readable HDF5 file ({said})") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
            except OSError:
                same = False
            if same:
                return f
            f.close()
            if self._file is not None or getattr(self, "metadata", None) is not None:
                raise self._fail("the file was replaced while it was open")
            os.close(self._fd)
            self._fd = None
            self._fd, self._size = self._open_fd()
        raise TablebaseFileError(f"{self.path}: the file keeps being replaced while it is opened")

    def _fail(self, what: str) -> TablebaseFileError:
        return TablebaseFileError(f"{self.path}: {what}")

    # --- opening from the probe header (format version 5) ------------------------------------

    def _from_header(self, p: dict) -> None:
        """Open from the probe header ``p`` (its CRC and regions checked): the metadata, /index
        and /chunk_table, each checked as :meth:`_from_hdf5` checks them, less what the header's
        checks already cover (the datasets' types, chunking and filters: the writer's, unchanged)."""
        self.metadata = metadata_from_attrs(p["attrs"], str(self.path), self._check_counts)
        m = self.metadata
        if m.format_version < HEADER_VERSION:
            raise self._fail(f"the probe header of a file of format version {m.format_version}: the file is damaged")
        n = m.nonterminal
        wide = m.value_bits == 16
        key_chunk, value_chunk = p["keys"]["chunk"], p["values"]["chunk"]
        m_keys, m_values = math.ceil(n / max(1, key_chunk)), math.ceil(n / max(1, value_chunk))
        if (p["keys"]["dtype"] != "<i8" or p["values"]["dtype"] != ("<u2" if wide else "|u1")
                or not 1 <= key_chunk <= MAX_CHUNK or not 1 <= value_chunk <= MAX_CHUNK
                or p["index"][1] != m_keys or p["chunk_table"][1:] != [m_keys + m_values, CHUNK_TABLE_COLUMNS[
                    m.format_version]]):
            raise self._fail("the probe header does not describe the layout of a tablebase: the file is damaged")
        self._set_layout(n, key_chunk, value_chunk, 2 if wide else 1)
        attrs = p["attrs"]
        self._index = int64_view(self._read_table("index", p["index"][0], 8 * m_keys, attrs["index_crc32"]))
        if m_keys and self._index[0] <= 0:
            raise self._fail("/index is not strictly ascending: the file is damaged")
        self._index_checked = False  # its order: checked before the first miss (check_index)
        self._columns = p["chunk_table"][2]
        self._table = int64_view(self._read_table("chunk_table", p["chunk_table"][0],
                                                  8 * p["chunk_table"][1] * self._columns, attrs["chunk_table_crc32"]))

    def _read_table(self, name: str, offset: int, nbytes: int, crc: int) -> bytearray:
        """The ``nbytes`` bytes of /``name`` at ``offset``, their CRC-32 checked against ``crc``."""
        data = bytearray(nbytes)  # (writable: numpy views of it are the same type as h5py's arrays)
        try:
            if _preadv is not None:
                done = _preadv(self._fd, [data], offset) if nbytes else 0
            else:  # pragma: no cover - systems without preadv
                data = bytearray(self._read_at(offset, nbytes))
                done = len(data)
        except OSError as exc:
            raise self._fail(f"/{name} is unreadable ({exc})") from None
        if done != nbytes:
            raise self._fail(f"/{name} is cut short: the file is truncated")
        if crc32(data) != crc:
            raise self._fail(f"/{name} fails its CRC-32 check: the file is damaged")
        return data

    def _set_layout(self, n: int, key_chunk: int, value_chunk: int, value_bytes: int) -> None:
        self.n, self.key_chunk, self.value_chunk = n, key_chunk, value_chunk
        self._value_bytes = value_bytes
        self._m_keys = math.ceil(n / key_chunk)
        # Value bytes in range: up to the longest DTM; a loss in 0 only for positions without moves.
        self._top_code = self.metadata.max_dtm + 1
        self._forbidden_code = -1 if self.metadata.no_moves else 1
        # The most bytes a stored chunk may take (checked as each chunk is read).
        self._bounds = (stored_bound(key_chunk * 8), stored_bound(value_chunk * value_bytes))

    def check_index(self) -> None:
        """Refuse /index unless it strictly ascends (checked once; what a miss relies on: the one
        chunk that could hold a key is the one :meth:`chunk_of` gives).

        Raises
        ------
        TablebaseFileError
            If it does not.
        """
        if self._index_checked:
            return
        index, m = self._index, len(self._index)
        data = index.cast("B")
        for lo in range(0, m - 1, INDEX_BLOCK):  # blocks that overlap by one key
            hi = min(m, lo + INDEX_BLOCK + 1)
            if not keys_ascending(data[8 * lo:8 * hi], hi - lo):
                raise self._fail("/index is not strictly ascending: the file is damaged")
        self._index_checked = True

    # --- opening through h5py ------------------------------------------------------------------

    def _from_hdf5(self) -> None:
        """Open through h5py (a file without the probe header, or one an HDF5 tool changed after
        the build): every piece of the layout checked against the schema. A file of format
        version 5 or later must have the header; where a header that still describes the file
        disagrees with HDF5 goes to :attr:`header_problems`."""
        self._file = self._open_hdf5()
        payload = self._header()  # (again: h5py may have found the file replaced and reopened it)
        self.metadata = read_metadata(self._file, self._check_counts)
        if self.metadata.format_version >= HEADER_VERSION and payload is None:
            raise self._fail("the probe header at the start of the file is missing: the file is damaged")
        self._check_layout()
        # A header that still describes the file (its regions unchanged) is what probes read: it
        # must say what HDF5 says. One that no longer does (an HDF5 tool changed the file after
        # the build) is not read, and may differ.
        if (payload is not None and self.metadata.format_version >= HEADER_VERSION
                and header.regions_match(self._fd, payload, self._size, crc32)):
            self.header_problems = self._header_disagreements(payload)

    def _header_disagreements(self, p: dict) -> list[str]:
        """Where the header ``p`` says other than HDF5: the attributes, the chunk sizes and
        dtypes, the places and sizes of /index and /chunk_table."""
        from dobutsu_tb.tablebase.schema import raw_attributes

        out = []
        ours = p["attrs"]
        theirs = raw_attributes(self._file)
        for name in sorted(set(ours) | set(theirs)):
            if ours.get(name) != theirs.get(name):
                out.append(f"the attribute {name!r} is {theirs.get(name)!r} in HDF5 but {ours.get(name)!r} in the "
                           f"probe header")
        found = {"keys": {"chunk": self.key_chunk, "dtype": "<i8"},
                 "values": {"chunk": self.value_chunk, "dtype": self.value_dtype.str},
                 "index": [self._file["index"].id.get_offset(), self._m_keys],
                 "chunk_table": [self._file["chunk_table"].id.get_offset(), *self._file["chunk_table"].shape]}
        found["chunk_table"] = [int(v) if v is not None else None for v in found["chunk_table"]]
        for name, value in found.items():
            if p[name] != value:
                out.append(f"the probe header gives {name} as {p[name]}; HDF5 says {value}")
        return out

    def _dataset(self, name: str, dtype: str, shape: tuple, filters: tuple | None = None):
        """The dataset ``name`` (h5py.Dataset), checked: its dtype and shape, and for the chunked
        ones (``filters`` given) one-dimensional chunks of at most :data:`MAX_CHUNK` entries with
        exactly these filters in this order (what :mod:`~dobutsu_tb.tablebase.chunks` undoes)."""
        import h5py
        import numpy as np

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
                    code == FILTER_SHUFFLE and tuple(values) != (dt.itemsize,) for code, values in pipeline):
                raise self._fail(f"/{name} does not have the filters of a tablebase ("
                                 + ", ".join(FILTER_NAMES[code] for code in filters) + ", in this order)")
        return dset

    def _checked_table(self, name: str, dtype: str, shape: tuple, crc_attr: str):
        dset = self._dataset(name, dtype, shape)
        try:
            data, crc = self._contiguous(dset), int(self._file.attrs[crc_attr])
        except Exception as exc:  # noqa: BLE001
            raise self._fail(f"/{name} is unreadable ({' '.join(str(exc).split())})") from None
        if zlib.crc32(data) != crc:
            raise self._fail(f"/{name} fails its CRC-32 check: the file is damaged")
        return data

    def _contiguous(self, dset):
        """A small table's data (numpy.ndarray of int64): one ``preadv`` where HDF5 stores it
        contiguously in the file (as we write them: a third of h5py's time for the 5x3 board's
        100 MB chunk table), else through h5py. The caller checks the CRC either way."""
        import numpy as np

        offset = dset.id.get_offset() if dset.chunks is None else None
        nbytes = int(np.prod(dset.shape, dtype=np.int64)) * 8
        if offset is not None and hasattr(os, "preadv") and 0 <= offset and offset + nbytes <= self._size:
            data = np.empty(dset.shape, "<i8")
            if os.preadv(self._fd, [data], offset) == nbytes:
                return data
        return np.ascontiguousarray(dset[()], np.int64)

    def _check_layout(self) -> None:
        import numpy as np

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
        keys = self._dataset("keys", "<i8", (n,), KEY_FILTERS)
        # One byte a value, or two for a variant whose longest DTM is 254 plies or more.
        wide = self.metadata.value_bits == 16
        values = self._dataset("values", "<u2" if wide else "u1", (n,), VALUE_FILTERS)
        self._set_layout(n, int(keys.chunks[0]), int(values.chunks[0]), 2 if wide else 1)
        for name in STATS_MEMBERS:
            length = self._dataset(f"stats/{name}", "<i8", None).shape
            if len(length) != 1 or not 1 <= length[0] <= (MAX_WIDE_DTM if wide else MAX_STORED_DTM) + 1:
                raise self._fail(f"/stats/{name} has shape {length}; expected one DTM count per ply")
        m = self._m_keys
        index = self._checked_table("index", "<i8", (m,), "index_crc32")
        if m and (index[0] <= 0 or (m > 1 and not np.all(index[1:] > index[:-1]))):
            raise self._fail("/index is not strictly ascending: the file is damaged")
        m_values = math.ceil(n / self.value_chunk)
        columns = CHUNK_TABLE_COLUMNS[self.metadata.format_version]
        table = self._checked_table("chunk_table", "<i8", (m + m_values, columns), "chunk_table_crc32")
        offsets, sizes = np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])
        if table.size and (offsets.min() <= 0 or sizes.min() <= CHECKSUM_BYTES
                           or sizes[:m].max(initial=0) > self._bounds[0]
                           or sizes[m:].max(initial=0) > self._bounds[1]
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
        self._index_array = index
        self._index, self._index_checked = int64_view(index), True
        self._table, self._columns = int64_view(np.ascontiguousarray(table)), columns

    @property
    def index(self):
        """/index as numpy.ndarray of int64 (made from the bytes read on open, on first use)."""
        if self._index_array is None:
            import numpy as np

            self._index_array = np.frombuffer(self._index, np.int64)
        return self._index_array

    @property
    def value_dtype(self):
        """The dtype of /values (numpy.dtype: uint8, or little-endian uint16)."""
        import numpy as np

        return np.dtype("<u2" if self._value_bytes == 2 else "u1")

    @property
    def _chunks(self) -> dict:
        """Per dataset, as numpy arrays: the chunks' offsets, sizes and place CRCs (None before
        format version 4), and the row of its first chunk in /chunk_table (whole-file reads)."""
        if self._chunk_arrays is None:
            import numpy as np

            table = np.frombuffer(self._table, np.int64).reshape(-1, self._columns)
            offsets, sizes = np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])
            crcs = np.ascontiguousarray(table[:, 2]) if self._columns > 2 else None
            m = self._m_keys
            self._chunk_arrays = {"keys": (offsets[:m], sizes[:m], None if crcs is None else crcs[:m], 0),
                                  "values": (offsets[m:], sizes[m:], None if crcs is None else crcs[m:], m)}
        return self._chunk_arrays

    def _check_start_value(self) -> None:
        """The start position is stored with the value the metadata give it (one probe)."""
        from dobutsu_tb.tablebase.game.position import Position

        m = self.metadata
        key = Position.from_text(m.start, m.variant).key()
        c = self.chunk_of(key)
        keys = self.keys_of_chunk(c) if c >= 0 else []
        i = bisect_left(keys, key)
        if i >= len(keys) or keys[i] != key:
            raise self._fail(f"inconsistent metadata: the start position {m.start} is not stored")
        i += c * self.key_chunk
        code = self.check_value(self.values_of_chunk(i // self.value_chunk)[i % self.value_chunk], i)
        if code != (0 if m.start_wdl == 0 else m.start_dtm + 1):
            raise self._fail(f"inconsistent metadata: the start position's value ({m.start_wdl}, {m.start_dtm}) "
                             f"is not the one stored")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        # A file dropped without close() (a Tablebase left to the collector) gives its descriptor
        # back, as Python's file objects do.
        fd = self.__dict__.get("_fd")
        if fd is not None:
            self._fd = None
            try:
                os.close(fd)
            except Exception:  # noqa: BLE001 (at interpreter shutdown, or already closed)
                pass

    def __enter__(self) -> "TablebaseFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def hdf5(self):
        """The file opened with h5py (h5py.File; opened on first use when the file was opened
        from its probe header)."""
        if self._file is None:
            self._file = self._open_hdf5()
        return self._file

    def _raw(self, name: str, c: int) -> bytes:
        """The stored bytes of chunk ``c`` of /keys or /values, read at the chunk table's offset
        and checked against the chunk's place (:meth:`_misplaced`)."""
        values = name != "keys"
        row = self._m_keys + c if values else c
        at = row * self._columns
        table = self._table
        offset, size = table[at], table[at + 1]
        if offset <= 0 or not CHECKSUM_BYTES < size <= self._bounds[values] or offset + size > self._size:
            raise self._fail(f"/chunk_table points outside the file or holds impossible sizes (chunk {c} of "
                             f"/{name}): the file is damaged")
        try:
            data = _pread(self._fd, size, offset) if _pread is not None else self._read_at(offset, size)
        except OSError as exc:
            raise self._fail(f"chunk {c} of /{name} is unreadable ({exc})") from None
        if len(data) != size:
            raise self._fail(f"chunk {c} of /{name} is cut short: the file is truncated")
        if self._columns > 2 and place_crc(row, data) != table[at + 2]:
            raise self._misplaced(name, c, data)
        return data

    def _misplaced(self, name: str, c: int, data) -> TablebaseFileError:
        """The error for chunk ``c`` whose bytes fail the CRC-32 of its place: damaged, if its
        zlib stream says so, else out of place."""
        try:
            if name == "keys":
                inflate_key_bytes(data, self.key_chunk)
            else:
                inflate_value_bytes(data, self.value_chunk * self._value_bytes)
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

    def chunk_keys(self, c: int, raw: bytes | None = None) -> memoryview:
        """The keys of chunk ``c`` of /keys (a memoryview of ints, format ``q``; no numpy), checked
        but for their order: the zlib stream and its Adler-32, and the first and last key against
        the index. A probe checks their order with :meth:`find` (around the key it finds, and the
        whole chunk before it answers that a key is missing); :meth:`keys_of_chunk` checks it
        whole. (The chunk's fletcher32, which covers the same bytes, is checked by
        :meth:`read_all`.)

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        count = min(self.key_chunk, self.n - c * self.key_chunk)
        try:
            data = inflate_key_bytes(raw if raw is not None else self._raw("keys", c), self.key_chunk)
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /keys is damaged: {exc}") from None
        keys = memoryview(data).cast("q") if _LITTLE else int64_view(data)
        if count < self.key_chunk:  # the last chunk (stored full size)
            keys = keys[:max(count, 0)]
        index = self._index
        if count <= 0 or keys[0] != index[c] or (c + 1 < len(index) and keys[-1] >= index[c + 1]):
            raise self._out_of_order(c)
        return keys

    def _out_of_order(self, c: int) -> TablebaseFileError:
        return self._fail(f"chunk {c} of /keys is out of order or disagrees with /index: the file is damaged")

    def check_order(self, c: int, keys: memoryview) -> None:
        """Refuse chunk ``c`` of /keys unless its keys (:meth:`chunk_keys`) strictly ascend.

        Raises
        ------
        TablebaseFileError
            If they do not.
        """
        if not keys_ascending(keys, len(keys)):
            raise self._out_of_order(c)

    def keys_of_chunk(self, c: int, raw: bytes | None = None) -> memoryview:
        """:meth:`chunk_keys`, their order checked too (:meth:`check_order`).

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        keys = self.chunk_keys(c, raw)
        self.check_order(c, keys)
        return keys

    def chunk_planes(self, c: int, raw: bytes | None = None) -> bytes:
        """The keys of chunk ``c`` of /keys still shuffled (:func:`~.chunks.inflate_key_planes`:
        key ``i`` is ``key_in_planes(planes, i, key_chunk)``), checked as :meth:`chunk_keys`
        checks them: what a probe searches (:meth:`find`), without undoing the shuffle.

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        count = min(self.key_chunk, self.n - c * self.key_chunk)
        n = self.key_chunk
        try:
            planes = inflate_key_planes(raw if raw is not None else self._raw("keys", c), n)
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /keys is damaged: {exc}") from None
        index = self._index
        if count <= 0 or key_in_planes(planes, 0, n) != index[c] or (
                c + 1 < len(index) and key_in_planes(planes, count - 1, n) >= index[c + 1]):
            raise self._out_of_order(c)
        return planes

    def keys_of_planes(self, c: int, planes: bytes) -> memoryview:
        """The keys of chunk ``c`` (a memoryview of ints, format ``q``) from its planes
        (:meth:`chunk_planes`), their order not checked (:meth:`check_order`)."""
        count = min(self.key_chunk, self.n - c * self.key_chunk)
        data = unshuffle_keys(planes, self.key_chunk)
        keys = memoryview(data).cast("q") if _LITTLE else int64_view(data)
        return keys[:max(count, 0)] if count < self.key_chunk else keys

    def find(self, c: int, planes: bytes, key: int) -> int:
        """The entry of ``key`` (its index among all stored keys) in chunk ``c`` of /keys, whose
        shuffled keys (:meth:`chunk_planes`) are ``planes``; -1 if it is not stored. The search
        reads only the keys it compares (about ten). A key found must be strictly between its
        neighbours; a key not found is reported only once the whole chunk has been checked in
        order (:meth:`check_order`): a chunk out of order is an error, never a wrong answer.

        Raises
        ------
        TablebaseFileError
            If the keys are out of order.
        """
        n = self.key_chunk
        count = min(n, self.n - c * n)
        lo, hi = 0, count
        # bisect_left over the keys, each read from its planes (key_in_planes written out: the probe's loop)
        while lo < hi:
            mid = (lo + hi) >> 1
            if int.from_bytes(planes[mid::n], "little", signed=True) < key:
                lo = mid + 1
            else:
                hi = mid
        i = lo
        if (i < count and int.from_bytes(planes[i::n], "little", signed=True) == key
                and (i == 0 or int.from_bytes(planes[i - 1::n], "little", signed=True) < key)
                and (i + 1 == count or int.from_bytes(planes[i + 1::n], "little", signed=True) > key)):
            return c * n + i
        self.check_order(c, self.keys_of_planes(c, planes))
        self.check_index()
        return -1

    def values_of_chunk(self, c: int, raw: bytes | None = None):
        """The value codes of chunk ``c`` of /values (bytes, or for two-byte values a memoryview of
        format ``H``: indexing either gives ints; no numpy), checked as :meth:`chunk_keys` checks
        keys. Each value's range is :meth:`check_value`'s to check.

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        count = min(self.value_chunk, self.n - c * self.value_chunk)
        try:
            data = inflate_value_bytes(raw if raw is not None else self._raw("values", c),
                                       self.value_chunk * self._value_bytes)
        except ValueError as exc:
            raise self._fail(f"chunk {c} of /values is damaged: {exc}") from None
        if count <= 0:
            raise self._fail(f"chunk {c} of /values is out of range: the file is damaged")
        if self._value_bytes == 1:
            return data if count == self.value_chunk else data[:count]  # bytes: indexing gives ints
        if sys.byteorder == "little":
            return memoryview(data).cast("H")[:count]
        from array import array  # pragma: no cover - big-endian machines

        out = array("H", data)  # pragma: no cover
        out.byteswap()  # pragma: no cover
        return memoryview(out)[:count]  # pragma: no cover

    def value_source(self, c: int) -> list:
        """What :meth:`value_code` reads chunk ``c`` of /values from (a probe's cache holds it): in a
        file whose chunks are tied to their places (format version 4 on), its stored bytes, checked
        against their place, and the bytes inflated so far; else its values inflated whole
        (:meth:`values_of_chunk`).

        Returns
        -------
        list
            ``[stored bytes or None, inflated bytes]``.

        Raises
        ------
        TablebaseFileError
            If the chunk is out of range or (older formats) damaged.
        """
        if self._columns <= 2:
            return [None, self.values_of_chunk(c)]
        if c * self.value_chunk >= self.n:
            raise self._fail(f"chunk {c} of /values is out of range: the file is damaged")
        return [self._raw("values", c), b""]

    def value_code(self, c: int, source: list, j: int) -> int:
        """The code of entry ``j`` of chunk ``c`` of /values, from its :meth:`value_source`: the
        chunk inflated only as far as entry ``j`` (:func:`~.chunks.inflate_prefix`; at least twice
        as far as before), its range left to :meth:`check_value`.

        Raises
        ------
        TablebaseFileError
            If the chunk's stream is damaged or ends before entry ``j``.
        """
        data = source[1]
        width = self._value_bytes
        if source[0] is None:
            return data[j]
        end = (j + 1) * width
        if len(data) < end:
            size = min(self.value_chunk * width, max(end, 2 * len(data)))
            try:
                data = source[1] = inflate_prefix(source[0], size)
            except ValueError as exc:
                raise self._fail(f"chunk {c} of /values is damaged: {exc}") from None
        return data[j] if width == 1 else data[2 * j] | data[2 * j + 1] << 8

    def read_keys(self, c: int, raw: bytes | None = None):
        """:meth:`keys_of_chunk` as numpy.ndarray of int64, shape (entries,).

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        import numpy as np

        return np.frombuffer(self.keys_of_chunk(c, raw), np.int64)

    def read_values(self, c: int, raw: bytes | None = None):
        """:meth:`values_of_chunk` as numpy.ndarray of uint8 (or uint16 for two-byte values), shape
        (entries,).

        Raises
        ------
        TablebaseFileError
            If the chunk is damaged.
        """
        import numpy as np

        return np.frombuffer(self.values_of_chunk(c, raw), self.value_dtype)

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
        """The chunk of /keys that would hold ``key``, or -1 if it is below every key (an answer
        that relies on the index's order: see :meth:`check_index`)."""
        return bisect_right(self._index, key) - 1

    def read_all(self, progress=None) -> tuple:
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

        import numpy as np

        from dobutsu_tb.encoding import config
        from dobutsu_tb.encoding.checksums import checksums
        from dobutsu_tb.tablebase.chunks import inflate_chunks
        from dobutsu_tb.tablebase.schema import code_histogram, value_counts

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
            shuffled, chunk, dtype, out = ((True, self.key_chunk, np.dtype("<i8"), keys) if name == "keys"
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

    def _check_all(self, keys, values) -> None:
        """What :meth:`keys_of_chunk` and :meth:`check_value` check chunk by chunk and value by
        value, for whole arrays (numpy.ndarray)."""
        import numpy as np

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
        import numpy as np

        from dobutsu_tb.tablebase.chunks import hdf5_chunk_table

        problems = []
        for name in ("keys", "values"):
            try:
                theirs = hdf5_chunk_table(self.hdf5[name])
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

    def read_stats(self) -> tuple:
        """/stats/dtm_wins and /stats/dtm_losses (numpy.ndarray of int64, one count per DTM);
        their layout was checked on open (through h5py, or the probe header's CRCs), their values
        are the verifier's to compare with the data.

        Raises
        ------
        TablebaseFileError
            If they are unreadable.
        """
        import numpy as np

        out = []
        for name in ("stats/dtm_wins", "stats/dtm_losses"):
            try:
                out.append(np.asarray(self.hdf5[name][()], np.int64).ravel())
            except Exception as exc:  # noqa: BLE001
                raise self._fail(f"/{name} is unreadable ({' '.join(str(exc).split())})") from None
        return out[0], out[1]
