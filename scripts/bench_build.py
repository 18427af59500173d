#!/usr/bin/env python3
"""Benchmark a tablebase build: seconds, positions per second and peak RSS of each phase; with
``--peer``, the peer's build and ours one after the other, and the ratio.

Usage::

    python scripts/bench_build.py [--variant NAME] [--start POSITION] [--out PATH] [--compile]
    python scripts/bench_build.py --peer PATH_TO_GENTB [--runs N]
    python scripts/bench_build.py --scaling [--variant NAME] [--start POSITION]
    python scripts/bench_build.py --enumeration [--runs N] [--variant NAME] [--start POSITION]
    python scripts/bench_build.py --write TABLEBASE [--runs N]
    python scripts/bench_build.py --cluster local --workers N [--worker-threads T] [--compare] [--variant NAME]
                                  [--start POSITION]

Without ``--peer`` it builds the full tablebase from the standard start in a child process and
prints each phase (wall seconds, positions per second, peak RSS sampled every 20 ms from
/proc/self/statm) and the whole process's wall time and peak RSS (the kernel's own accounting,
``wait4``). ``--compile`` first measures the numba compilation: a small build (the
lion-and-chick endgame) with an empty kernel cache, then again with the cache filled; the
difference is the compile time, and the full build then runs with a warm cache.

With ``--peer`` (R. Clausecker's ``gentb``, built from github.com/clausecker/dobutsu) it runs
``gentb -j THREADS OUT`` and our full build alternately, ``--runs`` times each (default 1),
and prints both wall times, both peak RSS and the ratio ours/peer of each pair.

Each build's report ends with its profile: the wall seconds of the phases' parts (children
generated and inserted, predecessors propagated, ...). ``--scaling`` builds with 1 thread pinned
to one CPU, with 1 thread unpinned, then with every CPU (``NUMBA_NUM_THREADS``), and prints each
phase's and part's speed-up over both one-thread builds (unpinned, the build's threads besides
numba's run on the CPU numba leaves idle).

``--enumeration`` runs only the enumeration (``enumerate_positions`` with the known counts, as
the build calls it, then the terminal partitions), ``--runs`` times, each in a process of its
own: its wall seconds and parts and the process's peak RSS. For trying a change to the
enumeration against the code before it, run alternately (the phase's noise here is a few seconds).

``--write TABLEBASE`` times the write phase alone: it reads a tablebase's keys, values and
metadata, then writes them again with ``write_file`` (as one block of records), ``--runs``
times, each in a process of its own, and checks that the file written holds the same keys,
values and metadata.

With ``--cluster ADDRESS --workers N`` the build runs on a Ray cluster (``local``: one started on
this machine; tablebase/cluster.py): it prints the phases as above (the driver's own RSS), then
the bytes the workers sent each other per phase (and per non-terminal position), the records
sent to the driver, and each worker's peak RSS. ``--compare`` first runs the in-process build,
then the cluster build, and prints the ratio of their wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
LION_CHICK = "S/-l-/-c-/-C-/-L-/-"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PhaseMonitor:
    """Records wall time and peak RSS per phase, fed by build_tablebase's on_phase hook."""

    def __init__(self):
        self.phase = None
        self.started, self.ended, self.peak = {}, {}, {}
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


def child(variant: str, start: str | None, out: str, cluster: str | None = None, workers: int = 2,
          worker_threads: int | None = None) -> None:
    """Run one build in this process and print its phases as JSON (the parent measures the rest)."""
    from dobutsu_tb.tablebase.build import build_tablebase
    from dobutsu_tb.tablebase.game.variant import get_variant

    options = None
    if cluster is not None:
        from dobutsu_tb.tablebase.cluster import ClusterOptions

        options = ClusterOptions(cluster, workers, worker_threads)
    monitor = PhaseMonitor()
    result = build_tablebase(out, start, progress=False, on_phase=monitor, variant=get_variant(variant),
                             cluster=options)
    monitor.stop()
    m = result.metadata
    phases = {name: {"seconds": monitor.ended[name] - monitor.started[name], "peak": monitor.peak[name]}
              for name in monitor.ended if name != "done"}
    print(json.dumps({"start": m.start, "reachable": m.reachable, "nonterminal": m.nonterminal,
                      "start_wdl": m.start_wdl, "start_dtm": m.start_dtm, "phases": phases,
                      "profile": result.profile, "file_bytes": Path(out).stat().st_size,
                      "cluster": None if result.cluster is None else {
                          "address": result.cluster.address, "workers": result.cluster.workers,
                          "rounds": result.cluster.rounds, "sent": result.cluster.sent}}))


def enumeration_child(variant: str, start: str | None) -> None:
    """Run only the enumeration in this process and print its figures as JSON."""
    from dobutsu_tb.tablebase.build import expected_counts
    from dobutsu_tb.tablebase.enumeration import count_terminal_partitions, enumerate_positions
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.game.position import Position
    from dobutsu_tb.tablebase.game.variant import get_variant

    game = game_of(get_variant(variant))
    position = Position.start(game.variant) if start is None else Position.from_text(start, game.variant)
    t = time.perf_counter()
    enum = enumerate_positions(game, position.state(), expected_counts(game.variant, position))
    count_terminal_partitions(enum)
    print(json.dumps({"seconds": time.perf_counter() - t, "profile": enum.profile, "nonterminal": enum.nonterminal,
                      "reachable": enum.reachable}))


def enumeration_runs(variant: str, start: str | None, runs: int) -> None:
    """``--enumeration``: the enumeration alone, ``runs`` times, a process each."""
    for k in range(runs):
        argv = [sys.executable, __file__, "--child-enumeration", "--variant", variant] + (
            ["--start", start] if start else [])
        wall, peak, text = run(argv)
        r = json.loads(text)
        parts = ", ".join(f"{name} {sec:.1f} s" for name, sec in r["profile"].items())
        print(f"run {k + 1}: enumeration {r['seconds']:.1f} s ({parts}); {r['reachable'] / r['seconds']:,.0f} "
              f"positions/s; process {wall:.1f} s, peak RSS {peak / 2**30:.2f} GiB; {r['nonterminal']:,} non-terminal, "
              f"{r['reachable']:,} reachable", flush=True)


def write_child(source: str, out: str) -> None:
    """Rewrite the tablebase ``source`` into ``out`` in this process; print the seconds as JSON."""
    from dobutsu_tb.tablebase.game.game import game_of
    from dobutsu_tb.tablebase.reader import TablebaseFile
    from dobutsu_tb.tablebase.writer import RecordBlocks, long_values, pack_records, reserve_output, write_file

    with TablebaseFile(source) as f:
        keys, values = f.read_all()
        meta = f.metadata
    shift = game_of(meta.variant).layout["KEY_SHIFT"]
    records = pack_records(keys, values, shift)
    longs = long_values(keys, values, shift) if values.dtype.itemsize == 2 else None  # a file of two-byte values
    del keys, values
    with reserve_output(out, force=True) as reserved:
        t = time.perf_counter()
        write_file(reserved.tmp, RecordBlocks.of(records, longs), meta)
        seconds = time.perf_counter() - t
        reserved.commit()
    print(json.dumps({"seconds": seconds, "records": int(records.shape[0])}))


def write_runs(source: str, out: str, runs: int) -> None:
    """``--write``: the write phase alone, ``runs`` times, a process each; each file compared."""
    for k in range(runs):
        wall, peak, text = run([sys.executable, __file__, "--child-write", source, "--out", out])
        r = json.loads(text)
        same = same_tablebase(out, source)
        print(f"run {k + 1}: write {r['seconds']:.2f} s ({r['records'] / r['seconds']:,.0f} records/s); process "
              f"{wall:.1f} s, peak RSS {peak / 2**30:.2f} GiB; {'the same' if same else 'NOT THE SAME'} keys, values "
              f"and metadata", flush=True)
        if not same:
            sys.exit(f"{out} differs from {source}")


def same_tablebase(a: str, b: str) -> bool:
    """Whether two tablebase files hold the same keys, values and metadata (the chunks may lie
    elsewhere in the files)."""
    import numpy as np

    from dobutsu_tb.tablebase.reader import TablebaseFile

    with TablebaseFile(a) as fa, TablebaseFile(b) as fb:
        ka, va = fa.read_all()
        kb, vb = fb.read_all()
        return fa.metadata == fb.metadata and np.array_equal(ka, kb) and np.array_equal(va, vb)


def run(argv: list[str], env: dict | None = None, capture: bool = True) -> tuple[float, int, str]:
    """Run a command; (wall seconds, peak RSS in bytes of the process, its stdout)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, text=True)
    out = proc.stdout.read() if capture else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss * 1024, out


def ours(start: str | None, out: str, env: dict | None = None, variant: str = "dobutsu",
         cluster: list[str] | None = None) -> tuple[float, int, dict]:
    argv = [sys.executable, __file__, "--child", "--out", out, "--variant", variant] + (
        ["--start", start] if start else []) + (cluster or [])
    wall, peak, text = run(argv, env)
    return wall, peak, json.loads(text)


def print_phases(report: dict, wall: float, peak: int) -> None:
    work = {"enumeration": report["reachable"], "terminal": report["reachable"] - report["nonterminal"],
            "retrograde": report["nonterminal"], "sort": report["nonterminal"], "write": report["nonterminal"],
            "check": 0, "start": 0, "stop": 0}
    print(f"start {report['start']}: {report['reachable']:,} reachable, {report['nonterminal']:,} non-terminal; "
          f"start value wdl={report['start_wdl']} dtm={report['start_dtm']}")
    print(f"{'phase':<12}{'seconds':>10}{'positions/s':>16}{'peak RSS GiB':>14}")
    for name, p in report["phases"].items():
        rate = f"{work[name] / p['seconds']:,.0f}" if work[name] and p["seconds"] > 0 else ""
        print(f"{name:<12}{p['seconds']:>10.1f}{rate:>16}{p['peak'] / 2**30:>14.2f}")
    print(f"{'process':<12}{wall:>10.1f}{'':>16}{peak / 2**30:>14.2f}  (whole process: start-up, imports, "
          f"loading cached kernels; kernel's peak RSS)")
    print(f"file: {report['file_bytes'] / 2**20:.1f} MiB, {os.cpu_count()} CPUs, "
          f"numba threads {os.environ.get('NUMBA_NUM_THREADS', 'default')}")
    if report["profile"]:
        print("profile (wall seconds): " + ", ".join(f"{k} {v:.1f}" for k, v in report["profile"].items()))
    cluster = report.get("cluster")
    if cluster:
        workers = cluster["workers"]
        print(f"cluster {cluster['address']}: {len(workers)} workers; rounds: "
              + ", ".join(f"{k} {v}" for k, v in cluster["rounds"].items()))
        print(f"{'bytes sent':<24}{'MiB':>12}{'per position':>14}  (per non-terminal position)")
        for phase, sent in cluster["sent"].items():
            what = "records to the driver" if phase == "records" else f"{phase} (between workers)"
            print(f"{what:<24}{sent / 2**20:>12,.1f}{sent / report['nonterminal']:>14.1f}")
        print(f"{'worker':<8}{'host':<20}{'pid':>8}{'threads':>8}{'positions':>14}{'peak RSS GiB':>14}")
        for i, w in enumerate(workers):
            print(f"{i:<8}{w['host'][:19]:<20}{w['pid']:>8}{w['threads']:>8}{w['positions']:>14,}"
                  f"{w['peak_rss'] / 2**30:>14.2f}")


#: Set in a build's environment: the CPU to pin the whole process to (``--scaling``'s one-CPU build).
PIN_ENV = "BENCH_BUILD_PIN_CPU"


def scaling(variant: str, start: str | None, out: str) -> None:
    """Build with one numba thread on one CPU, with one numba thread free to use every CPU, then
    with every CPU; print each phase's and part's speed-up over both one-thread builds.

    The build has threads besides numba's (the main thread, which makes HDF5's chunk writes
    while the compiled kernel compresses): with one numba thread and two
    CPUs they run on the CPU numba leaves idle, so that the one-thread build is not one CPU's."""
    cpus = os.cpu_count() or 1
    runs = {}
    for name, threads, pin in (("1 CPU", 1, True), ("1 thread", 1, False), (f"{cpus} threads", cpus, False)):
        env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
        env.pop(PIN_ENV, None)
        if pin:
            env[PIN_ENV] = str(min(os.sched_getaffinity(0)))
        runs[name] = ours(start, out, env, variant)
        wall, peak, _ = runs[name]
        print(f"{name}: {wall:.1f} s wall, {peak / 2**30:.2f} GiB peak", flush=True)
    one_cpu, one, many = (runs[name] for name in runs)
    rows = [(name, *(r[2]["phases"][name]["seconds"] for r in (one_cpu, one, many))) for name in many[2]["phases"]]
    rows += [(name, *(r[2]["profile"][name] for r in (one_cpu, one, many))) for name in many[2]["profile"]]
    rows.append(("process", one_cpu[0], one[0], many[0]))
    print(f"{'part':<24}{'1 CPU s':>10}{'1 thread s':>12}{f'{cpus} threads s':>14}"
          f"{'speed-up':>10}{'over 1 thread':>15}")
    for name, a, b, c in rows:
        print(f"{name:<24}{a:>10.1f}{b:>12.1f}{c:>14.1f}{a / c if c else float('nan'):>10.2f}"
              f"{b / c if c else float('nan'):>15.2f}")


def compile_time() -> float:
    """Seconds of numba compilation: a small build with an empty cache minus the same build warm."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, DOBUTSU_TB_CACHE=cache)
        cold, _, _ = ours(LION_CHICK, os.path.join(tmp, "lc.h5"), env)
        warm, _, _ = ours(LION_CHICK, os.path.join(tmp, "lc.h5"), env)
    print(f"numba compilation: {cold - warm:.1f} s (a small build took {cold:.1f} s with an empty kernel cache, "
          f"{warm:.1f} s with it filled)")
    return cold - warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="dobutsu", help="the game (default: dobutsu)")
    parser.add_argument("--start", default=None, help="start position (default: the variant's start)")
    parser.add_argument("--scaling", action="store_true", help="1 thread against every CPU, per phase")
    parser.add_argument("--out", default=None, help="output file (default: a temporary file, removed)")
    parser.add_argument("--compile", action="store_true", help="measure numba's compile time first")
    parser.add_argument("--peer", default=None, metavar="GENTB", help="a built gentb to run side by side")
    parser.add_argument("--runs", type=int, default=1,
                        help="pairs of runs with --peer, runs with --enumeration or --write (default 1)")
    parser.add_argument("--cluster", default=None, metavar="ADDRESS", help="build on a Ray cluster ('local')")
    parser.add_argument("--workers", type=int, default=2, help="workers with --cluster (default 2)")
    parser.add_argument("--worker-threads", type=int, default=None, help="threads of each worker with --cluster")
    parser.add_argument("--compare", action="store_true", help="with --cluster: the in-process build first, and the "
                                                               "ratio of the wall times")
    parser.add_argument("--enumeration", action="store_true", help="only the enumeration, --runs times")
    parser.add_argument("--write", default=None, metavar="TABLEBASE", help="only the write phase, of this file's "
                        "positions, --runs times")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-write", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-enumeration", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if os.environ.get(PIN_ENV):  # a build on one CPU: before numba's threads and the pools start
        os.sched_setaffinity(0, {int(os.environ[PIN_ENV])})
    if args.child:
        child(args.variant, args.start, args.out, args.cluster, args.workers, args.worker_threads)
        return
    if args.child_enumeration:
        enumeration_child(args.variant, args.start)
        return
    if args.child_write:
        write_child(args.child_write, args.out)
        return

    tmp = Path(tempfile.mkdtemp())
    out = args.out or str(tmp / "bench.h5")
    if args.compile or args.peer:
        compile_time()
    ours(LION_CHICK, str(tmp / "warm.h5"))  # fill the kernel cache
    if args.write:
        write_runs(args.write, out, args.runs)
    elif args.enumeration:
        enumeration_runs(args.variant, args.start, args.runs)
    elif args.scaling:
        scaling(args.variant, args.start, out)
    elif args.cluster:
        cluster = ["--cluster", args.cluster, "--workers", str(args.workers)] + (
            ["--worker-threads", str(args.worker_threads)] if args.worker_threads else [])
        ours(LION_CHICK, str(tmp / "warm.h5"), cluster=cluster)  # the workers' kernels too
        if args.compare:
            wall0, peak0, report0 = ours(args.start, out, variant=args.variant)
            print("in this process:")
            print_phases(report0, wall0, peak0)
            print()
        wall, peak, report = ours(args.start, out, variant=args.variant, cluster=cluster)
        print(f"on the cluster ({args.cluster}, {args.workers} workers):")
        print_phases(report, wall, peak)
        if args.compare:
            print(f"\nratio cluster / in-process wall time: {wall / wall0:.2f} ({wall:.1f} s / {wall0:.1f} s)")
    elif not args.peer:
        wall, peak, report = ours(args.start, out, variant=args.variant)
        print_phases(report, wall, peak)
    else:
        threads = os.environ.get("NUMBA_NUM_THREADS") or str(os.cpu_count() or 1)
        rows = []
        for k in range(args.runs):
            peer_wall, peer_peak, _ = run([args.peer, "-j", threads, str(tmp / "peer.tb")], capture=False)
            wall, peak, report = ours(None, out)
            rows.append((peer_wall, peer_peak, wall, peak))
            print(f"pair {k + 1}: gentb -j {threads} {peer_wall:.1f} s, {peer_peak / 2**20:.0f} MiB; "
                  f"ours {wall:.1f} s, {peak / 2**20:.0f} MiB; ratio ours/peer {wall / peer_wall:.2f}", flush=True)
        med = [statistics.median(r[i] for r in rows) for i in range(4)]
        print(f"{'':<18}{'wall s':>10}{'peak MiB':>12}")
        print(f"{'gentb -j ' + threads:<18}{med[0]:>10.1f}{med[1] / 2**20:>12.0f}")
        print(f"{'dobutsu-tb build':<18}{med[2]:>10.1f}{med[3] / 2**20:>12.0f}")
        print(f"ratio ours/peer: {statistics.median(r[2] / r[0] for r in rows):.2f} (median of {len(rows)} pairs)")
        print_phases(report, wall, peak)
    for p in tmp.iterdir():
        if not args.out or str(p) != args.out:
            p.unlink()


if __name__ == "__main__":
    main()
