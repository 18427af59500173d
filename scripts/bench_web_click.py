#!/usr/bin/env python3
"""Click-to-update time of the web explorer, measured in a real browser (headless Chromium).

Usage: python scripts/bench_web_click.py PATH [--clicks N] [--in-memory] [--seed K] [--chromium BIN]
       [--screenshot FILE]

Starts ``dobutsu-tb serve --tb PATH`` (``--chunked``, or ``--in-memory`` if given) on a free port
of 127.0.0.1 and opens the page in Debian's
Chromium (Playwright's Python API). From the file's start position it plays random legal moves
by clicking on the board, the piece and then its square (or the piece in hand, then the square),
and starts again from the start when a game ends. For each move, the page itself measures the
time from the click on the square (the event's time stamp) to the page updated: the new board,
value and move list drawn (the page's ``explorer:rendered`` event), plus the next frame (a
``requestAnimationFrame`` and a zero timeout). Prints the median, 90th percentile and maximum
over N moves, and the number of distinct positions visited (each probe of a new position goes
to the server; a revisited one comes from the page's cache). ``--screenshot`` saves the page of
the start position first.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# In the page: the click's time stamp, and the time from it to the frame after the next update.
MEASURE = """
document.addEventListener("click", (ev) => { window.__clickAt = ev.timeStamp; }, true);
document.addEventListener("explorer:rendered", () => {
  const at = window.__clickAt;
  requestAnimationFrame(() => setTimeout(() => { window.__took = performance.now() - at; }, 0));
});
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--clicks", type=int, default=200, help="moves to play (each one measured)")
    parser.add_argument("--in-memory", action="store_true", help="serve with --in-memory (default: --chunked)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshot", default=None, help="save the start position's page here (PNG)")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    cli = Path(sys.executable).parent / "dobutsu-tb"
    server = subprocess.Popen([str(cli), "serve", "--tb", args.path, "--port", "0"]
                              + (["--in-memory"] if args.in_memory else ["--chunked"]),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    found = re.search(r"http://127\.0\.0\.1:\d+/", server.stdout.readline())
    if found is None:
        server.kill()
        sys.exit("the server did not start")
    url = found.group(0)
    rng = random.Random(args.seed)
    took, seen = [], set()
    try:
        with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
            context = p.chromium.launch_persistent_context(profile, executable_path=args.chromium,
                                                           args=CHROMIUM_ARGS, viewport={"width": 1200, "height": 900})
            page = context.pages[0] if context.pages else context.new_page()
            page.add_init_script(MEASURE)
            page.goto(url)
            page.wait_for_function("() => document.body.dataset.state === 'ready'")
            start = page.url
            if args.screenshot:
                page.screenshot(path=args.screenshot, full_page=True)
            while len(took) < args.clicks:
                moves = page.eval_on_selector_all("#moves tbody tr[data-move]", "rows => rows.map(r => r.dataset.move)")
                over = page.locator("#game-over").is_visible() or page.get_attribute("body", "data-state") != "ready"
                if over or not moves:
                    page.goto(start)
                    page.wait_for_function("() => document.body.dataset.state === 'ready'")
                    continue
                move = rng.choice(moves)
                side = "sente" if page.get_attribute("body", "data-position").startswith("S") else "gote"
                if move[1] == "*":
                    page.click(f'[data-hand="{move[0]}"][data-side="{side}"]')
                else:
                    page.click(f'[data-square="{move[1:3]}"]')
                page.evaluate("() => { window.__took = null; }")
                page.click(f'[data-square="{move[-3:-1] if move.endswith("+") else move[-2:]}"]')
                page.wait_for_function("() => window.__took !== null")
                took.append(page.evaluate("() => window.__took"))
                seen.add(page.get_attribute("body", "data-position"))
            context.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    q = statistics.quantiles(took, n=10)
    print(f"{len(took)} moves clicked, {len(seen)} distinct positions, {'in memory' if args.in_memory else 'chunked'}")
    print(f"click to updated page, ms: median {statistics.median(took):.1f}, p90 {q[8]:.1f}, max {max(took):.1f}")


if __name__ == "__main__":
    main()
