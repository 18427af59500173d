"""Move notation (SPEC §1.6): ``Lb4-a3``, ``Cb3xb2``, ``Ca2-a1+``, drops ``C*b2``; and the UCI move
strings of Fairy-Stockfish's ``dobutsu`` variant: ``b1a2``, ``b2b3``, ``a3a4+``, drops ``C@b3``.

The piece letter is upper case for both sides (``R`` for a hen) and squares are absolute (as
Sente sees the board), whoever moves. Kernel moves (:mod:`tablebase.rules`) are in the frame of
the normalised state, so a Gote move's cells are turned by 180° (``cell -> 11 - cell``).

UCI squares count the ranks from Sente's side (Sente is "white", rank 1 is Sente's home rank),
ours from Gote's: our ``b4`` is UCI ``b1``, our ``a1`` UCI ``a4``. A UCI move names the from- and
to-squares, with ``+`` when a chick promotes; a drop is the piece letter, upper case for both
sides, ``@`` and the square (Fairy-Stockfish 11.1 and pyffish 0.0.90 write them so).
"""

from __future__ import annotations

import re

import numpy as np

from dobutsu_tb.tablebase.game.key import CELL_BITS, CELL_MASK, LION, N_RANKS, OPPONENT, PIECE_MASK
from dobutsu_tb.tablebase.game.position import (
    GOTE,
    HAND_LETTERS,
    PIECE_LETTER,
    SIDE_NAMES,
    Position,
    PositionError,
    parse_square,
    square_name,
)
from dobutsu_tb.tablebase.game.rules import (
    DROP,
    FROM_MASK,
    PROMOTION,
    SLOT_PIECE,
    TO_SHIFT,
    find_piece,
    legal_moves,
    make_move,
)

#: A move (SPEC §1.6): the piece letter upper case for both sides, the squares lower case.
MOVE_PATTERN = re.compile(r"([LGECR])(?:([a-c][1-4])([-x])|(\*))([a-c][1-4])(\+?)")
#: A UCI move (Fairy-Stockfish's ``dobutsu``): from- and to-square and ``+``, or a drop ``C@b3``.
UCI_MOVE_PATTERN = re.compile(r"([a-z][0-9]{1,2})([a-z][0-9]{1,2})(\+?)|([A-Za-z])@([a-z][0-9]{1,2})")
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


def play_move(position: Position, move: int) -> Position | None:
    """The position after a kernel move played in ``position``, or None when the move captures
    the enemy lion (the game is over: no position follows). The move is not checked."""
    child = int(make_move(np.int64(position.state()), np.int64(move)))
    if find_piece(child, LION) < 0 or find_piece(child, LION | OPPONENT) < 0:
        return None
    return Position.from_state(child, 1 - position.turn)


def uci_square(name: str) -> str:
    """The UCI name of one of our squares, or of a UCI square in ours (the map is its own inverse):
    the same file, the ranks counted from the other side (``'b4'`` <-> ``'b1'``)."""
    return name[0] + str(N_RANKS + 1 - int(name[1:]))


def uci_of_move_text(text: str) -> str:
    """The UCI string of a move in our notation: ``'Lb4-a3'`` -> ``'b1a2'``, ``'Ca2-a1+'`` ->
    ``'a3a4+'``, ``'C*b2'`` -> ``'C@b3'``.

    Raises
    ------
    IllegalMoveError
        If ``text`` is not a move in SPEC §1.6 notation.
    """
    m = MOVE_PATTERN.fullmatch(text)
    if not m:
        raise IllegalMoveError(f"{quote_move(text)} is not a move like Lb4-a3, Cb3xb2, Ca2-a1+ or C*b2")
    letter, src, _, drop, dst, promote = m.groups()
    if drop:
        return f"{letter}@{uci_square(dst)}"
    return f"{uci_square(src)}{uci_square(dst)}{promote}"


def uci_move_text(position: Position, move: int) -> str:
    """The UCI string of a kernel move played in ``position`` (in the frame of ``position.state()``)."""
    return uci_of_move_text(move_text(position, move))


def parse_uci_move(position: Position, text: str) -> int:
    """The kernel move that the UCI string ``text`` names in ``position``.

    A chick's move to the far rank written without ``+`` is read as the promotion (Fairy-Stockfish
    11.1 offers a move that does not promote; these rules promote always), and a drop's piece
    letter may be lower case.

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
    moves = legal_moves(position.state())
    if moves.size == 0:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {uci_move_text(position, int(mv)): int(mv) for mv in moves}
    want = t if m.group(1) else f"{t[0].upper()}{t[1:]}"
    for candidate in (want, want + "+"):
        if candidate in texts:
            return texts[candidate]
    if want.endswith("+") and want[:-1] in texts:
        raise IllegalMoveError(f"{t}: only a chick reaching the far rank promotes; write {want[:-1]}")
    raise IllegalMoveError(f"{t}: {_why_uci_illegal(position, m)}")


def _why_uci_illegal(position: Position, m: re.Match) -> str:
    src, dst, promote, letter, drop_to = m.groups()
    side = SIDE_NAMES[position.turn]
    squares = [s for s in (src, dst, drop_to) if s is not None]
    for s in squares:
        try:
            parse_square(uci_square(s))
        except (PositionError, ValueError):
            return f"{s} is not a square of the board"
    own = OPPONENT if position.turn == GOTE else 0
    if drop_to is not None:
        slot = HAND_LETTERS.find(letter.upper())
        if slot < 0 or position.hands[slot + 3 * position.turn] == 0:
            return f"{side} has no {letter.upper()} in hand to drop"
        return f"{drop_to} is not empty"
    code = position.board[parse_square(uci_square(src))]
    to_code = position.board[parse_square(uci_square(dst))]
    if code == 0 or (code & OPPONENT) != own:
        return f"{side} has no piece on {src}"
    if to_code and (to_code & OPPONENT) == own:
        return f"{dst} holds {side}'s own piece"
    return f"the {PIECE_LETTER[code & 7]} on {src} cannot move to {dst}"
