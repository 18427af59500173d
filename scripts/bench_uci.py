#!/usr/bin/env python3
"""Time the UCI engine (``dobutsu-tb uci``) as a GUI sees it, on a tablebase read lazily.

Usage: python scripts/bench_uci.py PATH [--positions N] [--in-memory]

Prints, each from the GUI's side of the pipes:

- start-up: the process started to ``uciok``;
- ``isready`` to ``readyok`` when idle (200 times), after a ``position`` command of 2,000 plies
  sent whole (as a GUI that reconnects would; 20 times, each a new game), and right after a
  ``go`` with MultiPV 500 on the start position (the search thread busy with every move's full
  principal variation; 20 times): median and maximum, in milliseconds;
- ``go`` to ``bestmove``: the start position with MultiPV 1 and 500, and N random positions of
  the file (default 300, MultiPV 1: the value, the best move and its full principal variation):
  median, 90th percentile and maximum;
- the engine's resident memory at the end (VmRSS).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase


class Engine:
    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, prefix):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the engine exited")
            if line.startswith(prefix):
                return line

    def timed(self, lines, prefix):
        t = time.perf_counter()
        for line in lines:
            self.send(line)
        self.until(prefix)
        return 1000 * (time.perf_counter() - t)


def summary(ms):
    ms = sorted(ms)
    return (f"median {statistics.median(ms):.2f} ms, p90 {ms[int(0.9 * (len(ms) - 1))]:.2f}, "
            f"max {ms[-1]:.2f} ({len(ms)} times)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--positions", type=int, default=300)
    parser.add_argument("--in-memory", action="store_true")
    args = parser.parse_args()

    with open_tablebase(args.path) as tb:
        f = tb._file
        rng = random.Random(0)
        entries = [rng.randrange(f.n) for _ in range(args.positions)]
        positions = [Position.from_key(int(f.read_keys(i // f.key_chunk)[i % f.key_chunk]), tb.variant)
                     for i in entries]
        start = Position.from_text(tb.metadata.start, tb.variant)

    argv = [sys.executable, "-m", "dobutsu_tb.analysis.cli", "uci", "--tb", args.path]
    t = time.perf_counter()
    engine = Engine(argv + (["--in-memory"] if args.in_memory else []))
    engine.send("uci")
    engine.until("uciok")
    print(f"{Path(args.path).name}, {'in memory' if args.in_memory else 'read lazily'}")
    print(f"start-up to uciok: {time.perf_counter() - t:.3f} s")

    idle = [engine.timed(["isready"], "readyok") for _ in range(200)]
    print(f"isready, idle: {summary(idle)}")
    shuffle = ["c1c2", "a4a3", "c2c1", "a3a4"] * 500
    long_game = []
    for k in range(20):  # a new game each time, so that nothing is replayed from the last one
        engine.send("ucinewgame")
        engine.send(f"position fen {start.fen()} moves " + " ".join(shuffle[: 2000 - k]))
        long_game.append(engine.timed(["isready"], "readyok"))
    print(f"isready after a position of about 2,000 plies: {summary(long_game)}")
    engine.send("setoption name MultiPV value 500")
    busy, multi = [], []
    for _ in range(20):
        engine.send(f"position fen {start.fen()}")
        t = time.perf_counter()
        engine.send("go")
        busy.append(engine.timed(["isready"], "readyok"))
        engine.until("bestmove")
        multi.append(1000 * (time.perf_counter() - t))
    print(f"isready right after go (MultiPV 500 on the start position): {summary(busy)}")
    print(f"go to bestmove, start position, MultiPV 500: {summary(multi)}")
    engine.send("setoption name MultiPV value 1")
    one = [engine.timed([f"position fen {start.fen()}", "go"], "bestmove") for _ in range(20)]
    print(f"go to bestmove, start position, MultiPV 1: {summary(one)}")
    random_ms = [engine.timed([f"position fen {p.fen()}", "go movetime 1000"], "bestmove") for p in positions]
    print(f"go to bestmove, {len(positions)} random positions of the file, MultiPV 1: {summary(random_ms)}")
    rss = next((line.split()[1] for line in Path(f"/proc/{engine.proc.pid}/status").read_text().splitlines()
                if line.startswith("VmRSS")), "?")
    print(f"resident memory at the end: {int(rss) / 1024:.0f} MiB" if rss != "?" else "resident memory: ?")
    engine.send("quit")
    engine.proc.wait()


if __name__ == "__main__":
    main()
