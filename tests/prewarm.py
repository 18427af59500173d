"""Compile the kernels of the board shapes the test suite builds on, into its kernel cache, on the
CPU the tests leave idle.

conftest.py starts this at the beginning of a run of most of the suite, as a background process
of its own session: ``python tests/prewarm.py PARENT_PID FOLDER`` (FOLDER: its temporary files,
and the files by which the tests hold it between two steps: :func:`hold`). With the cache empty
(a fresh clone, CI), the suite compiled on one CPU at a time while the other idled: 20 min 37 s
without this process, 17 min 37 s with it on 2026-12-07 evening; 15 min 43 s against 15 min 7 s
once it covered the later files too, that night (docs/experiments.md, "Compiling on the idle CPU
while the tests run" and the section after it).

For each shape it compiles the build kernels
(:func:`dobutsu_tb.tablebase.precompile.compile_kernels`, as a build does), then builds the
tablebase of the royal pieces alone and runs the front ends on it; it calls the game's kernels one
by one, as the tests of the rules do; all before the tests that need them get there. A test that
gets there first compiles what it needs itself, as without this process; a shape already compiled
is skipped. What fails here is left for the tests to find.

The order is the order in which the test files first need each (:data:`STEPS`). The standard
shape's build kernels (3 files x 4 ranks) are not here: the first test compiles them at once.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

#: What to compile, in the order in which the test files first need it: (what, variant, dense
#: table's slot dtype or ""). "build" compiles a shape's build kernels and then runs the front ends
#: on a tiny tablebase (:func:`front_ends`); "game" the game's kernels called one by one, as the
#: tests of the rules call them (:func:`game_kernels`). A variant named by a tuple is one of the
#: tests' own, made by :func:`tests_variant`.
STEPS = (
    ("build", "dobutsu-3x3", ""),  # test_build_safety.py, test_cluster.py, test_export.py
    ("build", "dobutsu-5x3", ""),  # test_cluster.py
    ("game", "dobutsu-4x4", ""),  # test_encoding.py, test_rules.py
    ("game", "dobutsu-6x3", ""),
    ("build", "dobutsu", "int32"),  # a dense table: test_out_of_core.py (dobutsu-nodrops, of the same shape)
    ("game", "dobutsu-3x3", ""),  # test_rules.py
    ("game", "dobutsu-5x3", ""),
    ("game", "dobutsu", ""),
    ("build", "dobutsu-6x3", ""),  # test_rules.py, test_variants.py
    ("build", "dobutsu-4x4", ""),
    ("build", ("one-by-five",), ""),  # test_variants.py: a board of one file (keys of 63 bits)
    ("build", ("wide", 4, 5), ""),  # test_variants.py: 56-bit keys on 4 files x 5 ranks (WIDEST_KEYS)
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
    run on such files (probe, verify, stats, export, line, verify-line), for their kernels."""
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
        for args in (["probe", start.text()], ["probe", start.fen()], ["verify"], ["stats", "--json"],
                     ["export", "--out", os.path.join(work, "t.parquet")]):
            runner.invoke(cli, [*args, "--tb", path])
        line = runner.invoke(cli, ["line", start.text(), "--json", "--tb", path])
        moves = [m["move"] for m in json.loads(line.stdout)["moves"]] if line.exit_code == 0 else []
        runner.invoke(cli, ["verify-line", "--tb", path, "--start", start.text(), *moves])


def game_kernels(variant) -> None:
    """Call each of the game's jitted kernels once, with the types the tests give them
    (test_rules.py, test_encoding.py), and the game's array functions and perft."""
    import numpy as np

    from conftest import jitted
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.position import Position

    game = game_of(variant)
    state = Position.start(variant).state()
    game.perft(state, 2)
    keys = game.encode(np.array([state[0]], np.int64), np.array([state[1]], np.int64), fold_mirror=False)
    game.decode(keys)
    k = jitted(game)
    b, h = (np.int64(w) for w in state)
    size = max(game.layout["MAX_MOVES"], game.layout["MAX_UNMOVES"])
    moves, keys, classes, boards, hands = (np.empty(size, np.int64) for _ in range(5))
    for kernel in (k.canonical_key, k.mirror_state, k.flip_state, k.game_over, k.classify):
        kernel(b, h)
    k.decode_key(np.int64(k.encode_state(b, h)))
    if k.gen_moves(b, h, moves):
        k.make_move(b, h, moves[0])
    for pruned in (False, True):
        k.gen_unmoves(b, h, boards, hands, pruned)
    k.parent_keys(b, h, keys)
    k.child_keys(b, h, moves, keys, classes)


def tests_variant(spec):
    """A variant of the tests' own, by ``spec``: ``("one-by-five",)`` is test_variants.py's
    ``ONE_FILE``, ``("wide", files, ranks)`` its variant of immobile pieces of that board in
    ``WIDEST_KEYS``."""
    from test_variants import ONE_FILE, WIDEST_KEYS, _immobile

    from dobutsu_tb.tablebase.game.variant import parse_variant
    from naive import tomllib

    if spec == ("one-by-five",):
        return parse_variant(tomllib.loads(ONE_FILE))
    [(start, kinds)] = [(start, kinds) for files, ranks, start, kinds, _ in WIDEST_KEYS if (files, ranks) == spec[1:]]
    return parse_variant(_immobile(*spec, start, kinds))


#: The file by which the tests ask this process to hold between two steps (while it exists), and
#: the file by which it says it holds, in its folder (conftest.prewarm_held).
HOLD, HELD = "hold", "held"


def hold(folder: str) -> None:
    """Wait while the tests ask this process to hold (a file :data:`HOLD` in ``folder``), saying so
    by a file :data:`HELD`: between two steps, it writes nothing into the kernel cache."""
    if not os.path.exists(os.path.join(folder, HOLD)):
        return
    open(os.path.join(folder, HELD), "w").close()
    while os.path.exists(os.path.join(folder, HOLD)):
        time.sleep(0.2)
    os.remove(os.path.join(folder, HELD))


def main(parent: int, folder: str) -> None:
    if not lowest_priority():
        return
    end_with_parent(parent)
    from dobutsu_tb.tablebase import precompile
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.variant import get_variant

    for what, name, dense in STEPS:
        hold(folder)
        try:
            variant = tests_variant(name) if isinstance(name, tuple) else get_variant(name)
            if what == "game":
                game_kernels(variant)
            # (False for a shape already compiled, which is skipped)
            elif precompile.compile_kernels(game_of(variant), dense=dense, big=True) and not dense:
                front_ends(variant)
        except Exception:  # (the tests meet it, with its message)
            continue


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
