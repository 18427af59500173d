#!/usr/bin/env python3
"""Benchmark probing: the CLI, lazy random probes, opening, batch lookups in memory.

Usage: python scripts/bench_probe.py PATH [--n N] [--runs R]

Prints:

- ``dobutsu-tb probe`` of the start position (its value and every move's), whole process,
  median of R runs (default 10): as the environment is, and with the package's bytecode written
  beforehand (what Python does on a user's first run unless ``PYTHONDONTWRITEBYTECODE`` is set);
- ``open_tablebase`` (lazy) in seconds, median of 20 opens;
- ``probe_wdl`` of N random stored positions (default 4000, each usually in a chunk not read
  before) on a lazily opened file, the file opened once: median microseconds;
- the same on two files open at once, one probe of each in turn, each on positions of its own,
  the second with the reader's checks of keys and values turned off, to show what the checks
  cost;
- ``open_tablebase(in_memory=True)`` in seconds and ``probe_many`` from an int64 array of
  2,000,000 random keys, in positions per second (median of 3);
- the file's size in MiB.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from dobutsu_tb.encoding.config import CHUNK_CACHE
from dobutsu_tb.tablebase import chunks, reader
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase


def unchecked_chunk_planes(self, c, raw=None):
    return chunks.inflate_key_planes(raw if raw is not None else self._raw("keys", c), self.key_chunk)


def unchecked_find(self, c, planes, key):
    n = self.key_chunk
    count = min(n, self.n - c * n)
    i = bisect.bisect_left(range(count), key, key=lambda j: chunks.key_in_planes(planes, j, n))
    return c * n + i if i < count and chunks.key_in_planes(planes, i, n) == key else -1


#: Run ``dobutsu-tb probe POSITION --tb PATH`` in a process, then list the source file of every
#: module it imported (argv: the list's path, the position, the tablebase).
_LIST_MODULES = """
import sys
out, position, path = sys.argv[1:]
sys.argv = ["dobutsu-tb", "probe", position, "--tb", path]
from dobutsu_tb.encoding import interrupt  # what the command line's run() imports, then its group
from dobutsu_tb.analysis.cli.group import main
try:
    main(prog_name="dobutsu-tb")  # (not run(): it ends the process)
except SystemExit:
    pass
files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
with open(out, "w") as f:
    f.writelines(name + "\\n" for name in files if name and name.endswith(".py"))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    cli = Path(sys.executable).parent / "dobutsu-tb"
    with tempfile.TemporaryDirectory() as cache:
        # Python writes the bytecode of what it imports on a user's first run, unless
        # PYTHONDONTWRITEBYTECODE is set (as on our machine): then every run compiles the sources
        # again. So the runs are timed as the environment is, and with the bytecode written first
        # (into a folder of its own, PYTHONPYCACHEPREFIX: the tree is left as it is).
        # (A prefix holds every module's bytecode, the standard library's too: each module a probe
        # imports is compiled there, as found by one probe run.)
        cached = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        listing = Path(cache) / "modules.txt"
        subprocess.run([sys.executable, "-c", _LIST_MODULES, str(listing), Position.START_TEXT, args.path],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-i", str(listing)], env=cached, check=True,
                       stdout=subprocess.DEVNULL)
        for label, env in (("as the environment is" + (" (PYTHONDONTWRITEBYTECODE set)"
                                                        if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""), None),
                           ("with the bytecode written", cached)):
            runs = []
            for _ in range(args.runs + 1):
                t = time.perf_counter()
                subprocess.run([str(cli), "probe", Position.START_TEXT, "--tb", args.path], check=True,
                               stdout=subprocess.DEVNULL, env=env)
                runs.append(time.perf_counter() - t)
            runs = runs[1:]  # the first run warms the page cache
            print(f"dobutsu-tb probe (start position, all moves), whole process, {label}: median "
                  f"{statistics.median(runs):.3f} s (min {min(runs):.3f}, max {max(runs):.3f}, {len(runs)} runs)")

    opens = []
    for _ in range(20):
        t = time.perf_counter()
        open_tablebase(args.path).close()
        opens.append(time.perf_counter() - t)
    print(f"open_tablebase (lazy): median {statistics.median(opens) * 1e3:.1f} ms")

    with open_tablebase(args.path) as tb:
        f = tb._file
        rng = np.random.default_rng(0)
        entries = np.sort(rng.choice(f.n, 2 * args.n, replace=False))
        keys = [int(f.read_keys(int(i) // f.key_chunk)[int(i) % f.key_chunk]) for i in entries]
    rng.shuffle(keys)
    positions = [Position.from_key(k, tb.variant) for k in keys]
    with open_tablebase(args.path) as tb:
        times = []
        for p in positions[::2]:
            t = time.perf_counter()
            tb.probe_wdl(p)
            times.append(time.perf_counter() - t)
    print(f"probe_wdl, lazy, {args.n} random stored positions, the file opened once: median "
          f"{statistics.median(times) * 1e6:.1f} us")

    # With and without the checks, one probe each in turn (on positions of its own), so that the
    # load of the machine and the page cache weigh on both alike: the second file's reader has
    # its checks of keys and values turned off.
    if hasattr(reader.TablebaseFile, "chunk_planes"):  # (not a reader of before the probe search of planes)
        with open_tablebase(args.path) as checked_tb, open_tablebase(args.path) as unchecked_tb:
            unchecked_tb._file.chunk_planes = types.MethodType(unchecked_chunk_planes, unchecked_tb._file)
            if hasattr(unchecked_tb, "_planes"):  # (the probes' cache of chunks, made on open: made again)
                unchecked_tb._planes = functools.lru_cache(CHUNK_CACHE)(unchecked_tb._file.chunk_planes)
            unchecked_tb._file.find = types.MethodType(unchecked_find, unchecked_tb._file)
            unchecked_tb._file.check_value = lambda code, i: code
            times = {True: [], False: []}
            for j in range(0, 2 * args.n, 2):
                for checks, tb, p in ((True, checked_tb, positions[j]), (False, unchecked_tb, positions[j + 1])):
                    t = time.perf_counter()
                    tb.probe_wdl(p)
                    times[checks].append(time.perf_counter() - t)
        checked, unchecked = (statistics.median(times[c]) * 1e6 for c in (True, False))
        print(f"probe_wdl, lazy, {args.n} random stored positions: median {checked:.1f} us "
              f"(without the reader's checks of keys and values: {unchecked:.1f} us; the checks cost "
              f"{100 * (checked - unchecked) / unchecked:+.0f}%)")

    t = time.perf_counter()
    with open_tablebase(args.path, in_memory=True) as tb:
        opened = time.perf_counter() - t
        stored = tb._all[0]
        batch = stored[rng.integers(0, stored.shape[0], 2_000_000)]
        tb.probe_many(batch[:1000])
        rates = []
        for _ in range(3):
            t = time.perf_counter()
            tb.probe_many(batch)
            rates.append(batch.shape[0] / (time.perf_counter() - t))
    print(f"open_tablebase(in_memory=True): {opened:.1f} s; probe_many from int64 keys: "
          f"{statistics.median(rates) / 1e6:.2f} M positions/s (2,000,000 random keys, median of 3)")
    print(f"file: {Path(args.path).stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
