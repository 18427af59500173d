"""Machine-readable reports: the JSON of ``--json`` on the command line and of the web API.

One builder per report, shared by both front ends, so that ``dobutsu-tb probe --json`` and
``GET /api/probe`` (likewise ``verify-line --json`` and ``POST /api/verify-line``, ``line --json``
and ``GET /api/line``, ``stats --json`` and ``GET /api/stats``) cannot drift apart. Every builder
returns plain ``dict``/``list``/``str``/``int`` values, ready for :func:`json.dumps`.

Values follow the one convention of docs/rules.md §7: a value is ``{"category": ..., "dtm": ...}``
with ``category`` ``"win"``, ``"draw"``, ``"loss"`` (or ``"unknown"`` for a move to a position the
file does not cover) and ``dtm`` the signed distance to mate in plies; a position's value is its
side to move's, a move's value is its player's (plies from the position before the move), and a
move's ``after`` is the value of the position after it, for its side to move. (Before, a move's
``category`` and ``dtm`` were its ``after``'s, as in the Lichess tablebase API: CHANGELOG.md.)
"""

from __future__ import annotations

from dobutsu_tb.tablebase.game.position import SIDE_NAMES, Position, PositionError
from dobutsu_tb.tablebase.game.variant import standard_variant
from dobutsu_tb.tablebase.probe import MoveValue, Tablebase
from dobutsu_tb.tablebase.values import DRAW, WDL_NAMES, Terminal, signed_dtm

#: Side names in JSON, indexed by SENTE / GOTE.
JSON_SIDES = ("sente", "gote")
#: ``end`` of a perfect line cut at ``max_plies`` before the end of the game.
STOPPED = "stopped at max_plies before the end of the game"


def parse_position(text: str, variant=None) -> Position:
    """A position of a variant (default: dobutsu shogi) in our notation (``S/gle/-c-/-C-/ELG/-``)
    or Fairy-Stockfish's FEN (``gle/1c1/1C1/ELG[-] w 0 1``, or without brackets for empty hands):
    :meth:`Position.looks_like_fen` tells them apart.

    Raises
    ------
    dobutsu_tb.tablebase.game.position.PositionError
        If the text is malformed or the position impossible (for a variant other than the
        standard game, or a text with another number of ranks, the message names the variant
        and its board).
    """
    try:
        return Position.from_fen(text, variant) if Position.looks_like_fen(text) else Position.from_text(text, variant)
    except PositionError as exc:
        standard = variant is None or variant == standard_variant()
        if standard and _ranks_given(text) in (None, standard_variant().ranks):
            raise  # the standard game's board: the message alone
        variant = variant or standard_variant()
        raise PositionError(f"{exc} (a position of {variant.name}: {variant.files} files, {variant.ranks} ranks, "
                            f"e.g. {variant.start})") from None


def _ranks_given(text: str) -> int | None:
    """How many ranks a position's text has (our notation or a FEN), None if it cannot tell."""
    if "[" in text:
        board = text.strip().split()[0].split("[")[0] if text.strip() else ""
        return len(board.split("/")) if board else None
    fields = text.strip().split("/")
    return len(fields) - 2 if len(fields) >= 3 else None


def move_note(m: MoveValue, royal: str = "lion") -> str:
    """The words beside a move in a list of moves: how it ends the game, that it leaves the royal
    piece (``royal``) to be captured, or that the file does not hold the position after it; empty
    otherwise. ``probe`` prints them, and the web page writes the same words (``static/app.js``,
    which a test holds to these)."""
    if m.wdl is None:
        return "not in this tablebase"
    return {Terminal.ROYAL_CAPTURED: f"captures the {royal}", Terminal.TRY: f"the {royal} reaches the far rank safely",
            Terminal.CATCH: f"leaves the {royal} to be captured"}.get(m.terminal, "")


def move_json(m: MoveValue) -> dict:
    """One move of :func:`probe_json`: its text, the position after it (None once the royal piece
    is captured), the move's ``category`` and signed ``dtm`` (plies) for its player, the terminal
    class of the position after it, and ``after``, that position's value for its side to move
    (:func:`value_json`; None when the file does not cover it)."""
    return {"move": m.move, "position": m.position.text() if m.position else None,
            "category": "unknown" if m.wdl is None else WDL_NAMES[m.wdl], "dtm": m.dtm,
            "terminal": None if m.terminal is None else str(m.terminal),
            "after": value_json((m.after_wdl, m.after_dtm))}


def probe_json(tb: Tablebase, position: Position) -> dict:
    """The value of ``position`` and of every legal move, best first (``probe --json``).

    Returns
    -------
    dict
        ``position`` (text), its ``category`` and ``dtm`` (signed, plies) for its side to move,
        ``terminal`` (``"catch"``, ``"try"`` or None) and ``moves``, a list of :func:`move_json`
        dicts, best first (the first one's value is the position's).

    Raises
    ------
    dobutsu_tb.tablebase.probe.MissingPositionError
        If the tablebase does not cover the position.
    """
    wdl, dtm, terminal = tb.value(position)
    moves = tb.probe_moves(position)
    return {"position": position.text(), "category": WDL_NAMES[wdl], "dtm": dtm,
            "terminal": None if terminal is None else str(terminal), "moves": [move_json(m) for m in moves]}


def perfect_line_json(tb: Tablebase, position: Position, max_plies: int = 200) -> dict:
    """A perfect-play line from ``position`` (``line --json``).

    Parameters
    ----------
    tb : Tablebase
    position : Position
    max_plies : int, optional
        The most plies, at least 1 (a drawn line stops earlier only where a position repeats; a
        longer win or loss is cut there too, and ``end`` says so).

    Returns
    -------
    dict
        ``position``, ``category``, ``dtm`` and ``terminal`` as :func:`probe_json`; ``moves``, the
        plies of :meth:`Tablebase.principal_variation`, each a :func:`move_json` dict with ``ply``
        (1 for the first) and ``side`` (who plays it) in front; ``end``, how the line ends
        (``"Sente captures the lion"``, ``"Gote's lion reaches the far rank safely"``, with the
        variant's royal piece for the lion; ``"draw"``
        for a drawn position, whose line stops at ``max_plies`` or a repetition, or
        :data:`STOPPED` when a win or loss is cut at ``max_plies`` before the end of the game),
        or None when the game is already over.

    Raises
    ------
    dobutsu_tb.tablebase.probe.MissingPositionError
        If the tablebase does not cover the position.
    """
    wdl, dtm, terminal = tb.value(position)
    line = tb.principal_variation(position, max_plies=max_plies)
    plies = [{"ply": n, "side": JSON_SIDES[(position.turn + n - 1) % 2], **move_json(m)}
             for n, m in enumerate(line, 1)]
    end = "draw" if wdl == DRAW else None
    if line and line[-1].ends_game:
        mover, royal = SIDE_NAMES[(position.turn + len(line) - 1) % 2], position.variant.royal.name
        end = (f"{mover} captures the {royal}" if line[-1].terminal == Terminal.ROYAL_CAPTURED
               else f"{mover}'s {royal} reaches the far rank safely")
    elif line and wdl != DRAW:
        end = STOPPED
    return {"position": position.text(), "category": WDL_NAMES[wdl], "dtm": dtm,
            "terminal": None if terminal is None else str(terminal), "moves": plies, "end": end}


def value_json(value: tuple) -> dict | None:
    """``{"category": ..., "dtm": ...}`` of a ``(wdl, dtm)`` pair (signed DTM in plies), None when
    the WDL is unknown."""
    return None if value[0] is None else {"category": WDL_NAMES[value[0]], "dtm": signed_dtm(*value)}


def line_report_json(report) -> dict:
    """One judged line of ``verify-line --json`` (an :class:`dobutsu_tb.analysis.lines.LineReport`).

    Returns
    -------
    dict
        ``start``, ``start_value`` (for its side to move), ``plies`` (per ply: ``ply``, ``side``,
        ``move``, ``before`` the value of the position before the move, for the mover, ``result``
        the move's value for the mover, ``after`` the value of the position after it, for the
        opponent, all :func:`value_json`; ``optimal``, ``best``, ``ending``), ``illegal``
        (``ply``, ``move``, ``reason``, or None), ``perfect``, ``first_mistake`` (a ply number or
        None) and ``verdict`` (text).
    """
    mistake = report.first_mistake
    return {
        "start": report.start.text(), "start_value": value_json(report.start_value),
        "plies": [{"ply": p.ply, "side": JSON_SIDES[p.side], "move": p.move,
                   "before": value_json(p.before), "after": value_json(p.after), "result": value_json(p.result),
                   "optimal": p.optimal, "best": p.best, "ending": p.ending} for p in report.plies],
        "illegal": None if report.illegal is None else dict(zip(("ply", "move", "reason"), report.illegal)),
        "perfect": report.perfect, "first_mistake": mistake.ply if mistake else None,
        "verdict": report.verdict(),
    }


def metadata_json(meta) -> dict:
    """What a tablebase file says about itself (a :class:`tablebase.schema.Metadata`).

    Returns
    -------
    dict
        ``start``; the counts ``reachable``, ``nonterminal``, ``catch_terminal``,
        ``try_terminal``, ``wins``, ``draws``, ``losses``; ``start_value`` (``category`` and
        signed ``dtm`` in plies); ``variant``, the game's whole description
        (:meth:`~dobutsu_tb.tablebase.game.variant.Variant.to_dict`: board, pieces with their
        steps, rules, start).
    """
    return {
        "variant": meta.variant.to_dict(),
        "start": meta.start, "reachable": meta.reachable, "nonterminal": meta.nonterminal,
        "catch_terminal": meta.catch_terminal, "try_terminal": meta.try_terminal,
        "wins": meta.wins, "draws": meta.draws, "losses": meta.losses,
        "start_value": {"category": WDL_NAMES[meta.start_wdl], "dtm": signed_dtm(meta.start_wdl, meta.start_dtm)},
    }


def stats_json(stats) -> dict:
    """What a tablebase holds (``stats --json``), from an :class:`dobutsu_tb.analysis.stats.Stats`.

    Returns
    -------
    dict
        The :func:`metadata_json` fields; ``dtm_wins`` and ``dtm_losses``, stored positions per
        DTM (list index = plies); ``material``, rows of ``on_board``, ``in_hand`` (pieces other
        than the lions), ``positions``, ``wins``, ``draws``, ``losses``; ``longest``, the longest
        wins as ``position`` and ``dtm`` (plies); ``jh85``, all reachable positions counted as
        jh85/dobutsushogi does (``wins``, ``draws``, ``losses``, terminal ones included, positions
        without a move undecided; ``no_moves`` and ``changed``, the positions and values that
        differ from ours).
    """
    material = []
    for board in range(stats.material.shape[0]):
        for hand in range(stats.material.shape[1]):
            loss, draw, win = (int(x) for x in stats.material[board, hand])
            if loss + draw + win:
                material.append({"on_board": board, "in_hand": hand, "positions": loss + draw + win,
                                 "wins": win, "draws": draw, "losses": loss})
    return {
        **metadata_json(stats.metadata),
        "dtm_wins": [int(x) for x in stats.dtm_wins], "dtm_losses": [int(x) for x in stats.dtm_losses],
        "material": material,
        "longest": [{"position": p.text(), "dtm": int(d)} for p, d in stats.longest],
        "jh85": _jh85_json(stats),
    }


def _jh85_json(stats) -> dict:
    m, j = stats.metadata, stats.jh85
    if j is None:
        return {"wins": m.wins + m.catch_terminal, "draws": m.draws, "losses": m.losses + m.try_terminal,
                "no_moves": [], "changed": []}
    return {"wins": j.wins, "draws": j.draws, "losses": j.losses, "no_moves": [p.text() for p in j.no_moves],
            "changed": [{"position": c.position.text(), "wdl": c.wdl, "dtm": c.dtm, "jh85_wdl": c.undecided_wdl}
                        for c in j.changes]}
