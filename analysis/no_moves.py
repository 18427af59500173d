"""The positions without a legal move, and the values that hinge on them.

Our rules make a player without a legal move lose (docs/rules.md §3): such a position is a loss
in 0 plies. jh85/dobutsushogi's solver seeds its retrograde analysis from terminal positions only,
so it never decides them and counts them among its draws, with every value whose proof needs
them. None is reachable in the standard game; the 5x3 board has four, and
:func:`jh85_counts` turns our counts into jh85's published ones (2,597,975,993 wins, 683,720,498
losses and 78,214,035 draws for the side to move, terminal positions included).

The values that change are found from the tablebase alone, with its moves and unmoves:

1. the *suspects*: positions whose proof of their value, by induction on the DTM, may pass
   through a position without a move. A win in d stays proven when a move leads to a loss in
   d - 1 that is not a suspect; a loss stays proven unless a move leads to a suspect. Only the
   predecessors of new suspects need looking at;
2. their values with the positions without a move left undecided: the least fixed point of the
   game's equations (a win has a move to a loss; a loss has moves, all of them to wins), every
   other position keeping its stored value. A suspect left undecided is a draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dobutsu_tb.tablebase.game.layout import CATCH, TRY
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import Tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import HISTOGRAM_STEP
from dobutsu_tb.tablebase.values import DRAW, LOSS, WIN

#: The value byte of a loss in 0 plies: a position without a legal move.
NO_MOVE_CODE = 1


@dataclass(frozen=True)
class Change:
    """A value that changes when the positions without a move are left undecided.

    Attributes
    ----------
    position : Position
    wdl, dtm : int
        Its stored value (WDL, signed DTM in plies).
    undecided_wdl : int
        Its WDL with the positions without a move undecided (0: a draw).
    """

    position: Position
    wdl: int
    dtm: int
    undecided_wdl: int


@dataclass(frozen=True)
class Jh85Counts:
    """Counts of all reachable positions in jh85/dobutsushogi's convention (catch-terminal ones
    wins for the side to move, try-terminal ones losses, positions without a move undecided).

    Attributes
    ----------
    wins, draws, losses : int
    no_moves : list of Position
        The positions without a legal move.
    changes : list of Change
        The stored values that differ from jh85's (the positions without a move among them).
    """

    wins: int
    draws: int
    losses: int
    no_moves: list
    changes: list


def no_move_keys(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The keys (int64, shape (k,)) whose value byte says a loss in 0, from a whole file's arrays
    (``TablebaseFile.read_all``), found in slices."""
    found = [keys[lo:lo + HISTOGRAM_STEP][values[lo:lo + HISTOGRAM_STEP] == NO_MOVE_CODE]
             for lo in range(0, values.shape[0], HISTOGRAM_STEP)]
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def scan_no_move_keys(path) -> np.ndarray:
    """The keys of a file's positions without a move, one chunk of /values at a time (little
    memory; about a minute for the 5x3 board's 1.4 M chunks).

    Raises
    ------
    TablebaseFileError
        If the file is missing or damaged.
    """
    found = []
    with TablebaseFile(path) as f:
        if f.metadata.no_moves:
            for c in range(f.chunk_count(True)):
                for j in np.flatnonzero(f.read_values(c) == NO_MOVE_CODE).tolist():
                    i = c * f.value_chunk + j
                    found.append(int(f.read_keys(i // f.key_chunk)[i % f.key_chunk]))
    return np.array(found, np.int64)


class _Graph:
    """The game around the suspects, by canonical key: stored values, moves and unmoves."""

    def __init__(self, tb: Tablebase):
        self.tb = tb
        self._moves: dict = {}

    def value(self, key: int) -> tuple[int, int]:
        return self.tb.lookup_key(key)

    def moves(self, key: int) -> list:
        """One entry per legal move: ``("key", k)`` for a move to the stored position k, or
        ``("fixed", wdl)`` for a move whose value for its player the rules fix (to a terminal
        position, or the royal piece's capture)."""
        out = self._moves.get(key)
        if out is None:
            out = [("fixed", mv.wdl) if mv.position is None or mv.terminal is not None else ("key", mv.position.key())
                   for mv in self.tb.probe_moves(Position.from_key(key, self.tb.variant))]
            self._moves[key] = out
        return out

    def parents(self, key: int) -> list[int]:
        """The canonical keys of the stored predecessors."""
        game, variant = self.tb.game, self.tb.variant
        found = set()
        for state in game.predecessors(Position.from_key(key, variant).state(), nonterminal_only=True):
            pos = Position.from_state(state, variant=variant)
            if game.classify(pos.state()) not in (CATCH, TRY) and self.tb.lookup_key(pos.key()) is not None:
                found.add(pos.key())
        return sorted(found)


def _suspects(graph: _Graph, roots: list[int]) -> set[int]:
    suspects = set(roots)
    todo = list(roots)
    while todo:
        for p in graph.parents(todo.pop()):
            if p in suspects:
                continue
            wdl, dtm = graph.value(p)
            if wdl == DRAW:
                continue
            if wdl == WIN:
                proven = any((kind == "fixed" and v == WIN)
                             or (kind == "key" and v not in suspects and graph.value(v) == (LOSS, 1 - dtm))
                             for kind, v in graph.moves(p))
            else:
                proven = not any(kind == "key" and v in suspects for kind, v in graph.moves(p))
            if not proven:
                suspects.add(p)
                todo.append(p)
    return suspects


def _undecided_values(graph: _Graph, suspects: set[int]) -> dict:
    value: dict = {}

    def for_mover(kind, v):  # a move's WDL for its player; None while undecided
        if kind == "fixed":
            return v
        if v in suspects:
            w = value.get(v)
            return None if w is None else -w
        return -graph.value(v)[0]

    changed = True
    while changed:
        changed = False
        for s in suspects:
            if s in value:
                continue
            results = [for_mover(kind, v) for kind, v in graph.moves(s)]
            if WIN in results:
                value[s] = WIN
                changed = True
            elif results and all(r == LOSS for r in results):
                value[s] = LOSS
                changed = True
    return {s: value.get(s, DRAW) for s in suspects}


def jh85_counts(tb: Tablebase, roots) -> Jh85Counts:
    """Counts of all reachable positions as jh85/dobutsushogi's solver makes them.

    Parameters
    ----------
    tb : Tablebase
        An open tablebase (read lazily: a few probes per suspect).
    roots : array_like of int64, shape (k,)
        The keys of its positions without a move (:func:`no_move_keys`, :func:`scan_no_move_keys`,
        or ``BuildResult.no_move_keys``); its metadata's ``no_moves`` of them.

    Returns
    -------
    Jh85Counts

    Raises
    ------
    ValueError
        If ``roots`` does not hold the file's positions without a move.
    """
    roots = sorted({int(k) for k in np.asarray(roots, np.int64).tolist()})
    m = tb.metadata
    if len(roots) != m.no_moves or any(tb.lookup_key(k) != (LOSS, 0) for k in roots):
        raise ValueError(f"expected the keys of the file's {m.no_moves} positions without a move")
    graph = _Graph(tb)
    suspects = _suspects(graph, roots)
    after = _undecided_values(graph, suspects)
    changes = []
    for key in sorted(suspects, key=lambda k: (abs(graph.value(k)[1]), k)):
        wdl, dtm = graph.value(key)
        if after[key] != wdl:
            changes.append(Change(Position.from_key(key, tb.variant), wdl, dtm, after[key]))
    lost_wins = sum(c.wdl == WIN for c in changes)
    lost_losses = sum(c.wdl == LOSS for c in changes)
    return Jh85Counts(wins=m.wins + m.catch_terminal - lost_wins, draws=m.draws + lost_wins + lost_losses,
                      losses=m.losses + m.try_terminal - lost_losses,
                      no_moves=[Position.from_key(k, tb.variant) for k in roots], changes=changes)
