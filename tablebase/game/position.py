"""Positions for the Python API and their text forms (SPEC §1.6).

A :class:`Position` is in the absolute frame (Sente's view: rank 1 at the top, Sente playing
upwards) and says who is to move; the kernels work on normalised packed states
(:mod:`encoding.key`), which :meth:`Position.state` and :meth:`Position.from_state` convert to
and from.

Text forms:

- the FEN-like form of the ``dobutsu`` tablebase program, ``S/gle/-c-/-C-/ELG/-``: side to move,
  ranks 1 to 4 (files a to c, ``-`` empty), pieces in hand or ``-``; upper case Sente, lower
  case Gote; ``L G E C`` and ``R``/``r`` for the hen;
- Fairy-Stockfish's FEN, ``gle/1c1/1C1/ELG[-] w 0 1`` (hen ``+C``), for cross-checks;
- the seed's diagrams (``H:n Z:n K:n`` hand lines around four rows of ``' .'``, ``' X'`` or
  ``'*X'`` cells), which do not say who is to move.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dobutsu_tb.tablebase.game.key import (
    CELL_BITS,
    CELL_MASK,
    CHICK,
    COUNT_BITS,
    COUNT_MASK,
    ELEPHANT,
    EMPTY,
    GIRAFFE,
    HAND_SHIFT,
    HEN,
    LION,
    N_CELLS,
    OPPONENT,
    canonical_key,
    flip_state,
)

SENTE, GOTE = 0, 1
#: Names of the sides, indexed by SENTE / GOTE.
SIDE_NAMES = ("Sente", "Gote")
#: Piece letters (Sente's, upper case) by piece code.
PIECE_LETTER = {ELEPHANT: "E", GIRAFFE: "G", LION: "L", CHICK: "C", HEN: "R"}
LETTER_PIECE = {v: k for k, v in PIECE_LETTER.items()}
#: Hand slot order: chick, elephant, giraffe.
HAND_LETTERS = "CEG"
FILES = "abc"
#: Fairy-Stockfish's name of this game (its ``UCI_Variant``), whose FEN :meth:`Position.from_fen` reads.
FSF_VARIANT = "dobutsu"
#: The longest text a position is read from (ours needs at most 25 characters, a FEN about 40).
MAX_TEXT_CHARS = 100


class PositionError(ValueError):
    """Raised for a malformed or impossible position; the message says what is wrong."""


def square_name(cell: int) -> str:
    """Name of a cell index 0..11 in the absolute frame, e.g. 0 -> ``'a1'``, 10 -> ``'b4'``."""
    return FILES[cell % 3] + str(cell // 3 + 1)


def parse_square(name: str) -> int:
    """Cell index 0..11 of a square name like ``'b3'``.

    Raises
    ------
    PositionError
        If the name is not a square of the 3x4 board.
    """
    if len(name) != 2 or name[0] not in FILES or name[1] not in "1234":
        raise PositionError(f"{name!r} is not a square (files a-c, ranks 1-4)")
    return 3 * (int(name[1]) - 1) + FILES.index(name[0])


@dataclass(frozen=True)
class Position:
    """A dobutsu shogi position in the absolute frame.

    Parameters
    ----------
    board : tuple of 12 int
        Cells a1 b1 c1 a2 ... c4; 0 empty, else a piece code (:mod:`encoding.key`: 1 elephant,
        2 giraffe, 3 lion, 4 chick, 5 hen) plus 8 for Gote's pieces.
    hands : tuple of 6 int
        Pieces in hand: Sente's chicks, elephants, giraffes, then Gote's.
    turn : int
        :data:`SENTE` (0) or :data:`GOTE` (1), the side to move.

    Raises
    ------
    PositionError
        If the position is impossible: not one lion per side, more than two chicks (hens
        included), elephants or giraffes, a lion or hen in hand, or a bad cell code.
    """

    board: tuple
    hands: tuple = (0, 0, 0, 0, 0, 0)
    turn: int = SENTE

    START_TEXT: ClassVar[str] = "S/gle/-c-/-C-/ELG/-"

    def __post_init__(self):
        board, hands = tuple(int(c) for c in self.board), tuple(int(h) for h in self.hands)
        object.__setattr__(self, "board", board)
        object.__setattr__(self, "hands", hands)
        if len(board) != N_CELLS:
            raise PositionError(f"a board has 12 cells, got {len(board)}")
        if len(hands) != 6 or min(hands) < 0:
            raise PositionError("hands are six counts >= 0 (Sente's C E G, Gote's C E G)")
        if self.turn not in (SENTE, GOTE):
            raise PositionError(f"turn must be SENTE (0) or GOTE (1), got {self.turn!r}")
        for cell, code in enumerate(board):
            if code != EMPTY and (code & 7) not in PIECE_LETTER or code & ~15 or code == OPPONENT:
                raise PositionError(f"bad cell code {code} on {square_name(cell)}")
        for side, name in ((0, "Sente"), (OPPONENT, "Gote")):
            lions = board.count(LION | side)
            if lions != 1:
                raise PositionError(f"{name} has {lions} lions on the board; needs exactly one")
        totals = {
            "chicks (hens included)": sum(board.count(c | s) for c in (CHICK, HEN) for s in (0, 8))
            + hands[0] + hands[3],
            "elephants": sum(board.count(ELEPHANT | s) for s in (0, 8)) + hands[1] + hands[4],
            "giraffes": sum(board.count(GIRAFFE | s) for s in (0, 8)) + hands[2] + hands[5],
        }
        for what, n in totals.items():
            if n > 2:
                raise PositionError(f"{n} {what} in the game; there are at most 2")

    # --- conversions -------------------------------------------------------------------------

    def state(self) -> int:
        """The normalised packed state (side to move as Sente; :mod:`encoding.key`)."""
        b, h = self.board, self.hands  # two cells a byte, then the hand counts
        s = int.from_bytes(bytes([b[0] | b[1] << 4, b[2] | b[3] << 4, b[4] | b[5] << 4, b[6] | b[7] << 4,
                                  b[8] | b[9] << 4, b[10] | b[11] << 4,
                                  h[0] | h[1] << 2 | h[2] << 4 | h[3] << 6, h[4] | h[5] << 2]), "little")
        return int(flip_state(s)) if self.turn == GOTE else s

    @classmethod
    def from_state(cls, state: int, turn: int = SENTE) -> "Position":
        """The position of a normalised packed state whose side to move is ``turn``."""
        s = int(flip_state(np.int64(state))) if turn == GOTE else int(state)
        board = tuple((s >> (CELL_BITS * i)) & CELL_MASK for i in range(N_CELLS))
        hands = tuple((s >> (HAND_SHIFT + COUNT_BITS * k)) & COUNT_MASK for k in range(6))
        return cls(board, hands, turn)

    def key(self) -> int:
        """The canonical key (SPEC §1.3): normalised, mirror folded."""
        return int(canonical_key(np.int64(self.state())))

    def mirror(self) -> "Position":
        """The left-right mirror image (files a and c swapped)."""
        board = tuple(self.board[3 * (i // 3) + 2 - i % 3] for i in range(N_CELLS))
        return Position(board, self.hands, self.turn)

    # --- text forms --------------------------------------------------------------------------

    @classmethod
    def start(cls) -> "Position":
        """The standard start position (SPEC §1.1)."""
        return cls.from_text(cls.START_TEXT)

    @classmethod
    def from_text(cls, text: str) -> "Position":
        """Parse the FEN-like form, e.g. ``S/gle/-c-/-C-/ELG/-``.

        The form is read strictly (SPEC §1.6): the side ``S`` or ``G``, four ranks of three cells
        (``L G E C R`` upper case for Sente, lower case for Gote, ``-`` empty), and the hand
        field: ``-`` when both hands are empty, else the pieces in hand (``C E G``, upper case
        Sente's, lower case Gote's), never empty. Only whitespace around the text is ignored.

        Raises
        ------
        PositionError
            If the text is malformed or the position impossible.
        """
        _check_length(text)
        fields = text.strip().split("/")
        if len(fields) != 6:
            raise PositionError(f"{text!r}: expected 6 fields 'side/rank1/rank2/rank3/rank4/hand', "
                                f"got {len(fields)}")
        side, *ranks, hand = fields
        if side not in ("S", "G"):
            raise PositionError(f"{text!r}: side to move must be 'S' or 'G', got {side!r}")
        board = []
        for r, rank in enumerate(ranks, 1):
            if len(rank) != 3:
                raise PositionError(f"{text!r}: rank {r} must have 3 cells, got {rank!r}")
            for ch in rank:
                board.append(_cell_of_letter(ch, text))
        return cls(tuple(board), _parse_hand(hand, text), SENTE if side == "S" else GOTE)

    def text(self) -> str:
        """The FEN-like form, e.g. ``S/gle/-c-/-C-/ELG/-``."""
        ranks = ["".join(_letter_of_cell(c) for c in self.board[3 * r: 3 * r + 3]) for r in range(4)]
        hand = "".join(HAND_LETTERS[k % 3].lower() if k >= 3 else HAND_LETTERS[k]
                       for k in range(6) for _ in range(self.hands[k])) or "-"
        return "/".join(["SG"[self.turn], *ranks, hand])

    @classmethod
    def from_fen(cls, fen: str) -> "Position":
        """Parse Fairy-Stockfish's FEN of the ``dobutsu`` variant, e.g. ``gle/1c1/1C1/ELG[-] w 0 1``.

        Raises
        ------
        PositionError
            If the FEN is malformed or the position impossible.
        """
        _check_length(fen)
        m = re.fullmatch(r"\s*([^\[\s]+)\[([^\]]*)\]\s+([wb])\b.*", fen)
        if not m:
            raise PositionError(f"{fen!r} is not a dobutsu FEN like 'gle/1c1/1C1/ELG[-] w 0 1'")
        placement, hand, side = m.groups()
        ranks = placement.split("/")
        if len(ranks) != 4:
            raise PositionError(f"{fen!r}: expected 4 ranks")
        board = []
        for r, rank in enumerate(ranks, 1):
            cells, promoted = [], False
            for ch in rank:
                if ch == "+":
                    promoted = True
                elif ch in _FEN_GAPS:  # ASCII digits only: str.isdigit() is true for '²' too
                    cells += [EMPTY] * int(ch)
                else:
                    code = _cell_of_letter(ch, fen)
                    if promoted:
                        if code & 7 != CHICK:
                            raise PositionError(f"{fen!r}: only a chick promotes")
                        code = HEN | (code & OPPONENT)
                        promoted = False
                    cells.append(code)
            if len(cells) != 3:
                raise PositionError(f"{fen!r}: rank {r} must have 3 cells")
            board += cells
        return cls(tuple(board), _parse_hand(hand or "-", fen), SENTE if side == "w" else GOTE)

    def fen(self) -> str:
        """Fairy-Stockfish's FEN of the position."""
        ranks = []
        for r in range(4):
            out, gap = "", 0
            for code in self.board[3 * r: 3 * r + 3]:
                if code == EMPTY:
                    gap += 1
                    continue
                if gap:
                    out, gap = out + str(gap), 0
                letter = _letter_of_cell(code)
                out += "+" + ("C" if letter == "R" else "c") if letter in "Rr" else letter
            ranks.append(out + (str(gap) if gap else ""))
        hand = self.text().rsplit("/", 1)[1]
        return f"{'/'.join(ranks)}[{hand}] {'wb'[self.turn]} 0 1"

    @classmethod
    def from_diagram(cls, text: str, turn: int = SENTE) -> "Position":
        """Parse a seed diagram: Gote's hand line, four rows of cells, Sente's hand line.

        Cells are ``' .'`` empty, ``' X'`` Sente's or ``'*X'`` Gote's piece X, with ``L`` lion,
        ``K`` giraffe, ``Z`` elephant, ``H`` chick, ``N`` hen; hand lines read ``H:n Z:n K:n``.
        The diagrams do not say who is to move, so ``turn`` does.

        Raises
        ------
        PositionError
            If the diagram is malformed or the position impossible.
        """
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) != 6:
            raise PositionError(f"a diagram has 6 non-blank lines (hand, 4 ranks, hand), got {len(lines)}")
        pieces = {"L": LION, "K": GIRAFFE, "Z": ELEPHANT, "H": CHICK, "N": HEN}

        def hand(line):
            m = re.fullmatch(r"\s*H:(\d)\s+Z:(\d)\s+K:(\d)\s*", line)
            if not m:
                raise PositionError(f"bad hand line {line.strip()!r}; expected 'H:n Z:n K:n'")
            return tuple(int(g) for g in m.groups())

        board = []
        for line in lines[1:5]:
            cells = re.findall(r"(\*?)([.A-Z])", line)
            if len(cells) != 3 or re.sub(r"\*?[.A-Z]|\s", "", line):
                raise PositionError(f"bad diagram row {line!r}: expected 3 cells like ' .', ' L', '*L'")
            for star, ch in cells:
                if ch == ".":
                    board.append(EMPTY)
                elif ch in pieces:
                    board.append(pieces[ch] | (OPPONENT if star else 0))
                else:
                    raise PositionError(f"unknown piece {ch!r} in diagram row {line!r}")
        return cls(tuple(board), hand(lines[5]) + hand(lines[0]), turn)

    def diagram(self) -> str:
        """A board for people: coordinates, pieces (Gote's lower case), hands and side to move."""
        rows = ["    a b c"]
        for r in range(4):
            cells = " ".join(_letter_of_cell(c).replace("-", ".") for c in self.board[3 * r: 3 * r + 3])
            rows.append(f"  {r + 1} {cells}")
        hand = self.text().rsplit("/", 1)[1]
        sente = "".join(ch for ch in hand if ch.isupper()) or "-"
        gote = "".join(ch for ch in hand if ch.islower()) or "-"
        rows.append(f"  in hand: Sente {sente}, Gote {gote}; {SIDE_NAMES[self.turn]} to move")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return f"Position.from_text({self.text()!r})"

    def __str__(self) -> str:
        return self.text()


def _check_length(text: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise PositionError(f"a position is at most {MAX_TEXT_CHARS} characters; got {len(text):,}")


#: Piece letters on the board, both cases (ASCII only).
_PIECE_LETTERS = "".join(PIECE_LETTER.values()) + "".join(PIECE_LETTER.values()).lower()
#: The run lengths of empty cells a FEN rank can hold.
_FEN_GAPS = "123"


def _cell_of_letter(ch: str, context: str) -> int:
    if ch == "-":
        return EMPTY
    piece = LETTER_PIECE.get(ch.upper()) if ch in _PIECE_LETTERS else None
    if piece is None:
        raise PositionError(f"{context!r}: unknown piece letter {ch!r} (use L G E C R, '-' empty)")
    return piece | (0 if ch.isupper() else OPPONENT)


def _letter_of_cell(code: int) -> str:
    if code == EMPTY:
        return "-"
    letter = PIECE_LETTER[code & 7]
    return letter.lower() if code & OPPONENT else letter


def _parse_hand(hand: str, context: str) -> tuple:
    """Counts of a hand field: ``-`` for empty hands, else one letter per piece (never both)."""
    counts = [0] * 6
    if hand == "-":
        return tuple(counts)
    if not hand:
        raise PositionError(f"{context!r}: the hand field is empty; write '-' when no piece is in hand")
    for ch in hand:
        if ch not in HAND_LETTERS + HAND_LETTERS.lower():
            raise PositionError(f"{context!r}: {ch!r} cannot be in hand (the hand field is '-' or "
                                f"pieces C E G, upper case Sente's, lower case Gote's)")
        counts[HAND_LETTERS.index(ch.upper()) + (0 if ch.isupper() else 3)] += 1
    return tuple(counts)
