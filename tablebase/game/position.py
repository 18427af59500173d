"""Positions for the Python API and their text forms (docs/rules.md, "Notation").

A :class:`Position` belongs to a variant (:mod:`~dobutsu_tb.tablebase.game.variant`; the
standard game by default), is in the absolute frame (Sente's view: rank 1 at the top, Sente
playing upwards) and says who is to move; the kernels work on normalised packed states
(:mod:`~dobutsu_tb.tablebase.game.layout`), which :meth:`Position.state` and
:meth:`Position.from_state` convert to and from.

Text forms:

- ours, ``S/gle/-c-/-C-/ELG/-``: the side to move (``S`` Sente, ``G`` Gote), the ranks from 1
  (the top) down, each its files from ``a`` (``-`` empty), and the pieces in hand or ``-``;
  upper case Sente, lower case Gote; the variant's letters (dobutsu: ``L G E C``, ``R`` the hen);
- Fairy-Stockfish's FEN, ``gle/1c1/1C1/ELG[-] w 0 1`` (a promoted piece is ``+`` and its
  unpromoted letter), for cross-checks and engines;
- the seed's diagrams of the standard game (``H:n Z:n K:n`` hand lines around four rows of
  ``' .'``, ``' X'`` or ``'*X'`` cells), which do not say who is to move.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from operator import lshift
from typing import ClassVar

from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.layout import EXT_SHIFT, OPPONENT
from dobutsu_tb.tablebase.game.text import (
    FILE_LETTERS,
    MAX_TEXT_CHARS,
    PositionError,
    board_letter,
    check_length,
    parse_hand,
    parse_position_text,
    parse_square,
    square_name,
)
from dobutsu_tb.tablebase.game.variant import Variant, standard_variant

SENTE, GOTE = 0, 1
#: Names of the sides, indexed by SENTE / GOTE.
SIDE_NAMES = ("Sente", "Gote")


def _plural(name: str) -> str:
    return name + ("es" if name.endswith(("s", "x", "ch", "sh")) else "s")


@dataclass(frozen=True)
class Position:
    """A position of a variant, in the absolute frame.

    Parameters
    ----------
    board : tuple of int
        One code per square, a1 b1 ... row by row from rank 1: 0 empty, else a piece code (1 +
        the kind's index in ``variant.pieces``; dobutsu: 1 elephant, 2 giraffe, 3 lion, 4 chick,
        5 hen) plus 8 for Gote's pieces.
    hands : tuple of int, optional
        Pieces in hand: Sente's counts in the order of ``variant.hand_order``, then Gote's
        (dobutsu: chicks, elephants, giraffes); all zero by default.
    turn : int, optional
        :data:`SENTE` (0, the default) or :data:`GOTE` (1), the side to move.
    variant : Variant, optional
        The game (default: dobutsu shogi).

    Raises
    ------
    PositionError
        If the position is impossible in the variant: not one royal piece per side, more pieces
        of a kind than the variant's army, a piece in hand that cannot be, or a bad cell code.
    """

    board: tuple
    hands: tuple | None = None
    turn: int = SENTE
    variant: Variant = field(default_factory=standard_variant, repr=False)

    #: The standard game's start position (``Position.start()`` is any variant's).
    START_TEXT: ClassVar[str] = "S/gle/-c-/-C-/ELG/-"

    def __post_init__(self):
        v = self.variant
        board = tuple(int(c) for c in self.board)
        hands = tuple(int(h) for h in self.hands) if self.hands is not None else (0,) * (2 * len(v.hand_order))
        object.__setattr__(self, "board", board)
        object.__setattr__(self, "hands", hands)
        if len(board) != v.cells:
            raise PositionError(f"a board of {v.size} has {v.cells} cells, got {len(board)}")
        if len(hands) != 2 * len(v.hand_order) or min(hands, default=0) < 0:
            raise PositionError(f"hands are {2 * len(v.hand_order)} counts >= 0 (Sente's "
                                f"{' '.join(v.hand_order) or 'none'}, then Gote's)")
        if self.turn not in (SENTE, GOTE):
            raise PositionError(f"turn must be SENTE (0) or GOTE (1), got {self.turn!r}")
        for cell, code in enumerate(board):
            if code != 0 and not (1 <= code & 7 <= len(v.pieces) and code & ~15 == 0):
                raise PositionError(f"bad cell code {code} on {square_name(cell, v)}")
        royal = v.pieces.index(v.royal) + 1
        for side, name in ((0, "Sente"), (OPPONENT, "Gote")):
            n = board.count(royal | side)
            if n != 1:
                raise PositionError(f"{name} has {n} {_plural(v.royal.name)} on the board; needs exactly one")
        for base, most in v.army.items():
            forms = [k for k, p in enumerate(v.pieces) if v.base_of[p.letter] == base]
            n = sum(board.count((k + 1) | s) for k in forms for s in (0, OPPONENT))
            if base in v.hand_order:
                slot = v.hand_order.index(base)
                n += hands[slot] + hands[slot + len(v.hand_order)]
            if base == v.royal.letter or n <= most:
                continue
            what = _plural(v.kind(base).name)
            promoted = v.kind(base).promotes_to
            if promoted:
                what += f" ({_plural(v.kind(promoted).name)} included)"
            raise PositionError(f"{n} {what} in the game; there are at most {most}")

    # --- conversions -------------------------------------------------------------------------

    @property
    def game(self):
        """The variant's :class:`~dobutsu_tb.tablebase.game.game.Game` (its tables and kernels)."""
        return game_of(self.variant)

    def state(self) -> tuple[int, int]:
        """The normalised packed state ``(board, hand)`` (side to move as Sente; layout.py)."""
        game = self.game
        # Each square's code in its nibble, each hand count in its field: disjoint bits, so the
        # sum of the shifted values is their bitwise or.
        split = game.shape["BOARD_CELLS"]
        board = sum(map(lshift, self.board[:split], range(0, 4 * split, 4)))
        hand = sum(map(lshift, self.hands, game.layout["COUNT_SHIFT"]))
        if len(self.board) > split:  # the squares beyond the board word, in the hand word
            hand |= sum(map(lshift, self.board[split:], range(0, 4 * (len(self.board) - split), 4))) << EXT_SHIFT
        if self.turn == GOTE:
            return game.flip(board, hand)
        return board, hand

    @classmethod
    def from_state(cls, state, turn: int = SENTE, variant: Variant | None = None) -> "Position":
        """The position of a normalised packed state ``(board, hand)`` whose side to move is ``turn``."""
        game = game_of(variant or standard_variant())
        board, hand = (int(w) for w in state)
        if turn == GOTE:
            board, hand = game.flip(board, hand)
        split = game.shape["BOARD_CELLS"]
        cells = tuple((board >> (4 * i)) & 15 for i in range(split))
        cells += tuple((hand >> (EXT_SHIFT + 4 * i)) & 15 for i in range(game.variant.cells - split))
        hands = tuple((hand >> shift) & mask for shift, mask in zip(game.layout["COUNT_SHIFT"],
                                                                    game.layout["COUNT_FIELD"]))
        return cls(cells, hands, turn, game.variant)

    @classmethod
    def from_key(cls, key: int, variant: Variant | None = None) -> "Position":
        """The position of a canonical key (as stored in a tablebase), Sente to move.

        Raises
        ------
        PositionError
            If ``key`` is not an integer (a Python or numpy one) or not the key of a position of
            the variant.
        VariantError
            If the variant's keys are wider than a key holds (``Game.key_problem``).
        """
        import operator

        game = game_of(variant or standard_variant())
        game.check_keys()
        try:  # 1.5 or "12" is no key (int() would read 1.5 as 1), nor a bool
            number = None if isinstance(key, bool) else operator.index(key)
        except TypeError:
            number = None
        if number is None:
            raise PositionError(f"a key is an integer, not {key!r}")
        key = number
        try:  # (a negative key or one of too many bits shifts out of range in the decoder; key 0
            # decodes to an empty board, which is no position either)
            state = game.kernels.decode_key(game.rules, key)
            if game.kernels.encode_state(game.rules, *state) == key:
                return cls.from_state(state, SENTE, game.variant)
        except (ValueError, OverflowError, IndexError, PositionError):
            pass
        raise PositionError(f"{key:#x} is not the key of a {game.variant.name} position")

    def key(self) -> int:
        """The canonical key (layout.py): normalised, mirror images folded."""
        return self.game.key_of(self.state())

    def mirror(self) -> "Position":
        """The left-right mirror image (files reversed; the game's ``mirror_state`` kernel)."""
        board, hand = self.game.kernels.mirror_state(self.game.rules, *self.state())
        return Position.from_state((board, hand), self.turn, self.variant)

    # --- moves (python-chess style) ------------------------------------------------------------

    @property
    def legal_moves(self) -> list:
        """The legal moves, as :class:`~dobutsu_tb.tablebase.game.notation.Move` objects in
        generation order; empty when the game is over (a successful try against the side to move).

        >>> [str(m) for m in Position.start().legal_moves]
        ['Cb3xb2', 'Lb4-a3', 'Lb4-c3', 'Gc4-c3']
        """
        from dobutsu_tb.tablebase.game.notation import kernel_move

        return [kernel_move(self, mv) for mv in self.game.legal_move_list(self.state())]

    def parse_move(self, move) -> "Move":  # noqa: F821 (notation.Move, imported when used)
        """The legal move that ``move`` names here: a :class:`~dobutsu_tb.tablebase.game.notation.Move`,
        or its text in our notation (``Lb4-a3``; a capture written with ``-`` is read too) or UCI's
        (``b1a2``, ``C@b3``).

        Raises
        ------
        IllegalMoveError
            If it is not a move, or names no legal move here (the message says why).
        """
        from dobutsu_tb.tablebase.game.notation import kernel_move, parse_move

        return kernel_move(self, parse_move(self, str(move)))

    def push(self, move) -> "Position | None":
        """The position after ``move`` (a Move, or its text in our notation or UCI's), or None when
        the move captures the enemy royal piece: the game is over and no position follows.
        Positions are values: this one is left as it is.

        >>> Position.start().push("Lb4-a3").text()
        'G/gle/-c-/LC-/E-G/-'

        Raises
        ------
        IllegalMoveError
            If it is not a move, or names no legal move here.
        """
        from dobutsu_tb.tablebase.game.notation import parse_move, play_move

        return play_move(self, parse_move(self, str(move)))

    # --- text forms --------------------------------------------------------------------------

    @classmethod
    def start(cls, variant: Variant | None = None) -> "Position":
        """The variant's start position (default: the standard game's)."""
        v = variant or standard_variant()
        return cls.from_text(v.start, v)

    @classmethod
    def from_text(cls, text: str, variant: Variant | None = None) -> "Position":
        """Parse our text form, e.g. ``S/gle/-c-/-C-/ELG/-``.

        The form is read strictly: the side ``S`` or ``G``, the ranks of the variant's board
        (its letters, upper case Sente, lower case Gote; ``-`` empty), and the hand field: ``-``
        when both hands are empty, else the pieces in hand, never empty. Only whitespace around
        the text is ignored.

        Raises
        ------
        PositionError
            If the text is malformed or the position impossible.
        """
        v = variant or standard_variant()
        cells, hands, side = parse_position_text(v, text)
        return cls._from_letters(v, cells, hands, SENTE if side == "S" else GOTE, text.strip())

    @classmethod
    def _from_letters(cls, v: Variant, cells: list, hands: tuple, turn: int, context: str | None = None) -> "Position":
        """The position of parsed letters; an impossible one's error names ``context`` (the text)."""
        index = {p.letter: k + 1 for k, p in enumerate(v.pieces)}
        board = tuple(0 if not ch else index[ch.upper()] | (0 if ch.isupper() else OPPONENT) for ch in cells)
        counts = tuple(hands[0][s] for s in v.hand_order) + tuple(hands[1][s] for s in v.hand_order)
        try:
            return cls(board, counts, turn, v)
        except PositionError as exc:
            if context is None:
                raise
            raise PositionError(f"{context!r}: {exc}") from None

    def _letter(self, code: int) -> str:
        if code == 0:
            return "-"
        letter = self.variant.pieces[(code & 7) - 1].letter
        return letter.lower() if code & OPPONENT else letter

    def _hand_text(self) -> str:
        slots = self.variant.hand_order
        n = len(slots)
        text = "".join(slots[k % n].lower() if k >= n else slots[k] for k in range(2 * n) for _ in range(self.hands[k]))
        return text or "-"

    def text(self) -> str:
        """Our text form, e.g. ``S/gle/-c-/-C-/ELG/-``."""
        f = self.variant.files
        ranks = ["".join(self._letter(c) for c in self.board[f * r: f * r + f]) for r in range(self.variant.ranks)]
        return "/".join(["SG"[self.turn], *ranks, self._hand_text()])

    @classmethod
    def from_fen(cls, fen: str, variant: Variant | None = None) -> "Position":
        """Parse Fairy-Stockfish's FEN, e.g. ``gle/1c1/1C1/ELG[-] w 0 1`` (a promoted piece is
        ``+`` and its unpromoted letter; the hands in brackets, ``[]`` or ``[-]`` when empty, or no
        brackets for empty hands). After the side to move, up to four fields of ``-`` or counts
        (``w - - 0 1``), nothing else.

        Raises
        ------
        PositionError
            If the FEN is malformed or the position impossible.
        """
        v = variant or standard_variant()
        check_length(fen)
        m = re.fullmatch(r"\s*([^\[\s]+)(?:\[([^\]]*)\])?\s+([wb])(?:\s+(?:-|\d+)){0,4}\s*", fen)
        if not m:
            example = Position.start(v).fen()
            raise PositionError(f"{fen!r} is not a {v.name} FEN like {example!r}")
        placement, hand, side = m.groups()
        ranks = placement.split("/")
        if len(ranks) != v.ranks:
            raise PositionError(f"{fen!r}: expected {v.ranks} ranks")
        cells = []
        for r, rank in enumerate(ranks, 1):
            row, promoted = [], False
            if re.search(r"[0-9]{2}", rank):  # FEN's 21 is twenty-one squares, not 2 and 1
                raise PositionError(f"{fen!r}: rank {r} has two digits in a row; write the empty squares as one count")
            for ch in rank:
                if ch == "+":
                    promoted = True
                elif ch in "123456789" and ch.isascii():  # ASCII digits only: str.isdigit() is true for '²'
                    row += [""] * int(ch)
                else:
                    letter = board_letter(v, ch, fen, "a digit for empty squares in a FEN")
                    if promoted:
                        kind = v.kind(letter.upper())
                        if not kind.promotes_to:
                            raise PositionError(f"{fen!r}: {kind.name} does not promote")
                        target = kind.promotes_to
                        letter = target if letter.isupper() else target.lower()
                        promoted = False
                    row.append(letter)
            if len(row) != v.files:
                raise PositionError(f"{fen!r}: rank {r} must have {v.files} cells")
            cells += row
        hands = parse_hand(v, hand or "-", fen)
        return cls._from_letters(v, cells, hands, SENTE if side == "w" else GOTE, fen)

    @staticmethod
    def looks_like_fen(text: str) -> bool:
        """Whether a position's text is a FEN (hands in brackets, or a side ``w``/``b`` after a
        space) rather than our notation (``S/gle/-c-/-C-/ELG/-``: no spaces)."""
        return "[" in text or re.match(r"\s*\S+\s+[wb](\s|$)", text) is not None

    def fen(self) -> str:
        """Fairy-Stockfish's FEN of the position."""
        v = self.variant
        ranks = []
        for r in range(v.ranks):
            out, gap = "", 0
            for code in self.board[v.files * r: v.files * r + v.files]:
                if code == 0:
                    gap += 1
                    continue
                if gap:
                    out, gap = out + str(gap), 0
                letter = self._letter(code)
                base = v.base_of[letter.upper()]
                if base != letter.upper():
                    letter = "+" + (base if letter.isupper() else base.lower())
                out += letter
            ranks.append(out + (str(gap) if gap else ""))
        return f"{'/'.join(ranks)}[{self._hand_text()}] {'wb'[self.turn]} 0 1"

    @classmethod
    def from_diagram(cls, text: str, turn: int = SENTE) -> "Position":
        """Parse a seed diagram of the standard game: Gote's hand line, four rows of cells, Sente's
        hand line.

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
        letters = {"L": "L", "K": "G", "Z": "E", "H": "C", "N": "R"}

        def hand(line):
            m = re.fullmatch(r"\s*H:(\d)\s+Z:(\d)\s+K:(\d)\s*", line)
            if not m:
                raise PositionError(f"bad hand line {line.strip()!r}; expected 'H:n Z:n K:n'")
            return dict(zip("CEG", (int(g) for g in m.groups())))

        cells = []
        for line in lines[1:5]:
            found = re.findall(r"(\*?)([.A-Z])", line)
            if len(found) != 3 or re.sub(r"\*?[.A-Z]|\s", "", line):
                raise PositionError(f"bad diagram row {line!r}: expected 3 cells like ' .', ' L', '*L'")
            for star, ch in found:
                if ch == ".":
                    cells.append("")
                elif ch in letters:
                    cells.append(letters[ch].lower() if star else letters[ch])
                else:
                    raise PositionError(f"unknown piece {ch!r} in diagram row {line!r}")
        return cls._from_letters(standard_variant(), cells, (hand(lines[5]), hand(lines[0])), turn)

    def diagram(self) -> str:
        """A board for people: coordinates, pieces (Gote's lower case), hands and side to move."""
        v = self.variant
        rows = ["    " + " ".join(FILE_LETTERS[: v.files])]
        for r in range(v.ranks):
            cells = " ".join(self._letter(c).replace("-", ".") for c in self.board[v.files * r: v.files * r + v.files])
            rows.append(f"{r + 1:>3} {cells}")
        hand = self._hand_text()
        sente = "".join(ch for ch in hand if ch.isupper()) or "-"
        gote = "".join(ch for ch in hand if ch.islower()) or "-"
        rows.append(f"  in hand: Sente {sente}, Gote {gote}; {SIDE_NAMES[self.turn]} to move")
        return "\n".join(rows)

    def __repr__(self) -> str:
        if self.variant.name == standard_variant().name and self.variant == standard_variant():
            return f"Position.from_text({self.text()!r})"
        return f"Position.from_text({self.text()!r}, get_variant({self.variant.name!r}))"

    def __str__(self) -> str:
        return self.text()


__all__ = ["Position", "PositionError", "SENTE", "GOTE", "SIDE_NAMES", "FILE_LETTERS", "MAX_TEXT_CHARS",
           "parse_square", "square_name"]
