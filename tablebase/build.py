"""Build a tablebase end to end: enumerate, solve, sort, write (the ``dobutsu-tb build`` job)."""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from dobutsu_tb.encoding import config, interrupt
from dobutsu_tb.encoding.compact import BLOCKS, table_key_at, table_slot_dtype
from dobutsu_tb.encoding.jit import njit, prange
from dobutsu_tb.encoding.sorting import lower_bound, sort_runs
from dobutsu_tb.encoding.words import counted
from dobutsu_tb.tablebase import retrograde
from dobutsu_tb.tablebase.enumeration import StartPositionError, count_terminal_partitions, enumerate_positions
from dobutsu_tb.tablebase.game.game import Game, game_of
from dobutsu_tb.tablebase.game.layout import CATCH, KEY_TOP_BIT, NONTERMINAL, key_room
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.variant import Variant, VariantError, get_variant, standard_variant
from dobutsu_tb.tablebase.memory import (  # noqa: F401 (InsufficientMemoryError: the build's error, also here)
    BASE_MEMORY,
    BuildPlan,
    InsufficientMemoryError,
    Sizes,
    default_budget,
    estimate_build,
    gib,
    gib_up,
    in_memory_file_system,
    make_plan,
    nearest_folder,
    peak_resident_memory,
    total_memory,
)
from dobutsu_tb.tablebase.output import remove_orphans
from dobutsu_tb.tablebase.precompile import big_build, compile_kernels
from dobutsu_tb.tablebase.schema import Metadata, value_counts
from dobutsu_tb.tablebase.values import LONG, describe_value
from dobutsu_tb.tablebase.writer import (
    RECORD_VALUE_BITS,
    WIDE_VALUE_BITS,
    LongValues,
    RecordBlocks,
    reserve_output,
    write_file,
)


@dataclass
class BuildResult:
    """What a build produced.

    Attributes
    ----------
    path : Path
        The file written.
    metadata : Metadata
        Counts, the start position's value and the seconds of each phase (also in the file).
    plan : BuildPlan or None
        How the build fitted its memory budget: the terminal partitions it ended with, the
        record passes, whether lists were spilled to disk (None for a build on a cluster).
    profile : dict of str to float
        Wall seconds of the phases' parts (``enumeration.expand``, ``enumeration.insert``,
        ``retrograde.propagate``, ...), for benchmarks (``scripts/bench_build.py``).
    cluster : ClusterReport or None
        A build on a cluster: its workers, their peak memory and the bytes they sent
        (:class:`~dobutsu_tb.tablebase.cluster.ClusterReport`).
    no_move_keys : numpy.ndarray of int64, shape (metadata.no_moves,)
        The canonical keys of the positions without a legal move (losses in 0), ascending.
    """

    path: Path
    metadata: Metadata
    plan: BuildPlan | None = None
    profile: dict = dataclasses.field(default_factory=dict)
    cluster: object | None = None
    no_move_keys: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

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
            f"non-terminal values:   {_wdl_counts(m.wins, m.draws, m.losses)}",
            f"all reachable, terminal ones included (a catch-terminal position a win, a try-terminal one a loss, "
            f"as jh85 counts): {_wdl_counts(m.wins + m.catch_terminal, m.draws, m.losses + m.try_terminal)}",
            f"start position {m.start}: {value} for the side to move",
            f"written to {self.path} ({secs})",
        ] + ([self.cluster.describe()] if self.cluster is not None else []))


#: A start whose counts nobody knows is refused before it starts when its estimate
#: (:func:`~dobutsu_tb.tablebase.memory.estimate_build`) does not fit the budget and says more
#: positions than these; a smaller one finds out soon enough as its tables grow.
ESTIMATE_FLOOR = 1 << 24

#: Positions known in advance, to size the tables and plan the memory: (variant, start) ->
#: (non-terminal, terminal). The standard game's are Tanaka's (2009); the 5x3 board's are ours
#: (its reachable total is jh85/dobutsushogi's).
STANDARD_NONTERMINAL = 99_485_568
STANDARD_TERMINAL = 246_803_167 - STANDARD_NONTERMINAL
KNOWN_COUNTS = {
    ("dobutsu", "S/gle/-c-/-C-/ELG/-"): (STANDARD_NONTERMINAL, STANDARD_TERMINAL),
    ("dobutsu-5x3", "S/gle/-c-/---/-C-/ELG/-"): (1_441_956_293, 3_359_910_526 - 1_441_956_293),
}


def expected_counts(variant: Variant, start: Position) -> tuple[int, int] | None:
    """(non-terminal, terminal) positions reachable from ``start`` when known in advance."""
    for (name, text), counts in KNOWN_COUNTS.items():
        if name == variant.name and variant == get_variant(name) and start.key() == Position.from_text(
                text, variant).key():
            return counts
    return None


@njit(parallel=True)
def _records_kernel(slots, layout, values, key_shift, bounds, offsets, out, counts):
    """The sort records of the occupied slots whose code lies in ``[bounds[0], bounds[-1])``: those
    of block b of the slots and sub-range r (``[bounds[r], bounds[r + 1])``) into
    ``out[offsets[b, r]:]``, their number into ``counts[b, r]``. A value byte LONG stays LONG
    (:func:`long_values_of` gives those values)."""
    size = slots.shape[0]
    n_blocks, n_ranges = offsets.shape[0], offsets.shape[1]
    lo, hi = bounds[0], bounds[n_ranges]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        made = np.zeros(n_ranges, np.int64)
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] == 0:
                continue
            code = table_key_at(slots, layout, s) >> key_shift
            if code < lo or code >= hi:
                continue
            r = 0
            while code >= bounds[r + 1]:
                r += 1
            out[offsets[b, r] + made[r]] = np.uint64((code << RECORD_VALUE_BITS) | np.int64(values[s]))
            made[r] += 1
        for r in range(n_ranges):  # (a loop: an array assigned to a slice compiles numba's shape-error message)
            counts[b, r] = made[r]


@njit
def _sample_codes(slots, layout, key_shift, step, out):
    """The codes of the occupied slots at multiples of ``step``, into ``out``; returns how many."""
    n = 0
    for s in range(0, slots.shape[0], step):
        if slots[s] != 0 and n < out.shape[0]:
            out[n] = table_key_at(slots, layout, s) >> key_shift
            n += 1
    return n


def sample_codes(table, key_shift: int, m: int = 1 << 20) -> np.ndarray:
    """The codes (``key >> key_shift``, int64, ascending) of at most ``m`` occupied slots of a table,
    taken at even steps: a sample for splitting the keys into ranges of about equal size."""
    sample = np.empty(m, np.int64)
    n = _sample_codes(table.slots, table.layout, key_shift, max(1, table.capacity // m), sample)
    return np.sort(sample[:n])


def range_bounds(sample: np.ndarray, passes: int) -> list[int]:
    """Bounds ``[0, b1, ..., 2**62]`` of about ``passes`` key ranges of about equal size, at the
    quantiles of a sorted sample of codes (equal quantiles merge, so there may be fewer)."""
    m = sample.shape[0]
    if passes <= 1 or m == 0:
        return [0, 1 << 62]
    bounds = [0] + [int(sample[int(m * k / passes)]) for k in range(1, passes)] + [1 << 62]
    return sorted(set(bounds))


@njit(parallel=True)
def _range_counts(slots, layout, key_shift, bounds, counts):
    """``counts[b, r]``: the occupied slots of block b of the slots (as :func:`_records_kernel`
    splits them) whose code lies in ``[bounds[r], bounds[r + 1])``."""
    size = slots.shape[0]
    n_blocks, n_ranges = counts.shape[0], counts.shape[1]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] != 0:
                code = table_key_at(slots, layout, s) >> key_shift
                if bounds[0] <= code < bounds[n_ranges]:  # (then code + 1 <= 2**62: no overflow)
                    counts[b, lower_bound(bounds, code + 1) - 1] += 1  # the last bound <= code


def range_counts(table, key_shift: int, bounds: list[int]) -> np.ndarray:
    """Positions of each block of slots in each key range ``[bounds[r], bounds[r + 1])``, in one
    scan of the table (int64, shape (BLOCKS, len(bounds) - 1)); ``bounds`` ascending, as
    :func:`range_bounds` gives them."""
    counts = np.zeros((BLOCKS, len(bounds) - 1), np.int64)
    _range_counts(table.slots, table.layout, key_shift, np.asarray(bounds, np.int64), counts)
    return counts


def records_between(table, solution, key_shift: int, lo: int, hi: int,
                    counts: np.ndarray | None = None) -> np.ndarray:
    """The sort records of the positions of a solved table whose code lies in ``[lo, hi)``, sorted
    (uint64, shape (n,)); arguments as for :func:`record_blocks`; ``counts`` (int64, shape
    (BLOCKS,)): the positions of the range in each block of slots, if known (a column of
    :func:`range_counts`), else counted here in a scan of the table."""
    if counts is None:
        counts = range_counts(table, key_shift, [lo, hi])[:, 0]
    return _records_in(table, solution, key_shift, [lo, hi], counts[:, None])


def long_values_of(table, solution, key_shift: int) -> LongValues:
    """The values of two bytes of a solved table's positions (those whose value byte is LONG: a
    DTM of 254 plies or more), by their keys' codes (``key >> key_shift``)."""
    codes = table.keys_at(solution.long_slots) >> key_shift
    return LongValues.of(codes, solution.long_dtm + 1)


def _records_in(table, solution, key_shift: int, bounds: list, counts: np.ndarray) -> np.ndarray:
    """The sort records of the positions whose code lies in ``[bounds[0], bounds[-1])``, sorted
    (uint64, shape (n,)), made in one scan of the table and sorted a sub-range
    ``[bounds[r], bounds[r + 1])`` a thread (:func:`~dobutsu_tb.encoding.sorting.sort_runs`);
    ``counts`` (int64, shape (BLOCKS, len(bounds) - 1)): the positions of each block of slots in
    each sub-range (columns of :func:`range_counts`)."""
    n_ranges = len(bounds) - 1
    sizes = counts.sum(axis=0)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    offsets = np.ascontiguousarray(starts[:-1] + np.cumsum(counts, axis=0) - counts, np.int64)
    made = np.zeros((BLOCKS, n_ranges), np.int64)
    out = np.empty(int(starts[-1]), np.uint64)
    _records_kernel(table.slots, table.layout, solution.values, key_shift, np.asarray(bounds, np.int64), offsets, out,
                    made)
    if not np.array_equal(made, counts):
        raise AssertionError("the records of a key range are not the ones counted")
    sort_runs(out, starts)
    return out


def record_blocks(table, solution, key_shift: int, passes: int) -> RecordBlocks:
    """The sort records (:func:`~dobutsu_tb.tablebase.writer.pack_records`) of every position of a
    solved table, in ``passes`` key ranges of about equal size (split at quantiles of a sample of
    the keys), each made in one scan of the table, sorted (a sub-range a thread) and handed over
    in turn: one pass's records in memory at a time. With DTMs of 254 plies or more, their
    ``longs`` hold those values (:func:`long_values_of`), and the file takes two-byte values.

    Parameters
    ----------
    table : CompactTable
        The enumeration's table.
    solution : Solution
        The retrograde analysis's values.
    key_shift : int
        The variant's ``KEY_SHIFT``.
    passes : int
        Key ranges.

    Returns
    -------
    RecordBlocks
    """
    threads = config.THREADS
    # Each pass's range is split further, a sub-range a thread, so that its records sort on every
    # thread (the whole pass made in one scan of the table, as before).
    fine = range_bounds(sample_codes(table, key_shift), passes * threads) if passes * threads > 1 else [0, 1 << 62]
    step = max(1, -(-(len(fine) - 1) // passes))  # sub-ranges a pass (fewer when quantiles merged)
    groups = [fine[g:g + step + 1] for g in range(0, len(fine) - 1, step)]

    def blocks():
        counts = range_counts(table, key_shift, fine)  # one scan for every range
        for g, bounds in enumerate(groups):
            interrupt.check()
            out = _records_in(table, solution, key_shift, bounds, counts[:, g * step:g * step + len(bounds) - 1])
            yield out
            del out

    longs = long_values_of(table, solution, key_shift) if solution.long_slots.shape[0] else None
    return RecordBlocks(len(table), blocks, longs)


def sorted_records(table, values: np.ndarray, key_shift: int) -> np.ndarray:
    """The sort records of every position of a solved table (value bytes ``values`` by slot),
    ascending by key: :func:`record_blocks` in one pass, as one array."""
    from dobutsu_tb.tablebase.retrograde import Solution

    solution = Solution(values, np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)
    return next(iter(record_blocks(table, solution, key_shift, 1).blocks()))


@njit(parallel=True)
def _histogram(slots, values, n_blocks, out):
    """out[b, code] = occupied slots of block b whose value byte is ``code``."""
    size = slots.shape[0]
    per = (size + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        for s in range(b * per, min(size, (b + 1) * per)):
            if slots[s] != 0:
                out[b, values[s]] += 1


def value_histogram(table, solution, value_bits: int) -> np.ndarray:
    """Positions of a solved table per value code (int64, shape (2**value_bits,)): DTM + 1, 0 for
    draws."""
    per_block = np.zeros((64, 256), np.int64)
    _histogram(table.slots, solution.values, 64, per_block)
    counts = np.zeros(1 << value_bits, np.int64)
    counts[:256] = per_block.sum(axis=0)
    if solution.long_slots.shape[0]:
        counts[LONG] = 0
        counts += np.bincount(solution.long_dtm + 1, minlength=1 << value_bits)
    return counts


class WorkFolder:
    """A build's own folder for what it spills to disk (``--work-dir``: the analysis's lists, the
    terminal children set aside), made in ``base`` only when the plan spills, and removed at the
    end whatever happens (a context manager), with the folders up to ``base`` that it had to make.

    Attributes
    ----------
    path : Path or None
        The folder, while it exists.
    removed : list of str
        The folders of builds killed outright (their process gone) that entering removed from
        ``base``.
    """

    PREFIX = ".dobutsu-tb-work-"

    def __init__(self, base: Path, spill: bool):
        self.base, self.spill, self.path = Path(base), spill, None
        self.removed: list[str] = []  # the leftover folders of killed builds removed on entry
        self._count = 0
        self._token = None
        self._made: list[Path] = []

    def __enter__(self) -> "WorkFolder":
        self.removed = remove_orphans(self.base, self.PREFIX)  # (those of builds killed outright)
        if self.spill:
            import tempfile

            self._made = [p for p in (self.base, *self.base.parents) if not p.exists()]  # removed at the end
            try:
                self.base.mkdir(parents=True, exist_ok=True)
                self.path = Path(tempfile.mkdtemp(prefix=f"{self.PREFIX}{os.getpid()}-", dir=self.base))
            except OSError as exc:
                from dobutsu_tb.tablebase.output import OutputError, describe_os_error

                why = ("not a folder" if self.base.exists() and not self.base.is_dir() else
                       f"cannot make a folder there ({describe_os_error(exc)})")
                self._remove()
                raise OutputError(f"the work folder {self.base} (--work-dir), for what the build spills to disk: "
                                  f"{why}; nothing was written") from None
            self._token = interrupt.at_exit(self._remove)  # also when a signal ends the process
        return self

    def _remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
        for folder in self._made:  # the folders mkdir made for --work-dir, deepest first, if still empty
            try:
                folder.rmdir()
            except OSError:
                break
        self._made = []

    def __exit__(self, *exc) -> None:
        self._remove()
        if self._token is not None:
            interrupt.forget(self._token)
            self._token = None

    def lists(self, n: int, dtype) -> np.ndarray:
        """A new array of ``n`` entries: a memory-mapped file in the folder (or in memory when the
        folder was not made). The file is unlinked at once, so that its disk is freed with the
        array (a ply's list when the next ply is done), not at the end of the analysis: what the
        plan's disk figure counts (:func:`~dobutsu_tb.tablebase.memory.make_plan`)."""
        if self.path is None or n == 0:
            return np.empty(n, dtype)
        self._count += 1
        path = self.path / f"list{self._count}.npy"
        array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n,))
        try:  # its disk taken now: a mapped page the disk cannot hold would end the process (SIGBUS)
            with open(path, "r+b") as f:
                os.posix_fallocate(f.fileno(), 0, os.path.getsize(path))
        except OSError as exc:
            from dobutsu_tb.tablebase.output import OutputError, describe_os_error

            del array
            path.unlink(missing_ok=True)
            raise OutputError(f"the work folder {self.base} (--work-dir) has no room for the analysis's lists "
                              f"({gib(n * np.dtype(dtype).itemsize)} more: {describe_os_error(exc)}); "
                              f"nothing was written") from None
        try:
            path.unlink()  # the mapping stays; removed at the end instead where a system forbids this
        except OSError:  # pragma: no cover - systems that cannot unlink a mapped file
            pass
        return array


#: Seconds between the enumeration's progress lines when stderr is not a terminal (no bars).
LOG_EVERY = 60.0


def _wdl_counts(wins: int, draws: int, losses: int) -> str:
    """``'12 wins, 1 draw, 0 losses'``."""
    return f"{counted(wins, 'win')}, {counted(draws, 'draw')}, {counted(losses, 'loss', 'losses')}"


def _peak_memory() -> str:
    """The process's peak resident memory so far, for the build's log lines."""
    return f"peak memory so far {peak_resident_memory() / 2**30:.2f} GiB"


def _log(msg: str) -> None:
    tqdm.write(msg, file=sys.stderr)


def check_start(start: Position) -> None:
    """Refuse a start the builder cannot start from, before anything is compiled.

    Raises
    ------
    dobutsu_tb.tablebase.enumeration.StartPositionError
        If the start position is terminal (the side to move can capture the enemy royal piece, or
        faces one that has reached its far rank safely).
    """
    game = start.game
    cls = game.classify(start.state())
    if cls != NONTERMINAL:
        royal = game.variant.royal.name
        raise StartPositionError("the start position is terminal: the side to move "
                                 + (f"can capture the enemy {royal}" if cls == CATCH
                                    else f"faces an enemy {royal} that has reached its far rank safely"))


def estimate_memory(nonterminal: int, terminal: int, game: Game | None = None) -> int:
    """The peak memory in bytes of a build that reaches these many positions, with every position
    in memory at once (:func:`~dobutsu_tb.tablebase.memory.make_plan` without a budget)."""
    layout = (game or game_of()).layout
    return make_plan(Sizes(layout["MAX_KEY_BITS"], layout["KEY_SHIFT"]), nonterminal, terminal, None,
                     Path(".")).peak


def _wide_estimate(variant, start) -> str:
    """What a build from ``start`` of a variant whose keys are too wide would reach and need
    (:func:`~dobutsu_tb.tablebase.memory.estimate_build` with keys as wide as they may be: the
    memory a lower bound)."""
    room = key_room(variant)
    return estimate_build(Sizes(room, KEY_TOP_BIT + 1 - room), variant, start).describe() + " at the least"


def build_tablebase(out, start=None, progress: bool | None = None,
                    on_phase: Callable[[str], None] | None = None, force: bool = False,
                    memory_check: bool = True, variant: Variant | None = None, max_memory: int | None = None,
                    work_dir=None, spill: bool | None = None, cluster=None) -> BuildResult:
    """Build the tablebase of every position reachable from ``start`` and write it to ``out``.

    Nothing is lost, whatever happens (:class:`~dobutsu_tb.tablebase.output.ReservedOutput`):
    ``out`` is locked and its temporary file created before any work, so an unwritable folder,
    a file that is not a tablebase, or another build of the same file fails at once; leftovers
    of killed builds are removed; the file appears, complete and checked, only at the end. SIGINT
    and SIGTERM stop the build within a batch (:mod:`~dobutsu_tb.encoding.interrupt`) and leave
    nothing behind, the work folder included.

    Parameters
    ----------
    out : str or Path
        The HDF5 file to write (atomically; an interrupted build leaves no file).
    start : Position or str, optional
        Start position (default: the variant's start); any legal non-terminal one.
    progress : bool or None, optional
        Progress bars and per-ply lines on stderr: True, False, or None for "only on a terminal".
    on_phase : callable, optional
        Called with each phase's name as it starts (``"enumeration"``, ``"terminal"``,
        ``"retrograde"``, ``"sort"``, ``"write"``, ``"check"``; a build on a cluster has ``"start"``
        first and ``"stop"`` last) and with ``"done"`` at the end.
    force : bool, optional
        Replace an existing ``out`` even if it is not a dobutsu tablebase.
    memory_check : bool, optional
        Keep the build within a memory budget (default): ``max_memory``, or what the machine
        has available; refuse it before it starts (or as its tables grow) when it cannot fit
        (:mod:`~dobutsu_tb.tablebase.memory` plans passes to fit).
    variant : Variant, optional
        The game (default: the start position's variant, or dobutsu shogi).
    max_memory : int, optional
        The budget in bytes (``--max-memory``); not with ``memory_check=False``.
    work_dir : str or Path, optional
        Where what the build spills to disk goes (the analysis's lists, the terminal children of
        partitions set aside; default: the output's folder); a folder of the build's own is made
        inside and removed at the end, whatever happens.
    spill : bool, optional
        Spill the retrograde analysis's lists to disk, or not, whatever the plan says.
    cluster : ClusterOptions, optional
        Build on a Ray cluster (:mod:`~dobutsu_tb.tablebase.cluster`, docs/cluster.md) instead of
        in this process; the memory options then do not apply (each worker holds a share).

    Returns
    -------
    BuildResult

    Raises
    ------
    dobutsu_tb.tablebase.game.position.PositionError
        If a text start position is malformed or impossible.
    dobutsu_tb.tablebase.enumeration.StartPositionError
        If the start position is terminal.
    dobutsu_tb.tablebase.game.variant.VariantError
        If the variant's keys are wider than a build holds (``Game.key_problem``), before
        anything is compiled or written.
    dobutsu_tb.encoding.compact.CompactTableFullError
        If the positions do not fit the hash tables.
    InsufficientMemoryError
        If the build does not fit the memory budget (before the build, or as its tables grow, or
        when the counts it found leave no room for the analysis).
    dobutsu_tb.tablebase.output.OutputError
        If ``out`` cannot be written (no such folder, not writable, another build writing it, a
        file there that is not a tablebase, a full disk); nothing is written then.
    dobutsu_tb.encoding.interrupt.Interrupted
        On SIGINT or SIGTERM; nothing is written.
    dobutsu_tb.tablebase.cluster.ClusterError
        With ``cluster``: Ray is not installed, the cluster cannot be reached or is too small, or a
        worker died; nothing is written.
    ValueError
        If ``start`` is of another variant than ``variant``, or ``max_memory`` is given with
        ``memory_check=False``.
    """
    if variant is None:
        variant = start.variant if isinstance(start, Position) else standard_variant()
    start = Position.start(variant) if start is None else (
        Position.from_text(start, variant) if isinstance(start, str) else start)
    if start.variant != variant:
        raise ValueError(f"the start position is of {start.variant.name}, not of {variant.name}")
    game = game_of(variant)
    check_start(start)  # (before anything is compiled or written)
    if game.key_problem is not None:
        raise VariantError(f"{variant.name}: {game.key_problem}; from {start.text()}: {_wide_estimate(variant, start)} "
                           f"(a variant's army is its start's: one whose start holds fewer pieces has narrower keys)")
    out = Path(out)
    expected = expected_counts(variant, start)
    sizes = Sizes(game.layout["MAX_KEY_BITS"], game.layout["KEY_SHIFT"])
    budget = None
    if not memory_check and max_memory is not None:
        raise ValueError("memory_check=False builds without a budget: max_memory cannot be given with it")
    if memory_check:
        budget = max_memory if max_memory is not None else default_budget()
    planned = expected or (config.DEFAULT_EXPECTED, config.DEFAULT_EXPECTED)
    base = Path(work_dir) if work_dir is not None else (out.parent if str(out.parent) else Path("."))
    source = "--max-memory" if max_memory is not None else "MemAvailable in /proc/meminfo"
    plan = None if cluster is not None else make_plan(sizes, *planned, budget, base, spill,
                                                      known=expected is not None, source=source)
    # (a start of unknown counts: what it may reach, for the refusal below and the kernels to compile)
    estimate = estimate_build(sizes, variant, start) if expected is None and cluster is None else None
    if estimate is not None and budget is not None and variant.hand_order:  # (the shares of boards with drops)
        if estimate.peak_low > budget and estimate.low > ESTIMATE_FLOOR:
            raise InsufficientMemoryError(
                f"{variant.name} from {start.text()}: {estimate.describe()}, more than the budget of {gib(budget)} "
                f"({source}); build a start with fewer pieces (--start), or on a cluster (--cluster, docs/cluster.md)"
                + (f", or raise --max-memory by {gib_up(estimate.peak_low - budget)} at least (an estimate: more "
                   f"may be needed)" if estimate.peak_low <= (total_memory() or 0) else ""))
    report = None
    profile = {}
    target = None
    try:
        with reserve_output(out, force) as target:
            if target.removed and progress is not False:
                _log(f"removed {counted(len(target.removed), 'leftover file')} of an interrupted build: "
                     + ", ".join(p.name for p in target.removed))
            disk = _work_disk(base) if plan is not None and (plan.terminal_disk or plan.spill) else (None, None)
            if plan is not None:
                plan = _terminal_disk(plan, base, progress is False, disk)
            if progress is not False and expected is not None and plan is not None:
                _log(plan.describe())  # (for a start of unknown counts: once they are known, after the enumeration)
            if progress is not False and expected is not None and plan is not None and plan.spill:
                _warn_memory_disk(base, plan.disk, disk)
            with interrupt.stop_on_signals():  # the commit too: a signal never cuts it in two
                if cluster is not None:
                    from dobutsu_tb.tablebase.cluster import build_on_cluster

                    meta, report, no_move_keys = build_on_cluster(target.tmp, game, start, expected, progress,
                                                                  on_phase or (lambda name: None), cluster, out)
                else:
                    dense = "" if plan.table_load is None else \
                        table_slot_dtype(plan.table_slots, game.layout["MAX_KEY_BITS"], config.THREADS).name
                    compile_kernels(game, _log if progress is not False else None, interrupt.check, start, dense,
                                    big_build(plan, estimate))
                    with WorkFolder(base, plan.spill or plan.terminal_disk > 0) as folder:
                        if folder.removed and progress is not False:
                            _log(f"removed {counted(len(folder.removed), 'work folder')} of a build that was "
                                 f"killed: " + ", ".join(folder.removed))
                        meta, plan, profile, no_move_keys = _build(target.tmp, game, start, expected, progress,
                                                                   on_phase or (lambda name: None), plan, sizes,
                                                                   folder)
                interrupt.check()  # a signal during the build: nothing is written
                target.commit()
    except interrupt.Interrupted as exc:
        if target is not None and target.committed:  # the signal came after the file was in place
            raise interrupt.Interrupted(exc.signum, f"{exc}, after {out} was written (complete)") from None
        raise interrupt.Interrupted(exc.signum, f"{exc}: the build stopped, {out} was not written") from None
    (on_phase or (lambda name: None))("done")
    return BuildResult(out, meta, plan, profile, report, no_move_keys)


@njit
def _keys_with_value(slots, layout, values, code, out):
    """The keys of the occupied slots whose value byte is ``code`` into ``out`` (at most its
    length); returns how many there are."""
    n = 0
    for s in range(values.shape[0]):
        if values[s] == code and slots[s] != 0:
            if n < out.shape[0]:
                out[n] = table_key_at(slots, layout, s)
            n += 1
    return n


def _free_cycles() -> None:
    """Collect reference cycles between phases. numba's first compile of a kernel (an empty kernel
    cache) leaves the frames that called it in a reference cycle, so a phase's arrays would outlive
    it until Python's collector next ran: the 5x3 build's terminal set (6.65 GiB) and tags stayed
    through the start of the retrograde analysis, and peaked at 21.9 GiB against the 17.0 GiB
    planned (docs/variants.md)."""
    gc.collect()


def _passes_hint(enum, plan: BuildPlan, sizes: Sizes) -> str:
    """For an enumeration that split its terminal positions into more partitions than planned (a
    start of unknown counts within a tight budget): how much more memory would have counted them
    all in the enumeration itself (each pass expands every position again); else ''."""
    if enum.terminal_parts <= plan.terminal_parts:
        return ""
    held = enum.catch_terminal + enum.try_terminal  # (the first partition's)
    more = sizes.terminal_set(held * enum.terminal_parts, plan.set_load_factor) - sizes.terminal_set(
        held, plan.set_load_factor)
    return (f", each as long as the enumeration's expansion (the budget held 1/{enum.terminal_parts} of the set of "
            f"terminal positions; about {gib(more)} more, --max-memory, would hold it all)")


def _work_disk(base: Path) -> tuple[int | None, str | None]:
    """The bytes free on the disk of the work folder ``base`` (``--work-dir``, or its nearest
    folder that exists; None when that cannot be told: the work folder's own error comes when it
    is made), and the type of its file system when that lives in memory (tmpfs), else None."""
    place = nearest_folder(base)
    try:
        free = shutil.disk_usage(place).free
    except OSError:
        free = None
    return free, in_memory_file_system(place)


def _terminal_disk(plan: BuildPlan, base: Path, quiet: bool, disk: tuple[int | None, str | None]) -> BuildPlan:
    """``plan`` as it stands once the disk of ``base`` (``--work-dir``) is seen: where it has less
    room free than the terminal children of the partitions not held would take
    (:attr:`BuildPlan.terminal_disk`), or is a file system in memory (tmpfs: what is set aside
    there takes memory beside the budget), those partitions are counted in one more pass over the
    table each instead (said in a line), and the plan says so. ``disk``: :func:`_work_disk`'s."""
    free, kind = disk
    if not plan.terminal_disk or free is None or (kind is None and free >= plan.terminal_disk):
        return plan
    if not quiet:
        what = f"the terminal children of {counted(plan.terminal_parts - 1, 'partition')}"
        passes = f"they are counted in {counted(plan.terminal_parts - 1, 'more pass', 'more passes')} over the table"
        shown = os.path.abspath(base)
        _log(f"the disk of {shown} (--work-dir) has {gib(free)} free, less than the {gib(plan.terminal_disk)} {what} "
             f"would take: {passes} instead" if kind is None else
             f"the work folder {shown} (--work-dir) is on {kind}, in memory: {what} (about "
             f"{gib(plan.terminal_disk)}) would take memory beside the budget there; {passes} instead (--work-dir on a "
             f"disk sets them aside)")
    return dataclasses.replace(plan, terminal_disk=0)


def _warn_memory_disk(base: Path, need: int, disk: tuple[int | None, str | None]) -> None:
    """A warning line when the work folder (``--work-dir``), where a plan spills the analysis's
    lists to spare memory, is on a file system in memory (tmpfs, ramfs: the lists would take
    memory beside the budget there), or has less room free than the ``need`` bytes the plan
    gives them at most (the build stops with an ``error:`` line when a list does not fit).
    ``disk``: :func:`_work_disk`'s."""
    shown = os.path.abspath(base)
    free, kind = disk
    if kind is not None:
        _log(f"warning: the work folder {shown} (--work-dir) is on {kind}, in memory: the lists "
             f"spilled there take memory beside the budget; give --work-dir a folder on a disk")
    if free is not None and free < need:
        _log(f"warning: the disk of {shown} (--work-dir) has {gib(free)} free, less than the up to {gib(need)} the "
             f"analysis's spilled lists may take: the build stops with an error if they do not fit")


def _build(tmp: Path, game: Game, start: Position, expected, progress, phase, plan: BuildPlan, sizes: Sizes,
           folder: "WorkFolder") -> tuple[Metadata, BuildPlan, dict, np.ndarray]:
    """The build's phases, writing into ``tmp``; returns the metadata written, the plan followed,
    the profile (:attr:`BuildResult.profile`) and the keys of the positions without a move."""
    quiet = progress is False
    disable = None if progress is None else not progress
    budget = None if plan.budget is None else plan.budget - BASE_MEMORY
    phase("enumeration")
    with tqdm(total=expected[0] if expected else None, desc="enumerate", unit=" pos",
              unit_scale=True, disable=disable, file=sys.stderr) as bar:
        logged = [time.perf_counter()]

        def log_due(bar) -> bool:
            """Whether a progress line is due: ``bar`` hidden (a log, not a terminal), and LOG_EVERY seconds
            since the last line."""
            if bar.disable and not quiet and time.perf_counter() - logged[0] > LOG_EVERY:
                logged[0] = time.perf_counter()
                return True
            return False

        def on_batch(expanded, queued):
            bar.update(expanded - bar.n)
            if not expected:
                bar.total = queued
            if log_due(bar):
                _log(f"enumeration: {counted(expanded, 'position')} expanded, {queued:,} non-terminal ones found")
        enum = enumerate_positions(game, start.state(), expected, on_batch, budget, plan.terminal_parts,
                                   plan.set_load_factor, plan.table_load,
                                   folder.path if plan.terminal_disk else None)
    set_aside = 0  # bytes of terminal children the enumeration set aside on disk
    if enum.terminal_parts > 1:
        phase("terminal")
        if enum.spilled is not None:
            enum.spilled.check()  # (a file changed on disk since: the passes over the table instead)
        spilled = enum.spilled is not None and enum.spilled.failed is None
        set_aside = enum.spilled.nbytes if spilled else 0
        if not quiet:
            how = (f"of {counted(enum.terminal_parts - 1, 'more partition')} from the {gib(enum.spilled.nbytes)} "
                   f"of their children set aside" if spilled else
                   f"in {counted(enum.terminal_parts - 1, 'more pass', 'more passes')}"
                   + _passes_hint(enum, plan, sizes))
            gave_up = "" if spilled or enum.spilled is None else \
                f" (the children set aside for them were given up: {enum.spilled.failed})"
            _log(f"enumerated {enum.nonterminal:,} non-terminal positions in {enum.seconds:.1f} s; counting the "
                 f"terminal positions {how}{gave_up}")
        again = int(enum.spilled.items.sum()) if spilled else enum.nonterminal * (enum.terminal_parts - 1)
        what = "children read back" if spilled else "positions expanded again"
        with tqdm(total=again, desc="terminal", unit=" pos", unit_scale=True, disable=disable,
                  file=sys.stderr) as bar:
            done = [0]

            def on_positions(n):
                bar.update(n)
                done[0] += n
                if log_due(bar):
                    _log(f"terminal positions: {done[0]:,} of {again:,} {what} to count them")
            try:
                count_terminal_partitions(enum, on_positions, budget)
            except OSError as exc:
                from dobutsu_tb.tablebase.output import OutputError, describe_os_error

                why = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else describe_os_error(exc)
                raise OutputError(f"the terminal children set aside in {folder.path} (--work-dir) could not be "
                                  f"read back: {why}; nothing was written") from None
    _free_cycles()  # the enumeration's terminal set and lists
    if not quiet:
        _log(f"enumerated {enum.reachable:,} positions ({enum.nonterminal:,} non-terminal) "
             f"in {enum.seconds:.1f} s; {_peak_memory()}")
    if enum.table.capacity == plan.table_slots:  # still the dense table it was made as
        sizes = dataclasses.replace(sizes, table_load=plan.table_load)
    check_plan = make_plan(sizes, enum.nonterminal, enum.reachable - enum.nonterminal, plan.budget, plan.work_dir,
                           True if plan.spill else None, source=plan.source, found=True)
    check_plan = dataclasses.replace(check_plan, terminal_parts=enum.terminal_parts, terminal_disk=set_aside)
    if not quiet and expected is None:
        _log(f"{check_plan.describe()} (planned for the counts found)")
        if check_plan.spill:
            _warn_memory_disk(folder.base, check_plan.disk, _work_disk(folder.base))
    if check_plan.spill and folder.path is None:
        folder.spill = True
        folder.__enter__()

    phase("retrograde")
    with tqdm(total=enum.nonterminal, desc="retrograde", unit=" pos", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        def on_ply(ply, processed, decided, secs):
            bar.update(processed)
            if not quiet:
                noun = "positions" if processed != 1 else "position "
                _log(f"ply {ply:3d}: {processed:>11,} {noun} -> {decided:>11,} decided at "
                     f"ply {ply + 1} ({secs:.2f} s)")
        solution = retrograde.solve(enum, on_ply, folder.lists if check_plan.spill else None)
    if not quiet:
        _log(f"solved in {solution.seconds:.1f} s; {_peak_memory()}")

    phase("sort")
    interrupt.check()
    t = time.perf_counter()
    start_wdl, start_dtm = solution.dtm_of(int(enum.table.lookup([start.key()])[0]))
    counts = dict(reachable=enum.reachable, nonterminal=enum.nonterminal,
                  catch_terminal=enum.catch_terminal, try_terminal=enum.try_terminal,
                  no_moves=enum.no_moves)
    enum_seconds = enum.seconds
    profile = {f"enumeration.{k}": v for k, v in enum.profile.items()}
    profile.update({f"retrograde.{k}": v for k, v in solution.profile.items()})
    table = enum.table
    del enum  # the counters go; the table and the values make the records
    solution.values = retrograde.contiguous_values(solution.values)  # the value bytes alone: the counters go
    _free_cycles()  # the values and counters of the analysis, and its frames
    no_move_keys = np.zeros(counts["no_moves"], np.int64)  # losses in 0: value byte 1
    if counts["no_moves"] and _keys_with_value(table.slots, table.layout, solution.values, 1,
                                               no_move_keys) != counts["no_moves"]:
        raise AssertionError("the positions without a move are not the losses in 0")
    no_move_keys.sort()
    blocks = record_blocks(table, solution, game.layout["KEY_SHIFT"], check_plan.record_passes)
    value_bits = RECORD_VALUE_BITS if blocks.longs is None else WIDE_VALUE_BITS
    found = value_counts(value_histogram(table, solution, value_bits))
    meta = Metadata(start=start.text(), variant=game.variant, wins=found["wins"], draws=found["draws"],
                    losses=found["losses"], start_wdl=start_wdl, start_dtm=start_dtm, max_dtm=found["max_dtm"],
                    seconds={"enumeration": enum_seconds, "retrograde": solution.seconds}, **counts)
    meta.seconds["sort"] = time.perf_counter() - t
    phase("write")
    t = time.perf_counter()
    with tqdm(total=2 * blocks.n, desc="write", unit=" entries", unit_scale=True,
              disable=disable, file=sys.stderr) as bar:
        parts = {}
        write_file(tmp, blocks, meta, progress=bar.update, profile=parts)
    del blocks, table, solution
    meta.seconds["write"] = time.perf_counter() - t
    profile.update({f"write.{k}": v for k, v in parts.items()})
    if not quiet:
        _log(f"temporary file written in {meta.seconds['write']:.1f} s (checked and renamed next); {_peak_memory()}")
    phase("check")
    check_start_value(tmp, start, start_wdl, start_dtm)
    return meta, check_plan, profile, no_move_keys


def check_start_value(tmp: Path, start: Position, start_wdl: int, start_dtm: int) -> None:
    """Read the start position's value back from the file written, through the probing code: a
    check of the file (a mismatch is a defect, raised as RuntimeError)."""
    interrupt.check()
    from dobutsu_tb.tablebase.probe import open_tablebase
    with open_tablebase(tmp) as tb:
        found = (tb.probe_wdl(start), abs(tb.probe_dtm(start)))
    if found != (start_wdl, start_dtm):  # pragma: no cover - a defect, not an input error
        raise RuntimeError(f"{tmp}: the start position reads back as {found}, "
                           f"not {(start_wdl, start_dtm)}")
