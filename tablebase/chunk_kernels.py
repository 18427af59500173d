"""The chunks of /keys and /values made in compiled code: taken from the sort records, shuffled
(the keys), deflated by zlib itself and checksummed, every thread at once, with no interpreter
between two chunks. The bytes are those of :func:`~dobutsu_tb.tablebase.chunks.encode_chunks`
(the same zlib, called with the same settings); the writer uses it when it can
(:data:`AVAILABLE`) and falls back to ``encode_chunks`` in a thread pool otherwise.

zlib is the shared library Python's own ``zlib`` module is linked against (found in this
process's memory map, else by the loader's search); its functions are handed to numba under
names of this project (``llvmlite.binding.add_symbol``), so a compiled kernel, cached on disk,
calls exactly that library in every process. The ``z_stream`` is laid out as on 64-bit Linux
(112 bytes); elsewhere :data:`AVAILABLE` is false.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import zlib

import numba
import numpy as np
from numba import types

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.checksums import fletcher32
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.sorting import lower_bound
from dobutsu_tb.tablebase.chunks import CHECKSUM_BYTES, stored_bound
from dobutsu_tb.tablebase.game.layout import RECORD_VALUE_BITS
from dobutsu_tb.tablebase.values import LONG

#: zlib's constants (zlib.h).
_Z_OK, _Z_STREAM_END, _Z_FINISH, _Z_DEFLATED, _MAX_WBITS, _MEM_LEVEL = 0, 1, 4, 8, 15, 8
#: ``sizeof(z_stream)`` on LP64, and its fields as 8-byte words: next_in, avail_in, next_out,
#: avail_out, total_out.
_STREAM_BYTES = 112
_NEXT_IN, _AVAIL_IN, _NEXT_OUT, _AVAIL_OUT, _TOTAL_OUT = 0, 1, 3, 4, 5
#: The names the zlib functions are given for numba.
_PREFIX = "dobutsu_tb_zlib_"
_SIGNATURES = {
    "deflateInit2_": types.int32(types.voidptr, types.int32, types.int32, types.int32, types.int32, types.int32,
                                 types.voidptr, types.int32),
    "deflateReset": types.int32(types.voidptr),
    "deflate": types.int32(types.voidptr, types.int32),
    "deflateEnd": types.int32(types.voidptr),
    "crc32": types.uint64(types.uint64, types.voidptr, types.uint32),
}


def _external(name: str):
    """zlib's function ``name`` as numba calls it (under our prefix, with its signature)."""
    return types.ExternalFunction(_PREFIX + name, _SIGNATURES[name])


_deflate_init, _deflate_reset = _external("deflateInit2_"), _external("deflateReset")
_deflate, _deflate_end, _crc32 = _external("deflate"), _external("deflateEnd"), _external("crc32")


def _zlib_path() -> str | None:
    """The file of the zlib that Python's ``zlib`` module uses (from /proc/self/maps), else the
    loader's ``libz``."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(path).startswith("libz.so"):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("z")


def _load() -> bytes | None:
    """Hand zlib's functions to numba; its version string (NUL-terminated), or None when it
    cannot be used here."""
    if (numba.config.DISABLE_JIT or sys.byteorder != "little" or ctypes.sizeof(ctypes.c_void_p) != 8
            or ctypes.sizeof(ctypes.c_ulong) != 8):
        return None
    path = _zlib_path()
    if path is None:
        return None
    try:
        import llvmlite.binding as llvm

        lib = ctypes.CDLL(path)
        lib.zlibVersion.restype = ctypes.c_char_p
        version = lib.zlibVersion()
        if not version.startswith(b"1.") or version.decode() != zlib.ZLIB_RUNTIME_VERSION:
            return None  # not the zlib of Python's module: the bytes might differ from encode_chunks'
        for name in _SIGNATURES:
            llvm.add_symbol(_PREFIX + name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    except (OSError, AttributeError, UnicodeDecodeError):
        return None
    return version + b"\0"


_VERSION = _load()
_VERSION_BYTES = np.frombuffer(_VERSION or b"\0", np.uint8).copy()  # for deflateInit2_
#: The long values of one-byte /values: none (the kernel's arguments keep their types).
_NO_LONGS = np.zeros(0, np.int64)
_NO_LONG_VALUES = np.zeros(0, np.uint16)
#: Whether :func:`encode_span` can run here (zlib found, 64-bit Linux, numba's JIT on).
AVAILABLE = _VERSION is not None


@njit(parallel=True)
def _encode_span(records, first, count, chunk, keys, key_shift, wide, long_codes, long_values, row, level, version,
                 threads, out, sizes, crcs):
    """Chunks ``first`` .. ``first + count - 1`` of ``records`` into ``out`` (rows 0 .. count - 1):
    their stored bytes, ``sizes`` their lengths (-1: zlib could not start, -2: deflate failed,
    -3: a two-byte value not in ``long_codes``), ``crcs`` their place CRCs (the row of chunk ``k``
    is ``row + k``); ``threads`` share them out (``numba.get_num_threads()`` here would make the
    kernel uncachable: a ctypes pointer). With ``wide`` the values take two bytes, a byte LONG
    its value from ``long_values`` at its code's place in ``long_codes``."""
    n = records.shape[0]
    width = 8 if keys else (2 if wide else 1)
    raw_bytes = chunk * width
    strategy = 4 if keys else 0  # Z_FIXED for the keys (chunks.encode_chunks says why)
    shift = np.uint64(RECORD_VALUE_BITS)
    left = np.uint64(key_shift)
    n_long = long_codes.shape[0]
    for t in prange(threads):
        lo, hi = t * count // threads, (t + 1) * count // threads
        stream = np.zeros(_STREAM_BYTES // 8, np.uint64)
        raw = np.zeros(raw_bytes, np.uint8)
        place = np.zeros(8, np.uint8)
        handle = stream.ctypes.data
        if _deflate_init(handle, level, _Z_DEFLATED, _MAX_WBITS, _MEM_LEVEL, strategy, version.ctypes.data,
                         _STREAM_BYTES) != _Z_OK:
            sizes[lo:hi] = -1
            continue
        for k in range(lo, hi):
            base = (first + k) * chunk
            missing = False
            for i in range(chunk):
                r = records[base + i] if base + i < n else np.uint64(0)  # the last chunk is padded
                if keys:
                    key = (r >> shift) << left
                    for b in range(8):  # HDF5's shuffle: byte b of every key in plane b
                        raw[b * chunk + i] = np.uint8((key >> np.uint64(8 * b)) & np.uint64(0xFF))
                elif width == 1:
                    raw[i] = np.uint8(r & np.uint64(0xFF))
                else:
                    v = np.int64(r & np.uint64(0xFF))
                    if v == LONG:
                        code = np.int64(r >> shift)
                        j = lower_bound(long_codes, code)
                        if j < n_long and long_codes[j] == code:
                            v = np.int64(long_values[j])
                        else:
                            missing = True
                    raw[2 * i] = np.uint8(v & 0xFF)
                    raw[2 * i + 1] = np.uint8((v >> 8) & 0xFF)
            if missing:
                sizes[k] = -3
                continue
            _deflate_reset(handle)
            stream[_NEXT_IN] = raw.ctypes.data
            stream[_AVAIL_IN] = raw_bytes
            stream[_NEXT_OUT] = out[k].ctypes.data
            stream[_AVAIL_OUT] = out.shape[1] - CHECKSUM_BYTES
            if _deflate(handle, _Z_FINISH) != _Z_STREAM_END:
                sizes[k] = -2
                continue
            size = np.int64(stream[_TOTAL_OUT])
            check = fletcher32(out[k], 0, size)
            for b in range(CHECKSUM_BYTES):  # little-endian, as HDF5's filter appends it
                out[k, size + b] = np.uint8((check >> (8 * b)) & 0xFF)
            sizes[k] = size + CHECKSUM_BYTES
            for b in range(8):
                place[b] = np.uint8(((row + k) >> (8 * b)) & 0xFF)
            crc = _crc32(np.uint64(0), place.ctypes.data, np.uint32(8))
            crcs[k] = np.int64(_crc32(crc, out[k].ctypes.data, np.uint32(size + CHECKSUM_BYTES)))
        _deflate_end(handle)


def encode_span(records: np.ndarray, first: int, count: int, chunk: int, keys: bool, key_shift: int,
                longs, row: int, level: int = config.GZIP_LEVEL):
    """The stored bytes of chunks ``first`` .. ``first + count - 1`` of ``records`` for /keys
    (shuffled, deflated with fixed Huffman codes) or /values, each followed by its fletcher32,
    with their place CRCs: what :func:`~dobutsu_tb.tablebase.chunks.encode_chunks` and
    :func:`~dobutsu_tb.tablebase.chunks.place_crc` give, byte for byte. Releases the GIL.

    Parameters
    ----------
    records : numpy.ndarray of uint64, shape (n,)
        Sort records (:func:`~dobutsu_tb.tablebase.writer.pack_records`); a chunk past the
        last record is padded with zeros.
    first, count, chunk : int
        The first chunk, how many, and the entries a chunk.
    keys : bool
        /keys (int64 keys ``(record >> 8) << key_shift``) or /values.
    key_shift : int
        The variant's ``KEY_SHIFT``.
    longs : LongValues or None
        For /values of two bytes: the values of the records whose byte is ``LONG``
        (:class:`~dobutsu_tb.tablebase.writer.LongValues`); None for one-byte values.
    row : int
        The /chunk_table row of chunk ``first`` (the place CRCs cover it).
    level : int, optional
        The deflate level.

    Returns
    -------
    out : numpy.ndarray of uint8, shape (count, bound)
        Chunk ``first + k`` is ``out[k, :sizes[k]]``.
    sizes : numpy.ndarray of int64, shape (count,)
        Bytes of each stored chunk.
    crcs : numpy.ndarray of int64, shape (count,)
        Their place CRCs.

    Raises
    ------
    RuntimeError
        If zlib is not :data:`AVAILABLE`, or fails.
    ValueError
        If a record's byte is ``LONG`` and ``longs`` has no value for its code.
    MemoryError
        If zlib cannot allocate its state.
    """
    if not AVAILABLE:
        raise RuntimeError("zlib cannot be called from compiled code here")
    wide = longs is not None
    width = 8 if keys else (2 if wide else 1)
    long_codes = longs.codes if wide else _NO_LONGS
    long_values = longs.values if wide else _NO_LONG_VALUES
    out = np.empty((count, stored_bound(chunk * width)), np.uint8)  # zlib's bound and the fletcher32
    sizes = np.zeros(count, np.int64)
    crcs = np.zeros(count, np.int64)
    if count:
        threads = min(numba.get_num_threads(), count)
        _encode_span(np.ascontiguousarray(records, np.uint64), np.int64(first), np.int64(count), np.int64(chunk),
                     bool(keys), np.int64(key_shift), wide, np.ascontiguousarray(long_codes, np.int64),
                     np.ascontiguousarray(long_values, np.uint16), np.int64(row), np.int64(level), _VERSION_BYTES,
                     np.int64(threads), out, sizes, crcs)
    if (sizes == -1).any():
        raise MemoryError("zlib could not allocate its state")
    if (sizes == -3).any():
        raise ValueError("a record's value needs two bytes, and the long values have none for its key")
    if (sizes < 0).any():
        raise RuntimeError("zlib failed to deflate a chunk")
    return out, sizes, crcs
