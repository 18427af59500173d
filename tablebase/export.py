"""Perfect play as data: the stored positions of a tablebase with their values and their moves'
values, in a Parquet file (``dobutsu-tb export``; docs/export.md).

One row per stored position (the non-terminal positions reachable from the file's start, each in
its normalised form: Sente to move, the canonical orientation of its key), in the file's key
order; the columns are :data:`COLUMNS`. The rows are made by compiled kernels one row group at a
time (:mod:`~dobutsu_tb.tablebase.export_kernels`): decode the keys, generate the moves and the
children's keys, look the children up in the file's sorted keys, sort each position's moves best
first as :meth:`Tablebase.probe_moves <dobutsu_tb.tablebase.probe.Tablebase.probe_moves>` does,
write the texts straight into Arrow buffers. pyarrow (the optional extra ``[data]``) writes them,
compressed with zstd, to a temporary file that is renamed when complete
(:class:`~dobutsu_tb.tablebase.output.ReservedOutput`).

Memory: the file's keys and values (9 bytes a stored position, as ``verify`` reads them; 10 with
two-byte values), and the buffers of two row groups at most (one being written while the next is
made: about 200 bytes a row each), whatever the number of rows written.

>>> export_parquet("dobutsu.h5", "dobutsu.parquet", sample=1000, seed=1,       # doctest: +SKIP
...                filters=[parse_filter("dtm>=30")])
ExportReport(path=PosixPath('dobutsu.parquet'), rows=1000, ...)
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.tablebase import export_kernels as ek
from dobutsu_tb.tablebase.game import notation
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.notation import TEXT_DROP, Move
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.lookup import key_directory
from dobutsu_tb.tablebase.output import OutputError, ReservedOutput, describe_os_error
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import TablebaseFileError
from dobutsu_tb.tablebase.values import decode_values

#: The export's format, in its metadata (``dobutsu_tb.format``).
EXPORT_FORMAT = "dobutsu-tablebase export 1"
#: Rows per row group, made by one round of the kernels.
ROW_GROUP = 1 << 19
#: Value codes scanned at a time when filtering (its temporaries: about 10 bytes a value).
SCAN_STEP = 1 << 22
#: Parquet's compression and its level.
COMPRESSION, COMPRESSION_LEVEL = "zstd", 3
#: The most bits of the directory of the stored keys' top bits (:func:`~dobutsu_tb.tablebase.lookup.key_directory`):
#: 2**22 + 1 entries, 32 MiB.
MAX_DIRECTORY_BITS = 22
#: The longest DTM a column of int16 holds (a move's DTM is one more than its child's).
MAX_EXPORT_DTM = 32766

#: The columns: name, Arrow type as read back, and what it holds (the file's metadata repeats it).
COLUMNS = (
    ("position", "string", "the position in our notation (docs/rules.md §8), normalised: Sente (S) to move, "
                           "in the orientation of its canonical key"),
    ("fen", "string", "the same position in Fairy-Stockfish's FEN, white (w) to move"),
    ("wdl", "int8", "the position's value for its side to move: 1 win, 0 draw, -1 loss"),
    ("dtm", "int16", "signed distance to mate in plies for the side to move: +n wins in n, -n loses in n, 0 a draw "
                     "(and a loss in 0: a position without a legal move); as Tablebase.probe_dtm"),
    ("moves", "list<string>", "every legal move in UCI notation (Fairy-Stockfish's: b1a2, a3a4+, C@b3; ranks "
                              "counted from Sente's side), best first as Tablebase.probe_moves: wins fastest, "
                              "then draws, then losses slowest, ties in move generation order"),
    ("move_dtm", "list<int16>", "each move's value for its player, in the order of moves: signed DTM in plies "
                                "counted from this position (+n wins in n, -n loses in n, 0 a draw), as "
                                "MoveValue.dtm; its WDL is its sign. A move to a catch-terminal position "
                                "(the opponent captures the lion next) is -2, a successful try +1"),
    ("best_moves", "list<string>", "the moves whose value is the position's (wdl and dtm), in the order of moves: "
                                   "a prefix of moves"),
    ("key", "int64", "the position's canonical key (docs/rules.md §5), the file's /keys entry; rows ascend by it"),
)

#: The conventions, in the file's metadata (``dobutsu_tb.conventions``).
CONVENTIONS = (
    "One row per stored position of the tablebase: the non-terminal positions reachable from its start "
    "(terminal ones, where the side to move can capture the lion or has already lost to a try, are not "
    "stored). Each is normalised: Sente to move (the side to move is always shown as Sente), the board "
    "in the orientation of the canonical key (mirror images are one position). A position's value "
    "(wdl, dtm) is its side to move's; a move's (move_dtm) is its player's, counted in plies from the "
    "position before the move, so the best moves' value is the position's own (docs/rules.md §7). "
    "DTM counts plies (half-moves); UCI's 'score mate' counts moves. Rows are in ascending key order, "
    "a sample too.")


class ExportError(ValueError):
    """Raised when an export cannot be made as asked: pyarrow missing, a sample larger than the
    positions to draw it from, DTMs too long for the columns; the message says which."""


def require_pyarrow():
    """``pyarrow`` and ``pyarrow.parquet``, imported.

    Raises
    ------
    ExportError
        If pyarrow is not installed (the message says what to install).
    """
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ExportError("export needs pyarrow, which is not installed: pip install 'dobutsu-tablebase[data]' "
                          "(or pip install pyarrow)") from None
    return pyarrow, pyarrow.parquet


# --- filters --------------------------------------------------------------------------------------

_FILTER = re.compile(r"\s*([A-Za-z_]\w*)\s*(==|=|!=|<=|>=|<|>)\s*([+-]?\d+|win|draw|loss)\s*")
_OPS = {"=": np.equal, "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}
_WDL_WORDS = {"win": 1, "draw": 0, "loss": -1}
#: The fields a filter reads.
FILTER_FIELDS = ("wdl", "dtm")
_EXAMPLE = "e.g. 'wdl=1' or 'dtm>=30'"


@dataclass(frozen=True)
class Filter:
    """A condition on a position's value (``--where``): ``FIELD OP VALUE`` (:func:`parse_filter`).

    Attributes
    ----------
    field : str
        ``'wdl'`` or ``'dtm'`` (the columns of the same name: the side to move's WDL, signed DTM
        in plies).
    op : str
        ``=``, ``!=``, ``<``, ``<=``, ``>`` or ``>=``.
    value : int
    """

    field: str
    op: str
    value: int

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"

    def test(self, wdl: np.ndarray, dtm: np.ndarray) -> np.ndarray:
        """Which positions pass, from their ``wdl`` and signed ``dtm`` (arrays of one shape)."""
        return _OPS[self.op](wdl if self.field == "wdl" else dtm, self.value)


def parse_filter(text: str) -> Filter:
    """A filter from its text: ``FIELD OP VALUE``, spaces allowed around each part.

    ``FIELD`` is ``wdl`` (``VALUE`` 1, 0, -1, or ``win``, ``draw``, ``loss``) or ``dtm`` (signed
    plies, as the column); ``OP`` one of ``= != < <= > >=`` (``==`` is ``=``). Examples:
    ``wdl=1``, ``wdl!=draw``, ``dtm>=30`` (wins in 30 plies or more), ``dtm<=-30`` (losses in 30
    or more).

    Raises
    ------
    ValueError
        If the text is not such a filter; the message says what is wrong.
    """
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}..."
    m = _FILTER.fullmatch(text)
    if not text.strip():
        raise ValueError(f"an empty filter; write FIELD OP VALUE, {_EXAMPLE}")
    if not m:
        field = re.match(r"\s*([A-Za-z_]\w*)", text)
        if field and field.group(1) not in FILTER_FIELDS:
            raise ValueError(f"{shown}: unknown field {field.group(1)!r}; a filter reads wdl or dtm, {_EXAMPLE}")
        raise ValueError(f"{shown} is not FIELD OP VALUE (FIELD wdl or dtm, OP one of = != < <= > >=, VALUE a whole "
                         f"number), {_EXAMPLE}")
    field, op, raw = m.groups()
    if field not in FILTER_FIELDS:
        raise ValueError(f"{shown}: unknown field {field!r}; a filter reads wdl or dtm, {_EXAMPLE}")
    if raw in _WDL_WORDS:
        if field != "wdl":
            raise ValueError(f"{shown}: {raw} is a value of wdl; dtm is a signed number of plies")
        value = _WDL_WORDS[raw]
    else:
        value = int(raw)
    if field == "wdl" and value not in (-1, 0, 1):
        raise ValueError(f"{shown}: wdl is 1 (win), 0 (draw) or -1 (loss)")
    if field == "dtm" and abs(value) > 65535:
        raise ValueError(f"{shown}: a DTM has at most 65,534 plies")
    return Filter(field, "=" if op == "==" else op, value)


def _passing(codes: np.ndarray, filters) -> np.ndarray:
    """Which of these value codes pass every filter (bool, the shape of ``codes``)."""
    wdl, dtm = decode_values(codes)
    signed = np.where(wdl < 0, -dtm.astype(np.int32), dtm.astype(np.int32))
    keep = np.ones(codes.shape[0], np.bool_)
    for f in filters:
        keep &= f.test(wdl, signed)
    return keep


# --- which rows -----------------------------------------------------------------------------------


class Selection:
    """The stored positions an export writes: those that pass ``filters``, or ``sample`` of them
    drawn uniformly without replacement; always in ascending key order.

    Parameters
    ----------
    values : numpy.ndarray of uint8 or uint16, shape (n,)
        The file's value codes.
    filters : sequence of Filter
    sample : int or None
        How many positions to draw (None: all that pass).
    seed : int
        The random generator's seed (numpy's ``default_rng``): the same seed, file, filters and
        sample give the same rows.

    Attributes
    ----------
    matching : int
        Positions that pass the filters.
    rows : int
        Positions to write.

    Raises
    ------
    ExportError
        If ``sample`` is more than the positions that pass.
    """

    def __init__(self, values: np.ndarray, filters=(), sample: int | None = None, seed: int = 0):
        self.values = values
        self.filters = tuple(filters)
        n = values.shape[0]
        if self.filters:
            self.matching = sum(int(_passing(values[lo:lo + SCAN_STEP], self.filters).sum())
                                for lo in range(0, n, SCAN_STEP))
        else:
            self.matching = n
        self.ranks = None
        if sample is not None:
            if sample > self.matching:
                what = "that pass --where" if self.filters else "in the file"
                raise ExportError(f"--sample {sample:,} is more than the {self.matching:,} stored positions {what}")
            rng = np.random.default_rng(seed)
            self.ranks = np.sort(rng.choice(self.matching, size=sample, replace=False, shuffle=False)).astype(np.int64)
        self.rows = self.matching if sample is None else sample

    def _matching_runs(self):
        """The stored indices that pass the filters, ascending, in pieces; with the rank of each
        piece's first among them."""
        n, seen = self.values.shape[0], 0
        for lo in range(0, n, SCAN_STEP):
            if self.filters:
                piece = np.flatnonzero(_passing(self.values[lo:lo + SCAN_STEP], self.filters)).astype(np.int64) + lo
            else:
                piece = np.arange(lo, min(n, lo + SCAN_STEP), dtype=np.int64)
            yield seen, piece
            seen += piece.shape[0]

    def _pieces(self):
        if self.ranks is None:
            yield from (piece for _, piece in self._matching_runs())
            return
        if not self.filters:  # the ranks are the indices
            yield self.ranks
            return
        at = 0
        for first, piece in self._matching_runs():
            end = np.searchsorted(self.ranks, first + piece.shape[0], side="left")
            if end > at:
                yield piece[self.ranks[at:end] - first]
                at = end

    def blocks(self, size: int):
        """The stored indices to write, ascending, in arrays of ``size`` (the last may be shorter).

        Yields
        ------
        numpy.ndarray of int64, shape (<= size,)
        """
        pending, count = [], 0
        for piece in self._pieces():
            while piece.shape[0]:
                take = min(size - count, piece.shape[0])
                pending.append(piece[:take])
                count += take
                piece = piece[take:]
                if count == size:
                    yield np.concatenate(pending) if len(pending) > 1 else pending[0]
                    pending, count = [], 0
        if count:
            yield np.concatenate(pending) if len(pending) > 1 else pending[0]


# --- the rows of a block --------------------------------------------------------------------------


def uci_dictionary(game) -> tuple[list, np.ndarray]:
    """Every move the variant's rules can make, in UCI notation, and the entry of each text code.

    Parameters
    ----------
    game : Game
        The variant's game (its move tables: each piece's targets from each square, promotion
        zones, drop squares).

    Returns
    -------
    texts : list of str
        The dictionary of the ``moves`` and ``best_moves`` columns: board moves by from-square and
        target, a promotion after its plain move, then drops by hand slot and square (a few hundred
        texts: Parquet stores each entry in as few bits as their count needs).
    index : numpy.ndarray of int16, shape (TEXT_CODES,)
        ``texts[index[code]]`` is the UCI text of a move's text code
        (:func:`~dobutsu_tb.tablebase.game.notation.text_code`, Sente to move); -1 for codes of
        moves the rules never make.
    """
    v, t = game.variant, game.layout
    texts: list = []
    index = np.full(ek.TEXT_CODES, -1, np.int16)
    pieces = range(1, len(v.pieces) + 1)

    def add(codes):
        text = Move.from_code(codes[0], v).uci(v)
        if text not in texts:
            texts.append(text)
        index[codes] = texts.index(text)

    targets = {(p, i, t["TARGET_LIST"][p, i, k]) for p in pieces for i in range(v.cells)
               for k in range(t["TARGET_COUNT"][p, i])}
    moves = sorted({(i, j, bool(t["PROMOTES"][p] and (t["PROMO_ZONE"][p] >> j) & 1)) for p, i, j in targets})
    for i, j, promotes in moves:
        flags = notation.TEXT_PROMOTION if promotes else 0
        add([p | (i << notation.TEXT_FROM_SHIFT) | (j << notation.TEXT_TO_SHIFT) | flags | capture
             for p in pieces for capture in (0, notation.TEXT_CAPTURE)])
    for slot in range(t["N_SLOTS"]):
        for j in range(v.cells):
            if (t["DROP_CELLS"][slot] >> j) & 1:
                add([t["SLOT_PIECE"][slot] | (TEXT_DROP << notation.TEXT_FROM_SHIFT) | (j << notation.TEXT_TO_SHIFT)])
    return texts, index


@dataclass
class _Context:
    """What every block of an export reads: the file's arrays, the kernels, the tables."""

    keys: np.ndarray
    values: np.ndarray
    directory: np.ndarray
    shift: int
    kernels: object
    tables: dict
    uci_index: np.ndarray
    rules: np.ndarray
    scratch: tuple
    path: Path
    variant: object


def _damaged(ctx: _Context, rows: np.ndarray, boards, hands, status: np.ndarray) -> TablebaseFileError:
    i = int(np.flatnonzero(status)[0])
    text = Position.from_state((int(boards[i]), int(hands[i])), variant=ctx.variant).text()
    if status[i] == ek.ROW_NO_TEXT:  # (a move the dictionary lacks: a bug, not the file)
        raise RuntimeError(f"a move of {text} has no UCI text in the export's dictionary")
    what = ("a child position of {} is not stored" if status[i] == ek.ROW_MISSING_CHILD else
            "the stored value of {} is not the best of its moves' values")
    return TablebaseFileError(f"{ctx.path}: {what.format(text)} (stored entry {int(rows[i]):,}): the file is damaged; "
                              f"'dobutsu-tb verify' checks it")


def block_arrays(ctx: _Context, rows: np.ndarray) -> dict:
    """The columns of the positions ``rows`` as numpy arrays and offsets.

    Parameters
    ----------
    ctx : _Context
        The file's keys and values, the kernels and tables (:func:`export_parquet` makes it).
    rows : numpy.ndarray of int64, shape (m,)
        Indices of stored positions (into the file's sorted keys), ascending.

    Returns
    -------
    dict
        ``key`` (int64, (m,)), ``wdl`` (int8, (m,)), ``dtm`` (int16, (m,)); ``position`` and
        ``fen`` as ``(offsets int32 (m + 1,), bytes uint8)``; ``moves``, ``move_dtm`` and
        ``best_moves`` as ``(offsets int32 (m + 1,), values)`` with int16 values (UCI dictionary
        entries for the moves, signed plies for ``move_dtm``).

    Raises
    ------
    TablebaseFileError
        If a child of a position is not stored, or a stored value is not what its children say.
    """
    k = ctx.kernels
    m = rows.shape[0]
    moves, ckeys, cclasses = ctx.scratch
    boards = np.empty(m, np.int64)
    hands = np.empty(m, np.int64)
    counts = np.empty(m, np.int64)
    k._decode_and_count(ctx.rules, ctx.keys, rows, boards, hands, counts, moves)
    offsets = np.zeros(m + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    child = np.empty(total, np.int64)
    classes = np.empty(total, np.int8)
    texts = np.empty(total, np.int16)
    bad = np.empty(m, np.int8)
    k._children(ctx.rules, boards, hands, offsets, child, classes, texts, bad, moves, ckeys, cclasses)
    if bad.any():  # (gen_moves and child_keys disagree: a bug, not the file)
        raise RuntimeError("the move generators disagree on the number of moves")
    codes = np.zeros(total, ctx.values.dtype)
    found = np.zeros(total, np.bool_)
    ek._lookup(ctx.keys, ctx.values, ctx.directory, ctx.shift, child, codes, found)
    del child
    wdl = np.empty(m, np.int8)
    dtm = np.empty(m, np.int16)
    move_dtm = np.empty(total, np.int16)
    move_uci = np.empty(total, np.int16)
    ranks = np.empty(total, np.int32)
    n_best = np.empty(m, np.int32)
    status = np.empty(m, np.int8)
    ek._order_moves(ctx.values[rows], offsets, classes, codes, found, texts, ctx.uci_index, ranks,
                    wdl, dtm, move_dtm, move_uci, n_best, status)
    if status.any():
        raise _damaged(ctx, rows, boards, hands, status)
    del classes, codes, found, texts, ranks
    best_offsets = np.zeros(m + 1, np.int32)
    np.cumsum(n_best, out=best_offsets[1:])
    best_uci = np.empty(int(best_offsets[-1]), np.int16)
    ek._best_prefix(offsets, n_best, move_uci, best_offsets, best_uci)
    t = ctx.tables
    pos_offsets = np.zeros(m + 1, np.int32)
    fen_offsets = np.zeros(m + 1, np.int32)
    none = np.empty(1, np.uint8)
    args = (t["files"], t["ranks"], t["split"], t["counts"], t["cell_letters"], t["fen_prefix"], t["fen_letters"],
            t["hand_letters"])
    ek._texts(boards, hands, *args, pos_offsets, none, fen_offsets, none, False)
    np.cumsum(pos_offsets, out=pos_offsets)
    np.cumsum(fen_offsets, out=fen_offsets)
    pos_bytes = np.empty(int(pos_offsets[-1]), np.uint8)
    fen_bytes = np.empty(int(fen_offsets[-1]), np.uint8)
    ek._texts(boards, hands, *args, pos_offsets, pos_bytes, fen_offsets, fen_bytes, True)
    return {"key": ctx.keys[rows], "position": (pos_offsets, pos_bytes), "fen": (fen_offsets, fen_bytes),
            "wdl": wdl, "dtm": dtm, "moves": (offsets, move_uci), "move_dtm": (offsets, move_dtm),
            "best_moves": (best_offsets, best_uci)}


# --- Arrow and Parquet ----------------------------------------------------------------------------


def arrow_schema(pa):
    """The Arrow schema of an export's batches: :data:`COLUMNS`, the move lists dictionary-encoded
    (int16 entries of :func:`uci_dictionary`; Parquet keeps its own dictionary, and readers get
    ``list<string>``)."""
    uci = pa.dictionary(pa.int16(), pa.string())
    types = {"position": pa.string(), "fen": pa.string(), "wdl": pa.int8(), "dtm": pa.int16(),
             "moves": pa.list_(pa.field("element", uci, nullable=False)),
             "move_dtm": pa.list_(pa.field("element", pa.int16(), nullable=False)),
             "best_moves": pa.list_(pa.field("element", uci, nullable=False)), "key": pa.int64()}
    return pa.schema([pa.field(name, types[name], nullable=False) for name, _, _ in COLUMNS])


def arrow_batch(pa, schema, dictionary, arrays: dict):
    """A ``pyarrow.RecordBatch`` of :func:`block_arrays`' arrays (no copy of the big buffers)."""
    out = []
    for field in schema:
        a = arrays[field.name]
        if field.name in ("position", "fen"):
            offsets, data = a
            col = pa.StringArray.from_buffers(offsets.shape[0] - 1, pa.py_buffer(offsets), pa.py_buffer(data))
        elif field.name in ("moves", "best_moves"):
            offsets, entries = a
            col = pa.ListArray.from_arrays(pa.array(offsets), pa.DictionaryArray.from_arrays(pa.array(entries),
                                                                                             dictionary),
                                           type=field.type)
        elif field.name == "move_dtm":
            offsets, values = a
            col = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), type=field.type)
        else:
            col = pa.array(a)
        out.append(col)
    return pa.RecordBatch.from_arrays(out, schema=schema)


def export_metadata(meta, path: Path, filters, sample, seed, selection, dictionary) -> dict:
    """The Parquet file's key-value metadata (docs/export.md): bytes to bytes."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        software = version("dobutsu-tablebase")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        software = "unknown"
    columns = [{"name": name, "type": kind, "description": text} for name, kind, text in COLUMNS]
    source = {"file": path.name, "variant": meta.variant.name, "start": meta.start,
              "stored_positions": meta.nonterminal, "reachable_positions": meta.reachable,
              "start_wdl": meta.start_wdl, "start_dtm": meta.start_dtm, "max_dtm": meta.max_dtm,
              "format_version": meta.format_version, "created": meta.created}
    chosen = {"rows": selection.rows, "matching": selection.matching, "where": [str(f) for f in filters],
              "sample": sample, "seed": seed if sample is not None else None,
              "order": "ascending key"}
    items = {"dobutsu_tb.format": EXPORT_FORMAT, "dobutsu_tb.columns": json.dumps(columns),
             "dobutsu_tb.conventions": CONVENTIONS, "dobutsu_tb.units": "dtm and move_dtm: plies (half-moves)",
             "dobutsu_tb.source": json.dumps(source), "dobutsu_tb.selection": json.dumps(chosen),
             "dobutsu_tb.variant": meta.variant.canonical_json, "dobutsu_tb.uci_moves": json.dumps(dictionary),
             "dobutsu_tb.software": f"dobutsu-tablebase {software}"}
    return {k.encode(): v.encode() for k, v in items.items()}


#: How pyarrow writes an export: zstd; Parquet's dictionaries for the columns of few distinct
#: values (the moves are dictionary-encoded already); delta encodings for the keys, which ascend,
#: and the texts, which share their beginnings with the row before; statistics (each row group's
#: smallest and largest value) where a reader filters (each row group also says it is sorted by
#: key, Parquet's ``sorting_columns``); no Arrow schema, so that readers see the
#: move lists as ``list<string>`` (the key-value metadata is added to the footer instead).
PARQUET_OPTIONS = {
    "compression": COMPRESSION, "compression_level": COMPRESSION_LEVEL,
    "use_dictionary": ["wdl", "dtm", "moves.list.element", "move_dtm.list.element", "best_moves.list.element"],
    "column_encoding": {"key": "DELTA_BINARY_PACKED", "position": "DELTA_BYTE_ARRAY", "fen": "DELTA_BYTE_ARRAY"},
    "write_statistics": ["wdl", "dtm", "key"], "store_schema": False}


def _write_blocks(pa, writer, schema, dictionary, ctx, selection, row_group, progress, seconds) -> int:
    """Make the row groups and write them; returns the rows written. A thread writes (pyarrow:
    encoding, compression) one row group while the kernels make the next, so that at most two
    are in memory."""
    from concurrent.futures import ThreadPoolExecutor, wait

    seconds["rows"] = seconds["write"] = 0.0
    written = 0

    def write(batch):
        t = time.perf_counter()
        writer.write_batch(batch, row_group_size=row_group)
        seconds["write"] += time.perf_counter() - t
        return batch.num_rows

    pending = None
    if progress is not None:
        progress(0, selection.rows)
    with ThreadPoolExecutor(1, thread_name_prefix="export-writer") as pool:
        try:
            for rows in selection.blocks(row_group):
                interrupt.check()
                t = time.perf_counter()
                batch = arrow_batch(pa, schema, dictionary, block_arrays(ctx, rows))
                seconds["rows"] += time.perf_counter() - t
                if pending is not None:
                    written += pending.result()
                    if progress is not None:
                        progress(written, selection.rows)
                pending = pool.submit(write, batch)
                del batch
            if pending is not None:
                written += pending.result()
                pending = None
                if progress is not None:
                    progress(written, selection.rows)
        finally:
            if pending is not None:  # (an error or a signal: the writer is closed only once it is idle)
                wait([pending])
    return written


@dataclass
class ExportReport:
    """What :func:`export_parquet` wrote.

    Attributes
    ----------
    path : Path
    rows : int
        Rows written.
    bytes : int
        The file's size.
    seconds : dict of str to float
        Wall time of each step: ``read`` (the tablebase), ``select`` (filters and sample),
        ``rows and write`` (the rows made and written), and within it ``rows`` (the kernels) and
        ``write`` (pyarrow), which overlap.
    """

    path: Path
    rows: int
    bytes: int
    seconds: dict


def export_parquet(tb_path, out, filters=(), sample: int | None = None, seed: int = 0, progress=None,
                   row_group: int | None = None) -> ExportReport:
    """Write the stored positions of a tablebase, their values and their moves' values to a
    Parquet file (module docstring; docs/export.md).

    Parameters
    ----------
    tb_path : str or Path
        The tablebase file (any variant: the file holds its own).
    out : str or Path
        The Parquet file to write; written under a temporary name and renamed when complete (a
        file there is replaced then).
    filters : sequence of Filter, optional
        Keep the positions that pass them all (:func:`parse_filter`).
    sample : int, optional
        Write this many of the positions that pass, drawn uniformly without replacement.
    seed : int, optional
        The sample's seed.
    progress : callable, optional
        Called as ``progress(rows_written, rows)`` before the first row group and after each.
    row_group : int, optional
        Rows per row group (default :data:`ROW_GROUP`).

    Returns
    -------
    ExportReport

    Raises
    ------
    ExportError
        If pyarrow is missing, the sample is larger than the positions that pass, or the file's
        DTMs are too long for int16 columns.
    TablebaseFileError
        If the tablebase is missing or damaged.
    OutputError
        If ``out`` cannot be written (nothing is left behind).
    """
    pa, pq = require_pyarrow()
    row_group = ROW_GROUP if row_group is None else row_group
    seconds = {}
    t = time.perf_counter()
    with TablebaseFile(tb_path) as f:
        meta = f.metadata
        if meta.max_dtm + 1 > MAX_EXPORT_DTM:
            raise ExportError(f"{tb_path}: its longest DTM ({meta.max_dtm:,} plies) is too long for the int16 "
                              f"columns of an export")
        keys, values = f.read_all()
    # (about 16 to 32 keys a bucket on average; the top bits are a Huffman code, so buckets differ)
    directory, shift = key_directory(keys, max(1, min(MAX_DIRECTORY_BITS, keys.shape[0].bit_length() - 5)))
    seconds["read"] = time.perf_counter() - t

    t = time.perf_counter()
    selection = Selection(values, filters, sample, seed)
    seconds["select"] = time.perf_counter() - t

    game = game_of(meta.variant)
    threads = max(1, config.THREADS)
    width = game.layout["MAX_MOVES"]
    dictionary_texts, uci_index = uci_dictionary(game)
    ctx = _Context(keys, values, directory, shift, game.jitted(notation, sys.modules[ek.__name__]),
                   ek.text_tables(meta.variant), uci_index, game.rules_array,
                   (np.empty((threads, width), np.int64), np.empty((threads, width), np.int64),
                    np.empty((threads, width), np.int64)), Path(tb_path), meta.variant)
    dictionary = pa.array(dictionary_texts, pa.string())
    schema = arrow_schema(pa)
    kv = export_metadata(meta, Path(tb_path), filters, sample, seed, selection, dictionary_texts)
    t = time.perf_counter()
    with ReservedOutput(out) as reserved, interrupt.stop_on_signals():
        try:
            writer = pq.ParquetWriter(str(reserved.tmp), schema, **PARQUET_OPTIONS,
                                      sorting_columns=[pq.SortingColumn(schema.get_field_index("key"))])
            try:
                written = _write_blocks(pa, writer, schema, dictionary, ctx, selection, row_group, progress, seconds)
                interrupt.check()
                writer.add_key_value_metadata(kv)  # (the footer's: no Arrow schema is stored, see PARQUET_OPTIONS)
            finally:
                writer.close()
        except (TablebaseFileError, OutputError):
            raise
        except OSError as exc:  # (pyarrow's: a full disk, a folder gone)
            raise OutputError(f"writing {out} failed ({describe_os_error(exc)}); nothing was written") from None
        path = reserved.commit()
    seconds["rows and write"] = time.perf_counter() - t
    return ExportReport(Path(out), written, path.stat().st_size, seconds)
