"""Compiling a variant's kernels in a child process before a build.

numba compiles a kernel on its first call and keeps what compiling took for the life of the
process: about 220 MiB for a build's kernels (a tiny build: 390 MiB resident with the kernel
cache empty, 171 MiB with it filled). A build that compiled its own kernels held that beside its
tables: from a fresh clone the standard build peaked at 1.53 GiB against 1.38 GiB with the cache
filled, and a build with ``--max-memory 1.2G`` that compiled its terminal-partition kernel at its
peak went to 1.35 GiB, over its budget. So, when the variant's kernels are not in the cache yet,
:func:`compile_kernels` has a child process compile them with tiny builds of the variant (its
royal pieces alone, and by hand each path a tiny game does not take: :func:`_main`), which
leaves a mark in the variant's cache folder; the build then loads its kernels from the cache
(docs/building.md, "Memory").

The kernels depend on the variant's rules and the sources only, never on the sizes of the tables,
so the tiny builds compile the real one's. A kernel that they missed would compile in the build,
as every kernel did before.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from dobutsu_tb.encoding import interrupt

#: The file that marks a shape's cache folder as holding every kernel of a build, and the one that
#: marks it as holding them for the uint64 slots of small tables of long keys too
#: (:func:`~dobutsu_tb.encoding.compact.slot_dtype`).
MARK = "compiled-by-precompile"
WIDE_MARK = "compiled-by-precompile-wide-slots"
#: Set in the child's environment: a build there compiles its own kernels (no grandchild).
CHILD_ENV = "DOBUTSU_TB_PRECOMPILING"


def _folder(game) -> str:
    import numba

    return os.path.join(numba.config.CACHE_DIR, game.cache_key)


def _wide(game) -> bool:
    """Whether a small table of ``game``'s keys has uint64 slots (its kernels compile for both)."""
    from dobutsu_tb.encoding.compact_layout import MAX_NARROW_REMAINDER, MIN_SLOT_BITS

    return game.layout["MAX_KEY_BITS"] - (MIN_SLOT_BITS + 1) > MAX_NARROW_REMAINDER


def kernels_cached(game) -> bool:
    """Whether a child process has compiled ``game``'s build kernels into the kernel cache (those of
    its board's shape, for the slots its tables have)."""
    marks = (MARK, WIDE_MARK) if _wide(game) else (MARK,)
    return all(os.path.exists(os.path.join(_folder(game), mark)) for mark in marks)


def compile_kernels(game, log: Callable[[str], None] | None = None, check: Callable[[], None] | None = None,
                    start=None) -> bool:
    """Compile ``game``'s build kernels in a child process, unless they are cached already.

    Nothing happens in the child of such a process, with numba's JIT disabled, or when the cache
    folder cannot be written (the kernels are then compiled where they run, as before). A child
    that fails costs nothing but its time: the build compiles what it needs itself.

    Parameters
    ----------
    game : Game
        The variant's rules.
    log : callable, optional
        Called with a line for people: that the kernels are being compiled, or why the child failed.
    check : callable, optional
        Called every 0.2 s while the child runs; what it raises (an interrupt) stops the child
        and is raised again.
    start : Position, optional
        The build's start: its royal pieces are the tiny builds' start when the variant's own
        start would give a terminal one.

    Returns
    -------
    bool
        Whether a child compiled the kernels.
    """
    import numba

    if os.environ.get(CHILD_ENV) or numba.config.DISABLE_JIT or kernels_cached(game):
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
        log(f"compiling the kernels for boards of {v.files} files x {v.ranks} ranks (once per version of the program "
            f"and board shape, about half a minute)")
    work = tempfile.mkdtemp(prefix="dobutsu-tb-precompile-")  # the child's builds: ours to remove, killed or not
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(_child_command(work), stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=err, text=True,
                                 env={**os.environ, CHILD_ENV: "1",  # the same folder, whatever the environment
                                      "DOBUTSU_TB_CACHE": os.path.dirname(numba.config.CACHE_DIR)})

        def kill():
            child.kill()
            shutil.rmtree(work, ignore_errors=True)

        token = interrupt.at_exit(kill)  # a process ended by a signal leaves no child and no file
        try:
            try:
                child.stdin.write(game.variant.to_json() + "\n" + (start.text() if start is not None else ""))
                child.stdin.close()
            except BrokenPipeError:  # the child ended at once: its exit code says so below
                pass
            while True:
                try:
                    child.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if check is not None:
                        check()
        except BaseException:
            child.kill()
            child.wait()
            raise
        finally:
            interrupt.forget(token)
            shutil.rmtree(work, ignore_errors=True)
        if child.returncode != 0:
            err.seek(0)
            lines = [line for line in err.read().splitlines() if line.strip()]
            how = f"exit code {child.returncode}"
            if child.returncode < 0:
                try:
                    how = f"killed by {signal.Signals(-child.returncode).name}"
                except ValueError:  # (a signal number Python has no name for)
                    pass
            if log is not None:
                log(f"warning: compiling the kernels in a child process failed ({how}"
                    + (f": {lines[-1].strip()[:200]}" if lines else "") + "); compiling them in this one")
            return False
    return kernels_cached(game)


#: The child's code: the parent's import path in place of the one ``python`` starts with, which
#: puts the current folder first (a ``numba.py`` there would run); then :func:`_main`.
_CHILD = ("import os, sys; sys.path[:] = sys.argv[1].split(os.pathsep); "
          "from dobutsu_tb.tablebase.precompile import _main; _main(sys.argv[2])")


def _child_command(work: str) -> list:
    return [sys.executable, "-c", _CHILD, os.pathsep.join(p for p in sys.path if p), work]


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


def _main(work: str) -> None:
    """The child: compile the kernels of the variant read from stdin (``Variant.to_json``, then a
    line with the build's start), building tiny tablebases in ``work`` (the parent removes it).

    Besides a plain tiny build and one with two-byte values (for keys that leave room for them in
    a sort record: at most 48 bits), it takes by hand the paths a tiny
    game does not: one ply of the analysis from the start (a game of royal pieces alone may have
    no decided position to start from), the terminal positions counted in two partitions, the
    records made in three key ranges, the keys of positions without a move, the table and the
    set of terminal positions grown (as for a start of unknown counts), and the set's partitions
    doubled (as when it outgrows a budget)."""
    import numpy as np

    from dobutsu_tb.encoding import config
    from dobutsu_tb.encoding.compact_set import CompactSet
    from dobutsu_tb.tablebase import enumeration, retrograde
    from dobutsu_tb.tablebase.build import _keys_with_value, build_tablebase, record_blocks
    from dobutsu_tb.tablebase.enumeration import CLASS_MASK, count_terminal_partitions, enumerate_positions
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.game.variant import variant_from_json
    from dobutsu_tb.tablebase.writer import RECORD_VALUE_BITS, WIDE_VALUE_BITS, fits_record

    lines = sys.stdin.read().split("\n")
    variant = variant_from_json(lines[0])
    start = tiny_start(variant, Position.from_text(lines[1], variant) if len(lines) > 1 and lines[1] else None)
    if start is None:
        sys.exit("no start of the royal pieces alone that is not terminal")
    game, bits, shift = start.game, start.game.layout["MAX_KEY_BITS"], start.game.layout["KEY_SHIFT"]
    build_tablebase(Path(work) / "plain.h5", start, progress=False, variant=variant, memory_check=False)
    enum = enumerate_positions(game, start.state())
    cells = retrograde.seed_values(enum)
    slot = enum.table.lookup([start.key()])
    retrograde.propagate_ply(enum, cells, 1, slot.astype(retrograde.slot_dtype(enum.table.capacity)))
    enum = enumerate_positions(game, start.state(), terminal_parts=2)
    count_terminal_partitions(enum)
    solution = retrograde.solve(enum)
    solution.values = np.ascontiguousarray(solution.values)
    for _ in record_blocks(enum.table, solution, shift, RECORD_VALUE_BITS, 3).blocks():
        pass
    _keys_with_value(enum.table.slots, enum.table.layout, solution.values, 1, np.zeros(1, np.int64))
    enum.table.grow(2 * len(enum.table))
    terminal = CompactSet(1, bits, shift, config.SET_LOAD_FACTOR, config.THREADS)
    terminal.grow(2 * terminal.room() + 2)
    smaller = CompactSet(1, bits, shift, config.SET_LOAD_FACTOR, config.THREADS)  # partitions doubled
    game.jitted(enumeration)._keep_partition_zero(game.rules_array, terminal.buf, terminal.layout, smaller.buf,
                                                  smaller.layout, smaller.counts, 1, np.zeros(CLASS_MASK + 1, np.int64))
    del enum, cells, solution, terminal, smaller
    if _wide(game):  # the tiny builds' tables had uint64 slots: a big table's are uint32
        from dobutsu_tb.encoding.compact_layout import MAX_NARROW_REMAINDER

        expected = int(0.7 * 2 ** max(0, bits - MAX_NARROW_REMAINDER))
        if expected <= 1 << 24:  # (a table of 4 bytes a slot: at most 2**25 slots here)
            enum = enumerate_positions(game, start.state(), expected=(expected, 1))
            solution = retrograde.solve(enum)
            solution.values = np.ascontiguousarray(solution.values)
            for _ in record_blocks(enum.table, solution, shift, RECORD_VALUE_BITS, 1).blocks():
                pass
            del enum, solution
    if fits_record(bits, WIDE_VALUE_BITS):  # (wider keys leave no room for them: such a build is refused)
        retrograde.LONG_DTM = 3  # two-byte values (what a DTM of 254 plies or more needs)
        build_tablebase(Path(work) / "wide.h5", start, progress=False, variant=variant, memory_check=False)
    Path(_folder(game), MARK).touch()
    if _wide(game):
        Path(_folder(game), WIDE_MARK).touch()
