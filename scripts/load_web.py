#!/usr/bin/env python3
"""A bounded load test of ``dobutsu-tb serve``: probes per second over 127.0.0.1.

Usage: python scripts/load_web.py PATH [--requests N] [--seconds S] [--clients C] [--pool P]
       [--in-memory] [--seed K]

Starts ``dobutsu-tb serve --tb PATH`` (``--chunked``, or ``--in-memory`` if given) on a free port
of 127.0.0.1, collects P distinct positions from random games (the Python API, before the clock starts), then
C client threads, each with one keep-alive connection, send ``GET /api/probe?position=...``
until N requests are answered or S seconds have passed, whichever comes first; the server is
stopped at the end. With P >= N every request asks a new position (no answer comes from the
server's cache of recent probes); a smaller pool revisits positions, as people do.

Prints the server's start-up (seconds from the command to its address, and its resident memory
then), the requests answered, the failures, the wall time, probes per second and the latency
percentiles (milliseconds), then the seconds of ``/api/line`` of the file's start position and
of ``/api/stats`` asked twice (counted once, then kept). Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase

HOST = "127.0.0.1"


def random_positions(path, count: int, seed: int) -> list[str]:
    """``count`` distinct positions (texts) the file covers, from random games from its start."""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    with open_tablebase(path) as tb:
        start = Position.from_text(tb.metadata.start, tb.variant)
        while len(found) < count:
            position = start
            for _ in range(rng.randint(1, 60)):
                moves = [m for m in tb.probe_moves(position) if m.position is not None and m.wdl is not None
                         and m.terminal is None]
                if not moves:
                    break
                position = rng.choice(moves).position
                found.setdefault(position.text())
                if len(found) >= count:
                    break
    return list(found)


def start_server(path, in_memory: bool) -> tuple[subprocess.Popen, int]:
    started = time.perf_counter()
    cli = Path(sys.executable).parent / "dobutsu-tb"
    args = [str(cli), "serve", "--tb", str(path), "--host", HOST, "--port", "0",
            "--in-memory" if in_memory else "--chunked"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
    if found is None:
        proc.kill()
        sys.exit("the server did not start")
    with open(f"/proc/{proc.pid}/status") as f:
        rss = int(f.read().split("VmRSS:")[1].split()[0]) * 1024
    print(f"start-up: {time.perf_counter() - started:.2f} s to the address, {rss / 2**20:.0f} MiB resident")
    return proc, int(found.group(1))


def timed_get(port: int, path: str) -> float:
    """Seconds to answer one ``GET path`` on a new connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=300)
    t = time.perf_counter()
    conn.request("GET", path)
    conn.getresponse().read()
    conn.close()
    return time.perf_counter() - t


def client(port: int, queue: list, lock: threading.Lock, deadline: float, latencies: list, failures: list) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    while time.perf_counter() < deadline:
        with lock:
            if not queue:
                break
            position = queue.pop()
        t = time.perf_counter()
        try:
            conn.request("GET", "/api/probe?position=" + urllib.parse.quote(position, safe="/"))
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException) as exc:
            ok = False
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=30)
            failures.append(repr(exc))
        latencies.append(time.perf_counter() - t)
        if not ok and len(failures) < 1000:
            failures.append(position)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--requests", type=int, default=3000, help="requests at most")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds at most")
    parser.add_argument("--clients", type=int, default=4, help="concurrent connections")
    parser.add_argument("--pool", type=int, default=None, help="distinct positions (default: one per request)")
    parser.add_argument("--in-memory", action="store_true", help="serve with --in-memory (default: --chunked)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pool = random_positions(args.path, args.pool or args.requests, args.seed)
    rng = random.Random(args.seed + 1)
    queue = [rng.choice(pool) for _ in range(args.requests)] if args.pool else pool[:args.requests]
    distinct = len(set(queue))
    proc, port = start_server(args.path, args.in_memory)
    try:
        conn = http.client.HTTPConnection(HOST, port, timeout=60)  # the page's first request, not timed
        conn.request("GET", "/api/info")
        start = json.loads(conn.getresponse().read())["start"]
        conn.close()
        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(port, queue, lock, t0 + args.seconds, latencies, failures))
                   for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        line = timed_get(port, "/api/line?position=" + urllib.parse.quote(start, safe="/"))
        stats = [timed_get(port, "/api/stats") for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ms = sorted(x * 1e3 for x in latencies)
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else ms * 99
    print(f"{len(ms)} probes ({distinct} distinct positions among the {args.requests} queued), "
          f"{len(failures)} failed, {args.clients} clients, {'in memory' if args.in_memory else 'chunked'}")
    print(f"{wall:.2f} s: {len(ms) / wall:.0f} probes/s; latency ms: median {q[49]:.1f}, p90 {q[89]:.1f}, "
          f"p99 {q[98]:.1f}, max {ms[-1]:.1f}")
    print(f"/api/line of {start}: {line:.3f} s; /api/stats: {stats[0]:.2f} s, then {stats[1] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
