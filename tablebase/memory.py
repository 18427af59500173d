"""A build's memory: what each phase needs, the budget it must stay within, and the plan that
fits the biggest variants into it (docs/building.md, "Memory").

The builder keeps three big structures: the table of non-terminal positions (4 bytes a slot,
:mod:`~dobutsu_tb.encoding.compact`) with a tag byte a slot during the enumeration and a value
and a counter byte a slot during the retrograde analysis; the set that counts the terminal
positions (buckets of 21 3-byte entries for dobutsu's keys); and the sort records of the write (8 bytes a
position). When they do not fit the budget together, the plan trades passes for memory:

- **terminal partitions**: the set holds only the terminal positions whose hash lies in the
  first of K partitions; the enumeration sets the others' terminal children aside in files in the
  work folder (:data:`TERMINAL_CHILDREN` a position, 8 bytes each), and after it each partition's
  file is read back and its distinct positions counted. Where the disk lacks the room, one pass
  over the table per other partition regenerates every position's terminal children instead;
- **record passes**: the records are made, sorted and written one key range at a time;
- **spilled lists**: the retrograde analysis's lists of positions (the seeds and each ply's
  frontier) live in memory-mapped files in the work folder instead of in memory.

None of these changes a result: the file is the same byte for byte.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.compact import dense_table_slots, table_nbytes
from dobutsu_tb.encoding.compact_layout import CompactTableFullError, shards_for, slot_bits_for
from dobutsu_tb.encoding.compact_set import set_nbytes
from dobutsu_tb.encoding.routing import region_bits
from dobutsu_tb.encoding.sorting import SCRATCH_BYTES

#: Bytes a build holds besides its tables: the interpreter, numpy, numba and its compiled
#: kernels, thread buffers (measured: about 0.25 GiB), the radix sort's scratch on two threads
#: (each phase counts that of more threads: :func:`sort_scratch`).
BASE_MEMORY = 320 << 20
#: What the retrograde analysis holds beyond BASE_MEMORY besides the table and its cells: a
#: window of frontier keys sorted (4 Mi keys), each thread's row of decisions, the resident pages
#: of spilled lists. Measured: the standard game within 990 MiB, planned without it at 990 MiB,
#: peaked at 1,032,904 kB during its analysis (19 MiB over; 2026-12-06).
ANALYSIS_BUFFERS = 32 << 20
#: What a phase holds besides when its table is grouped by region (2 GiB or more:
#: :func:`~dobutsu_tb.encoding.routing.region_bits`): the enumeration's lists of a batch of 256 K
#: positions' children, the analysis's predecessors of 512 K frontier positions, twice (as
#: generated, and grouped) and the slots they decide. Measured on the 5x3 game: 40 MiB more at the
#: enumeration's peak than with batches of 32 K positions; about 72 MiB in the analysis.
GROUPED_BUFFERS = 128 << 20
#: The most terminal partitions (passes over the table).
MAX_TERMINAL_PARTS = 64
#: The most key ranges the records are made in (each a scan of the table): a budget within a few
#: MiB of the table's floor asked for 1024, and the standard game's build in 990 MiB ran for more
#: than 17 minutes; such a budget is refused instead.
MAX_RECORD_PASSES = 64
#: Moves a non-terminal position has, on average, that reach a terminal position (repeats
#: included: what the enumeration sets aside for the terminal partitions it does not hold), with a
#: margin. Measured: the standard game's 99,485,568 positions have about 437 million such moves
#: (4.39 each), the 5x3 game's 1,441,956,293 about 6.62 billion (4.59 each).
TERMINAL_CHILDREN = 5.0
#: The share of the positions that one ply's lists (frontier, decisions, seeds) hold at most,
#: for the estimate (the standard game's largest ply holds 9 %).
LIST_SHARE = 0.35
GIB = 1 << 30


#: Reachable positions over :func:`position_bound` on the boards solved: 15.7 % for the standard
#: game (246,803,167 of 1,567,925,964, Tanaka's bound), 22.4 % for the 3x5 board (3,359,910,526 of
#: 14,982,595,110); and the share of the reachable positions that are non-terminal (40 % and 43 %).
REACHABLE_SHARE = (0.157, 0.224)
NONTERMINAL_SHARE = 0.43
#: How full a dense table (:func:`~dobutsu_tb.encoding.compact.dense_table_slots`) is sized, in the
#: order the plan tries them when a power of two of slots does not fit the budget, or costs more
#: passes: at the table's usual load, then fuller (a linear probe's unsuccessful search is about
#: 4 times longer at 85 % than at 67 %, but a pass over the table costs more).
DENSE_TABLE_LOADS = (config.LOAD_FACTOR, 0.85)
#: How full a dense table may get before it grows: a table made for a known count at its load
#: must not grow for a few keys more in one shard.
DENSE_FILL_LIMIT = 0.92


class InsufficientMemoryError(MemoryError):
    """Raised before a build (or before its tables grow) when the memory it would need exceeds the
    budget; the message says how much is needed and available."""


def _meminfo(field: str) -> int | None:
    """A field of ``/proc/meminfo`` in bytes, or None where there is no such file or field."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (memory that can be had without swapping),
    or None where there is no such file."""
    return _meminfo("MemAvailable")


def total_memory() -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in bytes (this machine's memory), or None if unknown."""
    return _meminfo("MemTotal")


def resident_memory() -> int:
    """This process's resident memory in bytes (0 if unknown)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_resident_memory() -> int:
    """This process's peak resident memory in bytes: ``VmHWM`` of ``/proc/self/status`` where there
    is one, else ``ru_maxrss``. (Linux keeps ``ru_maxrss`` across ``exec``, so a process started by
    a large one, a test runner, would report its parent's size; ``VmHWM`` is this program's own.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def default_budget() -> int | None:
    """The memory a build may use when ``--max-memory`` is not given: what the machine has
    available (``MemAvailable``) plus what this process already holds; None if unknown."""
    available = available_memory()
    return None if available is None else available + resident_memory()


#: File systems whose files live in memory: what a build spills there takes memory, not disk.
MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")


def _unescape_mount(field: str) -> str:
    """A mount point as ``/proc/self/mountinfo`` writes it (space, tab, newline and backslash as
    octal escapes: ``\\040``) made plain."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def nearest_folder(path) -> Path:
    """``path`` made absolute, or its nearest folder above that exists (a ``--work-dir`` whose
    folders the build makes later); never raises (``os.path.exists``: no ``PermissionError``)."""
    place = Path(os.path.abspath(path))
    while not os.path.exists(place) and place != place.parent:
        place = place.parent
    return place


def file_system_of(path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the file system that holds ``path`` (``'ext4'``, ``'tmpfs'`` ...), from the
    mount point in ``mountinfo`` (proc(5)) nearest above it; a path that does not exist yet is
    taken at its nearest existing folder. None where that cannot be told (no such file: not Linux).

    Parameters
    ----------
    path : str or Path
        A file or folder, existing or not.
    mountinfo : str, optional
        The mount table to read (tests give their own).

    Returns
    -------
    str or None
    """
    place = Path(os.path.realpath(nearest_folder(path)))
    best, kind = -1, None
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if "-" not in fields or len(fields) < 5:
                    continue
                after = fields[fields.index("-") + 1:]
                mount = Path(_unescape_mount(fields[4]))
                depth = len(mount.parts)
                if after and depth >= best and (place == mount or mount in place.parents):
                    best, kind = depth, after[0]  # (a later mount on the same point hides the earlier)
    except OSError:
        return None
    return kind


def in_memory_file_system(path) -> str | None:
    """The type of ``path``'s file system when its files live in memory (tmpfs, ramfs: what is
    spilled there takes memory beside the build's budget), else None (:func:`file_system_of`).
    A file system in memory under another name (an overlay on a tmpfs, a zram block device) is
    not seen.

    Parameters
    ----------
    path : str or Path
        A file or folder, existing or not.

    Returns
    -------
    str or None
    """
    kind = file_system_of(path)
    return kind if kind in MEMORY_FILE_SYSTEMS else None


def parse_size(text: str) -> int:
    """Bytes of a size like ``20G``, ``512M``, ``1.5GiB``, ``1gb`` or ``1000000`` (bytes): K, M, G,
    T and P are powers of 1024, with or without ``B`` or ``iB``, in either case (as ``free`` and
    most memory options read them).

    Raises
    ------
    ValueError
        If the text is not such a size.
    """
    found = re.fullmatch(r"\s*([0-9.]+(?:E[+-]?[0-9]+)?)\s*(?:([KMGTP])(?:I?B)?|B)?\s*", text.upper())
    try:
        value = float(found.group(1)) if found else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a size like 20G, 512M or 1000000")
    unit = {None: 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}[found.group(2)]
    size = int(value * unit)
    if size <= 0:
        raise ValueError(f"{text!r} is not a size like 20G, 512M or 1000000: it is less than a byte")
    return size


def gib(n: int) -> str:
    """``n`` bytes as ``'1.8 GiB'``; below 1 GiB in MiB, KiB or bytes (``'320 MiB'`` rather than
    ``'0.3 GiB'``, so that a need and a budget a few MiB apart do not read the same); from 1 TiB
    on in TiB or PiB (a full game of a big board: ``'1.4 PiB'``, not ``'1443093.6 GiB'``). The
    unit is the one the rounded figure fits (``2**40 - 1`` bytes: ``'1.0 TiB'``, not
    ``'1024.0 GiB'``)."""
    if n < 1 << 10:
        return f"{n} byte" if n == 1 else f"{n} bytes"
    k = _unit_of(n)
    if k + 1 < len(_UNITS) and round(n / _UNITS[k][1], _UNITS[k][2]) >= 1024:  # (rounds up to the next unit)
        k += 1
    unit, size, digits = _UNITS[k]
    return f"{n / size:.{digits}f} {unit}"


#: The units sizes are said in: (name, bytes, decimals).
_UNITS = (("KiB", 1 << 10, 0), ("MiB", 1 << 20, 0), ("GiB", GIB, 1), ("TiB", GIB << 10, 1), ("PiB", GIB << 20, 1))


def _unit_of(n: int) -> int:
    """The index in :data:`_UNITS` of the largest unit ``n`` (at least 1 KiB) holds once."""
    return max(i for i, (_, size, _) in enumerate(_UNITS) if n >= size)


def gib_up(n: int) -> str:
    """:func:`gib` rounded up in its unit, never down: a figure of at least ``n`` bytes, for
    "raise --max-memory by K at least" (rounded to the nearest, 1.4 MiB read "1 MiB", and a user
    who raised the budget by that was refused again)."""
    if n < 1 << 10:
        return gib(n)
    k = _unit_of(n)
    while True:
        unit, size, digits = _UNITS[k]
        tenths = -(-n * 10 ** digits // size)  # (the figure's last digit, rounded up)
        if tenths < 1024 * 10 ** digits or k + 1 == len(_UNITS):
            return f"{tenths / 10 ** digits:.{digits}f} {unit}"
        k += 1


def raise_by(missing: int) -> str:
    """The advice that ends a refusal for memory: how much more ``--max-memory`` must give at
    least (``missing`` bytes, rounded up: :func:`gib_up`)."""
    return f"free some memory or raise --max-memory by {gib_up(missing)} at least"


def gib_apart(*sizes: int) -> list[str]:
    """:func:`gib` of each of ``sizes``, or, when two of them would read the same, all in the
    first of MiB, KiB and bytes (with thousands separators) that tells them apart: a need and a
    budget that differ say so (``'1,068 MiB'`` against ``'1,024 MiB'``, not ``'1.0 GiB'`` twice;
    ``'328,657 KiB'`` against ``'328,462 KiB'``, not ``'321 MiB'`` twice)."""
    distinct = len(set(sizes))
    said = [gib(n) for n in sizes]
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10), ("bytes", 1)):
        if len(set(said)) == distinct:
            break
        said = [f"{round(n / size):,} {unit}" for n in sizes]
    return said


@dataclass(frozen=True)
class Sizes:
    """Bytes of the builder's structures for a number of positions, by a variant's key width and
    the table's sizing: a power of two of slots at most
    :data:`~dobutsu_tb.encoding.config.LOAD_FACTOR` full, or (``table_load``) a dense table sized
    to its positions at that load."""

    code_bits: int
    shift: int
    table_load: float | None = None

    def table(self, nonterminal: int) -> int:
        """The table's slots (4 bytes each; 8 for a small table of long keys) for this many
        non-terminal positions."""
        if self.table_load is not None:
            return table_nbytes(max(1, nonterminal), self.code_bits, self.table_load, config.THREADS, dense=True)
        return table_nbytes(max(1, nonterminal), self.code_bits, config.LOAD_FACTOR, config.THREADS)

    def slots(self, nonterminal: int) -> int:
        """The table's slots for this many non-terminal positions."""
        if self.table_load is not None:
            return dense_table_slots(max(1, nonterminal), self.table_load, config.THREADS, self.code_bits)
        return 1 << slot_bits_for(max(1, nonterminal), config.LOAD_FACTOR, shards_for(config.THREADS),
                                  self.code_bits)

    def terminal_set(self, terminal: int, load: float = config.SET_LOAD_FACTOR) -> int:
        """The set that counts this many terminal positions, at most ``load`` full."""
        return set_nbytes(max(1, terminal), self.code_bits, self.shift, load, config.THREADS)

    def grouped(self, nonterminal: int, terminal_in_memory: int = 0) -> int:
        """:data:`GROUPED_BUFFERS` when the table or the terminal set is big enough to be grouped
        by region, else 0."""
        big = max(self.table(nonterminal), self.terminal_set(terminal_in_memory) if terminal_in_memory else 0)
        return GROUPED_BUFFERS if region_bits(big) else 0

    def enumeration(self, nonterminal: int, terminal_in_memory: int, load: float = config.SET_LOAD_FACTOR) -> int:
        """The table, its tags, the terminal set (at most ``load`` full), and
        :meth:`grouped`."""
        return (self.table(nonterminal) + self.slots(nonterminal) + self.terminal_set(terminal_in_memory, load)
                + self.grouped(nonterminal, terminal_in_memory) + sort_scratch())

    def retrograde(self, nonterminal: int, spilled: bool = False) -> int:
        """The table, a value and a counter byte a slot, the analysis's buffers
        (:data:`ANALYSIS_BUFFERS`, at most 8 bytes a position: a small game's window is its
        frontier; and :meth:`grouped`) and (unless spilled) the lists."""
        lists = 0 if spilled else int(LIST_SHARE * nonterminal) * 4 * 2
        buffers = min(ANALYSIS_BUFFERS, 8 * nonterminal) + self.grouped(nonterminal)
        return self.table(nonterminal) + 2 * self.slots(nonterminal) + buffers + lists + sort_scratch()

    def records(self, nonterminal: int, passes: int) -> int:
        """The table, the value bytes and one pass's sort records (8 bytes a position): the
        counters are gone by then (the value bytes are moved into the first half of the analysis's
        cells, whose second half goes back to the system: retrograde.contiguous_values)."""
        return self.table(nonterminal) + self.slots(nonterminal) + 8 * math.ceil(nonterminal / passes) + sort_scratch()


def sort_scratch() -> int:
    """Bytes of the radix sort's scratch (:data:`~dobutsu_tb.encoding.sorting.SCRATCH_BYTES` a
    thread, at each sort of a phase) beyond the two threads that :data:`BASE_MEMORY` counts."""
    return max(0, config.THREADS - 2) * SCRATCH_BYTES


def record_passes(sizes: Sizes, nonterminal: int) -> int:
    """The fewest key ranges whose sort records (8 bytes a position) take at most half the bytes
    of the table: the records are made while the table and the values are held, so one pass of
    all of them would make the write the build's peak (the standard game: 3 ranges of about
    265 MB instead of 796 MB at once, for two more scans of the table)."""
    return max(1, -(-8 * nonterminal // max(1, sizes.table(nonterminal) // 2)))


@dataclass(frozen=True)
class BuildPlan:
    """How a build fits its memory budget.

    Attributes
    ----------
    budget : int or None
        The most bytes the build may hold (None: no bound).
    terminal_parts : int
        Partitions of the terminal positions (a power of two; 1 counts them all during the
        enumeration). The enumeration may double it if the set outgrows the budget.
    set_load_factor : float
        How full the set of terminal positions may get: :data:`~dobutsu_tb.encoding.config.SET_LOAD_FACTOR`,
        or up to :data:`~dobutsu_tb.encoding.config.MAX_SET_LOAD_FACTOR` when that saves a pass.
    record_passes : int
        Key ranges the records are sorted and written in.
    spill : bool
        The retrograde analysis's lists live in memory-mapped files in ``work_dir``.
    work_dir : Path
        Where spilled lists and terminal children set aside go (a folder of the build's own,
        removed at the end).
    peak : int
        The estimated peak memory in bytes.
    disk : int
        The estimated most bytes of lists in ``work_dir`` at once.
    terminal_disk : int
        The estimated bytes of the terminal children set aside in ``work_dir`` during the
        enumeration (removed before the analysis), with ``terminal_parts`` above 1; else 0.
    table_load : float or None
        The load a dense table is sized for (None: a power of two of slots).
    table_slots : int
        The dense table's slots (0 without one).
    source : str
        Where the budget comes from (``--max-memory``, or the machine's available memory), for
        the refusals of the phases planned again once the counts are found.
    """

    budget: int | None
    terminal_parts: int
    record_passes: int
    spill: bool
    work_dir: Path
    peak: int
    disk: int
    set_load_factor: float = config.SET_LOAD_FACTOR
    table_load: float | None = None
    table_slots: int = 0
    source: str = "--max-memory"
    terminal_disk: int = 0

    def describe(self) -> str:
        """One line for people: the estimate and how the build fits it."""
        parts = [f"memory: about {gib(self.peak)} at the peak"
                 + (f" (budget {gib(self.budget)})" if self.budget is not None else "")]
        if self.table_load is not None:
            parts.append(f"a dense table of {self.table_slots:,} slots ({self.table_load:.0%} full)")
        if self.terminal_parts > 1:
            parts.append(f"terminal positions in {self.terminal_parts} partitions, "
                         + (f"{self.terminal_parts - 1} of them set aside in {os.path.abspath(self.work_dir)} (about "
                            f"{gib(self.terminal_disk)} of disk)" if self.terminal_disk else
                            f"counted in {self.terminal_parts} passes"))
        if self.record_passes > 1:
            parts.append(f"records written in {self.record_passes} key ranges")
        if self.set_load_factor != config.SET_LOAD_FACTOR:
            parts.append(f"terminal set up to {self.set_load_factor:.0%} full")
        parts.append(f"lists spilled to {os.path.abspath(self.work_dir)} (up to {gib(self.disk)} of disk)" if self.spill
                     else "no disk besides the output file")
        return "; ".join(parts)


def make_plan(sizes: Sizes, nonterminal: int, terminal: int, budget: int | None, work_dir: Path,
              spill: bool | None = None, known: bool = True, source: str = "--max-memory",
              found: bool = False) -> BuildPlan:
    """The cheapest plan that fits ``budget``: the fewest terminal partitions and record passes,
    spilling lists only when needed (or as ``spill`` says). When the counts are known and a
    power of two of the table's slots does not fit, or needs more terminal passes, the table is
    dense (:data:`DENSE_TABLE_LOADS`): the plan with the fewest terminal passes, and of those the
    smallest peak.

    Parameters
    ----------
    sizes : Sizes
    nonterminal, terminal : int
        Positions expected.
    budget : int or None
        Bytes (None: no bound, one pass of each).
    work_dir : Path
    spill : bool, optional
        Force spilling on or off.
    known : bool, optional
        Whether the counts are known; if not (a start whose counts nobody knows in advance), the
        plan only sizes the start and the enumeration checks the budget as its tables grow.
    source : str, optional
        Where the budget comes from, for the error message.
    found : bool, optional
        The counts are those an enumeration has just found (a start whose counts were not known
        in advance, so ``known`` is taken as False): the plan is checked for the phases after it
        (the analysis and the records), whose refusals say so.

    Returns
    -------
    BuildPlan

    Raises
    ------
    InsufficientMemoryError
        If no plan fits: the table with its value and counter bytes alone exceeds the budget. Its
        one line says by how much to raise the budget.
    """
    known = known and not found
    if budget is None or not known or sizes.table_load is not None:
        return _plan_for(sizes, nonterminal, terminal, budget, work_dir, spill, known, source, found)
    plans, refused = [], None
    for candidate in (sizes, *(dataclasses.replace(sizes, table_load=load) for load in DENSE_TABLE_LOADS)):
        try:
            plans.append(_plan_for(candidate, nonterminal, terminal, budget, work_dir, spill, known, source, found))
        except (InsufficientMemoryError, CompactTableFullError) as exc:
            refused = exc
        if plans and plans[-1].terminal_parts == 1:
            break  # no plan has fewer passes (a power of two of slots first, as before dense tables)
    if not plans:
        raise refused
    return min(plans, key=lambda plan: (plan.terminal_parts, plan.peak))


def _plan_for(sizes: Sizes, nonterminal: int, terminal: int, budget: int | None, work_dir: Path,
              spill: bool | None, known: bool, source: str, found: bool = False) -> BuildPlan:
    """:func:`make_plan` for one sizing of the table."""
    dense = {} if sizes.table_load is None else dict(table_load=sizes.table_load,
                                                     table_slots=sizes.slots(nonterminal))
    first = record_passes(sizes, nonterminal)
    if budget is None:
        peak = BASE_MEMORY + max(sizes.enumeration(nonterminal, terminal), sizes.retrograde(nonterminal),
                                 sizes.records(nonterminal, first))
        return BuildPlan(None, 1, first, bool(spill), work_dir, peak, 0, source=source, **dense)

    def refuse(need: int, needs: str, what: str, but: str = ", but"):
        """Stop: ``need`` bytes (the interpreter's included) for ``what`` break the budget; the
        line says "the {needs} {need} {what}"."""
        said, given = gib_apart(need, budget)
        raise InsufficientMemoryError(f"the {needs} {said} {what}{but} the budget is {given} ({source}); "
                                      + raise_by(need - budget))

    room = budget - BASE_MEMORY
    floor = sizes.retrograde(nonterminal, spilled=True)
    if floor > room:
        if found:
            refuse(floor + BASE_MEMORY, f"retrograde analysis of the {nonterminal:,} non-terminal positions found "
                   f"needs at least", f"of memory (the table, a value and a counter byte a position, its buffers and "
                   f"{gib(BASE_MEMORY)} for the interpreter and the kernels, its lists spilled to disk)")
        what = (f"its {nonterminal + terminal:,} positions: {gib(floor)} for the table of the {nonterminal:,} "
                f"non-terminal ones, their values and the analysis's buffers" if known else
                f"its first tables: {gib(floor)} for a table of {nonterminal:,} non-terminal positions, their "
                f"values and the analysis's buffers, before their count is known")
        refuse(floor + BASE_MEMORY, "build needs at least",
               f"of memory for {what}, and {gib(BASE_MEMORY)} for the interpreter and the kernels", "; but")
    parts, load = 1, config.SET_LOAD_FACTOR
    while sizes.enumeration(nonterminal, terminal // parts, load) > room and parts < MAX_TERMINAL_PARTS:
        fuller = [lf for lf in (0.75, config.MAX_SET_LOAD_FACTOR) if lf > load
                  and sizes.enumeration(nonterminal, terminal // parts, lf) <= room]
        if fuller and known:  # a fuller set saves a pass over the table
            load = fuller[0]
            break
        parts *= 2
    if sizes.enumeration(nonterminal, terminal // parts, load) > room and known and not found:
        refuse(sizes.enumeration(nonterminal, terminal // parts) + BASE_MEMORY, "build needs about",
               f"of memory for {nonterminal + terminal:,} positions")
    if spill is None:
        spill = sizes.retrograde(nonterminal) > room
    passes = first
    while sizes.records(nonterminal, passes) > room and passes < MAX_RECORD_PASSES:
        passes *= 2
    if sizes.records(nonterminal, passes) > room and (known or found):
        what = f"{nonterminal:,} non-terminal positions found" if found else f"{nonterminal + terminal:,} positions"
        refuse(sizes.records(nonterminal, passes) + BASE_MEMORY, "build needs about",
               f"of memory for {what} (their sort records in {passes} key ranges, each a scan of the table)")
    peak = BASE_MEMORY + max(sizes.enumeration(nonterminal, terminal // parts, load),
                             sizes.retrograde(nonterminal, spill), sizes.records(nonterminal, passes))
    disk = int(LIST_SHARE * nonterminal) * 4 * 2 if spill else 0
    return BuildPlan(budget, parts, passes, spill, work_dir, peak, disk, load, source=source,
                     terminal_disk=terminal_spill_bytes(nonterminal, parts), **dense)


def terminal_spill_bytes(nonterminal: int, parts: int) -> int:
    """The bytes an enumeration of ``nonterminal`` positions sets aside on disk for the terminal
    partitions it does not hold (``parts - 1`` of ``parts``; 0 for one): :data:`TERMINAL_CHILDREN`
    8-byte children a position."""
    return int(TERMINAL_CHILDREN * nonterminal * (parts - 1) / parts) * 8


def position_bound(variant, start) -> int:
    """An upper bound of the positions reachable from ``start``: every way to place its material
    (the pieces of the start position, which only change sides, promote and go to hand) with both
    royal pieces on the board, the side to move normalised, mirror images not folded (for the
    standard game this is Tanaka's bound, 1,567,925,964).

    Parameters
    ----------
    variant : Variant
    start : Position
        Of ``variant``.

    Returns
    -------
    int
        Positions (normalised, Sente to move).
    """
    army: dict = {}
    for cell in start.board:
        if cell:
            letter = variant.base_of[variant.pieces[(cell & 7) - 1].letter]
            army[letter] = army.get(letter, 0) + 1
    slots = variant.hand_order
    for k, n in enumerate(start.hands):
        if n:
            army[slots[k % len(slots)]] = army.get(slots[k % len(slots)], 0) + n
    # (pieces on the board, product of the factorials of their counts by form) -> ways, kind by kind
    dist = {(2, 1): 1}  # the two royal pieces
    for letter, n in army.items():
        kind = variant.kind(letter)
        if kind.royal:
            continue
        forms = 2 * (2 if kind.promotes_to else 1)  # a side and, for a kind that promotes, its form
        options: dict = {}
        for on_board in range(n + 1):
            hand_ways = n - on_board + 1 if letter in slots else 1  # the others in either hand, or out of the game
            for split in _compositions(on_board, forms):
                key = (on_board, math.prod(math.factorial(x) for x in split))
                options[key] = options.get(key, 0) + hand_ways
        merged: dict = {}
        for (m, den), ways in dist.items():
            for (on_board, den2), ways2 in options.items():
                key = (m + on_board, den * den2)
                merged[key] = merged.get(key, 0) + ways * ways2
        dist = merged
    cells = variant.cells
    return sum(ways * math.factorial(cells) // (math.factorial(cells - m) * den)
               for (m, den), ways in dist.items() if m <= cells)


def _compositions(n: int, parts: int):
    """Every way to write ``n`` as an ordered sum of ``parts`` non-negative numbers."""
    if parts == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in _compositions(n - first, parts - 1):
            yield (first,) + rest


@dataclass(frozen=True)
class Estimate:
    """What a build of unknown counts may reach, before it starts (:func:`estimate_build`).

    Attributes
    ----------
    bound : int
        :func:`position_bound` (normalised positions, mirror images not folded).
    low, high : int
        The reachable positions at the shares of the boards solved (:data:`REACHABLE_SHARE`).
    peak_low, peak_high : int
        Bytes a build of that many positions holds at its peak, with every position in memory.
    """

    bound: int
    low: int
    high: int
    peak_low: int
    peak_high: int

    def describe(self) -> str:
        """One line for people."""
        low, high = gib(self.peak_low), gib(self.peak_high)
        return (f"at most {self.bound:,} positions (every placement of its pieces); at the share of the boards "
                f"solved so far ({REACHABLE_SHARE[0]:.0%} to {REACHABLE_SHARE[1]:.0%}) about {_rough(self.low)} to "
                f"{_rough(self.high)} reachable, which need about {low if low == high else f'{low} to {high}'} of "
                f"memory")


def _rough(n: int) -> str:
    """``'1.4 x 10^10'``."""
    if n < 10**6:
        return f"{n:,}"
    e = int(math.log10(n))
    return f"{n / 10**e:.1f} x 10^{e}"


def estimate_build(sizes: Sizes, variant, start) -> Estimate:
    """An :class:`Estimate` of a build from ``start`` (a start whose counts nobody knows in advance).

    Parameters
    ----------
    sizes : Sizes
        The variant's key widths.
    variant : Variant
    start : Position
    """
    bound = position_bound(variant, start)
    low, high = (int(bound * share) for share in REACHABLE_SHARE)

    def peak(n):
        nonterminal = max(1, int(n * NONTERMINAL_SHARE))
        try:
            return make_plan(sizes, nonterminal, n - nonterminal, None, Path(".")).peak
        except CompactTableFullError:  # more than one table holds: its bytes at the same loads
            table = 4 * nonterminal / config.LOAD_FACTOR
            return int(BASE_MEMORY + 1.25 * table + 3 * (n - nonterminal) / config.SET_LOAD_FACTOR)

    return Estimate(bound, low, high, peak(low), peak(high))
