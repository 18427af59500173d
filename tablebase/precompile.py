"""Compiling a variant's kernels in a child process before a build.

numba compiles a kernel on its first call and keeps what compiling took for the life of the
process: about 220 MiB for a build's kernels (a tiny build: 390 MiB resident with the kernel
cache empty, 171 MiB with it filled). A build that compiled its own kernels held that beside its
tables: from a fresh clone the standard build peaked at 1.53 GiB against 1.38 GiB with the cache
filled, and a build with ``--max-memory 1.2G`` that compiled its terminal-partition kernel at its
peak went to 1.35 GiB, over its budget. So, when the variant's kernels are not in the cache yet,
:func:`compile_kernels` has a child process compile them with tiny builds of the variant (its
royal pieces alone on their start squares: plainly, with the terminal positions counted in two
partitions, and with two-byte values), which leaves a mark in the variant's cache folder; the
build then loads every kernel from the cache (docs/building.md, "How fast").

The kernels depend on the variant's rules and the sources only, never on the sizes of the tables,
so the tiny builds compile exactly the kernels of the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from dobutsu_tb.encoding import interrupt

#: The file that marks a variant's cache folder as holding every kernel of a build.
MARK = "compiled-by-precompile"
#: Set in the child's environment: a build there compiles its own kernels (no grandchild).
CHILD_ENV = "DOBUTSU_TB_PRECOMPILING"


def _folder(game) -> str:
    import numba

    return os.path.join(numba.config.CACHE_DIR, game.cache_key)


def kernels_cached(game) -> bool:
    """Whether a child process has compiled ``game``'s build kernels into the kernel cache."""
    return os.path.exists(os.path.join(_folder(game), MARK))


def compile_kernels(game, log: Callable[[str], None] | None = None, check: Callable[[], None] | None = None) -> bool:
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
        log(f"compiling the kernels for {game.variant.name} (once per version of the program, about 20 s)")
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(_child_command(), stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=err, text=True,
                                 env={**os.environ, CHILD_ENV: "1",  # the same folder, whatever the environment
                                      "DOBUTSU_TB_CACHE": os.path.dirname(numba.config.CACHE_DIR)})
        token = interrupt.at_exit(child.kill)  # a process ended by a signal leaves no child
        try:
            try:
                child.stdin.write(game.variant.to_json())
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
        if child.returncode != 0:
            err.seek(0)
            lines = [line for line in err.read().splitlines() if line.strip()]
            if log is not None:
                log(f"warning: compiling the kernels in a child process failed (exit code {child.returncode}"
                    + (f": {lines[-1].strip()[:200]}" if lines else "") + "); compiling them in this one")
            return False
    return kernels_cached(game)


def _child_command() -> list:
    return [sys.executable, "-m", __name__]


def tiny_start(variant):
    """The variant's start position with its royal pieces alone on the board, no hands."""
    from dobutsu_tb.tablebase.game.position import Position

    start = Position.start(variant)
    royal = variant.pieces.index(variant.royal) + 1
    return Position(tuple(c if c & 7 == royal else 0 for c in start.board), None, start.turn, variant)


def _main() -> None:
    """The child: compile the kernels of the variant read from stdin (``Variant.to_json``)."""
    from dobutsu_tb.tablebase import retrograde
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions, enumerate_positions
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import variant_from_json

    variant = variant_from_json(sys.stdin.read())
    game = game_of(variant)
    start = tiny_start(variant)
    with tempfile.TemporaryDirectory() as tmp:
        build_tablebase(Path(tmp) / "plain.h5", start, progress=False, variant=variant, memory_check=False)
        enum = enumerate_positions(game, start.state(), terminal_parts=2)
        count_terminal_partitions(enum)
        del enum
        retrograde.LONG_DTM = 3  # two-byte values (what a DTM of 254 plies or more needs)
        build_tablebase(Path(tmp) / "wide.h5", start, progress=False, variant=variant, memory_check=False)
    Path(_folder(game), MARK).touch()


if __name__ == "__main__":
    _main()
