"""Move notation (SPEC §1.6): ``Lb4-a3``, ``Cb3xb2``, ``Ca2-a1+``, drops ``C*b2``.

The piece letter is upper case for both sides (``R`` for a hen) and squares are absolute (as
Sente sees the board), whoever moves. Kernel moves (:mod:`tablebase.rules`) are in the frame of
the normalised state, so a Gote move's cells are turned by 180° (``cell -> 11 - cell``).
"""

from __future__ import annotations

import re

from dobutsu_tb.tablebase.game.key import CELL_BITS, CELL_MASK, OPPONENT, PIECE_MASK
from dobutsu_tb.tablebase.game.position import (
    GOTE,
    PIECE_LETTER,
    Position,
    parse_square,
    square_name,
)
from dobutsu_tb.tablebase.game.rules import DROP, FROM_MASK, PROMOTION, SLOT_PIECE, TO_SHIFT, legal_moves

#: A move (SPEC §1.6): the piece letter upper case for both sides, the squares lower case.
MOVE_PATTERN = re.compile(r"([LGECR])(?:([a-c][1-4])([-x])|(\*))([a-c][1-4])(\+?)")
#: Longest move text quoted whole in an error message.
_QUOTE_MAX = 20


class IllegalMoveError(ValueError):
    """Raised for a move that is malformed or not legal in the position; the message says why."""


def _absolute(cell: int, turn: int) -> int:
    return 11 - cell if turn == GOTE else cell


def move_text(position: Position, move: int) -> str:
    """Text of a kernel move played in ``position`` (in the frame of ``position.state()``)."""
    state = position.state()
    src, dst = move & FROM_MASK, (move >> TO_SHIFT) & FROM_MASK
    to = square_name(_absolute(dst, position.turn))
    if src >= DROP:
        return f"{PIECE_LETTER[int(SLOT_PIECE[src - DROP])]}*{to}"
    piece = (state >> (CELL_BITS * src)) & PIECE_MASK
    capture = "x" if (state >> (CELL_BITS * dst)) & CELL_MASK else "-"
    promote = "+" if move & PROMOTION else ""
    return f"{PIECE_LETTER[piece]}{square_name(_absolute(src, position.turn))}{capture}{to}{promote}"


def parse_move(position: Position, text: str) -> int:
    """The kernel move that ``text`` names in ``position``.

    Raises
    ------
    IllegalMoveError
        If the text is not a move in SPEC §1.6 notation, or names no legal move here (the
        message says which of: no piece there, the piece cannot go there, the square is taken,
        nothing to drop, the game is over).
    """
    t = text.strip()
    m = MOVE_PATTERN.fullmatch(t)
    if not m:
        hint = (" (the piece letter is upper case for both sides)" if MOVE_PATTERN.fullmatch(t[:1].upper() + t[1:])
                else "")
        raise IllegalMoveError(f"{quote_move(text)} is not a move like Lb4-a3, Cb3xb2, Ca2-a1+ or C*b2{hint}")
    moves = legal_moves(position.state())
    if moves.size == 0:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {move_text(position, int(mv)): int(mv) for mv in moves}
    want = t
    if want in texts:
        return texts[want]
    # Accept a capture written with '-' or a move written with 'x' only when it is unambiguous.
    loose = {k.replace("x", "-"): v for k, v in texts.items()}
    if want.replace("x", "-") in loose:
        return loose[want.replace("x", "-")]
    raise IllegalMoveError(f"{t}: {_why_illegal(position, m)}")


def quote_move(text: str) -> str:
    """``repr(text)`` for an error message, cut to :data:`_QUOTE_MAX` characters (with its
    length said) when longer: a whole line of garbage is not echoed back."""
    return repr(text) if len(text) <= _QUOTE_MAX else f"{text[:_QUOTE_MAX]!r}... ({len(text):,} characters)"


def _why_illegal(position: Position, m: re.Match) -> str:
    letter, src, _, drop, dst, _ = m.groups()
    side = ("Sente", "Gote")[position.turn]
    own = OPPONENT if position.turn == GOTE else 0
    to_code = position.board[parse_square(dst)]
    if drop:
        slot = "CEG".find(letter.upper())
        if slot < 0 or position.hands[slot + 3 * position.turn] == 0:
            return f"{side} has no {letter.upper()} in hand to drop"
        return f"{dst} is not empty"
    code = position.board[parse_square(src)]
    if code == 0 or (code & OPPONENT) != own or PIECE_LETTER[code & 7] != letter.upper():
        return f"{side} has no {letter.upper()} on {src}"
    if to_code and (to_code & OPPONENT) == own:
        return f"{dst} holds {side}'s own piece"
    return f"a {letter.upper()} on {src} cannot move to {dst}" + (
        " (a chick reaching the far rank promotes: write '+')" if letter.upper() == "C" else "")
