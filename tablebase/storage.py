"""HDF5 storage of a tablebase (one file, readable by any HDF5 reader).

Layout (format version 1)::

    /keys    int64 <i8, (n,)   canonical keys of the non-terminal positions, ascending
    /wdl     int8  <i1, (n,)   WDL from the side to move's view: 1 win, 0 draw, -1 loss
    /dtm     uint16 <u2, (n,)  DTM in plies (0 for draws)
    /index   int64 <i8, (m,)   the first key of each chunk of /keys, for probes
    /stats/dtm_wins, /stats/dtm_losses   int64 <i8: positions per DTM (index = plies)

``/keys``, ``/wdl`` and ``/dtm`` are chunked alike (:data:`tablebase.config.CHUNK` entries)
with shuffle, gzip and fletcher32, so a probe decompresses one chunk of each. Terminal
positions are not stored: the rules answer them. The file's attributes hold the metadata:
format version, rules, start position, counts per value, build times.

Files are written to a temporary name in the target folder and renamed into place when
complete, so a failed or interrupted write never leaves a file that looks complete.
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from dobutsu_tb.encoding import config

FORMAT = "dobutsu-tablebase"
FORMAT_VERSION = 1
RULES = ("dobutsu shogi (SPEC §1): catch and try (Tanaka's convention: catch-terminal and "
         "try-terminal positions are not stored), side to move normalised, mirrors folded")
KEY_LAYOUT = "Huffman-style 64-bit canonical key, first code bit at bit 62 (SPEC §1.3)"


class TablebaseFileError(OSError):
    """Raised for a missing, unreadable, corrupt or foreign tablebase file."""


@dataclass
class Metadata:
    """What a tablebase file says about itself (its root attributes).

    Attributes
    ----------
    start : str
        Start position in SPEC §1.6 text form.
    reachable, nonterminal, catch_terminal, try_terminal : int
        Position counts (SPEC §1.4).
    no_moves : int
        Non-terminal positions without a legal move (stored as losses in 0).
    wins, draws, losses : int
        Stored (non-terminal) positions per WDL.
    start_wdl, start_dtm : int
        The start position's value (DTM in plies).
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
    seconds: dict = field(default_factory=dict)
    created: str = ""
    format_version: int = FORMAT_VERSION


_COUNT_FIELDS = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins",
                 "draws", "losses", "start_wdl", "start_dtm")


def write_tablebase(path, keys: np.ndarray, wdl: np.ndarray, dtm: np.ndarray, meta: Metadata,
                    progress=None) -> Path:
    """Write a tablebase file atomically.

    Parameters
    ----------
    path : str or Path
        Target file; replaced if it exists, only once the new file is complete.
    keys : numpy.ndarray of int64, shape (n,)
        Canonical keys, strictly ascending.
    wdl : numpy.ndarray of int8, shape (n,)
    dtm : numpy.ndarray of uint16, shape (n,)
        Plies.
    meta : Metadata
    progress : callable, optional
        Called as ``progress(entries)`` after each slice of a dataset is written.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    ValueError
        If the arrays disagree in length or the keys are not strictly ascending.
    OSError
        If the folder is not writable.
    """
    path = Path(path)
    n = keys.shape[0]
    if wdl.shape != (n,) or dtm.shape != (n,):
        raise ValueError("keys, wdl and dtm must have the same length")
    if n > 1 and not np.all(keys[1:] > keys[:-1]):
        raise ValueError("keys must be strictly ascending")
    chunk = max(1, min(config.CHUNK, n))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent or ".")
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            opts = dict(chunks=(chunk,), compression="gzip", compression_opts=config.GZIP_LEVEL,
                        shuffle=True, fletcher32=True)
            step = chunk * 256
            for name, data, dtype in (("keys", keys, "<i8"), ("wdl", wdl, "<i1"), ("dtm", dtm, "<u2")):
                dset = f.create_dataset(name, shape=(n,), dtype=dtype, **opts)
                for lo in range(0, n, step):
                    dset[lo:lo + step] = data[lo:lo + step]
                    if progress is not None:
                        progress(min(step, n - lo))
            f.create_dataset("index", data=keys[::chunk].astype("<i8"))
            stats = f.create_group("stats")
            top = int(dtm.max()) + 1 if n else 1
            stats.create_dataset("dtm_wins", data=np.bincount(dtm[wdl == 1], minlength=top).astype("<i8"))
            stats.create_dataset("dtm_losses", data=np.bincount(dtm[wdl == -1], minlength=top).astype("<i8"))
            a = f.attrs
            a["format"] = FORMAT
            a["format_version"] = FORMAT_VERSION
            a["rules"] = RULES
            a["key_layout"] = KEY_LAYOUT
            a["start"] = meta.start
            for name in _COUNT_FIELDS:
                a[name] = np.int64(getattr(meta, name))
            for phase, secs in meta.seconds.items():
                a[f"seconds_{phase}"] = float(secs)
            a["created"] = meta.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            a["chunk"] = np.int64(chunk)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_metadata(f: h5py.File) -> Metadata:
    """The :class:`Metadata` of an open tablebase file.

    Raises
    ------
    TablebaseFileError
        If the file is not a tablebase of a format version this code reads.
    """
    a = f.attrs
    if a.get("format") != FORMAT:
        raise TablebaseFileError(f"{f.filename}: not a dobutsu tablebase file")
    if int(a.get("format_version", -1)) != FORMAT_VERSION:
        raise TablebaseFileError(f"{f.filename}: format version {a.get('format_version')} "
                                 f"(this program reads version {FORMAT_VERSION})")
    missing = [name for name in ("start", *_COUNT_FIELDS) if name not in a]
    if missing:
        raise TablebaseFileError(f"{f.filename}: metadata attribute {missing[0]!r} is missing "
                                 f"(a damaged file?)")
    seconds = {k[len("seconds_"):]: float(v) for k, v in a.items() if k.startswith("seconds_")}
    return Metadata(start=str(a["start"]), seconds=seconds, created=str(a.get("created", "")),
                    format_version=int(a["format_version"]),
                    **{name: int(a[name]) for name in _COUNT_FIELDS})


def open_file(path) -> h5py.File:
    """Open a tablebase file read-only.

    Raises
    ------
    TablebaseFileError
        If the file is missing, not HDF5, or not a tablebase.
    """
    path = Path(path)
    if not path.exists():
        raise TablebaseFileError(f"{path}: no such file (build one with 'dobutsu-tb build')")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise TablebaseFileError(f"{path}: not a readable HDF5 file ({exc})") from None
    try:
        read_metadata(f)
        for name in ("keys", "wdl", "dtm", "index"):
            if name not in f:
                raise TablebaseFileError(f"{path}: dataset /{name} is missing")
    except BaseException:
        f.close()
        raise
    return f
