"""Build a tablebase end to end: enumerate, solve, sort, write (the ``dobutsu-tb build`` job)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.compact import block_offsets, table_key_at, table_nbytes
from dobutsu_tb.encoding.compact_set import set_nbytes
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.tablebase import retrograde
from dobutsu_tb.tablebase.enumeration import enumerate_positions
from dobutsu_tb.tablebase.game.key import KEY_SHIFT, MAX_KEY_BITS
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.rules import STANDARD_NONTERMINAL, STANDARD_REACHABLE
from dobutsu_tb.tablebase.schema import Metadata, value_counts
from dobutsu_tb.tablebase.values import decode_value, describe_value
from dobutsu_tb.tablebase.writer import RECORD_VALUE_BITS, record_values, reserve_output, write_file


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
    """The sort records (:func:`~dobutsu_tb.tablebase.writer.pack_records`) of every position of
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


class InsufficientMemoryError(MemoryError):
    """Raised before a build (or before its tables grow) when the machine lacks the memory it
    would need; the message says how much is needed and available."""


#: Bytes a build holds besides its tables: the interpreter, numpy, numba and its compiled
#: kernels, thread buffers (measured: about 0.25 GiB).
BASE_MEMORY = 320 << 20


def estimate_memory(nonterminal: int, terminal: int) -> int:
    """The peak memory of a build that reaches these many positions, in bytes.

    The largest of: the enumeration (the table of non-terminal positions at 4 bytes a slot, a
    tag byte a slot, the set of terminal ones at 3 bytes a slot), the retrograde analysis (the
    table, a value and a counter byte a slot, frontier lists) and the sort (the table, the value
    bytes and an 8-byte record a position); plus :data:`BASE_MEMORY`.

    Parameters
    ----------
    nonterminal, terminal : int
        Positions expected.

    Returns
    -------
    int
        Bytes.

    Raises
    ------
    dobutsu_tb.encoding.compact.CompactTableFullError
        If no table can hold that many positions.
    """
    table = table_nbytes(nonterminal, MAX_KEY_BITS, config.LOAD_FACTOR, config.THREADS)
    slots = table // 4
    terminal_set = set_nbytes(terminal, MAX_KEY_BITS, KEY_SHIFT, config.SET_LOAD_FACTOR, config.THREADS)
    enumeration = table + slots + terminal_set
    retro = table + 2 * slots + 5 * 8 * nonterminal // 10  # frontier and decided lists: a share of the positions
    sort = table + 2 * slots + 8 * nonterminal
    return BASE_MEMORY + max(enumeration, retro, sort)


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (memory that can be had without swapping),
    or None where there is no such file."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _resident_memory() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check_memory(nonterminal: int, terminal: int) -> None:
    """Refuse a build whose estimated peak (:func:`estimate_memory`) exceeds the memory this
    process holds plus what the machine has available (:func:`available_memory`).

    Raises
    ------
    InsufficientMemoryError
        With the figures, and how to go on anyway.
    """
    available = available_memory()
    if available is None:
        return
    need = estimate_memory(nonterminal, terminal)
    have = available + _resident_memory()
    if need > have:
        gib = 1 << 30
        raise InsufficientMemoryError(
            f"the build needs about {need / gib:.1f} GiB of memory for {nonterminal + terminal:,} positions, but "
            f"only {have / gib:.1f} GiB is available (MemAvailable in /proc/meminfo); free some memory, or "
            f"pass --ignore-memory to try anyway")


def build_tablebase(out, start=None, progress: bool | None = None,
                    on_phase: Callable[[str], None] | None = None, force: bool = False,
                    memory_check: bool = True) -> BuildResult:
    """Build the tablebase of every position reachable from ``start`` and write it to ``out``.

    Nothing is lost, whatever happens (:class:`~dobutsu_tb.tablebase.output.ReservedOutput`):
    ``out`` is locked and its temporary file created before any work, so an unwritable folder,
    a file that is not a tablebase, or another build of the same file fails at once; leftovers
    of killed builds are removed; the file appears, complete and checked, only at the end. SIGINT
    and SIGTERM stop the build within a batch (:mod:`~dobutsu_tb.encoding.interrupt`) and leave
    nothing behind.

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
    force : bool, optional
        Replace an existing ``out`` even if it is not a dobutsu tablebase.
    memory_check : bool, optional
        Refuse to start (or to grow the tables) when the estimated peak memory
        (:func:`estimate_memory`) exceeds what the machine has available (default).

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
    InsufficientMemoryError
        If the machine has too little memory (``memory_check``).
    dobutsu_tb.tablebase.output.OutputError
        If ``out`` cannot be written (no such folder, not writable, another build writing it, a
        file there that is not a tablebase, a full disk); nothing is written then.
    dobutsu_tb.encoding.interrupt.Interrupted
        On SIGINT or SIGTERM; nothing is written.
    """
    start = Position.start() if start is None else (
        Position.from_text(start) if isinstance(start, str) else start)
    out = Path(out)
    expected = None
    if start.key() == Position.start().key():
        expected = (STANDARD_NONTERMINAL, STANDARD_REACHABLE - STANDARD_NONTERMINAL)
    if memory_check:
        check_memory(*(expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)))
    target = None
    try:
        with reserve_output(out, force) as target:
            if target.removed and progress is not False:
                _log(f"removed {len(target.removed)} leftover file(s) of an interrupted build: "
                     + ", ".join(p.name for p in target.removed))
            with interrupt.stop_on_signals():  # the commit too: a signal never cuts it in two
                meta = _build(target.tmp, start, expected, progress, on_phase or (lambda name: None),
                              check_memory if memory_check else None)
                interrupt.check()  # a signal during the build: nothing is written
                target.commit()
    except interrupt.Interrupted as exc:
        if target is not None and target.committed:  # the signal came after the file was in place
            raise interrupt.Interrupted(exc.signum, f"{exc}, after {out} was written (complete)") from None
        raise interrupt.Interrupted(exc.signum, f"{exc}: the build stopped, {out} was not written") from None
    (on_phase or (lambda name: None))("done")
    return BuildResult(out, meta)


def _build(tmp: Path, start: Position, expected, progress, phase, memory_check) -> Metadata:
    """The build's phases, writing into ``tmp``; returns the metadata written."""
    quiet = progress is False
    disable = None if progress is None else not progress
    phase("enumeration")
    with tqdm(total=expected[0] if expected else None, desc="enumerate", unit=" pos",
              unit_scale=True, disable=disable, file=sys.stderr) as bar:
        def on_batch(expanded, queued):
            bar.update(expanded - bar.n)
            if not expected:
                bar.total = queued
        enum = enumerate_positions(start.state(), expected, on_batch, before_growth=memory_check)
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
    interrupt.check()
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
    interrupt.check()
    found = value_counts(np.bincount(record_values(records), minlength=256))
    meta = Metadata(start=start.text(), wins=found["wins"], draws=found["draws"], losses=found["losses"],
                    start_wdl=start_wdl, start_dtm=start_dtm, max_dtm=found["max_dtm"],
                    seconds={"enumeration": enum_seconds, "retrograde": retro_seconds}, **counts)
    meta.seconds["sort"] = time.perf_counter() - t
    phase("write")
    t = time.perf_counter()
    with tqdm(total=2 * records.shape[0], desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        write_file(tmp, records, meta, progress=bar.update)
    del records
    meta.seconds["write"] = time.perf_counter() - t
    # Read the start position's value back through the probing code: a check of the file written.
    phase("check")
    interrupt.check()
    from dobutsu_tb.tablebase.probe import open_tablebase

    with open_tablebase(tmp) as tb:
        found = (tb.probe_wdl(start), abs(tb.probe_dtm(start)))
    if found != (start_wdl, start_dtm):  # pragma: no cover - a defect, not an input error
        raise RuntimeError(f"{tmp}: the start position reads back as {found}, "
                           f"not {(start_wdl, start_dtm)}")
    return meta
