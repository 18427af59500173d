#!/usr/bin/env python3
"""Benchmark the Parquet export (``dobutsu-tb export``): wall time, rows per second, file size and
peak RSS of a whole export and of a random sample.

Usage::

    python scripts/bench_export.py TABLEBASE [--sample N] [--seed S] [--runs R] [--out-dir DIR]
                                   [--no-full] [--keep]

Each export runs in a child process of its own (``export_parquet``, as the command runs it),
after a small warm-up export that loads the kernels (or compiles them into the kernel cache, on
the first run of a version: its time is printed apart). For each it prints the whole process's
wall time (imports included) and peak RSS (the kernel's own accounting, ``wait4``), the rows per
second, the file's size (and bytes per row), and the export's own steps: reading the tablebase,
selecting the rows, making and writing the rows (the kernels' and pyarrow's shares of it overlap:
a thread writes one row group while the kernels make the next). ``--runs`` repeats each export
and prints every run. The files go to a temporary folder (``--out-dir``), removed at the end
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(tb: str, out: str, sample: int | None, seed: int) -> None:
    """The child's side: one export, then one JSON line with its report."""
    from dobutsu_tb.tablebase.export import export_parquet

    report = export_parquet(tb, out, sample=sample, seed=seed)
    print(json.dumps({"rows": report.rows, "bytes": report.bytes, "seconds": report.seconds}), flush=True)


def measure(tb: Path, out: Path, sample: int | None, seed: int) -> tuple[dict, float, int]:
    """One export in a child process, reaped with ``wait4`` (its own peak RSS, not the largest
    child's so far): (its report, wall seconds, peak RSS in bytes)."""
    argv = [sys.executable, __file__, str(tb), "--child", str(out), str(sample or 0), "--seed", str(seed)]
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        lines, errors = stdout.read().strip().splitlines(), stderr.read().strip().splitlines()
    if proc.returncode != 0 or not lines:
        sys.exit(f"the export failed (exit code {proc.returncode}): {errors[-1] if errors else ''}")
    return json.loads(lines[-1]), wall, usage.ru_maxrss * 1024


def size(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} bytes"


def show(what: str, report: dict, wall: float, rss: int) -> None:
    rows, s = report["rows"], report["seconds"]
    print(f"{what}: {rows:,} rows in {wall:.1f} s ({rows / wall:,.0f} rows/s), {size(report['bytes'])} "
          f"({report['bytes'] / max(rows, 1):.1f} bytes/row), peak RSS {size(rss)}")
    rest = wall - s["read"] - s["select"] - s["rows and write"]
    print(f"    read {s['read']:.1f} s, select {s['select']:.1f} s, rows and write {s['rows and write']:.1f} s "
          f"(kernels {s['rows']:.1f} s, pyarrow {s['write']:.1f} s, overlapping); the rest {rest:.1f} s "
          f"(start-up, imports, kernels loaded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tablebase", type=Path)
    parser.add_argument("--sample", type=int, default=1_000_000, help="rows of the sample (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1, help="runs of each export (default 1)")
    parser.add_argument("--out-dir", type=Path, default=None, help="folder of the files (default: a temporary one)")
    parser.add_argument("--no-full", action="store_true", help="the sample only")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(str(args.tablebase), args.child[0], int(args.child[1]) or None, args.seed)
        return
    if args.runs < 1 or args.sample < 1:
        parser.error("--runs and --sample are at least 1")
    if not args.tablebase.is_file():
        parser.error(f"{args.tablebase}: no such file")
    folder = Path(tempfile.mkdtemp(prefix="bench-export-", dir=args.out_dir))
    try:
        print(f"{args.tablebase} ({size(args.tablebase.stat().st_size)}); {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f}; pyarrow {_pyarrow_version()}")
        report, wall, rss = measure(args.tablebase, folder / "warm-up.parquet", 1000, 0)
        print(f"warm-up (1,000 rows; loads or compiles the kernels): {wall:.1f} s")
        for run in range(args.runs):
            tag = f" (run {run + 1})" if args.runs > 1 else ""
            report, wall, rss = measure(args.tablebase, folder / "sample.parquet", args.sample, args.seed)
            show(f"sample of {args.sample:,}{tag}", report, wall, rss)
        if not args.no_full:
            for run in range(args.runs):
                tag = f" (run {run + 1})" if args.runs > 1 else ""
                report, wall, rss = measure(args.tablebase, folder / "all.parquet", None, 0)
                show(f"every stored position{tag}", report, wall, rss)
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep:
            print(f"files kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _pyarrow_version() -> str:
    try:
        import pyarrow
    except ImportError:
        sys.exit("the export needs pyarrow: pip install 'dobutsu-tablebase[data]'")
    return pyarrow.__version__


if __name__ == "__main__":
    main()
