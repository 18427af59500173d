"""Verifying published lines against a tablebase (``dobutsu-tb verify-line``).

A line is replayed from its start; for every ply the report gives the move, the value of the
position before it (for the side that moves) and after it (for the side then to move), and
whether the move is optimal: it keeps the value, and wins as fast or loses as slowly as
possible (SPEC §1.5), i.e. it is as good as the tablebase's best move. Where it is not, the
report lists the best moves. The verdict says the start position's true value, whether the line
is perfect play, and the first ply where either side went wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dobutsu_tb.tablebase.game.notation import IllegalMoveError, move_text, parse_move
from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
from dobutsu_tb.tablebase.probe import MoveValue, Tablebase
from dobutsu_tb.tablebase.values import DRAW, WIN, describe_value


def mover_value(m: MoveValue) -> tuple[int | None, int | None]:
    """(WDL, unsigned DTM) of playing ``m``, for the side that plays it (plies from before it)."""
    if m.terminal == "lion captured":
        return WIN, 1
    if m.wdl is None:
        return None, None
    if m.wdl == DRAW:
        return DRAW, 0
    return -m.wdl, abs(m.dtm) + 1


@dataclass
class PlyReport:
    """One ply of a verified line.

    Attributes
    ----------
    ply : int
        1 for the first move.
    side : int
        0 Sente, 1 Gote: who played it.
    move : str
        The move, in SPEC §1.6 notation.
    before : (int, int)
        WDL and unsigned DTM (plies) of the position before the move, for ``side``.
    after : (int or None, int or None)
        WDL and signed DTM of the position after it, for the side then to move.
    result : (int or None, int or None)
        WDL and unsigned DTM of playing the move, for ``side`` (plies from before it).
    optimal : bool
        The move is as good as the best move.
    best : list of str
        The best moves, with their values for ``side``, when the move is not optimal.
    position : Position or None
        The position after the move (None once a lion is captured).
    """

    ply: int
    side: int
    move: str
    before: tuple
    after: tuple
    result: tuple
    optimal: bool
    best: list = field(default_factory=list)
    position: Position | None = None
    ending: str | None = None


@dataclass
class LineReport:
    """A verified line: its plies and the verdict.

    Attributes
    ----------
    start : Position
    start_value : (int, int)
        True WDL and unsigned DTM (plies) of the start position.
    plies : list of PlyReport
        The legal plies, in order.
    illegal : (int, str, str) or None
        (ply, move, reason) of the first illegal move; the replay stops there.
    """

    start: Position
    start_value: tuple
    plies: list = field(default_factory=list)
    illegal: tuple | None = None

    @property
    def first_mistake(self) -> PlyReport | None:
        """The first ply whose move is not optimal, or None."""
        return next((p for p in self.plies if not p.optimal), None)

    @property
    def perfect(self) -> bool:
        """Every move legal and optimal."""
        return self.illegal is None and self.first_mistake is None

    def verdict(self) -> str:
        """One paragraph: the true value, perfect play or not, the first mistake."""
        side = SIDE_NAMES[self.start.turn]
        lines = [f"The start position {self.start.text()} is a "
                 f"{describe_value(*self.start_value)} for {side} (the side to move)."
                 if self.start_value[0] != DRAW else
                 f"The start position {self.start.text()} is a draw."]
        if self.illegal:
            ply, move, reason = self.illegal
            lines.append(f"Ply {ply} ({move}) is illegal: {reason}.")
        mistake = self.first_mistake
        if mistake is None and self.illegal is None:
            end = self.plies[-1].ending if self.plies else None
            lines.append(f"The line is perfect play: every one of its {len(self.plies)} plies is optimal"
                         + (f" and {end}." if end else ", though it stops before the game ends."))
        elif mistake is not None:
            lines.append(f"The line is not perfect play: the first mistake is ply {mistake.ply}, "
                         f"{SIDE_NAMES[mistake.side]}'s {mistake.move} ({describe_value(*mistake.result, unit=False)} "
                         f"instead of {describe_value(*mistake.before, unit=False)}); best: {', '.join(mistake.best)}.")
        return " ".join(lines)


def verify_line(tb: Tablebase, start, moves: list[str]) -> LineReport:
    """Replay ``moves`` from ``start`` and judge each against the tablebase.

    Parameters
    ----------
    tb : Tablebase
        A tablebase that covers ``start``.
    start : Position or str
    moves : list of str
        Moves in SPEC §1.6 notation.

    Returns
    -------
    LineReport

    Raises
    ------
    tablebase.probe.MissingPositionError
        If the tablebase does not cover the start position.
    """
    pos = start if isinstance(start, Position) else Position.from_text(start)
    wdl0 = tb.probe_wdl(pos)
    report = LineReport(pos, (wdl0, abs(tb.probe_dtm(pos))))
    over = None
    for ply, text in enumerate(moves, 1):
        side = pos.turn if pos is not None else None
        if over:
            report.illegal = (ply, text, f"the game is over ({over})")
            break
        try:
            mv = parse_move(pos, text)
        except IllegalMoveError as exc:
            report.illegal = (ply, text, str(exc).split(": ", 1)[-1])
            break
        wdl = tb.probe_wdl(pos)
        before = (wdl, abs(tb.probe_dtm(pos)))
        options = tb.probe_moves(pos)
        played_text = move_text(pos, mv)
        played = next(m for m in options if m.move == played_text)
        best_key = options[0].sort_key()
        optimal = played.sort_key() == best_key
        best = [] if optimal else [f"{m.move} ({describe_value(*mover_value(m), unit=False)})"
                                   for m in options if m.sort_key() == best_key]
        ending = None
        if played.terminal == "lion captured":
            ending = f"{SIDE_NAMES[side]} captures the lion"
            over = ending
        elif played.terminal == "try":
            ending = f"{SIDE_NAMES[side]}'s lion reaches the far rank safely"
            over = ending
        report.plies.append(PlyReport(ply, side, played_text, before, (played.wdl, played.dtm),
                                      mover_value(played), optimal, best, played.position, ending))
        pos = played.position
    return report


_MOVE_NUMBER = re.compile(r"^\d+\.+$")


def read_games(path) -> list[list[str]]:
    """Games from a text file: one move per line (one game), or one game per line.

    Move numbers (``1.``), blank lines and ``#`` comments are ignored. If every non-blank line
    holds a single move the file is one game; otherwise each line is a game.

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    lines = []
    for raw in Path(path).read_text().splitlines():
        tokens = [t for t in raw.split("#", 1)[0].split() if not _MOVE_NUMBER.match(t)]
        if tokens:
            lines.append(tokens)
    if all(len(t) == 1 for t in lines):
        return [[t[0] for t in lines]] if lines else []
    return lines
