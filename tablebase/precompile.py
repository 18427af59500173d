"""Compiling a variant's kernels in two child processes before a build.

numba compiles a kernel on its first call and keeps what compiling took for the life of the
process: about 220 MiB for a build's kernels (a tiny build: 390 MiB resident with the kernel
cache empty, 171 MiB with it filled). A build that compiled its own kernels held that beside its
tables: from a fresh clone the standard build peaked at 1.53 GiB against 1.38 GiB with the cache
filled, and a build with ``--max-memory 1.2G`` that compiled its terminal-partition kernel at its
peak went to 1.35 GiB, over its budget. So, when the variant's kernels are not in the cache yet,
:func:`compile_kernels` has child processes compile them with tiny builds of the variant (its
royal pieces alone, and by hand each path a tiny game does not take: :func:`_main`), then leaves
a mark in the variant's cache folder; the build then loads its kernels from the cache
(docs/building.md, "Memory").

numba compiles on one core, so two children share the work, one the enumeration's kernels and
one the rest, each on a core of its own (15.0-15.8 s for the standard shape's first build against
31.1-32.6 s with one child, on 2026-12-06; 18.6-20.9 s on 2026-12-08, after more paths had
joined them and their kernels were made cheaper to compile: docs/building.md). The second does
not wait for the first's kernels: its tiny builds start from enumerations made without numba's
JIT (:func:`_enumerate_plainly`), which
the enumeration's kernels make the same; and no large kernel is the work of both (the radix sort
is the second's, the terminal positions' later passes the first's; some twenty small helpers,
such as the table's look-ups, are compiled by both). Both save into one cache folder at once,
which numba's cache does not allow for (``encoding/jit.py``, ``_TolerantIndex.save``).

The paths that only big builds take (:func:`big_build`: terminal positions in partitions, a dense
table, tables or sets of 2 GiB and more, two-byte values) compile only for a build whose plan
takes them (for a start of unknown counts, one whose estimate may), with a mark of their own
(:data:`BIG_MARK`): about 5 s of a shape's first build (30-35 s with them, 25-29 s without, the
standard shape, on 2026-12-08 before the kernels were made cheaper to compile; the rest of what
it was, 38-50 s, was the kernels both children compiled). A
build that meets one of them anyway (a DTM of 254 plies or more, a start that goes past its
estimate) compiles that kernel itself, as every build did before.

The kernels depend on the variant's board shape and the sources only, never on the sizes of the
tables, so the tiny builds compile the real one's. A kernel that they missed would compile in the
build, as every kernel did before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from dobutsu_tb.encoding import interrupt
from dobutsu_tb.tablebase.output import make_work_folder, remove_orphans

#: The file that marks a shape's cache folder as holding every kernel of a build, and the one that
#: marks it as holding them for the uint64 slots of small tables of long keys too
#: (:func:`~dobutsu_tb.encoding.compact.slot_dtype`).
MARK = "compiled-by-precompile"
WIDE_MARK = "compiled-by-precompile-wide-slots"
#: The mark of a dense table's kernels (a build whose memory plan sizes the table to its count:
#: :func:`~dobutsu_tb.encoding.compact.dense_table_slots`), by the dtype of its slots.
DENSE_MARK = "compiled-by-precompile-dense-{}"
#: The mark of the kernels of the paths that only big builds take (:func:`big_build`): terminal
#: positions in partitions (counted in more passes, or set aside on disk), the analysis grouped by
#: region, tables grown past 2**31 slots, two-byte values. A build of another plan does without
#: them, and its first one compiles about 5 s sooner (docs/building.md, "Kernels").
BIG_MARK = "compiled-by-precompile-big"
#: Set in the child's environment: a build there compiles its own kernels (no grandchild).
CHILD_ENV = "DOBUTSU_TB_PRECOMPILING"


def _folder(game) -> str:
    import numba

    return os.path.join(numba.config.CACHE_DIR, game.cache_key)


def _wide(game) -> bool:
    """Whether a small table of ``game``'s keys has uint64 slots (its kernels compile for both)."""
    from dobutsu_tb.encoding.compact_layout import MAX_NARROW_REMAINDER, MIN_SLOT_BITS

    return game.layout["MAX_KEY_BITS"] - (MIN_SLOT_BITS + 1) > MAX_NARROW_REMAINDER


def big_build(plan, estimate=None) -> bool:
    """Whether a build of ``plan`` (:class:`~dobutsu_tb.tablebase.memory.BuildPlan`) takes the
    paths of :data:`BIG_MARK`'s kernels: terminal positions in partitions, lists spilled to disk, a
    dense table, or a peak of :data:`~dobutsu_tb.encoding.routing.GROUP_FROM` bytes or more (only
    a table or a set that big has its accesses grouped by region: the plan's peak bounds both).

    For a start of unknown counts, whose plan sizes only the start, ``estimate``
    (:class:`~dobutsu_tb.tablebase.memory.Estimate`) says: it may take them when the peak it
    estimates for the most positions it expects reaches the plan's budget or ``GROUP_FROM`` bytes.
    A build that goes past its estimate compiles what it meets in its own process."""
    from dobutsu_tb.encoding import routing

    if estimate is not None:
        limit = routing.GROUP_FROM if plan.budget is None else min(routing.GROUP_FROM, plan.budget)
        return estimate.peak_high >= limit
    return (plan.terminal_parts > 1 or plan.spill or plan.table_load is not None
            or plan.peak >= routing.GROUP_FROM)


def kernels_cached(game, dense: str = "", big: bool = False) -> bool:
    """Whether a child process has compiled ``game``'s build kernels into the kernel cache (those of
    its board's shape, for the slots its tables have; with ``big``, those of the paths of big builds
    too, :data:`BIG_MARK`; and with ``dense``, the name of a dtype, those of a dense table of such
    slots)."""
    marks = (MARK, WIDE_MARK) if _wide(game) else (MARK,)
    marks += (BIG_MARK,) if big or dense else ()
    marks += (DENSE_MARK.format(dense),) if dense else ()
    return all(os.path.exists(os.path.join(_folder(game), mark)) for mark in marks)


def compile_kernels(game, log: Callable[[str], None] | None = None, check: Callable[[], None] | None = None,
                    start=None, dense: str = "", big: bool = False) -> bool:
    """Compile ``game``'s build kernels in two child processes at once, unless they are cached
    already.

    One child compiles the enumeration's kernels, the other those of the analysis, the sort and
    the write (:func:`_main`), each on a core of its own (module docstring). Nothing happens in
    the child of such a process, with numba's JIT disabled, or when the cache folder cannot be
    written (the kernels are then compiled where they run, as before). A child that fails costs
    nothing but its time: the build compiles what it needs itself.

    Parameters
    ----------
    game : Game
        The variant's rules.
    log : callable, optional
        Called with a line for people: that the kernels are being compiled, or why a child failed.
    check : callable, optional
        Called every 0.2 s while the children run; what it raises (an interrupt) stops them
        and is raised again.
    start : Position, optional
        The build's start: its royal pieces are the tiny builds' start when the variant's own
        start would give a terminal one.
    dense : str, optional
        The dtype of a dense table's slots (``"int32"`` or ``"int64"``), when the build's memory
        plan has one: the children compile its kernels too (once per shape and dtype: a kernel
        compiles for each dtype of the slots it is given), and those of ``big``.
    big : bool, optional
        The children compile the kernels of the paths of big builds too (:func:`big_build`,
        :data:`BIG_MARK`); without it, a build that takes one of them compiles its kernel itself.

    Returns
    -------
    bool
        Whether the children compiled the kernels.
    """
    import numba

    big = big or bool(dense)
    if os.environ.get(CHILD_ENV) or numba.config.DISABLE_JIT or kernels_cached(game, dense, big):
        return False
    folder = _folder(game)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK):
        return False
    if log is not None:
        v = game.variant
        table = (f", with a dense table of {dense} slots" if dense else
                 ", with the paths of big builds" if big else "")
        log(f"compiling the kernels for boards of {v.files} files x {v.ranks} ranks{table} (once per version of the "
            f"program and board shape, up to a minute)")
    _remove_orphans()
    work, lock = make_work_folder(_WORK_PREFIX)  # the children's builds: ours to remove, killed or not
    work = str(work)
    request = "\n".join((game.variant.to_json(), start.text() if start is not None else "", dense,
                         "big" if big else ""))
    env = {**os.environ, CHILD_ENV: "1",  # the same folder, whatever the environment
           "DOBUTSU_TB_CACHE": os.path.dirname(numba.config.CACHE_DIR)}
    children = []

    def kill():
        for child, _ in children:
            _kill_group(child)
        shutil.rmtree(work, ignore_errors=True)

    token = interrupt.at_exit(kill)  # a process ended by a signal leaves no child and no file
    try:
        for part in PARTS:
            err = tempfile.TemporaryFile("w+")
            try:
                # (a session of its own: a Ctrl-C at the terminal is the parent's to act on, through
                # ``check``, and the child's own children go with it: _kill_group)
                child = subprocess.Popen(_child_command(os.path.join(work, part), part), stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=err, text=True, env=env,
                                         start_new_session=True)
            except BaseException:
                err.close()
                raise
            children.append((child, err))
            try:
                child.stdin.write(request)
                child.stdin.close()
            except BrokenPipeError:  # the child ended at once: its exit code says so below
                pass
        while any(child.poll() is None for child, _ in children):
            try:
                next(c for c, _ in children if c.poll() is None).wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if check is not None:
                    check()
        if check is not None:
            check()  # (a signal that came as the children ended)
    except BaseException:
        for child, _ in children:
            _kill_group(child)
            child.wait()
        raise
    finally:
        interrupt.forget(token)
        for child, _ in children:  # a grandchild left by a child that was killed
            _kill_group(child)
        shutil.rmtree(work, ignore_errors=True)
        os.close(lock)
        failed = [_failure(child, err) for child, err in children if child.returncode != 0]
        for _, err in children:
            err.close()
    if failed:
        if log is not None:
            log(f"warning: compiling the kernels in a child process failed ({failed[0]}); compiling them in this one")
        return False
    try:
        Path(folder, MARK).touch()
        if _wide(game):
            Path(folder, WIDE_MARK).touch()
        if big:
            Path(folder, BIG_MARK).touch()
        if dense:
            Path(folder, DENSE_MARK.format(dense)).touch()
    except OSError:  # (no room for the mark: the build loads what it can and compiles the rest)
        return False
    return kernels_cached(game, dense, big)


#: The start of the name of the children's work folder
#: (:func:`~dobutsu_tb.tablebase.output.make_work_folder`: the parent's process id follows).
_WORK_PREFIX = "dobutsu-tb-precompile-"


def _remove_orphans() -> None:
    """Remove the children's work folders that a process killed by SIGKILL left in the folder for
    temporary files (:func:`~dobutsu_tb.tablebase.output.remove_orphans`; only folders with a lock
    file: those of the code before 2026-12-08 have none). On Linux its children died with it
    (:func:`_die_with_parent`)."""
    remove_orphans(tempfile.gettempdir(), _WORK_PREFIX, need_lock=True)


def _die_with_parent(parent) -> None:
    """Have Linux kill this child (SIGKILL) when its parent ends, however it ends: a parent killed
    by SIGKILL cannot kill its children, which then compiled on for half a minute, held by no one
    (``PR_SET_PDEATHSIG``; elsewhere, or where the system refuses it, nothing). Exits at once if
    ``parent`` (a process id) has already ended."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            armed = ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            armed = False
        if not armed:
            return  # (the parent's handlers are all there is)
        # (the parent ended before the child was armed; only here: elsewhere the parent may be a
        # launcher's child, and nothing is armed anyway)
        if os.getppid() != int(parent):
            os._exit(1)


def _kill_group(child: subprocess.Popen) -> None:
    """Kill a child and every process of its session (its own children)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(child.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            child.kill()
    except (ProcessLookupError, PermissionError):  # (all gone already)
        pass


def _failure(child: subprocess.Popen, err) -> str:
    """How a child that failed ended, and the last line it wrote on stderr."""
    err.seek(0)
    lines = [line for line in err.read().splitlines() if line.strip()]
    how = f"exit code {child.returncode}"
    if child.returncode is not None and child.returncode < 0:
        try:
            how = f"killed by {signal.Signals(-child.returncode).name}"
        except ValueError:  # (a signal number Python has no name for)
            pass
    return how + (f": {lines[-1].strip()[:200]}" if lines else "")


#: The children's shares of the kernels (:func:`_main`).
PARTS = ("enumeration", "analysis")

#: The child's code: the parent's import path in place of the one ``python`` starts with, which
#: puts the current folder first (a ``numba.py`` there would run); then :func:`_main` or
#: :func:`_enumerate_plainly`.
_CHILD = ("import os, sys; sys.path[:] = sys.argv[1].split(os.pathsep); "
          "from dobutsu_tb.tablebase import precompile; precompile._die_with_parent(int(sys.argv[2])); "
          "getattr(precompile, sys.argv[3])(*sys.argv[4:])")


def _python_command(function: str, *args: str) -> list:
    """The command that runs this module's ``function(*args)`` in a new Python (:data:`_CHILD`)."""
    return [sys.executable, "-c", _CHILD, os.pathsep.join(p for p in sys.path if p), str(os.getpid()), function,
            *args]


def _child_command(work: str, part: str) -> list:
    return _python_command("_main", work, part)


def tiny_start(variant, start=None):
    """A position with the royal pieces alone on the board, no hands, where the variant's start
    (or else ``start``) has them; None if both such positions are terminal."""
    from dobutsu_tb.tablebase.game.layout import NONTERMINAL
    from dobutsu_tb.tablebase.game.position import Position

    royal = variant.pieces.index(variant.royal) + 1
    for source in (Position.start(variant), start):
        if source is not None:
            tiny = Position(tuple(c if c & 7 == royal else 0 for c in source.board), None, source.turn, variant)
            if tiny.game.classify(tiny.state()) == NONTERMINAL:
                return tiny
    return None


def _read_request():
    """The variant and the tiny builds' start, read from stdin (:func:`_request_line`): (the
    request's text, the variant, the start)."""
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.game.variant import variant_from_json

    text = sys.stdin.read()
    variant = variant_from_json(_request_line(text, 0))
    given = _request_line(text, 1)
    start = tiny_start(variant, Position.from_text(given, variant) if given else None)
    if start is None:
        sys.exit("no start of the royal pieces alone that is not terminal")
    return text, variant, start


def _request_line(text: str, k: int) -> str:
    """Line ``k`` of a request, stripped, or ``""``: 0 the variant (``Variant.to_json``), 1 the
    build's start, 2 the dtype of a dense table's slots, 3 ``big`` for the paths of big builds
    (:data:`BIG_MARK`); each but the first may be empty."""
    lines = text.split("\n")
    return lines[k].strip() if len(lines) > k else ""


def _dense_expected(game, dtype: str) -> int | None:
    """Non-terminal positions to expect for a dense table (85 % full) whose slots have ``dtype``
    (int32 or int64): the smallest such table that is not a power of two a shard; None where it
    would have more than 2**25 slots (its kernels compile in the build then)."""
    import numpy as np

    from dobutsu_tb.encoding import config
    from dobutsu_tb.encoding.compact import TABLE_SLOT_GRAIN, dense_table_slots, slot_dtype
    from dobutsu_tb.encoding.compact_layout import L_TAG_BITS, make_table_layout, shards_for

    bits, shards = game.layout["MAX_KEY_BITS"], shards_for(config.THREADS)
    for k in range(14, 26):
        per = (1 << (k - 1)) + TABLE_SLOT_GRAIN
        if per * shards > 1 << 25 or k + shards.bit_length() - 1 > bits:
            return None
        layout = make_table_layout(bits, 0, per * shards, shards)
        if np.dtype(slot_dtype(int(layout[L_TAG_BITS]), True)).name == dtype:
            expected = int(per * shards * 0.85) - shards * TABLE_SLOT_GRAIN // 2
            if dense_table_slots(expected, 0.85, shards, bits) == per * shards:
                return expected
    return None


def _main(work: str, part: str) -> None:
    """A child: compile its share (``part``, one of :data:`PARTS`) of the kernels of the variant
    read from stdin (:func:`_read_request`), building tiny tablebases in ``work`` (the parent
    removes it).

    ``enumeration`` enumerates the tiny game (its royal pieces alone) as a build does and grows its
    table and a set of terminal positions (as for a start of unknown counts); for keys long enough
    that small tables have uint64 slots (:func:`_wide`), it also builds a tiny game in a table of
    the uint32 slots of a big one.
    For a big build (the request's fourth line, :data:`BIG_MARK`) it also enumerates in two
    partitions (the terminal positions of the second counted in a later pass over the table, and
    set aside on disk), grows the table as one past 2**31 slots, doubles the set's partitions (as
    when it outgrows a budget), and with a dense table's dtype builds one.

    ``analysis`` takes the rest, on the same enumerations made without numba's JIT in a
    process of its own (:func:`_enumerate_plainly`: a fraction of a second), so that it need not
    wait for the other child's kernels: a plain tiny build, and by hand the paths a tiny game does
    not take: one ply of the analysis from the start (a game of royal pieces alone may have no
    decided position to start from), the records made in three key ranges and the keys of positions
    without a move. For a big build, also the analysis grouped by region, a dense table's and a
    tiny build with two-byte values."""
    from dobutsu_tb.encoding.jit import saves_failed

    text, variant, start = _read_request()
    os.makedirs(work, exist_ok=True)
    if part == "enumeration":
        _compile_enumeration(start, _request_line(text, 2), _request_line(text, 3) == "big", work)
    elif part == "analysis":
        _compile_analysis(text, variant, start, work, _request_line(text, 3) == "big")
    else:
        sys.exit(f"no such share of the kernels: {part!r}")
    if saves_failed():  # (the mark would say that kernels are cached which are not)
        sys.exit("the kernel cache could not save every kernel")


@contextlib.contextmanager
def _remap_in_int64(wide: bool):
    """With ``wide``, tables grow as one of more than ``2**31`` slots does: each old slot's new place
    in int64 (:func:`~dobutsu_tb.encoding.compact.remap_dtype`), so that those kernels compile too."""
    import numpy as np

    from dobutsu_tb.encoding import compact

    real = compact.remap_dtype
    if wide:
        compact.remap_dtype = lambda capacity: np.int64
    try:
        yield
    finally:
        compact.remap_dtype = real


def _compile_enumeration(start, dense: str = "", big: bool = True, work: str | None = None) -> None:
    import numpy as np

    from dobutsu_tb.encoding import config, sorting
    from dobutsu_tb.encoding.compact_set import CompactSet
    from dobutsu_tb.tablebase import enumeration
    from dobutsu_tb.tablebase.enumeration import CLASS_MASK, enumerate_positions

    game, bits, shift = start.game, start.game.layout["MAX_KEY_BITS"], start.game.layout["KEY_SHIFT"]
    # The radix sort's kernel is the other child's to compile (this one compiles the longest,
    # _insert): its windows in key order sort with numpy's, so as not to compile it twice at once.
    sorting.METHOD = "numpy"
    # each old slot's new place in int32, and with ``big`` in int64 (past 2**31 slots)
    for wide_remap in (False, True) if big else (False,):
        with _remap_in_int64(wide_remap):
            enum = enumerate_positions(game, start.state())
            enumeration.regrow_tags(enum.tags, enum.table.grow(2 * len(enum.table)), enum.table.capacity)
    expected = _narrow_expected(game)
    if expected:  # a big table's uint32 slots, grown; and a table of uint64 slots grown into them
        for wide_remap in (False, True) if big else (False,):
            with _remap_in_int64(wide_remap):
                enum = enumerate_positions(game, start.state(), expected=(expected, 1))
                enum.table.grow(2 * enum.table.capacity)
                enum = enumerate_positions(game, start.state())
                enum.table.grow(expected)
    terminal = CompactSet(1, bits, shift, config.SET_LOAD_FACTOR, config.THREADS)
    terminal.grow(2 * terminal.room() + 2)  # (as for a start of unknown counts)
    if not big:
        return
    enumeration.count_terminal_partitions(enumerate_positions(game, start.state(), terminal_parts=2))
    # (the other partition's terminal children set aside: in ``work``, which the parent removes
    # when it kills this child)
    with tempfile.TemporaryDirectory(dir=work) as folder:
        enumeration.count_terminal_partitions(enumerate_positions(game, start.state(), terminal_parts=2,
                                                                  spill_dir=folder))
    enumeration._deal_by_shard(np.zeros(1, np.int64), 1, terminal.layout,  # (a tiny game may set none aside)
                               np.zeros((1, terminal.n_shards, 1), np.int64),
                               enumeration.thread_counters(1, terminal.n_shards))
    smaller = CompactSet(1, bits, shift, config.SET_LOAD_FACTOR, config.THREADS)  # partitions doubled
    game.jitted(enumeration)._keep_partition_zero(game.rules_array, terminal.buf, terminal.layout, smaller.buf,
                                                  smaller.layout, smaller.counts, 1, np.zeros(CLASS_MASK + 1, np.int64))
    del enum, terminal, smaller
    expected = _dense_expected(game, dense) if dense else None
    if expected:  # a dense table, its terminal positions in two partitions (counted in a second pass)
        enumeration.count_terminal_partitions(enumerate_positions(game, start.state(), expected=(expected, 1),
                                                                  terminal_parts=2, table_load=0.85))


def _narrow_expected(game) -> int | None:
    """For keys long enough that a tiny build's table has uint64 slots (:func:`_wide`), the
    positions to expect for a table of the uint32 slots of a big one; None for other keys, or
    where such a table would have more than 2**25 slots (they compile in the build then)."""
    from dobutsu_tb.encoding.compact_layout import MAX_NARROW_REMAINDER

    if not _wide(game):
        return None
    expected = int(0.7 * 2 ** max(0, game.layout["MAX_KEY_BITS"] - MAX_NARROW_REMAINDER))
    return expected if expected <= 1 << 24 else None


#: The enumerations that :func:`_enumerate_plainly` makes: a file name, and
#: :func:`~dobutsu_tb.tablebase.enumeration.enumerate_positions`'s ``terminal_parts`` and whether
#: the table has a big one's uint32 slots (:func:`_narrow_expected`; only where it says so) or is
#: dense (only where the request asks for it).
_PLAIN = {"one-partition.pickle": (1, False), "narrow-slots.pickle": (1, True), "dense.pickle": (2, "dense")}


def _enumerate_plainly(work: str) -> None:
    """The analysis child's child, run with ``NUMBA_DISABLE_JIT=1``: the tiny game's enumerations
    of :data:`_PLAIN` into ``work``, each as the fields of its
    :class:`~dobutsu_tb.tablebase.enumeration.Enumeration` but the game, pickled."""
    import dataclasses
    import pickle

    from dobutsu_tb.tablebase.enumeration import enumerate_positions

    text, _, start = _read_request()
    dense = _request_line(text, 2)
    for name, (parts, narrow) in _PLAIN.items():
        expected = (_dense_expected(start.game, dense) if dense else None) if narrow == "dense" else \
            _narrow_expected(start.game)
        if narrow and expected is None:
            continue
        enum = enumerate_positions(start.game, start.state(), expected=(expected, 1) if narrow else None,
                                   terminal_parts=parts, table_load=0.85 if narrow == "dense" else None)
        fields = {f.name: getattr(enum, f.name) for f in dataclasses.fields(enum) if f.name != "game"}
        with open(os.path.join(work, name), "wb") as f:
            pickle.dump(fields, f, protocol=pickle.HIGHEST_PROTOCOL)


def _compile_analysis(text: str, variant, start, work: str, big: bool = True) -> None:
    import pickle

    import numpy as np

    from dobutsu_tb.encoding import routing, sorting
    from dobutsu_tb.tablebase import build, retrograde
    from dobutsu_tb.tablebase.build import _keys_with_value, build_tablebase, record_blocks
    from dobutsu_tb.tablebase.enumeration import Enumeration
    from dobutsu_tb.tablebase.writer import RECORD_VALUE_BITS

    plain = subprocess.run(_python_command("_enumerate_plainly", work), input=text, text=True, capture_output=True,
                           env={**os.environ, "NUMBA_DISABLE_JIT": "1"}, check=False)
    if plain.returncode != 0:
        lines = [line for line in plain.stderr.splitlines() if line.strip()]
        sys.exit(f"the enumeration without the JIT failed: {lines[-1] if lines else plain.returncode}")
    game, shift = start.game, start.game.layout["KEY_SHIFT"]
    sorting.sort_method()  # (the radix sort's kernel, timed against numpy's: this child's to compile)

    def enumerated(name: str = "one-partition.pickle") -> Enumeration:
        with open(os.path.join(work, name), "rb") as f:
            return Enumeration(game=game, **pickle.load(f))

    def solved_and_recorded(enum: Enumeration, passes: int) -> None:
        """Solve ``enum``, then make its records in ``passes`` key ranges, its values' histogram and
        the keys of its positions without a move."""
        solution = retrograde.solve(enum)
        solution.values = retrograde.contiguous_values(solution.values)
        for _ in record_blocks(enum.table, solution, shift, passes).blocks():
            pass
        build.value_histogram(enum.table, solution, RECORD_VALUE_BITS)
        _keys_with_value(enum.table.slots, enum.table.layout, solution.values, 1, np.zeros(1, np.int64))

    # The builds' enumeration is the one made without the JIT (what a build of this start enumerates)
    build.enumerate_positions = lambda *args, **kwargs: enumerated()
    build_tablebase(Path(work) / "plain.h5", start, progress=False, variant=variant, memory_check=False)
    enum = enumerated()
    cells = retrograde.seed_values(enum)
    slot = enum.table.lookup([start.key()])
    retrograde.propagate_ply(enum, cells, 1, slot.astype(retrograde.slot_dtype(enum.table.capacity)))
    solved_and_recorded(enumerated(), 3)
    big_table = "one-partition.pickle"  # (a table with a big one's slots)
    if _narrow_expected(game):  # the tiny builds' tables had uint64 slots: a big table's are uint32
        big_table = "narrow-slots.pickle"
        solved_and_recorded(enumerated(big_table), 1)
    del enum, cells
    if not big:
        return
    grouping = routing.GROUP_FROM, routing.REGION_BYTES  # a big table's plies, grouped by region
    routing.GROUP_FROM, routing.REGION_BYTES = 0, 1 << 12
    try:
        retrograde.solve(enumerated(big_table))
    finally:
        routing.GROUP_FROM, routing.REGION_BYTES = grouping
    if os.path.exists(os.path.join(work, "dense.pickle")):  # a dense table, its terminal positions in two passes
        solved_and_recorded(enumerated("dense.pickle"), 2)
    retrograde.LONG_DTM = 3  # two-byte values (what a DTM of 254 plies or more needs)
    build_tablebase(Path(work) / "wide.h5", start, progress=False, variant=variant, memory_check=False)
