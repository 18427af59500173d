#!/usr/bin/env python3
"""Benchmark probing: one probe from the command line (start-up included) and in-process probes.

Usage: python scripts/bench_probe.py PATH [--n N]

Prints the wall time of ``dobutsu-tb probe`` on the start position (best of 5 runs), and the
mean time of ``probe_wdl`` in-process over N random stored positions: cold (chunks read as
needed), warm (the same positions again) and with ``in_memory=True``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import h5py  # noqa: E402
import numpy as np  # noqa: E402

from dobutsu_tb.tablebase.game.key import decode
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()

    cli = Path(sys.executable).parent / "dobutsu-tb"
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([str(cli), "probe", Position.START_TEXT, "--tb", args.path], check=True,
                       stdout=subprocess.DEVNULL)
        runs.append(time.perf_counter() - t)
    print(f"dobutsu-tb probe (start position, all moves): best {min(runs):.3f} s, "
          f"worst {max(runs):.3f} s of 5 runs")

    with h5py.File(args.path, "r") as f:
        n = f["keys"].shape[0]
        rng = np.random.default_rng(0)
        idx = np.sort(rng.choice(n, args.n, replace=False))
        keys = f["keys"][idx]
    positions = [Position.from_state(int(s)) for s in decode(keys)]
    for label, in_memory in (("chunked", False), ("in_memory", True)):
        t = time.perf_counter()
        with open_tablebase(args.path, in_memory=in_memory) as tb:
            opened = time.perf_counter() - t
            tb.probe_wdl(positions[0])
            for rnd in ("cold", "warm"):
                t = time.perf_counter()
                for p in positions:
                    tb.probe_wdl(p)
                per = (time.perf_counter() - t) / len(positions)
                print(f"probe_wdl {label:<9} {rnd}: {per * 1e6:8.1f} us per position "
                      f"(open {opened:.2f} s, {len(positions)} random positions)")


if __name__ == "__main__":
    main()
