"""Build a tablebase end to end: enumerate, solve, sort, write (the ``dobutsu-tb build`` job)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase import retrograde
from dobutsu_tb.tablebase.enumeration import Enumeration, enumerate_positions
from dobutsu_tb.tablebase.game.key import KEY_SHIFT
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.rules import STANDARD_NONTERMINAL, STANDARD_REACHABLE
from dobutsu_tb.tablebase.storage import Metadata, write_tablebase
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN, describe_value

# A sort record (one uint64 per position), sorted as an integer to order keys::
#
#     bits 63 .. 20   the key's code bits (key >> KEY_SHIFT: at most 44 bits)
#     bits 19 .. 18   WDL + 1
#     bits 17 .. 0    DTM
_VALUE_BITS = 20
_WDL_SHIFT = 18
_DTM_MASK = (1 << _WDL_SHIFT) - 1


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
def _pack(table, wdl, dtm, slots, out):
    for i in prange(slots.shape[0]):
        s = slots[i]
        out[i] = ((table[s] >> KEY_SHIFT) << _VALUE_BITS) | (np.int64(wdl[s] + 1) << _WDL_SHIFT) | np.int64(dtm[s])


@njit(parallel=True)
def _unpack(packed, keys, wdl, dtm):
    for i in prange(packed.shape[0]):
        p = packed[i]
        keys[i] = np.int64(p >> np.uint64(_VALUE_BITS)) << KEY_SHIFT
        wdl[i] = np.int8(np.int64((p >> np.uint64(_WDL_SHIFT)) & np.uint64(3)) - 1)
        dtm[i] = np.uint16(p & np.uint64(_DTM_MASK))


def sorted_values(enum: Enumeration) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys (ascending), WDL and DTM of every position of a solved enumeration.

    Returns
    -------
    keys : numpy.ndarray of int64, shape (n,)
    wdl : numpy.ndarray of int8, shape (n,)
    dtm : numpy.ndarray of uint16, shape (n,)
    """
    slots = enum.table.occupied()
    packed = np.empty(slots.shape[0], np.int64)
    _pack(enum.table.table, enum.wdl, enum.dtm, slots, packed)
    del slots
    packed = packed.view(np.uint64)
    packed.sort()
    n = packed.shape[0]
    keys, wdl, dtm = np.empty(n, np.int64), np.empty(n, np.int8), np.empty(n, np.uint16)
    _unpack(packed, keys, wdl, dtm)
    return keys, wdl, dtm


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
    encoding.position.PositionError
        If a text start position is malformed or impossible.
    tablebase.generate.StartPositionError
        If the start position is terminal.
    encoding.hashtable.HashTableFullError
        If the positions do not fit in memory's hash tables.
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
        retro_seconds = retrograde.solve(enum, on_ply)

    phase("sort")
    t = time.perf_counter()
    slot = enum.table.lookup([start.key()])[0]
    start_wdl, start_dtm = int(enum.wdl[slot]), int(enum.dtm[slot])
    counts = dict(reachable=enum.reachable, nonterminal=enum.nonterminal,
                  catch_terminal=enum.catch_terminal, try_terminal=enum.try_terminal,
                  no_moves=enum.no_moves)
    enum_seconds = enum.seconds
    keys, wdl, dtm = sorted_values(enum)
    del enum
    meta = Metadata(start=start.text(), wins=int((wdl == WIN).sum()), draws=int((wdl == DRAW).sum()),
                    losses=int((wdl == LOSS).sum()), start_wdl=start_wdl, start_dtm=start_dtm,
                    seconds={"enumeration": enum_seconds, "retrograde": retro_seconds}, **counts)
    sort_seconds = time.perf_counter() - t
    meta.seconds["sort"] = sort_seconds
    phase("write")
    t = time.perf_counter()
    with tqdm(total=3 * keys.shape[0], desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        write_tablebase(out, keys, wdl, dtm, meta, progress=bar.update)
    del keys, wdl, dtm
    meta.seconds["write"] = time.perf_counter() - t
    # Read the start position's value back through the probing code: a check of the file just
    # written, which also compiles (and caches) every kernel a first `dobutsu-tb probe` needs.
    phase("check")
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(out) as tb:
        found = (tb.probe_wdl(start), abs(tb.probe_dtm(start)))
        tb.probe_moves(start)  # compiles move generation too, for the user's first probe
    if found != (start_wdl, start_dtm):  # pragma: no cover - a defect, not an input error
        raise RuntimeError(f"{out}: the start position reads back as {found}, "
                           f"not {(start_wdl, start_dtm)}")
    phase("done")
    return BuildResult(out, meta)
