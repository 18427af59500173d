#!/usr/bin/env python3
"""Benchmark a tablebase build: seconds, positions per second and peak RSS of each phase.

Usage: python scripts/bench_build.py [--start POSITION] [--out PATH]

Without --start it builds the full tablebase from the standard start (a few minutes, about
4 GiB). The peak RSS of a phase is the largest resident set sampled (every 20 ms, from
/proc/self/statm) while the phase ran.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dobutsu_tb.tablebase.build import build_tablebase

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PhaseMonitor:
    """Records wall time and peak RSS per phase, fed by build_tablebase's on_phase hook."""

    def __init__(self):
        self.phase = None
        self.started = {}
        self.ended = {}
        self.peak = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        if self.phase is not None:
            self.ended[self.phase] = now
        self.phase = name
        self.started[name] = now
        self.peak[name] = rss_bytes()

    def _sample(self):
        while not self._stop.wait(0.02):
            phase = self.phase
            if phase is not None:
                self.peak[phase] = max(self.peak.get(phase, 0), rss_bytes())

    def stop(self):
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", default=None, help="start position (default: the standard start)")
    parser.add_argument("--out", default=None, help="output file (default: a temporary file, removed)")
    args = parser.parse_args()

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp()) / "bench.h5"
    monitor = PhaseMonitor()
    t0 = time.perf_counter()
    result = build_tablebase(out, args.start, progress=False, on_phase=monitor)
    total = time.perf_counter() - t0
    monitor.stop()
    m = result.metadata
    work = {"enumeration": m.reachable, "retrograde": m.nonterminal, "sort": m.nonterminal,
            "write": m.nonterminal, "check": 1}
    print(f"start {m.start}: {m.reachable:,} reachable, {m.nonterminal:,} non-terminal; "
          f"start value wdl={m.start_wdl} dtm={m.start_dtm}")
    print(f"{'phase':<12}{'seconds':>10}{'positions/s':>16}{'peak RSS GiB':>14}")
    for phase in ("enumeration", "retrograde", "sort", "write", "check"):
        secs = monitor.ended[phase] - monitor.started[phase]
        rate = work[phase] / secs if secs > 0 and phase != "check" else float("nan")
        print(f"{phase:<12}{secs:>10.1f}{rate:>16,.0f}{monitor.peak[phase] / 2**30:>14.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{'total':<12}{total:>10.1f}{'':>16}{peak / 2**30:>14.2f}  (peak RSS of the process)")
    print(f"file: {out.stat().st_size / 2**20:.1f} MiB, {os.cpu_count()} CPUs, "
          f"numba threads {os.environ.get('NUMBA_NUM_THREADS', 'default')}")
    if not args.out:
        out.unlink()


if __name__ == "__main__":
    main()
