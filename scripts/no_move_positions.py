#!/usr/bin/env python3
"""Which values hinge on the positions without a legal move, and jh85's counts with them as draws.

Usage::

    python scripts/no_move_positions.py dobutsu-5x3.h5

Our rules make a player without a legal move lose (docs/rules.md). jh85/dobutsushogi's solver
seeds its retrograde analysis from terminal positions only, so a non-terminal position without a
move is never decided and ends up among its draws. This script finds the positions whose value
changes under that convention, from the tablebase alone:

1. the positions without a move (the stored losses in 0), found by scanning ``/values``;
2. the *suspects*: positions whose proof of their value, by induction on the DTM, may pass through
   one of those. A win in d stays proven when a move leads to a loss in d - 1 that is not a
   suspect; a loss stays proven unless a move leads to a suspect. Only the predecessors of new
   suspects need looking at (unmoves);
3. the suspects' values under jh85's convention: the least fixed point of the game's equations
   (a win has a move to a loss, a loss has moves and all of them to wins), with every other
   position's value kept; a suspect left undecided is a draw there.

It prints the positions whose value changes, and the counts of all reachable positions in jh85's
convention (catch-terminal positions wins, try-terminal ones losses) before and after the change.
It reads the file lazily: a few hundred MB of memory.
"""

from __future__ import annotations

import argparse
import sys
import time

from dobutsu_tb.tablebase.game.layout import CATCH, TRY
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN, signed_text


def no_move_keys(path) -> list[int]:
    """Keys of the stored positions lost in 0 (value byte 1), by a scan of every /values chunk."""
    with TablebaseFile(path) as f:
        if f.metadata.no_moves == 0:
            return []
        found = []
        for c in range(f.chunk_count(True)):
            values = f.read_values(c)
            for j in (values == 1).nonzero()[0].tolist():
                i = c * f.value_chunk + j
                found.append(int(f.read_keys(i // f.key_chunk)[i % f.key_chunk]))
        return found


class Graph:
    """The game around the suspects: moves and unmoves of stored positions, by canonical key."""

    def __init__(self, tb):
        self.tb = tb
        self.variant = tb.variant
        self.game = tb.game
        self._moves = {}

    def value(self, key: int) -> int:
        """The stored WDL of a non-terminal position (1, 0, -1)."""
        return self.tb.lookup_key(key)[0]

    def moves(self, key: int) -> list:
        """One entry per legal move: the key of the position after it when that is stored, else
        the move's fixed WDL for the mover (a move to a catch-terminal position loses, one to a
        try-terminal position or capturing the royal piece wins)."""
        out = self._moves.get(key)
        if out is None:
            pos = Position.from_key(key, self.variant)
            out = []
            for mv in self.tb.probe_moves(pos):
                if mv.position is None or mv.terminal is not None:
                    out.append(("fixed", mv.wdl))
                else:
                    out.append(("key", mv.position.key()))
            self._moves[key] = out
        return out

    def parents(self, key: int) -> list[int]:
        """Canonical keys of the stored predecessors."""
        state = Position.from_key(key, self.variant).state()
        keys = set()
        for p in self.game.predecessors(state, nonterminal_only=True):
            pos = Position.from_state(p, variant=self.variant)
            if self.game.classify(pos.state()) not in (CATCH, TRY) and self.tb.lookup_key(pos.key()) is not None:
                keys.add(pos.key())
        return sorted(keys)


def suspects_of(graph: Graph, roots: list[int]) -> set[int]:
    """Positions whose proof of their value may pass through ``roots`` (roots included).

    A proof is checked by induction on the DTM, never in a circle: a win in d stays proven when a
    move leads to a loss in d - 1 that is not a suspect; a loss stays proven when no move leads to
    a suspect (its moves all lead to shorter wins).
    """
    suspects = set(roots)
    todo = list(roots)
    while todo:
        s = todo.pop()
        for p in graph.parents(s):
            if p in suspects:
                continue
            w, dtm = graph.tb.lookup_key(p)
            if w == DRAW:
                continue
            if w == WIN:
                proven = any((kind == "fixed" and v == WIN)
                             or (kind == "key" and v not in suspects and graph.tb.lookup_key(v) == (LOSS, 1 - dtm))
                             for kind, v in graph.moves(p))
            else:
                proven = not any(kind == "key" and v in suspects for kind, v in graph.moves(p))
            if not proven:
                suspects.add(p)
                todo.append(p)
    return suspects


def resolve(graph: Graph, suspects: set[int], undecided: set[int]) -> dict:
    """The suspects' WDL when the positions in ``undecided`` are left undecided (least fixed
    point, every other position keeping its stored value): a dict key -> WDL (DRAW if undecided)."""
    value = {}

    def mover(kind, v):  # a move's WDL for its player, None while undecided
        if kind == "fixed":
            return v
        if v in suspects:
            w = value.get(v)
            return None if w is None else -w
        return -graph.value(v)

    changed = True
    while changed:
        changed = False
        for s in suspects:
            if s in value or s in undecided:
                continue
            results = [mover(kind, v) for kind, v in graph.moves(s)]
            if any(r == WIN for r in results):
                value[s] = WIN
                changed = True
            elif results and all(r == LOSS for r in results):
                value[s] = LOSS
                changed = True
    return {s: value.get(s, DRAW) for s in suspects}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tablebase")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    roots = no_move_keys(args.tablebase)
    print(f"positions without a legal move: {len(roots)} ({time.perf_counter() - t0:.1f} s to find)")
    with open_tablebase(args.tablebase) as tb:
        graph = Graph(tb)
        for k in roots:
            print(f"  {Position.from_key(k, tb.variant).text()}")
        suspects = suspects_of(graph, roots)
        after = resolve(graph, suspects, set(roots))
        names = {WIN: "win", DRAW: "draw", LOSS: "loss"}
        changes = {WIN: 0, DRAW: 0, LOSS: 0}
        print(f"positions whose proof may pass through them: {len(suspects)}")
        print("values that change when they are draws (ours -> jh85's convention):")
        for k in sorted(suspects, key=lambda k: (tb.lookup_key(k)[1], k)):
            wdl, dtm = tb.lookup_key(k)
            if after[k] != wdl:
                changes[wdl] += 1
                print(f"  {Position.from_key(k, tb.variant).text()}: {names[wdl]} (DTM {signed_text(dtm)}) -> "
                      f"{names[after[k]]}")
        m = tb.metadata
        wins, draws, losses = m.wins + m.catch_terminal, m.draws, m.losses + m.try_terminal
        moved = changes[WIN] + changes[LOSS]
        print(f"all reachable positions, jh85's convention, ours:      {wins:,} / {losses:,} / {draws:,} (W/L/D)")
        print(f"  with the positions without a move left undecided: {wins - changes[WIN]:,} / "
              f"{losses - changes[LOSS]:,} / {draws + moved:,} (W/L/D)")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
