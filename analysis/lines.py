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
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from dobutsu_tb.analysis.textfiles import read_text, shorten
from dobutsu_tb.encoding.config import KEY_CHUNK, VERIFY_PLIES_PER_CHUNK
from dobutsu_tb.tablebase.game.notation import IllegalMoveError, move_text, parse_move
from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
from dobutsu_tb.tablebase.probe import MissingPositionError, MoveValue, Tablebase
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
    state : int or None
        The normalised packed state after the move (None once a lion is captured); its
        :attr:`position` is made from it when asked for.
    ending : str or None
        How the move ends the game (``"Sente captures the lion"``, ``"Gote's lion reaches the
        far rank safely"``), or None.
    """

    ply: int
    side: int
    move: str
    before: tuple
    after: tuple
    result: tuple
    optimal: bool
    best: list = field(default_factory=list)
    state: int | None = None
    ending: str | None = None

    @property
    def position(self) -> Position | None:
        """The position after the move (None once a lion is captured)."""
        return None if self.state is None else Position.from_state(self.state, 1 - self.side)


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
            report.illegal = (ply, shorten(text), f"the game is over ({over})")
            break
        try:
            mv = parse_move(pos, text)
        except IllegalMoveError as exc:
            report.illegal = (ply, shorten(text), _reason(exc))
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
        over = _ending(played.terminal, side)
        report.plies.append(PlyReport(ply, side, played_text, before, (played.wdl, played.dtm),
                                      mover_value(played), optimal, best,
                                      None if played.position is None else played.position.state(), over))
        pos = played.position
    return report


def _ending(terminal: str | None, side: int) -> str | None:
    """How a move whose child has this terminal class ends the game, or None."""
    if terminal == "lion captured":
        return f"{SIDE_NAMES[side]} captures the lion"
    if terminal == "try":
        return f"{SIDE_NAMES[side]}'s lion reaches the far rank safely"
    return None


def _reason(exc: IllegalMoveError) -> str:
    """Why a move is illegal, without the move in front (:func:`parse_move`'s message)."""
    return str(exc).split(": ", 1)[-1]


def reads_whole_file(tb: Tablebase, plies: int) -> bool:
    """Whether judging ``plies`` plies pays for reading the whole tablebase into memory
    (:data:`~dobutsu_tb.encoding.config.VERIFY_PLIES_PER_CHUNK`)."""
    return plies > VERIFY_PLIES_PER_CHUNK * len(tb) / KEY_CHUNK


def verify_games(tb: Tablebase, start, games: list[list[str]], progress=None) -> Iterator[LineReport]:
    """:func:`verify_line` of many games from one start, at a cost linear in their plies.

    The games are replayed and judged by jitted kernels with the values looked up in batches
    (:mod:`~dobutsu_tb.tablebase.replay`; open the tablebase ``in_memory`` for many games), and
    the reports are made as they are iterated, so that a big file needs little memory. Every
    report equals :func:`verify_line`'s for the same game (the tests compare them).

    Parameters
    ----------
    tb : Tablebase
        A tablebase that covers ``start``.
    start : Position or str
    games : list of list of str
        Moves in SPEC §1.6 notation, game by game.
    progress : callable, optional
        ``progress(games_done)`` while the games are judged (before the first report).

    Returns
    -------
    iterator of LineReport
        One per game, in order.

    Raises
    ------
    tablebase.probe.MissingPositionError
        If the tablebase does not cover the start or a position a game reaches (as
        :func:`verify_line` would for the first such game); raised before any report.
    """
    from dobutsu_tb.tablebase import replay

    pos = start if isinstance(start, Position) else Position.from_text(start)
    start_value = (tb.probe_wdl(pos), abs(tb.probe_dtm(pos)))
    specs_of: dict = {}
    specs = np.fromiter((specs_of[t] if t in specs_of else specs_of.setdefault(t, replay.move_spec(t))
                         for game in games for t in game), np.int64, sum(len(g) for g in games))
    plies = np.fromiter((len(g) for g in games), np.int64, len(games))
    judged = replay.replay_games(tb, pos.state(), pos.turn, specs, plies, progress)
    missing = np.flatnonzero((judged.status == replay.MISSING_BEFORE) | (judged.status == replay.MISSING_CHILD))
    if missing.size:
        i = int(missing[0])
        game = int(np.searchsorted(judged.ply_start, i, side="right")) - 1
        turn = (pos.turn + i - int(judged.ply_start[game])) % 2
        where = (Position.from_state(int(judged.state_before[i]), turn)
                 if judged.status[i] == replay.MISSING_BEFORE else
                 Position.from_state(int(judged.state_after[i]), 1 - turn))
        raise MissingPositionError(f"{where.text()} is not in this tablebase "
                                   f"(not reachable from {tb.metadata.start})")
    return _judged_reports(judged, pos, start_value, games)


def _judged_reports(judged, start: Position, start_value: tuple, games) -> Iterator[LineReport]:
    """The LineReports of :func:`verify_games` from the arrays of ``replay.replay_games``."""
    from dobutsu_tb.tablebase import replay

    texts: dict = {}
    values: dict = {}
    movers: dict = {}
    best_of: dict = {}

    def value(wdl, dtm):  # one shared tuple per value
        key = (wdl, dtm)
        return values.get(key) or values.setdefault(key, key)

    def move_text_of(code):
        return texts.get(code) or texts.setdefault(code, replay.move_text_of(code))

    def mover_of(rank):
        return movers.get(rank) or movers.setdefault(rank, replay.mover_value_of_rank(rank))

    cols = [a.tolist() for a in (judged.status, judged.before_wdl, judged.before_dtm, judged.text, judged.after_wdl,
                                 judged.after_dtm, judged.terminal, judged.rank, judged.best_rank,
                                 judged.state_after, judged.n_best)]
    status, before_wdl, before_dtm, text, after_wdl, after_dtm, terminal, rank, best_rank, state_after, n_best = cols
    best_text, best_start = judged.best_text.tolist(), judged.best_start.tolist()
    ply_start = judged.ply_start.tolist()
    next_best = 0
    for g, moves in enumerate(games):
        report = LineReport(start, start_value)
        first = ply_start[g]
        over = None
        for n, move in enumerate(moves):
            i = first + n
            side = (start.turn + n) % 2
            st = status[i]
            if st == replay.OVER:
                report.illegal = (n + 1, shorten(move), f"the game is over ({over})")
                break
            if st == replay.ILLEGAL:
                here = Position.from_state(int(judged.state_before[i]), side)
                try:
                    parse_move(here, move)
                except IllegalMoveError as exc:
                    report.illegal = (n + 1, shorten(move), _reason(exc))
                    break
                raise AssertionError(f"the replay found {move!r} illegal in {here.text()}, parse_move did not")
            if st != replay.OK:
                break
            term = replay.TERMINAL_NAMES[terminal[i]]
            if after_wdl[i] == replay.UNKNOWN_WDL:
                after = result = (None, None)
            else:
                after = value(after_wdl[i], after_dtm[i])
                result = mover_of(rank[i])
            best = []
            if n_best[i]:
                verdict = describe_value(*mover_of(best_rank[i]), unit=False)
                for code in best_text[best_start[next_best]:best_start[next_best + 1]]:
                    key = (code, verdict)
                    best.append(best_of.get(key) or best_of.setdefault(key, f"{move_text_of(code)} ({verdict})"))
                next_best += 1
            over = _ending(term, side)
            report.plies.append(PlyReport(n + 1, side, move_text_of(text[i]), value(before_wdl[i], before_dtm[i]),
                                          after, result, rank[i] == best_rank[i], best,
                                          None if state_after[i] < 0 else state_after[i], over))
        yield report



_MOVE_NUMBER = re.compile(r"^\d+\.+$")


def read_games(path) -> list[list[str]]:
    """Games from a text file: one move per line (one game), or one game per line.

    Move numbers (``1.``), blank lines and ``#`` comments are ignored. If every non-blank line
    holds a single move the file is one game; otherwise each line is a game.

    Raises
    ------
    dobutsu_tb.analysis.textfiles.InputFileError
        If the file is not UTF-8 text.
    OSError
        If the file cannot be read.
    """
    lines = []
    for raw in read_text(path).splitlines():
        tokens = [t for t in raw.split("#", 1)[0].split() if not _MOVE_NUMBER.match(t)]
        if tokens:
            lines.append(tokens)
    if all(len(t) == 1 for t in lines):
        return [[t[0] for t in lines]] if lines else []
    return lines
