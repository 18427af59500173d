"""The tablebase file's layout, format version 5 (one HDF5 file that any HDF5 reader can read),
and the checks of its metadata.

Layout::

    /keys     int64 <i8, (n,)  canonical keys of the non-terminal positions, strictly ascending;
                               chunks of KEY_CHUNK entries, shuffle + deflate + fletcher32
    /values   uint8, (n,)      the value byte of each key (values.py): 0 draw, else DTM + 1,
                               a win when the DTM is odd; chunks of VALUE_CHUNK, deflate + fletcher32
    /index    int64 <i8, (m,)  the first key of each chunk of /keys (m = ceil(n / KEY_CHUNK));
                               its CRC-32 is the attribute index_crc32
    /chunk_table  int64 <i8, (m + m', 3)   for each chunk of /keys, then of /values (row r):
                               its byte offset and size in the file, as HDF5's chunk index
                               records them (no two overlapping), and the CRC-32 of r (8 bytes,
                               little-endian) followed by the chunk's stored bytes
                               (:func:`~dobutsu_tb.tablebase.chunks.place_crc`), which ties
                               each chunk to its place; the table's own CRC-32 is the attribute
                               chunk_table_crc32
    /stats/dtm_wins, /stats/dtm_losses   int64 <i8: positions per DTM (index = plies)

The root attributes hold the metadata (:class:`Metadata`): format and version, rules, start
position, counts per class and per value, the longest DTM, the start position's value and the
seconds of each build phase, and ``metadata_crc32``, the CRC-32 of all the others
(:func:`metadata_crc32`). Strings are fixed-length UTF-8 and the attributes are kept in the root
group's object header, so every byte of HDF5's own metadata is covered by one of HDF5's
checksums (superblock, object headers, the chunk index) and the file has no global heap (HDF5
can loop forever on a damaged one). Terminal positions are not stored: the rules answer them.
The file starts with HDF5's user block, which holds the probe header
(:mod:`~dobutsu_tb.tablebase.header`): the attributes and the places of /index and /chunk_table
again, so that a probe opens the file without h5py or numpy.

Version 5 differs from version 4 only by the probe header (and by the keys' chunks, deflated
with fixed Huffman codes: any inflater reads them); a file of version 4 is read through h5py.
Version 4 differs from version 3 only by the chunk table's third column: in a file of version 3
or 2 a chunk moved, swapped or copied over another of the same stored size (a /values chunk
above all: its bytes say nothing of their place) is read as if it were in place, and only
``dobutsu-tb verify``, which re-derives every value, finds it. Version 3 differs from version 2
only by ``metadata_crc32`` and the string attributes' storage. Files of versions 2 to 4 are
still read, with every check their layout allows.

The chunks' bytes are :mod:`~dobutsu_tb.tablebase.chunks`' to encode and decode; files are
written by :mod:`~dobutsu_tb.tablebase.writer` and read, every byte checked, by
:mod:`~dobutsu_tb.tablebase.reader`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from dobutsu_tb.tablebase.game.layout import key_width_problem
from dobutsu_tb.tablebase.game.variant import Variant, VariantError, standard_variant, variant_from_json
from dobutsu_tb.tablebase.values import MAX_STORED_DTM, MAX_WIDE_DTM

FORMAT = "dobutsu-tablebase"
FORMAT_VERSION = 5
RULES = ("dobutsu shogi and its variants (docs/rules.md): catch and try (Tanaka's convention: catch-terminal and "
         "try-terminal positions are not stored), side to move normalised, mirrors folded when the variant is "
         "mirror-symmetric; the variant's description is the attribute 'variant'")
KEY_LAYOUT = "Huffman-style 64-bit canonical key derived from the variant, first code bit at bit 62 (docs/rules.md)"
VALUE_LAYOUT = "uint8: 0 draw, otherwise DTM + 1 in plies; an odd DTM is a win, an even one a loss"
#: The same in two bytes, for a variant whose longest DTM is 254 plies or more.
WIDE_VALUE_LAYOUT = "uint16: 0 draw, otherwise DTM + 1 in plies; an odd DTM is a win, an even one a loss"
#: The dtypes of /keys and /values (numpy's names).
KEY_DTYPE, VALUE_DTYPE = "<i8", "u1"


#: Datasets of a tablebase file, at the root and in /stats.
MEMBERS = {"keys", "values", "index", "chunk_table", "stats"}
STATS_MEMBERS = {"dtm_wins", "dtm_losses"}
#: HDF5's identifiers of the filters we use (H5Zpublic.h; h5py.h5z.FILTER_DEFLATE, ...).
FILTER_DEFLATE, FILTER_SHUFFLE, FILTER_FLETCHER32 = 1, 2, 3
#: The filter pipelines of /keys and /values, in order (what encode_chunks applies).
KEY_FILTERS = (FILTER_SHUFFLE, FILTER_DEFLATE, FILTER_FLETCHER32)
VALUE_FILTERS = (FILTER_DEFLATE, FILTER_FLETCHER32)
FILTER_NAMES = {FILTER_SHUFFLE: "shuffle", FILTER_DEFLATE: "deflate", FILTER_FLETCHER32: "fletcher32"}
#: Most entries in a chunk of a file we read (ours have KEY_CHUNK and VALUE_CHUNK).
MAX_CHUNK = 1 << 16


class TablebaseFileError(OSError):
    """Raised for a missing, unreadable, corrupt or foreign tablebase file; the message says where."""


@dataclass
class Metadata:
    """What a tablebase file says about itself (its root attributes).

    Attributes
    ----------
    start : str
        Start position in our text form (docs/rules.md §8).
    reachable, nonterminal, catch_terminal, try_terminal : int
        Position counts (docs/rules.md §6).
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
    variant : Variant
        The game (files of format 2 and 3, written before variants existed: dobutsu shogi).
    value_bits : int
        8, or 16 when the values take two bytes (``value_layout`` says which).
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
    variant: Variant = field(default_factory=standard_variant)
    value_bits: int = 8


#: The integer attributes of the metadata: counts, the longest DTM and the start position's value.
COUNT_FIELDS = ("reachable", "nonterminal", "catch_terminal", "try_terminal", "no_moves", "wins",
                "draws", "losses", "start_wdl", "start_dtm", "max_dtm")


#: Values counted at a time by :func:`code_histogram` (its temporaries: 8 bytes a value).
HISTOGRAM_STEP = 1 << 22


def code_histogram(codes, size: int = 256):
    """Positions per value code, counted in slices (``np.bincount`` of the whole array would make
    an int64 copy of it: 11.5 GB for the 5x3 game's 1.44 G values).

    Parameters
    ----------
    codes : numpy.ndarray of uint8 or uint16 (or any unsigned integers), shape (n,)
    size : int, optional
        The least length of the result (the codes' range: 256 for bytes).

    Returns
    -------
    numpy.ndarray of int64, shape (max(size, codes.max() + 1),)
    """
    import numpy as np

    counts = np.zeros(size, np.int64)
    for lo in range(0, codes.shape[0], HISTOGRAM_STEP):
        part = np.bincount(codes[lo:lo + HISTOGRAM_STEP], minlength=counts.shape[0])
        if part.shape[0] > counts.shape[0]:
            counts = np.pad(counts, (0, part.shape[0] - counts.shape[0]))
        counts += part
    return counts


def value_counts(per_code) -> dict:
    """What the metadata say about the values, from the number of positions per value byte.

    Parameters
    ----------
    per_code : numpy.ndarray of int64, shape (256,)
        Positions per value byte (:func:`code_histogram`).

    Returns
    -------
    dict
        ``wins``, ``draws``, ``losses``, ``no_moves`` (losses in 0: the positions without a
        legal move) and ``max_dtm`` (plies), as ints.
    """
    import numpy as np

    decided = per_code[1:]
    dtm = np.arange(decided.shape[0])
    return {"wins": int(decided[dtm % 2 == 1].sum()), "draws": int(per_code[0]),
            "losses": int(decided[dtm % 2 == 0].sum()), "no_moves": int(decided[0]),
            "max_dtm": int(np.flatnonzero(decided).max()) if decided.any() else 0}


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
    elif type(value) in (int, float, bool, str):  # JSON's (the probe header's) types: no numpy needed
        ok = type(value) is int or (kind is float and type(value) is float)
    else:
        import numpy as np

        ok = (np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_, str))
              and isinstance(value, (int, np.integer) if kind is int else (int, float, np.integer, np.floating)))
    if not ok:
        raise TablebaseFileError(f"{filename}: metadata attribute {name!r} is not {_KIND_NAMES[kind]}")
    return kind(value)


#: Root attributes of every readable format version, by type (besides ``seconds_*``, floats).
_STRING_ATTRS = ("format", "rules", "key_layout", "value_layout", "start", "created")
_INT_ATTRS = ("format_version", *COUNT_FIELDS, "index_crc32", "chunk_table_crc32")
#: What each readable format version adds to them: version 2 has no metadata_crc32 (it is read
#: with every other check); version 4 names its variant (files of versions 2 and 3 are dobutsu
#: shogi's). A new version with attributes of its own adds a row here, and its
#: number to READABLE_VERSIONS through it.
VERSION_ATTRS = {2: (), 3: ("metadata_crc32",), 4: ("metadata_crc32", "variant"), 5: ("metadata_crc32", "variant")}
READABLE_VERSIONS = tuple(VERSION_ATTRS)
#: Columns of /chunk_table by format version: offset and size, and from version 4 the CRC-32
#: of each chunk's place and bytes.
CHUNK_TABLE_COLUMNS = {2: 2, 3: 2, 4: 3, 5: 3}
#: Attributes that a file may lack (their value is then "").
_OPTIONAL_ATTRS = ("created",)


def _attribute_kind(name: str) -> type:
    """The type of the root attribute ``name``: float for ``seconds_*``, str or int."""
    return str if name in _STRING_ATTRS or name == "variant" else float if name.startswith("seconds_") else int


def raw_attributes(f) -> dict:
    """The root attributes of an open h5py file as plain Python values (strings decoded, numpy
    scalars as int or float, arrays as lists): what the probe header holds.

    Raises
    ------
    Exception
        Whatever h5py raises for damaged attribute headers.
    """
    out = {}
    for k in f.attrs.keys():
        value = f.attrs[k]
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        out[k] = value.tolist() if hasattr(value, "tolist") else value
    return out


def read_metadata(f, check_counts: bool = True) -> Metadata:
    """The :class:`Metadata` of a tablebase file open with h5py (h5py.File), checked as by
    :func:`metadata_from_attrs`.

    Raises
    ------
    TablebaseFileError
        As :func:`metadata_from_attrs`, or if HDF5 cannot read the attributes.
    """
    try:
        a = f.attrs
        raw = {k: a[k] for k in a.keys()}
    except Exception as exc:  # h5py raises assorted types for damaged attribute headers
        raise TablebaseFileError(f"{f.filename}: unreadable metadata ({' '.join(str(exc).split())})") from None
    return metadata_from_attrs(raw, f.filename, check_counts)


def metadata_from_attrs(raw: dict, name: str, check_counts: bool = True) -> Metadata:
    """The :class:`Metadata` of a file's root attributes, checked: their names and types, their
    CRC-32 (``metadata_crc32``, format versions 3 and later), the start position, and (unless
    ``check_counts`` is false, as the verifier asks, to report the details itself) that the
    counts agree with each other.

    Parameters
    ----------
    raw : dict
        The attributes by name: as h5py reads them, or as the probe header holds them
        (:mod:`~dobutsu_tb.tablebase.header`).
    name : str
        The file's name, for the messages.
    check_counts : bool, optional

    Raises
    ------
    TablebaseFileError
        If the file is not a tablebase of a readable format version, or its attributes are
        missing, unknown, of the wrong type, damaged or contradict each other.
    """
    try:
        fmt = raw.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode("utf-8", "replace")
        if not isinstance(fmt, str) or fmt != FORMAT:
            raise TablebaseFileError(f"{name}: not a dobutsu tablebase file")
        version = _attribute(raw.get("format_version"), "format_version", int, name)
        if version not in READABLE_VERSIONS:
            raise TablebaseFileError(f"{name}: format version {version} (this program reads versions "
                                     f"{min(READABLE_VERSIONS)} to {FORMAT_VERSION}; build the file again with "
                                     f"'dobutsu-tb build')")
        known = (*_STRING_ATTRS, *_INT_ATTRS, *VERSION_ATTRS[version])
        missing = [k for k in known if k not in raw and k not in _OPTIONAL_ATTRS]
        if missing:
            raise TablebaseFileError(f"{name}: metadata attribute {missing[0]!r} is missing (a damaged file?)")
        unknown = [k for k in raw if k not in known and not k.startswith("seconds_")]
        if unknown:
            raise TablebaseFileError(f"{name}: unknown metadata attribute {unknown[0]!r} (a damaged file?)")
        attrs = {k: _attribute(v, k, _attribute_kind(k), name) for k, v in raw.items()}
        if "metadata_crc32" in VERSION_ATTRS[version] and attrs["metadata_crc32"] != metadata_crc32(attrs):
            raise TablebaseFileError(f"{name}: the metadata fail their CRC-32 check: the file is damaged")
    except TablebaseFileError:
        raise
    except Exception as exc:  # damaged values (h5py raises assorted types for damaged headers)
        raise TablebaseFileError(f"{name}: unreadable metadata ({' '.join(str(exc).split())})") from None
    try:
        variant = variant_from_json(attrs["variant"], "its variant") if version >= 4 else standard_variant()
        problem = key_width_problem(variant)  # (no build writes a variant whose keys do not fit)
        if problem is not None:
            raise VariantError(f"its variant: {problem}")
    except VariantError as exc:
        raise TablebaseFileError(f"{name}: {exc} (a damaged file?)") from None
    meta = Metadata(start=attrs["start"], created=attrs.get("created", ""), format_version=version,
                    seconds={k[len("seconds_"):]: v for k, v in attrs.items() if k.startswith("seconds_")},
                    variant=variant, value_bits=16 if attrs["value_layout"] == WIDE_VALUE_LAYOUT else 8,
                    **{k: attrs[k] for k in COUNT_FIELDS})
    problem = _start_problem(meta.start, variant) or (_metadata_problem(meta) if check_counts else None)
    if problem:
        raise TablebaseFileError(f"{name}: inconsistent metadata: {problem}")
    return meta


def _start_problem(text: str, variant: Variant) -> str | None:
    from dobutsu_tb.tablebase.game.layout import NONTERMINAL
    from dobutsu_tb.tablebase.game.position import Position, PositionError

    try:
        position = Position.from_text(text, variant)
    except PositionError as exc:
        return f"the start position {text!r} is not a position of {variant.name} ({exc})"
    if position.game.classify(position.state()) != NONTERMINAL:
        return f"the start position {text} is terminal"
    return None


def _metadata_problem(m: Metadata) -> str | None:
    if min(m.reachable, m.nonterminal, m.catch_terminal, m.try_terminal, m.no_moves, m.wins, m.draws, m.losses) < 0:
        return "a negative count"
    if m.reachable != m.nonterminal + m.catch_terminal + m.try_terminal:
        return "reachable is not non-terminal + catch-terminal + try-terminal"
    if m.wins + m.draws + m.losses != m.nonterminal:
        return "wins + draws + losses is not the number of non-terminal positions"
    if not 0 <= m.max_dtm <= MAX_WIDE_DTM:
        return f"the longest DTM {m.max_dtm} is out of range"
    if m.value_bits == 8 and m.max_dtm > MAX_STORED_DTM:
        return f"the longest DTM {m.max_dtm} does not fit the file's one-byte values"
    if m.start_wdl not in (-1, 0, 1) or not 0 <= m.start_dtm <= m.max_dtm:
        return "the start position's value is out of range"
    if (m.start_dtm != 0) if m.start_wdl == 0 else (m.start_dtm % 2 == 1) != (m.start_wdl == 1):
        return "the start position's DTM contradicts its WDL"
    return None
