#!/usr/bin/env python3
"""Time each puzzle's main command and measure its peak memory, one process per job.

Usage: python scripts/bench_puzzles.py [--full] [--only TEXT] [--timeout SECONDS]

Each job runs in a process of its own, which compiles the kernels it needs on a small instance
(or runs the job once, for the quick ones), then times the job. A line per job gives the
seconds of the timed run (warm; wall clock, then the CPU time of all the process's threads, which
load on a shared machine inflates less) and the peak resident memory of the job's whole process
(imports and warm-up included), read with ``os.wait4``. Without --full the quick jobs run (Last
One solutions and fewest moves of the shipped shapes, Tank Change, Othello, every squares board
and Room Sweeper problem, SweepOptimizer's included, by the default engine and by our search);
--full adds the central game's counts and fewest moves (about 40 s each on an idle machine). A
job that fails or runs out of time is reported as such and the others go on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LASTONE = ROOT / "data" / "lastone"
SHAPES = ("t-shape", "cross", "plus", "pyramid", "arrow", "diamond", "central")


def jobs(full: bool) -> list[tuple[str, str, str]]:
    """(label, kind, argument) of each job, in the order they run."""
    out = [(f"lastone {name}: solve", "lastone-solve", name) for name in SHAPES]
    out += [(f"lastone {name}: --fewest-moves", "lastone-fewest", name) for name in SHAPES[:-1]]
    out += [("tankchange --count", "tankchange", ""), ("othello --count", "othello", "")]
    out += [(f"squares {path.stem}", "squares", str(path))
            for path in sorted((ROOT / "data" / "squares").glob("*.txt"))]
    sweeps = sorted((ROOT / "data" / "sweep").glob("*.txt")) + sorted((ROOT / "data" / "sweep").glob("*/*.txt"))
    sweeps = [path for path in sweeps if not path.stem.endswith("-routes")]
    out += [(f"sweep {path.relative_to(ROOT / 'data' / 'sweep').with_suffix('')}", "sweep", str(path))
            for path in sweeps]
    # Our search beside the SAT solver (q64 left out: the search does not finish it in 600 s).
    out += [(f"sweep --engine search {path.relative_to(ROOT / 'data' / 'sweep').with_suffix('')}", "sweep-search",
             str(path)) for path in sweeps if path.stem != "q64"]
    if full:
        out += [("lastone central: --count", "lastone-count", "central"),
                ("lastone central: --fewest-moves", "lastone-fewest", "central")]
    return out


def prepare(kind: str, arg: str):
    """Compile what the job needs (on a small instance, or the job itself once); return the job."""
    from dobutsu_tb.analysis.puzzles import lastone, othello, squares, sweep, tankchange

    if kind.startswith("lastone"):
        start, small = lastone.read_board(LASTONE / f"{arg}.txt"), lastone.read_board(LASTONE / "cross.txt")
        if kind == "lastone-solve":
            lastone.solve(small)
            return lambda: f"{len(lastone.solve(start)) - 1} jumps"
        if kind == "lastone-fewest":
            lastone.fewest_moves(small)
            return lambda: f"{len(lastone.fewest_moves(start)) - 1} moves"
        lastone.count(small)
        return lambda: (lambda r: f"{r.reachable:,} boards, {r.reachable_up_to_symmetry:,} up to symmetry, "
                                  f"{r.solutions:,} solutions")(lastone.count(start))
    if kind == "tankchange":
        def job():
            r = tankchange.solve()
            return f"{r.moves} moves, {r.count} shortest sequences"
    elif kind == "othello":
        def job():
            r = othello.solve()
            return f"{r.placements} placements, {r.count} shortest sequences"
    elif kind == "squares":
        squares.solve(squares.parse_grid("..\n.."))
        grid = squares.read_grid(arg)
        return lambda: f"{squares.solve(grid, limit=0).count:,} solutions"
    elif kind in ("sweep", "sweep-search"):
        engine = "auto" if kind == "sweep" else "search"
        for warm in ("tiny.txt", "meeting-5x5.txt"):  # the searches without meetings and with them
            if (ROOT / "data" / "sweep" / warm).exists():  # (the search's kernels: auto may end there)
                sweep.solve(sweep.read_problem(ROOT / "data" / "sweep" / warm), engine="search")
        problem = sweep.read_problem(arg)
        kinds = "/".join(str(sum(1 for c in problem.cleaners if c[0] == k)) for k in sweep.KINDS)

        def answer():
            r = sweep.solve(problem, engine=engine)
            work = (f"{r.conflicts:,} conflicts" if r.engine == "sat" else f"{r.nodes:,} nodes")
            return ("no solution" if r.routes is None else "solved with meetings" if r.with_meetings
                    else "solved") + f" by the {r.engine}, {work}"
        return lambda: f"{answer()} ({problem.width}x{problem.height}, {kinds} b/g/r)"
    else:
        raise ValueError(f"unknown job kind {kind!r}")
    job()
    return job


def run_one(kind: str, arg: str) -> None:
    """The child's side: prepare, time, print one JSON line."""
    job = prepare(kind, arg)
    t, cpu = time.perf_counter(), time.process_time()
    answer = job()
    print(json.dumps({"answer": answer, "seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu}),
          flush=True)


def measure(kind: str, arg: str, timeout: float) -> tuple[dict | None, float, str]:
    """Run one job in a child process: (its JSON line or None, peak RSS in GiB, error text).

    The child is reaped with ``os.wait4``, whose resource usage is the child's own (its
    ``ru_maxrss``, in KiB on Linux), not the maximum over every child so far."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, "--run", kind, arg], stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return None, usage.ru_maxrss / 2**20, f"over {timeout:g} s"
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        lines, errors = out.read().strip().splitlines(), err.read().strip().splitlines()
    rss = usage.ru_maxrss / 2**20
    if proc.returncode != 0 or not lines:
        return None, rss, errors[-1] if errors else f"exit code {proc.returncode}"
    return json.loads(lines[-1]), rss, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="also the central game's counts and fewest moves")
    parser.add_argument("--only", default="", help="run only the jobs whose label contains this text")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a job may take (default 900)")
    parser.add_argument("--run", nargs=2, metavar=("KIND", "ARG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run_one(*args.run)
        return
    print(f"{'job':<44}{'seconds':>9}{'CPU s':>9}{'peak RSS':>12}   answer", flush=True)
    for label, kind, arg in jobs(args.full):
        if args.only not in label:
            continue
        result, rss, error = measure(kind, arg, args.timeout)
        if result is None:
            print(f"{label:<44}{'-':>9}{'-':>9}{rss:>8.2f} GiB   failed: {error}", flush=True)
        else:
            print(f"{label:<44}{result['seconds']:>9.2f}{result['cpu']:>9.2f}{rss:>8.2f} GiB   {result['answer']}",
                  flush=True)


if __name__ == "__main__":
    main()
