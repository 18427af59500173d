"""Compile the kernels of the board shapes the test suite builds on, into its kernel cache, on the
CPU the tests leave idle.

conftest.py starts this at the beginning of a run of most of the suite, as a background process
of its own session: ``python tests/prewarm.py PARENT_PID``. With the cache empty (a fresh clone,
CI), the suite compiled on one CPU at a time while the other idled: 20 min 37 s without this
process, 17 min 37 s with it (docs/experiments.md, "Compiling on the idle CPU while the tests
run"). For each shape it compiles the build kernels
(:func:`dobutsu_tb.tablebase.precompile.compile_kernels`, as a build does), then builds the
tablebase of the royal pieces alone and runs the front ends on it, before the tests that need
them get there. A test that gets there first compiles what it needs itself, as without this
process; a shape already compiled is skipped. What fails here is left for the tests to find.

The order is the order in which the test files first need each shape. The standard shape
(3 files x 4 ranks) is not here: the first test compiles it at once.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time

#: (variant, dense table's slot dtype or ""), in the order the test files first build them.
SHAPES = (
    ("dobutsu-3x3", ""),  # test_build_safety.py, test_cluster.py, test_export.py
    ("dobutsu-5x3", ""),  # test_cluster.py
    ("dobutsu", "int32"),  # a dense table: test_out_of_core.py (dobutsu-nodrops, of the same shape)
    ("dobutsu-6x3", ""),  # test_rules.py, test_variants.py
    ("dobutsu-4x4", ""),  # test_rules.py, test_variants.py
)


class _SameSession(subprocess.Popen):
    """``subprocess.Popen`` that keeps the child in this process's session, so in its process group
    (conftest.py kills the group at the session's end) and its autogroup (:func:`lowest_priority`)."""

    def __init__(self, *args, **kwargs):
        kwargs["start_new_session"] = False
        super().__init__(*args, **kwargs)


def lowest_priority() -> bool:
    """Run this process, and the children it starts, (almost) only on a CPU the tests leave idle;
    False if that cannot be had.

    With the kernel's autogroups (Linux, ``/proc/sys/kernel/sched_autogroup_enabled``) each session
    gets an equal share of the CPUs whatever its processes' nice values, and ``compile_kernels``
    starts each child in a session of its own: so, with nice 19 alone, the compiling took a CPU
    from the tests (the suite's first build, compiling the standard shape beside it, took 97 s in
    place of 44-53 s: docs/experiments.md). So the children stay in this session, and its
    autogroup gets nice 19 (weight 15 against the tests' 1024); each process gets nice 19 too,
    for systems without autogroups. Its autogroup is this process's own only when it leads its
    session (as conftest.py starts it): otherwise it is left alone, and so is the prewarming."""
    os.nice(19)
    subprocess.Popen = _SameSession
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            autogroups = f.read().strip() == "1"
    except OSError:  # (not Linux, or a kernel without autogroups: nice values rule)
        return True
    if not autogroups:
        return True
    if os.getsid(0) != os.getpid():
        return False
    for _ in range(20):
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write("19")
            return True
        except OSError as exc:  # (EAGAIN: another autogroup's nice was set in the last 100 ms)
            if exc.errno != errno.EAGAIN:
                return False
            time.sleep(0.2)
    return False


def end_with_parent(parent: int) -> None:
    """End this process and its children once ``parent`` (the tests' process) has gone: a run
    killed before its end cannot stop this one (a thread that looks every second)."""
    import signal

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def front_ends(variant) -> None:
    """Build the tablebase of ``variant``'s royal pieces alone and run the front ends the tests
    run on such files (probe, line, verify, stats, export), for their kernels."""
    import tempfile

    from click.testing import CliRunner

    from dobutsu_tb.analysis.cli import main as cli
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.precompile import tiny_start

    start = tiny_start(variant)
    if start is None:  # (its royal pieces alone are terminal: the tests' own builds compile it)
        return
    with tempfile.TemporaryDirectory(prefix="dobutsu-tb-prewarm-") as work:
        path = os.path.join(work, "t.h5")
        build_tablebase(path, start, progress=False, variant=variant)
        runner = CliRunner()
        for args in (["probe", start.text()], ["probe", start.fen()], ["line", start.text(), "--json"], ["verify"],
                     ["stats", "--json"], ["export", "--out", os.path.join(work, "t.parquet")]):
            runner.invoke(cli, [*args, "--tb", path])


def main(parent: int) -> None:
    if not lowest_priority():
        return
    end_with_parent(parent)
    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import get_variant

    for name, dense in SHAPES:
        try:
            variant = get_variant(name)
            # (False for a shape already compiled, which is skipped)
            if precompile.compile_kernels(game_of(variant), dense=dense) and not dense:
                front_ends(variant)
        except Exception:  # (the tests meet it, with its message)
            continue


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid())
