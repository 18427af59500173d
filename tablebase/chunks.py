"""The bytes of one chunk of /keys or /values, as HDF5's filters store them: shuffled (the keys),
deflated with zlib, then followed by the fletcher32 of the deflated bytes; and where HDF5's chunk
index puts them. The reader decodes chunks itself (:func:`inflate_key_bytes`,
:func:`inflate_key_planes`, :func:`inflate_value_bytes`, :func:`inflate_chunks`) from the offsets of
/chunk_table, so a damaged filter mask in HDF5's index cannot make it skip a filter, and checks
each chunk's bytes against its place in the table (:func:`place_crc`, format version 4), since
a chunk's own checksums travel with it.
"""

from __future__ import annotations

import itertools
import math
import zlib

try:  # zlib-ng inflates the same streams two to three times faster (a probe inflates two chunks)
    from zlib_ng import zlib_ng as _inflater
except ImportError:  # pragma: no cover - zlib-ng is a dependency; stay correct without it
    _inflater = zlib

from dobutsu_tb.encoding import config

#: zlib's CRC-32 (the same values), from zlib-ng when it is there: quicker on long tables.
crc32 = _inflater.crc32

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


def encode_chunks(data, shuffle: bool, level: int = config.GZIP_LEVEL) -> list[bytes]:
    """The bytes HDF5 stores for each chunk: shuffled if asked (HDF5's shuffle filter), deflated
    (zlib; with fixed Huffman codes when shuffled, for the keys: any inflater reads them), then
    the little-endian fletcher32 of the deflated bytes (HDF5's fletcher32 filter).

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
    import numpy as np

    from dobutsu_tb.encoding.checksums import checksums

    count, size = data.shape
    raw = data.view(np.uint8).reshape(count, size, data.itemsize)
    if shuffle and data.itemsize > 1:
        raw = raw.transpose(0, 2, 1)
    raw = np.ascontiguousarray(raw).reshape(count, -1)
    # The keys with fixed Huffman codes (Z_FIXED): 1 % larger, inflated in half the time (no
    # code tables to build from the stream: most of a probe's inflating); the values as usual
    # (fixed codes would make them 30 % larger).
    strategy = zlib.Z_FIXED if shuffle else zlib.Z_DEFAULT_STRATEGY
    packed = [_deflate(raw[c], level, strategy) for c in range(count)]
    return [z + int(c).to_bytes(CHECKSUM_BYTES, "little") for z, c in zip(packed, checksums(packed))]


def _deflate(data, level: int, strategy: int) -> bytes:
    """A zlib stream of ``data`` (what ``zlib.compress`` makes, with this strategy)."""
    if strategy == zlib.Z_DEFAULT_STRATEGY:
        return zlib.compress(data, level)
    z = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS, 8, strategy)
    return z.compress(data) + z.flush()


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
    return crc32(chunk, crc32(row.to_bytes(8, "little")))


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
    """The inflated bytes of a stored chunk (its fletcher32 last, not checked here). Inflating is
    not bounded (bounding it would cost a probe 6 %): the reader checks on open that a chunk's
    stored size is within zlib's bound for at most
    :data:`~dobutsu_tb.tablebase.schema.MAX_CHUNK` elements, so a forged stream inflates to at
    most about 1,000 times that size.

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


def inflate_key_bytes(chunk, entries: int) -> bytearray:
    """The keys of a stored chunk of /keys as little-endian int64 bytes: inflated (its zlib
    stream checked, Adler-32 included), then HDF5's shuffle undone; no numpy.

    Parameters
    ----------
    chunk : bytes-like
        The chunk as stored, its fletcher32 last (not checked here).
    entries : int
        Keys in a chunk (the last chunk of /keys is stored full size too).

    Returns
    -------
    bytearray
        ``8 * entries`` bytes.

    Raises
    ------
    ValueError
        If the zlib stream is damaged or cut short, or inflates to the wrong size.
    """
    return unshuffle_keys(inflate_key_planes(chunk, entries), entries)


def inflate_key_planes(chunk, entries: int) -> bytes:
    """:func:`inflate_key_bytes` (the same arguments and errors) with the shuffle left in place:
    ``8 * entries`` bytes whose plane ``b`` (bytes ``b * entries`` to ``(b + 1) * entries``) holds
    byte ``b`` of every key, so key ``i`` is :func:`key_in_planes`. What a probe searches: finding
    one key reads about ten of them instead of undoing the shuffle of all 512."""
    return _inflate(chunk, 8 * entries)


def key_in_planes(planes: bytes, i: int, entries: int) -> int:
    """Key ``i`` (a signed int64, as stored) of a shuffled chunk of /keys
    (:func:`inflate_key_planes`): its 8 bytes are ``entries`` apart, lowest first."""
    return int.from_bytes(planes[i::entries], "little", signed=True)


def unshuffle_keys(planes: bytes, entries: int) -> bytearray:
    """Undo HDF5's shuffle of a chunk of /keys: the keys as little-endian int64 bytes
    (``8 * entries`` of them), from their planes (:func:`inflate_key_planes`)."""
    out = bytearray(8 * entries)
    for b in range(8):  # byte b of every key is plane b of the shuffled chunk
        out[b::8] = planes[b * entries:(b + 1) * entries]
    return out


def inflate_value_bytes(chunk, size: int) -> bytes:
    """The bytes of a stored chunk of /values (not shuffled), inflated and checked as by
    :func:`inflate_key_bytes`.

    Parameters
    ----------
    chunk : bytes-like
    size : int
        The chunk's bytes once inflated (entries times the values' bytes).

    Returns
    -------
    bytes

    Raises
    ------
    ValueError
        If the zlib stream is damaged or cut short, or inflates to the wrong size.
    """
    return _inflate(chunk, size)


def inflate_prefix(chunk, size: int) -> bytes:
    """The first ``size`` bytes a stored chunk inflates to, its zlib stream checked that far (its
    Adler-32, at the stream's end, not): what a probe of one value needs, half a chunk of /values
    on average, whose dynamic Huffman codes make inflating the costliest part of a probe. Read a
    chunk so only where its bytes are checked otherwise (the CRC-32 of its place: :func:`place_crc`).

    Parameters
    ----------
    chunk : bytes-like
        The chunk as stored, its fletcher32 last (not checked here).
    size : int
        Bytes wanted (at most the chunk's whole size).

    Returns
    -------
    bytes
        ``size`` bytes.

    Raises
    ------
    ValueError
        If the zlib stream is damaged, or ends before ``size`` bytes.
    """
    # (:func:`_inflate`'s checks written out, not a switch in it: it inflates every chunk of keys
    # a probe reads; sharing one function measured 0.6 and 1.1 µs slower a probe in two
    # alternations, within this host's noise)
    if len(chunk) <= CHECKSUM_BYTES:
        raise ValueError("too short")
    try:
        data = _inflater.decompressobj().decompress(memoryview(chunk)[:-CHECKSUM_BYTES], size)
    except (zlib.error, _inflater.error) as exc:
        raise ValueError(f"damaged deflate stream ({exc})") from None
    if len(data) < size:
        raise ValueError(f"inflates to {len(data)} bytes, fewer than {size}")
    return data


#: Per number of keys m: m lanes of 64 bits with bit 63 set, and m lanes holding 1.
_LANES: dict = {}


def keys_ascending(data, count: int) -> bool:
    """Whether the first ``count`` little-endian int64s of ``data`` are strictly ascending and
    none negative, without numpy and without a Python loop over the keys.

    The keys are read as one big integer of 64-bit lanes. A key below 2**63 leaves its lane's top
    bit free, so ``(next | 2**63) - key - 1``, lane by lane, never borrows from the lane above,
    and its top bit is set exactly when ``next > key``: three operations on the whole chunk.

    Parameters
    ----------
    data : bytes-like
        At least ``8 * count`` bytes (any C-contiguous buffer: bytes, a memoryview of int64s).
    count : int

    Returns
    -------
    bool
    """
    if count <= 1:
        return count == 0 or memoryview(data).cast("B")[7] < 0x80
    m = count - 1
    lanes = _LANES.get(m)
    if lanes is None:
        lanes = _LANES[m] = (int.from_bytes((b"\0" * 7 + b"\x80") * m, "little"),
                             int.from_bytes((b"\x01" + b"\0" * 7) * m, "little"), (1 << (64 * m)) - 1)
    top, ones, mask = lanes
    whole = int.from_bytes(memoryview(data).cast("B")[:8 * count], "little")
    if whole & ((top << 64) | top):  # a key of 2**63 or more: negative as int64
        return False
    return (((whole >> 64) | top) - (whole & mask) - ones) & top == top


class ChunkError(ValueError):
    """A damaged chunk among several (:func:`inflate_chunks`); ``index`` is its place in the list."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def inflate_chunks(chunks, dtype, count: int, shuffle: bool):
    """The elements of several stored chunks, end to end, each inflated and checked as by
    :func:`inflate_key_bytes`, with one shuffle undone for all of them (whole-file readers).

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
    import numpy as np

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


def hdf5_chunk_table(dset):
    """HDF5's own record of a one-dimensional chunked dataset's chunks (an h5py.Dataset), in
    chunk order.

    Returns
    -------
    numpy.ndarray of int64, shape (chunks, 3)
        Byte offset in the file, size in bytes and filter mask of each chunk (-1 rows for
        chunks that were never written).
    """
    import numpy as np

    step = dset.chunks[0]
    n_chunks = math.ceil(dset.shape[0] / step)
    out = np.full((n_chunks, 3), -1, np.int64)
    infos = []
    dset.id.chunk_iter(infos.append)  # (a callback that only appends: 0.4 s for the standard file, not 0.8 s)
    if infos:  # (one pass over them: 0.05 s for the standard file's, against 0.13 s for two)
        flat = np.fromiter(itertools.chain.from_iterable(
            (info.chunk_offset[0], info.byte_offset, info.size, info.filter_mask) for info in infos),
            np.int64, 4 * len(infos)).reshape(-1, 4)
        c = flat[:, 0] // step
        inside = (c >= 0) & (c < n_chunks)
        out[c[inside]] = flat[inside, 1:]
    return out
