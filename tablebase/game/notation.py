"""Move notation (docs/rules.md §8): ``Lb4-a3``, ``Cb3xb2``, ``Ca2-a1+``, drops ``C*b2``; and
:class:`Move`, a move as its text shows it.

The piece letter is upper case for both sides (the variant's letters; ``R`` for a hen) and
squares are absolute (as Sente sees the board), whoever moves. Kernel moves
(:mod:`~dobutsu_tb.tablebase.game.rules`) are in the frame of the normalised state, so a Gote
move's squares are turned by 180° (square ``i`` of N is ``N - 1 - i`` seen from the other side).
Fairy-Stockfish's move strings (``b3b2``, ``C@b2``, ``a2a1+``) are :meth:`Move.uci`'s.

A kernel move becomes text in one place: :func:`text_code` (a plain kernel, which the replay of
many games also runs jitted) gives its *text code*, :meth:`Move.from_code` the :class:`Move`,
whose ``str`` is the text::

    bits 0..2    piece code (1 + the kind's index in the variant; a drop's piece)
    bits 3..7    from-square 0..19 (absolute, as Sente sees the board), TEXT_DROP for a drop
    bits 8..12   to-square 0..19 (absolute)
    bit  13      a capture ('x')
    bit  14      a promotion ('+')
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache

from dobutsu_tb.encoding.binding import bind_plain
from dobutsu_tb.tablebase.game.key import cell_at
from dobutsu_tb.tablebase.game.layout import N_CELLS, OPPONENT, PIECE_MASK, SLOT_PIECE
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

#: Text code layout (module docstring).
TEXT_FROM_SHIFT, TEXT_TO_SHIFT, TEXT_CAPTURE, TEXT_PROMOTION = 3, 8, 1 << 13, 1 << 14
TEXT_SQUARE_MASK = 31
TEXT_DROP = DROP
#: The plain kernels, bound to each variant's tables (:func:`_bound`; ``Game.jitted`` for the replay).
__kernels__ = ("text_code",)


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


def text_code(rules, board, hand, turn, move):
    """The text code (module docstring) of a kernel move played on the normalised state ``(board,
    hand)`` by ``turn`` (:data:`~dobutsu_tb.tablebase.game.position.GOTE`'s squares are turned
    round)."""
    src = move & FROM_MASK
    dst = (move >> TO_SHIFT) & TO_MASK
    to = N_CELLS - 1 - dst if turn == GOTE else dst
    if src >= DROP:
        return rules[SLOT_PIECE + src - DROP] | (TEXT_DROP << TEXT_FROM_SHIFT) | (to << TEXT_TO_SHIFT)
    piece = cell_at(board, hand, src) & PIECE_MASK
    frm = N_CELLS - 1 - src if turn == GOTE else src
    capture = TEXT_CAPTURE if cell_at(board, hand, dst) else 0
    promotion = TEXT_PROMOTION if move & PROMOTION else 0
    return piece | (frm << TEXT_FROM_SHIFT) | (to << TEXT_TO_SHIFT) | capture | promotion


@lru_cache(maxsize=64)
def _bound(files: int, ranks: int):
    """This module's plain kernels (and the game's they call) bound to a board shape (plain Python:
    no numba)."""
    from dobutsu_tb.tablebase.game.game import GAME_MODULES
    from dobutsu_tb.tablebase.game.layout import shape_names

    return bind_plain(GAME_MODULES + (sys.modules[__name__],), shape_names(files, ranks))


@dataclass(frozen=True)
class Move:
    """A move as our notation writes it: ``Lb4-a3``, ``Cb3xb2``, ``Ca2-a1+``, ``C*b2``.

    A value object, as python-chess's ``Move``: it names squares, not a position;
    :meth:`Position.push <dobutsu_tb.tablebase.game.position.Position.push>` plays it and
    :attr:`Position.legal_moves <dobutsu_tb.tablebase.game.position.Position.legal_moves>` lists
    a position's.

    >>> str(Move.from_text("Cb3xb2")), Move.from_text("Lb4-a3").uci()
    ('Cb3xb2', 'b1a2')

    Attributes
    ----------
    piece : str
        The piece's letter, upper case (the piece dropped, for a drop).
    to_square : str
        Its square, e.g. ``'a3'`` (absolute, as Sente sees the board).
    from_square : str or None
        The square it leaves; None for a drop.
    capture : bool
        It captures (``x``). Read loosely when a move is played: a capture written with ``-`` is
        the same move.
    promotion : bool
        It promotes (``+``).
    """

    piece: str
    to_square: str
    from_square: str | None = None
    capture: bool = False
    promotion: bool = False

    @property
    def drop(self) -> bool:
        """The move drops a piece from the hand."""
        return self.from_square is None

    def __str__(self) -> str:
        if self.drop:
            return f"{self.piece}*{self.to_square}"
        return (f"{self.piece}{self.from_square}{'x' if self.capture else '-'}{self.to_square}"
                f"{'+' if self.promotion else ''}")

    def __repr__(self) -> str:
        return f"Move.from_text({str(self)!r})"

    @classmethod
    def from_text(cls, text: str, variant: Variant | None = None) -> "Move":
        """The move our notation writes as ``text`` (its form only: whether it is legal is the
        position's to say).

        Raises
        ------
        IllegalMoveError
            If ``text`` is not a move of the variant's letters and board.
        """
        v = variant or standard_variant()
        m = move_pattern(v).fullmatch(text.strip())
        if not m:
            raise IllegalMoveError(f"{quote_move(text)} is not a move like {' or '.join(_examples(v))}")
        letter, src, sep, _, dst, plus = m.groups()
        for square in (src, dst):
            if square is not None:
                try:
                    parse_square(square, v)
                except PositionError as exc:
                    raise IllegalMoveError(f"{quote_move(text)}: {exc}") from None
        return cls(letter, dst, src, sep == "x", bool(plus))

    @classmethod
    def from_code(cls, code: int, variant: Variant) -> "Move":
        """The move of a text code (module docstring)."""
        src, dst = (code >> TEXT_FROM_SHIFT) & TEXT_SQUARE_MASK, (code >> TEXT_TO_SHIFT) & TEXT_SQUARE_MASK
        return cls(variant.pieces[(code & 7) - 1].letter, square_name(dst, variant),
                   None if src == TEXT_DROP else square_name(src, variant), bool(code & TEXT_CAPTURE),
                   bool(code & TEXT_PROMOTION))

    def code(self, variant: Variant) -> int:
        """The move's text code (module docstring).

        Raises
        ------
        PositionError
            If a square is not on the variant's board.
        """
        piece = 1 + [p.letter for p in variant.pieces].index(self.piece)
        frm = TEXT_DROP if self.drop else parse_square(self.from_square, variant)
        return (piece | (frm << TEXT_FROM_SHIFT) | (parse_square(self.to_square, variant) << TEXT_TO_SHIFT)
                | (TEXT_CAPTURE if self.capture else 0) | (TEXT_PROMOTION if self.promotion else 0))

    def uci(self, variant: Variant | None = None) -> str:
        """Fairy-Stockfish's text of the move: from- and to-square (``b1a2``), ``+`` for a
        promotion, ``C@b3`` for a drop, the ranks counted from Sente's side."""
        to = uci_square(self.to_square, variant)
        if self.drop:
            return f"{self.piece}@{to}"
        return f"{uci_square(self.from_square, variant)}{to}{'+' if self.promotion else ''}"


def kernel_move(position: Position, move: int) -> Move:
    """The :class:`Move` of a kernel move played in ``position`` (in the frame of ``position.state()``)."""
    v = position.variant
    board, hand = position.state()
    return Move.from_code(_bound(v.files, v.ranks).text_code(position.game.rules, board, hand, position.turn, move), v)


def move_text(position: Position, move: int) -> str:
    """Text of a kernel move played in ``position`` (in the frame of ``position.state()``)."""
    return str(kernel_move(position, move))


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
    return Move.from_text(text, variant).uci(variant)


def uci_move_text(position: Position, move: int) -> str:
    """Fairy-Stockfish's text of a kernel move played in ``position`` (:meth:`Move.uci`)."""
    return kernel_move(position, move).uci(position.variant)


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
    moves = position.game.legal_move_list(position.state())
    if not moves:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {uci_move_text(position, mv): mv for mv in moves}
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


def _uci_squares_note(v: Variant, m: re.Match, message: str) -> str:
    """What an error about a UCI move read among moves of our notation adds when it names the
    move's square: that its squares are UCI's, whose ranks count from Sente's side (``b4a3``
    starts from our b1, not b4), unless that square is the same in both."""
    sq = m.group(1) or m.group(5)
    if sq not in message.split(": ", 1)[-1] or "not a square" in message:
        return ""
    try:
        ours = uci_square(sq, v)
        parse_square(ours, v)
    except (PositionError, ValueError):
        return ""
    if ours == sq:
        return ""
    return (f" (read as a UCI move, whose ranks count from Sente's side: its {sq} is {ours} in this notation, "
            f"which writes a move like {_examples(v)[0].split(',')[0]})")


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
    moves = position.game.legal_move_list(position.state())
    if not m:
        uci = UCI_MOVE_PATTERN.fullmatch(t)
        if uci:
            try:
                return parse_uci_move(position, t)
            except IllegalMoveError as exc:
                raise IllegalMoveError(f"{exc}{_uci_squares_note(v, uci, str(exc))}") from None
        hint = " (the piece letter is upper case for both sides)" if pattern.fullmatch(t[:1].upper() + t[1:]) else ""
        example = " or ".join(_examples(v))
        raise IllegalMoveError(f"{quote_move(text)} is not a move like {example}{hint}")
    if not moves:
        raise IllegalMoveError(f"{t}: the game is already over")
    texts = {move_text(position, mv): mv for mv in moves}
    if t in texts:
        return texts[t]
    # Accept a capture written with '-' or a move written with 'x' only when it is unambiguous.
    loose = {k.replace("x", "-"): v for k, v in texts.items()}
    if t.replace("x", "-") in loose:
        return loose[t.replace("x", "-")]
    plain = t[:-1] if t.endswith("+") else t
    if t.endswith("+") and plain.replace("x", "-") in loose:
        kind = v.kind(m.group(1))
        why = (f"a {kind.name} never promotes" if not kind.promotes_to else
               "only a piece reaching its promotion zone promotes")
        raise IllegalMoveError(f"{t}: {why}; write {move_text(position, loose[plain.replace('x', '-')])}")
    if (t + "+").replace("x", "-") in loose:
        raise IllegalMoveError(f"{t}: a {v.kind(m.group(1)).name} that reaches its promotion zone promotes; write "
                               f"{move_text(position, loose[(t + '+').replace('x', '-')])}")
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
    article = "an" if letter.upper() in "AEFHILMNORSX" else "a"  # (as the letter is read: an E, an L)
    return f"{article} {letter.upper()} on {src} cannot move to {dst}"
