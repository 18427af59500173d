"""Verifying published lines against a tablebase (``dobutsu-tb verify-line``).

A line is replayed from its start; for every ply the report gives the move, the value of the
position before it (for the side that moves) and after it (for the side then to move), the
move's value for its player, and whether the move is optimal: it keeps the value, and wins as
fast or loses as slowly as possible (docs/rules.md §7), i.e. it is as good as the tablebase's
best move. Values follow docs/rules.md §7: WDL and signed DTM in plies. Where it is not, the
report lists the best moves. The verdict says the start position's true value, whether the line
is perfect play, and the first ply where either side went wrong.

The game's history counts as the rules say (docs/rules.md §3): a move to a position that has
occurred twice before in the line is a draw, and ends the game. At a ply where a move would
repeat so, the moves are judged with it (as the UCI engine judges its root's), and the value
before the move is the best move's in this game; the tablebase's values know no history.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from dobutsu_tb.analysis.textfiles import MAX_GAMES_BYTES, read_text, shorten, without_comments
from dobutsu_tb.encoding.config import KEY_CHUNK
from dobutsu_tb.tablebase.game.notation import IllegalMoveError, Move, move_text, parse_move
from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position
from dobutsu_tb.tablebase.probe import MissingPositionError, Tablebase
from dobutsu_tb.tablebase.values import DRAW, UNKNOWN, Terminal, describe_value, value_of_rank


@dataclass(slots=True)
class PlyReport:
    """One ply of a verified line.

    Attributes
    ----------
    ply : int
        1 for the first move.
    side : int
        0 Sente, 1 Gote: who played it.
    move : str
        The move, in our notation (docs/rules.md §8).
    before : (int, int)
        WDL and signed DTM (plies) of the position before the move, for ``side`` (its side to move):
        its best move's value in this game (the module docstring).
    after : (int or None, int or None)
        WDL and signed DTM of the position after it, for the side then to move.
    result : (int or None, int or None)
        The move's value for ``side``: WDL and signed DTM, plies from before it.
    optimal : bool
        The move is as good as the best move.
    best : list of str
        The best moves, with their values for ``side``, when the move is not optimal.
    state : (int, int) or None
        The normalised packed state after the move (None once a lion is captured); its
        :attr:`position` is made from it when asked for.
    variant : Variant or None
        The game (None: dobutsu shogi).
    ending : str or None
        How the move ends the game (``"Sente captures the lion"``, ``"Gote's lion reaches the
        far rank safely"``, :data:`REPETITION`), or None.
    """

    ply: int
    side: int
    move: str
    before: tuple
    after: tuple
    result: tuple
    optimal: bool
    best: list = field(default_factory=list)
    state: tuple | None = None
    ending: str | None = None
    variant: object = None

    @property
    def position(self) -> Position | None:
        """The position after the move (None once a lion is captured)."""
        return None if self.state is None else Position.from_state(self.state, 1 - self.side, self.variant)


#: The ending of a move that makes a position occur for the third time (docs/rules.md §3).
REPETITION = "the position occurs for the third time, a draw by repetition"


@functools.lru_cache(maxsize=64)
def _text_of(position: Position) -> str:
    """``position.text()``, made once for the start of many games."""
    return position.text()


@dataclass
class LineReport:
    """A verified line: its plies and the verdict.

    Attributes
    ----------
    start : Position
    start_value : (int, int)
        True WDL and signed DTM (plies) of the start position, for its side to move.
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
        start = _text_of(self.start)
        lines = [f"The start position {start} is a {describe_value(*self.start_value)} for {side} (the side to "
                 "move)." if self.start_value[0] != DRAW else f"The start position {start} is a draw."]
        if self.illegal:
            ply, move, reason = self.illegal
            lines.append(f"Ply {ply} ({move}) is illegal: {reason}.")
        mistake = self.first_mistake
        if mistake is None and self.illegal is None:
            end = self.plies[-1].ending if self.plies else None
            every = (f"every one of its {len(self.plies):,} plies is" if len(self.plies) != 1 else "its one ply is")
            lines.append(f"The line is perfect play: {every} optimal"
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
        Moves in our notation (docs/rules.md §8) or UCI's.

    Returns
    -------
    LineReport

    Raises
    ------
    dobutsu_tb.tablebase.probe.MissingPositionError
        If the tablebase does not cover the start position.
    """
    pos = tb.position(start)
    report = LineReport(pos, tb.value(pos)[:2])
    over = None
    seen = Counter([pos])  # the occurrences of each position in the line
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
        before = tb.value(pos)[:2]
        options = tb.probe_moves(pos)
        repeats = {m.move for m in options if m.repeats_third_time(seen)}
        if repeats:  # those moves draw: judge the moves in this game, in the order they are generated
            order = {move_text(pos, m): i for i, m in enumerate(pos.game.legal_move_list(pos.state()))}
            options = [dataclasses.replace(m, wdl=DRAW, dtm=0, after_wdl=DRAW, after_dtm=0) if m.move in repeats
                       else m for m in options]
            options.sort(key=lambda m: (m.sort_key(), order[m.move]))
            before = value_of_rank(options[0].sort_key())
        played_text = move_text(pos, mv)
        played = next(m for m in options if m.move == played_text)
        best_key = options[0].sort_key()
        optimal = played.sort_key() == best_key
        best_moves = [] if optimal else [m for m in options if m.sort_key() == best_key]
        if len(best_moves) > 1 and not repeats:  # in the order of generation, as verify_games' kernels list them
            order = {move_text(pos, m): i for i, m in enumerate(pos.game.legal_move_list(pos.state()))}
            best_moves.sort(key=lambda m: order[m.move])
        best = [f"{m.move} ({describe_value(m.wdl, m.dtm, unit=False)})" for m in best_moves]
        over = REPETITION if played_text in repeats else _ending(played.terminal, side, pos.variant.royal.name)
        report.plies.append(PlyReport(ply, side, played_text, before, (played.after_wdl, played.after_dtm),
                                      (played.wdl, played.dtm), optimal, best,
                                      None if played.position is None else played.position.state(), over,
                                      pos.variant))
        pos = played.position
        seen[pos] += 1
    return report


def _ending(terminal: Terminal | None, side: int, royal: str = "lion") -> str | None:
    """How a move whose child has this terminal class ends the game, or None (``royal``: the
    royal piece's name)."""
    if terminal == Terminal.ROYAL_CAPTURED:
        return f"{SIDE_NAMES[side]} captures the {royal}"
    if terminal == Terminal.TRY:
        return f"{SIDE_NAMES[side]}'s {royal} reaches the far rank safely"
    return None


def _reason(exc: IllegalMoveError) -> str:
    """Why a move is illegal, without the move in front (:func:`parse_move`'s message)."""
    return str(exc).split(": ", 1)[-1]


#: ``verify-line`` reads the whole tablebase into memory when its games have more plies than
#: this fraction of the file's chunks of keys (a ply looks up ten positions or so, each in a
#: chunk of its own; reading every chunk one by one costs more than reading the file at once).
VERIFY_PLIES_PER_CHUNK = 0.125


def reads_whole_file(tb: Tablebase, plies: int) -> bool:
    """Whether judging ``plies`` plies pays for reading the whole tablebase into memory
    (:data:`VERIFY_PLIES_PER_CHUNK`)."""
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
        Moves in our notation (docs/rules.md §8) or UCI's, game by game.
    progress : callable, optional
        ``progress(games_done)`` while the games are judged (before the first report).

    Returns
    -------
    iterator of LineReport
        One per game, in order.

    Raises
    ------
    dobutsu_tb.tablebase.probe.MissingPositionError
        If the tablebase does not cover the start or a position a game reaches (as
        :func:`verify_line` would for the first such game); raised before any report.
    """
    from dobutsu_tb.tablebase import replay

    pos = tb.position(start)
    variant = tb.variant
    start_value = tb.value(pos)[:2]
    specs_of: dict = {}  # each distinct text's spec, made once

    def read_specs():
        for text in {t for game in games for t in game} - specs_of.keys():
            specs_of[text] = replay.move_spec(text, variant)

    read_specs()
    if replay.NOT_A_MOVE in specs_of.values():  # UCI's strings (or moves that are no moves)
        games = [_in_our_notation(pos, game) if any(specs_of[t] == replay.NOT_A_MOVE for t in game) else game
                 for game in games]
        read_specs()  # the texts in our notation
    specs = np.fromiter((specs_of[t] for game in games for t in game), np.int64, sum(len(g) for g in games))
    plies = np.fromiter((len(g) for g in games), np.int64, len(games))
    judged = replay.replay_games(tb, pos.state(), pos.turn, specs, plies, progress)
    status = judged.plies["status"]
    missing = np.flatnonzero((status == replay.MISSING_BEFORE) | (status == replay.MISSING_CHILD))
    if missing.size:
        i = int(missing[0])
        game = int(np.searchsorted(judged.ply_start, i, side="right")) - 1
        turn = (pos.turn + i - int(judged.ply_start[game])) % 2
        p = judged.plies[i]
        where = (Position.from_state((p["board_before"], p["hand_before"]), turn, variant)
                 if status[i] == replay.MISSING_BEFORE else
                 Position.from_state((p["board_after"], p["hand_after"]), 1 - turn, variant))
        raise MissingPositionError(f"{where.text()} is not in this tablebase "
                                   f"(not reachable from {tb.metadata.start})")
    return _judged_reports(judged, pos, start_value, games)


def _in_our_notation(start: Position, moves: list[str]) -> list[str]:
    """A game's moves in our notation, for the replay's kernels, which read only ours: the game is
    played in Python (:func:`parse_move` reads UCI's strings too) up to its first move that is
    not legal or that ends the game (a capture, a try, a position's third occurrence); that move
    and those after it stay as written, so the replay stops where this did and says why."""
    from dobutsu_tb.tablebase.game.notation import play_move

    out = []
    here = start
    seen = Counter([start])
    for k, text in enumerate(moves):
        try:
            mv = parse_move(here, text)
        except IllegalMoveError:
            return out + list(moves[k:])
        out.append(move_text(here, mv))
        here = play_move(here, mv)
        if here is None or here.game.game_over(here.state()):
            return out + list(moves[k + 1:])
        seen[here] += 1
        if seen[here] == 3:
            return out + list(moves[k + 1:])
    return out


#: Games whose reports :func:`verify_games` makes at a time (their plies column by column).
REPORT_GAMES = 4096
#: A value as one integer in :func:`_judged_reports`: ``wdl * _WDL_SCALE + dtm + _DTM_BIAS``
#: (a signed DTM of fewer than ``_DTM_BIAS`` plies either way).
_WDL_SCALE, _DTM_BIAS = 1 << 18, 1 << 17


def _objects(codes: np.ndarray, cache: dict, make) -> list:
    """``[make(c) for c in codes]``, one shared object per distinct code (kept in ``cache``)."""
    for c in np.unique(codes).tolist():
        if c not in cache:
            cache[c] = make(c)
    return [cache[c] for c in codes.tolist()]


def _value_codes(wdl: np.ndarray, dtm: np.ndarray) -> np.ndarray:
    """Values as one integer each (:data:`_WDL_SCALE`)."""
    return wdl.astype(np.int64) * _WDL_SCALE + dtm + _DTM_BIAS


def _value(code: int) -> tuple:
    """(wdl, dtm) of a value code (:data:`_WDL_SCALE`), (None, None) for an unknown value."""
    wdl, dtm = divmod(code, _WDL_SCALE)
    return (None, None) if wdl == UNKNOWN else (wdl, dtm - _DTM_BIAS)


def _best_text(code: int, variant) -> str:
    """``'Lb4-a3 (win in 7)'`` of ``text * 2**32 + rank`` (a best move's text code and rank)."""
    text, rank = divmod(code, 1 << 32)
    return f"{Move.from_code(text, variant)} ({describe_value(*value_of_rank(rank), unit=False)})"


def _best_lists(judged, idx: np.ndarray, best_ordinal: np.ndarray, cache: dict, variant) -> list:
    """For the plies ``idx``, the best moves' texts with their values when the move played is not
    one of them (``'Lb4-a3 (win in 7)'``), else an empty list."""
    plies = judged.plies
    best_list = [[] for _ in range(idx.size)]
    has_best = np.flatnonzero(plies["n_best"][idx] > 0)
    if not has_best.size:
        return best_list
    row = best_ordinal[idx[has_best]]  # consecutive rows of best_start
    b0, b1 = int(judged.best_start[row[0]]), int(judged.best_start[row[-1] + 1])
    ends = (judged.best_start[row + 1] - b0).tolist()
    counts = np.diff(judged.best_start[row[0]:row[-1] + 2])
    ranks = np.repeat(plies["best_rank"][idx[has_best]].astype(np.int64), counts)
    best_texts = _objects(judged.best_text[b0:b1].astype(np.int64) * (1 << 32) + ranks, cache,
                          lambda c: _best_text(c, variant))
    begin = 0
    for k, end in zip(has_best.tolist(), ends):
        best_list[k] = best_texts[begin:end]
        begin = end
    return best_list


def _judged_reports(judged, start: Position, start_value: tuple, games) -> Iterator[LineReport]:
    """The LineReports of :func:`verify_games` from the arrays of ``replay.replay_games``, made
    :data:`REPORT_GAMES` games at a time: each column of their plies at once from the arrays,
    each distinct value, move text or ending made once, then one :class:`PlyReport` a ply."""
    from dobutsu_tb.tablebase import replay

    variant = start.variant
    texts, values, movers, bests = {}, {}, {}, {}
    royal = variant.royal.name
    endings = {code * 2 + side: _ending(terminal, side, royal) for code, terminal in replay.TERMINALS.items()
               for side in (0, 1)}
    endings.update({replay.TERM_REPETITION * 2 + side: REPETITION for side in (0, 1)})
    all_plies = judged.plies
    ok_all = all_plies["status"] == replay.OK
    best_ordinal = np.cumsum(all_plies["n_best"] > 0) - 1  # a ply's row in best_start, when it has one
    ply_start = judged.ply_start
    for g0 in range(0, len(games), REPORT_GAMES):
        g1 = min(len(games), g0 + REPORT_GAMES)
        lo, hi = int(ply_start[g0]), int(ply_start[g1])
        ok = ok_all[lo:hi]
        done = np.zeros(hi - lo + 1, np.int64)  # plies judged before each ply of the block
        np.cumsum(ok, out=done[1:])
        idx = np.flatnonzero(ok) + lo
        n = idx - np.repeat(ply_start[g0:g1], np.diff(done[ply_start[g0:g1 + 1] - lo]))
        side = (start.turn + n) % 2
        p = all_plies[idx]
        state = [None if b < 0 else (b, h) for b, h in zip(p["board_after"].tolist(), p["hand_after"].tolist())]
        plies = list(map(
            PlyReport, (n + 1).tolist(), side.tolist(),
            _objects(p["text"], texts, lambda c: str(Move.from_code(c, variant))),
            _objects(_value_codes(p["before_wdl"], p["before_dtm"]), values, _value),
            _objects(_value_codes(p["after_wdl"], p["after_dtm"]), values, _value),
            _objects(p["rank"], movers, value_of_rank),
            (p["rank"] == p["best_rank"]).tolist(), _best_lists(judged, idx, best_ordinal, bests, variant), state,
            [endings[c] for c in (p["terminal"].astype(np.int64) * 2 + side).tolist()], [variant] * idx.size))
        bounds = done[ply_start[g0:g1 + 1] - lo].tolist()
        for g in range(g0, g1):
            first, last = bounds[g - g0], bounds[g - g0 + 1]
            report = LineReport(start, start_value, plies[first:last])
            if last - first < len(games[g]):  # the replay stopped at this ply
                report.illegal = _stopped_at(judged, int(ply_start[g]) + last - first, last - first, games[g],
                                             report, start)
            yield report


def _stopped_at(judged, i: int, judged_plies: int, moves: list, report: LineReport, start: Position) -> tuple:
    """``report.illegal`` of a game whose replay stopped at ply ``i`` (its move ``judged_plies``)."""
    from dobutsu_tb.tablebase import replay

    text = shorten(moves[judged_plies])
    p = judged.plies[i]
    if p["status"] == replay.OVER:
        return judged_plies + 1, text, f"the game is over ({report.plies[-1].ending})"
    here = Position.from_state((p["board_before"], p["hand_before"]), (start.turn + judged_plies) % 2, start.variant)
    try:
        parse_move(here, moves[judged_plies])
    except IllegalMoveError as exc:
        return judged_plies + 1, text, _reason(exc)
    raise AssertionError(f"the replay found {text!r} illegal in {here.text()}, parse_move did not")


_MOVE_NUMBER = re.compile(r"^\d+\.+$")


def read_games(path) -> list[list[str]]:
    """Games from a text file: one move per line (one game), or one game per line.

    Move numbers (``1.``), blank lines and ``#`` comments are ignored. If every non-blank line
    holds a single move the file is one game; otherwise each line is a game.

    Raises
    ------
    dobutsu_tb.analysis.textfiles.InputFileError
        If the file is missing, a folder, larger than
        :data:`~dobutsu_tb.analysis.textfiles.MAX_GAMES_BYTES` or not UTF-8 text.
    OSError
        If the file cannot be read.
    """
    lines = []
    for raw in read_text(path, MAX_GAMES_BYTES, "a file of games").splitlines():
        tokens = [t for t in without_comments(raw).split() if not _MOVE_NUMBER.match(t)]
        if tokens:
            lines.append(tokens)
    if all(len(t) == 1 for t in lines):
        return [[t[0] for t in lines]] if lines else []
    return lines
