"""Move notation (docs/rules.md, "Notation"): ``Lb4-a3``, ``Cb3xb2``, ``Ca2-a1+``, drops ``C*b2``.

The piece letter is upper case for both sides (the variant's letters; ``R`` for a hen) and
squares are absolute (as Sente sees the board), whoever moves. Kernel moves
(:mod:`~dobutsu_tb.tablebase.game.rules`) are in the frame of the normalised state, so a Gote
move's squares are turned by 180° (square ``i`` of N is ``N - 1 - i`` seen from the other side).
Fairy-Stockfish's move strings (``b3b2``, ``C@b2``, ``a2a1+``) are :func:`uci_move_text`'s.
"""

from __future__ import annotations

import re
from functools import lru_cache

from dobutsu_tb.tablebase.game.layout import CELL_BITS, CELL_MASK, OPPONENT, PIECE_MASK
from dobutsu_tb.tablebase.game.position import (
    FILE_LETTERS,
    GOTE,
    SIDE_NAMES,
    Position,
    PositionError,
    parse_square,
    square_name,
)
from dobutsu_tb.tablebase.game.rules import DROP, FROM_MASK, PROMOTION, TO_MASK, TO_SHIFT
from dobutsu_tb.tablebase.game.variant import Variant, standard_variant

#: Longest move text quoted whole in an error message.
_QUOTE_MAX = 20


class IllegalMoveError(ValueError):
    """Raised for a move that is malformed or not legal in the position; the message says why."""


@lru_cache(maxsize=64)
def move_pattern(variant: Variant) -> re.Pattern:
    """The regular expression of a move of the variant: groups letter, from-square, ``-``/``x``,
    ``*`` (a drop), to-square, ``+``."""
    letters = "".join(p.letter for p in variant.pieces)
    square = f"[a-{FILE_LETTERS[variant.files - 1]}][1-9][0-9]?"
    return re.compile(rf"([{letters}])(?:({square})([-x])|(\*))({square})(\+?)")


#: The standard game's move pattern.
MOVE_PATTERN = move_pattern(standard_variant())


def absolute(cell: int, turn: int, variant: Variant) -> int:
    """A square of the normalised frame of ``turn``'s position as Sente sees the board (and back)."""
    return variant.cells - 1 - cell if turn == GOTE else cell


def move_text(position: Position, move: int) -> str:
    """Text of a kernel move played in ``position`` (in the frame of ``position.state()``)."""
    v = position.variant
    board, _ = position.state()
    src, dst = move & FROM_MASK, (move >> TO_SHIFT) & TO_MASK
    to = square_name(absolute(dst, position.turn, v), v)
    if src >= DROP:
        return f"{v.hand_order[src - DROP]}*{to}"
    piece = (board >> (CELL_BITS * src)) & PIECE_MASK
    capture = "x" if (board >> (CELL_BITS * dst)) & CELL_MASK else "-"
    promote = "+" if move & PROMOTION else ""
    return f"{v.pieces[piece - 1].letter}{square_name(absolute(src, position.turn, v), v)}{capture}{to}{promote}"


#: A UCI move (Fairy-Stockfish's): from- and to-square and ``+``, or a drop ``C@b3``.
UCI_MOVE_PATTERN = re.compile(r"([a-z][0-9]{1,2})([a-z][0-9]{1,2})(\+?)|([A-Za-z])@([a-z][0-9]{1,2})")


def uci_square(name: str, variant: Variant | None = None) -> str:
    """The UCI name of one of our squares, or of a UCI square in ours (the map is its own
    inverse): the same file, the ranks counted from the other side (``'b4'`` <-> ``'b1'`` on
    dobutsu's four ranks). UCI squares count the ranks from Sente's side (Sente is "white")."""
    return name[0] + str((variant or standard_variant()).ranks + 1 - int(name[1:]))


def uci_of_move_text(text: str, variant: Variant | None = None) -> str:
    """The UCI string of a move in our notation: ``'Lb4-a3'`` -> ``'b1a2'``, ``'Ca2-a1+'`` ->
    ``'a3a4+'``, ``'C*b2'`` -> ``'C@b3'``.

    Raises
    ------
    IllegalMoveError
        If ``text`` is not a move in our notation.
    """
    v = variant or standard_variant()
    m = move_pattern(v).fullmatch(text)
    if not m:
        raise IllegalMoveError(f"{quote_move(text)} is not a move like {' or '.join(_examples(v))}")
    letter, src, _, drop, dst, promote = m.groups()
    if drop:
        return f"{letter}@{uci_square(dst, v)}"
    return f"{uci_square(src, v)}{uci_square(dst, v)}{promote}"


def uci_move_text(position: Position, move: int) -> str:
    """Fairy-Stockfish's text of a kernel move played in ``position``: from- and to-square
    (``b3b2``), ``+`` for a promotion, ``C@b2`` for a drop, the ranks counted from Sente's side."""
    v = position.variant
    src, dst = move & FROM_MASK, (move >> TO_SHIFT) & TO_MASK

    def name(cell):
        a = absolute(cell, position.turn, v)
        return FILE_LETTERS[a % v.files] + str(v.ranks - a // v.files)

    if src >= DROP:
        return f"{v.hand_order[src - DROP]}@{name(dst)}"
    return f"{name(src)}{name(dst)}{'+' if move & PROMOTION else ''}"


def parse_uci_move(position: Position, text: str) -> int:
    """The kernel move that the UCI string ``text`` names in ``position``.

    A move into the promotion zone written without ``+`` is read as the promotion (Fairy-Stockfish
    11.1 offers a chick move to the far rank that does not promote; these rules always promote),
    and a drop's piece letter may be lower case.

    Raises
    ------
    IllegalMoveError
        If the text is not a UCI move, or names no legal move here (the message says why, with
        UCI squares).
    """
    t = text.strip()
    m = UCI_MOVE_PATTERN.fullmatch(t)
    if not m:
        raise IllegalMoveError(f"{quote_move(text)} is not a UCI move like b2b3, a3a4+ or C@b3")
    moves = position.game.legal_moves(position.state())
    if moves.size == 0:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {uci_move_text(position, int(mv)): int(mv) for mv in moves}
    want = t if m.group(1) else f"{t[0].upper()}{t[1:]}"
    for candidate in (want, want + "+"):
        if candidate in texts:
            return texts[candidate]
    if want.endswith("+") and want[:-1] in texts:
        raise IllegalMoveError(f"{t}: only a piece reaching its promotion zone promotes; write {want[:-1]}")
    raise IllegalMoveError(f"{t}: {_why_uci_illegal(position, m)}")


def _why_uci_illegal(position: Position, m: re.Match) -> str:
    v = position.variant
    src, dst, promote, letter, drop_to = m.groups()
    side = SIDE_NAMES[position.turn]
    for sq in (x for x in (src, dst, drop_to) if x is not None):
        try:
            parse_square(uci_square(sq, v), v)
        except (PositionError, ValueError):
            return f"{sq} is not a square of the board"
    own = OPPONENT if position.turn == GOTE else 0
    if drop_to is not None:
        slot = v.hand_order.find(letter.upper())
        if slot < 0 or position.hands[slot + len(v.hand_order) * position.turn] == 0:
            return f"{side} has no {letter.upper()} in hand to drop"
        if position.board[parse_square(uci_square(drop_to, v), v)]:
            return f"{drop_to} is not empty"
        return f"a {v.kind(letter.upper()).name} may not be dropped on {drop_to}"
    code = position.board[parse_square(uci_square(src, v), v)]
    to_code = position.board[parse_square(uci_square(dst, v), v)]
    if code == 0 or (code & OPPONENT) != own:
        return f"{side} has no piece on {src}"
    if to_code and (to_code & OPPONENT) == own:
        return f"{dst} holds {side}'s own piece"
    return f"the {v.pieces[(code & 7) - 1].letter} on {src} cannot move to {dst}"


def play_move(position: Position, move: int) -> Position | None:
    """The position after a kernel move played in ``position``, or None when the move captures
    the enemy royal piece (the game is over: no position follows). The move is not checked."""
    game = position.game
    child = game.make_move(position.state(), move)
    if not game.has_both_royals(child):
        return None
    return Position.from_state(child, 1 - position.turn, position.variant)


def parse_move(position: Position, text: str) -> int:
    """The kernel move that ``text`` names in ``position``: our notation (``Lb4-a3``) or
    Fairy-Stockfish's (``b4a3``, ``C@b2``).

    Raises
    ------
    IllegalMoveError
        If the text is not a move, or names no legal move here (the message says which of: no
        piece there, the piece cannot go there, the square is taken, nothing to drop, the game
        is over).
    """
    v = position.variant
    t = text.strip()
    pattern = move_pattern(v)
    m = pattern.fullmatch(t)
    moves = position.game.legal_moves(position.state())
    if not m:
        uci = {uci_move_text(position, int(mv)): int(mv) for mv in moves}
        if t in uci:
            return uci[t]
        hint = " (the piece letter is upper case for both sides)" if pattern.fullmatch(t[:1].upper() + t[1:]) else ""
        example = " or ".join(_examples(v))
        raise IllegalMoveError(f"{quote_move(text)} is not a move like {example}{hint}")
    if moves.size == 0:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {move_text(position, int(mv)): int(mv) for mv in moves}
    if t in texts:
        return texts[t]
    # Accept a capture written with '-' or a move written with 'x' only when it is unambiguous.
    loose = {k.replace("x", "-"): v for k, v in texts.items()}
    if t.replace("x", "-") in loose:
        return loose[t.replace("x", "-")]
    raise IllegalMoveError(f"{t}: {_why_illegal(position, m)}")


def _examples(v: Variant) -> list[str]:
    if v.name == standard_variant().name:
        return ["Lb4-a3, Cb3xb2, Ca2-a1+", "C*b2"]
    royal = v.royal.letter
    last = v.ranks
    drop = f", {v.hand_order[0]}*b2" if v.hand_order else ""
    return [f"{royal}b{last}-a{last - 1}, {royal}b{last}xb{last - 1}{drop}"]


def quote_move(text: str) -> str:
    """``repr(text)`` for an error message, cut to :data:`_QUOTE_MAX` characters (with its
    length said) when longer: a whole line of garbage is not echoed back."""
    return repr(text) if len(text) <= _QUOTE_MAX else f"{text[:_QUOTE_MAX]!r}... ({len(text):,} characters)"


def _why_illegal(position: Position, m: re.Match) -> str:
    v = position.variant
    letter, src, _, drop, dst, _ = m.groups()
    side = SIDE_NAMES[position.turn]
    own = OPPONENT if position.turn == GOTE else 0
    try:
        to_code = position.board[parse_square(dst, v)]
        from_code = None if drop else position.board[parse_square(src, v)]
    except ValueError as exc:
        return str(exc)
    if drop:
        slot = v.hand_order.find(letter.upper())
        if slot < 0 or position.hands[slot + len(v.hand_order) * position.turn] == 0:
            return f"{side} has no {letter.upper()} in hand to drop"
        if to_code:
            return f"{dst} is not empty"
        return f"a {v.kind(letter).name} may not be dropped on {dst}"
    if from_code == 0 or (from_code & OPPONENT) != own or v.pieces[(from_code & 7) - 1].letter != letter.upper():
        return f"{side} has no {letter.upper()} on {src}"
    if to_code and (to_code & OPPONENT) == own:
        return f"{dst} holds {side}'s own piece"
    kind = v.kind(letter)
    return f"a {letter.upper()} on {src} cannot move to {dst}" + (
        f" (a {kind.name} reaching its promotion zone promotes: write '+')" if kind.promotes_to else "")
