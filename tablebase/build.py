"""Build a tablebase end to end: enumerate, solve, sort, write (the ``dobutsu-tb build`` job)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding.compact import block_offsets, table_key_at
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase import retrograde
from dobutsu_tb.tablebase.enumeration import enumerate_positions
from dobutsu_tb.tablebase.game.key import KEY_SHIFT
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.rules import STANDARD_NONTERMINAL, STANDARD_REACHABLE
from dobutsu_tb.tablebase.storage import RECORD_VALUE_BITS, Metadata, record_values, write_tablebase
from dobutsu_tb.tablebase.values import UNDECIDED, decode_value, describe_value

@dataclass
class BuildResult:
    """What a build produced.

    Attributes
    ----------
    path : Path
        The file written.
    metadata : Metadata
        Counts, the start position's value and the seconds of each phase (also in the file).
    """

    path: Path
    metadata: Metadata

    def summary(self) -> str:
        """A few lines for people: counts and the start position's value."""
        m = self.metadata
        value = describe_value(m.start_wdl, m.start_dtm)
        secs = ", ".join(f"{k} {v:.1f} s" for k, v in m.seconds.items())
        return "\n".join([
            f"reachable positions:   {m.reachable:>13,}",
            f"  non-terminal:        {m.nonterminal:>13,}",
            f"  catch-terminal:      {m.catch_terminal:>13,}",
            f"  try-terminal:        {m.try_terminal:>13,}",
            f"non-terminal values:   {m.wins:,} wins, {m.draws:,} draws, {m.losses:,} losses",
            f"start position {m.start}: {value} for the side to move",
            f"written to {self.path} ({secs})",
        ])


@njit(parallel=True)
def _records(slots, layout, values, offsets, out):
    """out[offsets[b]:offsets[b + 1]] = the sort records of block b's occupied slots."""
    size = slots.shape[0]
    n_blocks = offsets.shape[0] - 1
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        j = offsets[b]
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] != 0:
                code = table_key_at(slots, layout, s) >> KEY_SHIFT
                out[j] = np.uint64((code << RECORD_VALUE_BITS) | values[s])
                j += 1


def sorted_records(table, values: np.ndarray) -> np.ndarray:
    """The sort records (:func:`~dobutsu_tb.tablebase.storage.pack_records`) of every position of
    a solved table, ascending by key.

    Parameters
    ----------
    table : CompactTable
        The enumeration's table.
    values : numpy.ndarray of uint8, shape (table.capacity,)
        Value bytes by slot.

    Returns
    -------
    numpy.ndarray of uint64, shape (len(table),)
    """
    offsets = block_offsets(table.slots)
    records = np.empty(int(offsets[-1]), np.uint64)
    _records(table.slots, table.layout, values, offsets, records)
    records.sort()
    return records


def _log(msg: str) -> None:
    tqdm.write(msg, file=sys.stderr)


def build_tablebase(out, start=None, progress: bool | None = None,
                    on_phase: Callable[[str], None] | None = None) -> BuildResult:
    """Build the tablebase of every position reachable from ``start`` and write it to ``out``.

    Parameters
    ----------
    out : str or Path
        The HDF5 file to write (atomically; an interrupted build leaves no file).
    start : Position or str, optional
        Start position (default: the standard start, SPEC §1.1); any legal non-terminal one.
    progress : bool or None, optional
        Progress bars and per-ply lines on stderr: True, False, or None for "only on a terminal".
    on_phase : callable, optional
        Called with each phase's name as it starts (``"enumeration"``, ``"retrograde"``,
        ``"sort"``, ``"write"``, ``"check"``) and with ``"done"`` at the end; for benchmarks.

    Returns
    -------
    BuildResult

    Raises
    ------
    dobutsu_tb.tablebase.game.position.PositionError
        If a text start position is malformed or impossible.
    dobutsu_tb.tablebase.enumeration.StartPositionError
        If the start position is terminal.
    dobutsu_tb.encoding.compact.CompactTableFullError
        If the positions do not fit the hash tables.
    OSError
        If ``out`` cannot be written.
    """
    start = Position.start() if start is None else (
        Position.from_text(start) if isinstance(start, str) else start)
    out = Path(out)
    if not out.parent.exists():
        raise FileNotFoundError(f"{out.parent}: no such folder")
    quiet = progress is False
    disable = None if progress is None else not progress
    phase = on_phase or (lambda name: None)
    expected = None
    if start.key() == Position.start().key():
        expected = (STANDARD_NONTERMINAL, STANDARD_REACHABLE - STANDARD_NONTERMINAL)

    phase("enumeration")
    with tqdm(total=expected[0] if expected else None, desc="enumerate", unit=" pos",
              unit_scale=True, disable=disable, file=sys.stderr) as bar:
        def on_batch(expanded, queued):
            bar.update(expanded - bar.n)
            if not expected:
                bar.total = queued
        enum = enumerate_positions(start.state(), expected, on_batch)
    if not quiet:
        _log(f"enumerated {enum.reachable:,} positions ({enum.nonterminal:,} non-terminal) "
             f"in {enum.seconds:.1f} s")

    phase("retrograde")
    with tqdm(total=enum.nonterminal, desc="retrograde", unit=" pos", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        def on_ply(ply, processed, decided, secs):
            bar.update(processed)
            if not quiet:
                _log(f"ply {ply:3d}: {processed:>11,} positions -> {decided:>11,} decided at "
                     f"ply {ply + 1} ({secs:.2f} s)")
        values, retro_seconds = retrograde.solve(enum, on_ply)

    phase("sort")
    t = time.perf_counter()
    start_wdl, start_dtm = decode_value(int(values[enum.table.lookup([start.key()])[0]]))
    counts = dict(reachable=enum.reachable, nonterminal=enum.nonterminal,
                  catch_terminal=enum.catch_terminal, try_terminal=enum.try_terminal,
                  no_moves=enum.no_moves)
    enum_seconds = enum.seconds
    table = enum.table
    del enum  # the counters go; the table and the values make the records
    records = sorted_records(table, values)
    del table, values
    per_code = np.bincount(record_values(records), minlength=256)
    dtms = np.arange(per_code.shape[0] - 1)
    decided = per_code[1:]
    meta = Metadata(start=start.text(), wins=int(decided[dtms % 2 == 1].sum()), draws=int(per_code[UNDECIDED]),
                    losses=int(decided[dtms % 2 == 0].sum()), start_wdl=start_wdl, start_dtm=start_dtm,
                    max_dtm=int(np.flatnonzero(decided).max()) if decided.any() else 0,
                    seconds={"enumeration": enum_seconds, "retrograde": retro_seconds}, **counts)
    meta.seconds["sort"] = time.perf_counter() - t
    phase("write")
    t = time.perf_counter()
    with tqdm(total=2 * records.shape[0], desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        write_tablebase(out, records, meta, progress=bar.update)
    del records
    meta.seconds["write"] = time.perf_counter() - t
    # Read the start position's value back through the probing code: a check of the file just written.
    phase("check")
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(out) as tb:
        found = (tb.probe_wdl(start), abs(tb.probe_dtm(start)))
    if found != (start_wdl, start_dtm):  # pragma: no cover - a defect, not an input error
        raise RuntimeError(f"{out}: the start position reads back as {found}, "
                           f"not {(start_wdl, start_dtm)}")
    phase("done")
    return BuildResult(out, meta)
