"""Compile the build kernels of the board shapes the test suite builds on, into its kernel cache.

conftest.py starts this at the beginning of a whole run, as a background process at the lowest
priority: with the cache empty (a fresh clone, CI), about a third of the suite's time was
numba compiling, on one core at a time, while the other core idled. Here each shape compiles
(:func:`dobutsu_tb.tablebase.precompile.compile_kernels`, as a build does) before the tests that
need it reach it; a test that gets there first compiles what it needs itself, as without this
process, and a shape already cached costs nothing. Nothing the tests assert depends on it.

The order is the order in which the test files first need each shape. The standard shape
(3 files x 4 ranks) is not here: the first test compiles it at once.
"""

from __future__ import annotations

import os
import subprocess

#: (variant, dense table's slot dtype or ""), in the order the test files first build them.
SHAPES = (
    ("dobutsu-5x3", ""),  # test_cluster.py
    ("dobutsu-3x3", ""),  # test_export.py
    ("dobutsu", "int32"),  # test_out_of_core.py
    ("dobutsu-6x3", ""),  # test_rules.py, test_variants.py
    ("dobutsu-4x4", ""),
)


class _SameSession(subprocess.Popen):
    """``subprocess.Popen`` that keeps the child in this process's session, so in its process group
    (conftest.py kills the group at the session's end) and its scheduling group (below)."""

    def __init__(self, *args, **kwargs):
        kwargs["start_new_session"] = False
        super().__init__(*args, **kwargs)


def lowest_priority() -> None:
    """Run this process, and the children it starts, only on a CPU the tests leave idle.

    With the kernel's autogroups (Linux, ``/proc/sys/kernel/sched_autogroup_enabled``) each session
    shares the CPUs equally with every other whatever its processes' nice values, and
    ``compile_kernels`` starts each child in a session of its own: without this, the compiling
    took a CPU from the tests (the suite's first build, compiling the standard shape beside it,
    took 97 s in place of 39). So the children stay in this session, whose autogroup gets the
    lowest priority, and each process the nice value 19 where autogroups are off."""
    os.nice(19)
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:  # (not Linux, or no autogroups)
        pass
    subprocess.Popen = _SameSession


def front_ends(variant) -> None:
    """Build the tablebase of ``variant``'s royal pieces alone and run the front ends the tests
    run on such files (probe, line, verify, stats, export), for their kernels: what fails here
    is the tests' to find."""
    import tempfile

    from click.testing import CliRunner

    from dobutsu_tb.analysis.cli import main as cli
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.precompile import tiny_start

    start = tiny_start(variant)
    with tempfile.TemporaryDirectory(prefix="dobutsu-tb-prewarm-") as work:
        path = os.path.join(work, "t.h5")
        build_tablebase(path, start, progress=False, variant=variant)
        runner = CliRunner()
        for args in (["probe", start.text()], ["probe", start.fen()], ["line", start.text(), "--json"], ["verify"],
                     ["stats", "--json"], ["export", "--out", os.path.join(work, "t.parquet")]):
            runner.invoke(cli, [*args, "--tb", path])


def main() -> None:
    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import get_variant

    lowest_priority()
    for name, dense in SHAPES:
        variant = get_variant(name)
        precompile.compile_kernels(game_of(variant), dense=dense)
        if not dense:
            front_ends(variant)


if __name__ == "__main__":
    main()
