"""The bytes of one chunk of /keys or /values, as HDF5's filters store them: shuffled (the keys),
deflated with zlib, then followed by the fletcher32 of the deflated bytes; and where HDF5's chunk
index puts them. The reader decodes chunks itself (:func:`inflate_chunk`) from the offsets of
/chunk_table, so a damaged filter mask in HDF5's index cannot make it skip a filter, and checks
each chunk's bytes against its place in the table (:func:`place_crc`, format version 4), since
a chunk's own checksums travel with it.
"""

from __future__ import annotations

import math
import zlib

import h5py
import numpy as np

try:  # zlib-ng inflates the same streams two to three times faster (a probe inflates two chunks)
    from zlib_ng import zlib_ng as _inflater
except ImportError:  # pragma: no cover - zlib-ng is a dependency; stay correct without it
    _inflater = zlib

from dobutsu_tb.encoding import config

#: The fletcher32 filter appends this many checksum bytes to a chunk.
CHECKSUM_BYTES = 4


def stored_bound(raw_bytes: int) -> int:
    """Most bytes a chunk can take once deflated and checksummed.

    Parameters
    ----------
    raw_bytes : int
        The chunk's size before deflating.

    Returns
    -------
    int
        zlib's ``compressBound`` of ``raw_bytes``, plus :data:`CHECKSUM_BYTES`.
    """
    return raw_bytes + (raw_bytes >> 12) + (raw_bytes >> 14) + (raw_bytes >> 25) + 13 + CHECKSUM_BYTES


def encode_chunks(data: np.ndarray, shuffle: bool, level: int = config.GZIP_LEVEL) -> list[bytes]:
    """The bytes HDF5 stores for each chunk: shuffled if asked (HDF5's shuffle filter), deflated
    (zlib), then the little-endian fletcher32 of the deflated bytes (HDF5's fletcher32 filter).

    Parameters
    ----------
    data : numpy.ndarray, shape (chunks, entries)
        One full chunk a row.
    shuffle : bool
        Apply the shuffle filter first (for /keys).
    level : int, optional
        The deflate level.

    Returns
    -------
    list of bytes
        One stored chunk a row.
    """
    from dobutsu_tb.encoding.checksums import checksums

    count, size = data.shape
    raw = data.view(np.uint8).reshape(count, size, data.itemsize)
    if shuffle and data.itemsize > 1:
        raw = raw.transpose(0, 2, 1)
    raw = np.ascontiguousarray(raw).reshape(count, -1)
    packed = [zlib.compress(raw[c], level) for c in range(count)]
    return [z + int(c).to_bytes(CHECKSUM_BYTES, "little") for z, c in zip(packed, checksums(packed))]


def place_crc(row: int, chunk) -> int:
    """The CRC-32 that ties a stored chunk to its place: of ``row``, its row in /chunk_table
    (chunks of /keys first, then of /values), as 8 bytes little-endian, followed by its bytes.

    Parameters
    ----------
    row : int
        The chunk's row in /chunk_table.
    chunk : bytes-like
        The chunk as stored (its fletcher32 last).

    Returns
    -------
    int
        In [0, 2**32).
    """
    return zlib.crc32(chunk, zlib.crc32(row.to_bytes(8, "little")))


def checksum_matches(chunk: bytes, ours: int) -> bool:
    """Whether a stored chunk ends with the fletcher32 ``ours`` (of its other bytes).

    Parameters
    ----------
    chunk : bytes
        The chunk as stored, its checksum last.
    ours : int
        The fletcher32 of ``chunk[:-CHECKSUM_BYTES]``
        (:func:`~dobutsu_tb.encoding.checksums.checksums`).

    Returns
    -------
    bool
        True if the stored checksum is ``ours``, in either byte order (as HDF5's own filter
        accepts it).
    """
    stored = int.from_bytes(chunk[-CHECKSUM_BYTES:], "little")
    return stored == ours or stored == int.from_bytes(ours.to_bytes(CHECKSUM_BYTES, "little"), "big")


def _inflate(chunk, size: int) -> bytes:
    """The inflated bytes of a stored chunk (its fletcher32 last, not checked here).

    Raises
    ------
    ValueError
        If the chunk is too short, its zlib stream damaged or cut short, or it does not inflate
        to ``size`` bytes.
    """
    if len(chunk) <= CHECKSUM_BYTES:
        raise ValueError("too short")
    try:
        raw = _inflater.decompress(memoryview(chunk)[:-CHECKSUM_BYTES])
    except (zlib.error, _inflater.error) as exc:
        raise ValueError(f"damaged deflate stream ({exc})") from None
    if len(raw) != size:
        raise ValueError(f"inflates to {len(raw)} bytes, not {size}")
    return raw


def inflate_chunk(chunk: bytes, dtype: np.dtype, count: int, shuffle: bool) -> np.ndarray:
    """The ``count`` elements of one stored chunk, its zlib stream checked (Adler-32 included).

    Its fletcher32 is the caller's to check
    (:meth:`~dobutsu_tb.tablebase.reader.TablebaseFile.read_all` checks it for many chunks at
    once). Inflating is not bounded (bounding it would cost a probe 6 %): the reader checks on
    open that a chunk's stored size is within zlib's bound for at most
    :data:`~dobutsu_tb.tablebase.schema.MAX_CHUNK` elements, so a forged stream inflates to at
    most about 1,000 times that size.

    Parameters
    ----------
    chunk : bytes
        The chunk as stored, its fletcher32 last.
    dtype : numpy.dtype
        The elements' dtype.
    count : int
        Elements in the chunk.
    shuffle : bool
        Undo HDF5's shuffle filter (for /keys).

    Returns
    -------
    numpy.ndarray of dtype, shape (count,)

    Raises
    ------
    ValueError
        If the zlib stream is damaged or cut short, or inflates to the wrong size.
    """
    raw = _inflate(chunk, count * dtype.itemsize)
    if shuffle and dtype.itemsize > 1:
        planes = np.frombuffer(raw, np.uint8).reshape(dtype.itemsize, count)
        return np.ascontiguousarray(planes.T).view(dtype).reshape(count)
    return np.frombuffer(raw, dtype)


class ChunkError(ValueError):
    """A damaged chunk among several (:func:`inflate_chunks`); ``index`` is its place in the list."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def inflate_chunks(chunks, dtype: np.dtype, count: int, shuffle: bool) -> np.ndarray:
    """The elements of several stored chunks, end to end: :func:`inflate_chunk` for many chunks,
    with one shuffle undone for all of them (whole-file readers).

    Parameters
    ----------
    chunks : sequence of bytes-like
        Stored chunks, their fletcher32 last (the caller checks it).
    dtype : numpy.dtype
        The elements' dtype.
    count : int
        Elements in each chunk (the last chunk of a dataset is stored full size too).
    shuffle : bool
        Undo HDF5's shuffle filter (for /keys).

    Returns
    -------
    numpy.ndarray of dtype, shape (len(chunks) * count,)

    Raises
    ------
    ChunkError
        For the first chunk whose zlib stream is damaged, cut short or of the wrong size.
    """
    size = count * dtype.itemsize
    parts = []
    for i, chunk in enumerate(chunks):
        try:
            parts.append(_inflate(chunk, size))
        except ValueError as exc:
            raise ChunkError(i, str(exc)) from None
    data = np.frombuffer(b"".join(parts), np.uint8)
    if shuffle and dtype.itemsize > 1:
        data = np.ascontiguousarray(data.reshape(len(parts), dtype.itemsize, count).transpose(0, 2, 1))
    return data.view(dtype).reshape(len(parts) * count)


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
