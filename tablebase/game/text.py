"""Reading the fields of our position text against a variant's board and letters
(docs/rules.md, "Notation"); :class:`~dobutsu_tb.tablebase.game.position.Position` builds positions
from them. Kept apart from position.py because a variant's start position is read with it while
the variant is being checked, before any table of it exists.
"""

from __future__ import annotations

import re

#: The longest text a position is read from.
MAX_TEXT_CHARS = 100
FILE_LETTERS = "abcdefghijklmno"


class PositionError(ValueError):
    """Raised for a malformed or impossible position; the message says what is wrong."""


def square_name(cell: int, variant=None) -> str:
    """Name of a square index in the absolute frame, e.g. 0 -> ``'a1'``, 10 -> ``'b4'`` (3 files)."""
    from dobutsu_tb.tablebase.game.variant import standard_variant

    files = (variant or standard_variant()).files
    return FILE_LETTERS[cell % files] + str(cell // files + 1)


def parse_square(name: str, variant=None) -> int:
    """Square index of a square name like ``'b3'``.

    Raises
    ------
    PositionError
        If the name is not a square of the variant's board.
    """
    from dobutsu_tb.tablebase.game.variant import standard_variant

    v = variant or standard_variant()
    m = re.fullmatch(r"([a-o])([1-9][0-9]?)", name)
    if not m or FILE_LETTERS.index(m.group(1)) >= v.files or not 1 <= int(m.group(2)) <= v.ranks:
        raise PositionError(f"{name!r} is not a square (files a-{FILE_LETTERS[v.files - 1]}, ranks 1-{v.ranks})")
    return v.files * (int(m.group(2)) - 1) + FILE_LETTERS.index(m.group(1))


def check_length(text: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise PositionError(f"a position is at most {MAX_TEXT_CHARS} characters; got {len(text):,}")


def board_letter(variant, ch: str, context: str, empty: str = "'-' empty") -> str:
    """``ch`` if it is a piece letter of the variant (either case, ASCII), else a PositionError
    that says how empty squares are written (``empty``: our notation's by default)."""
    if not (ch.isascii() and ch.isalpha() and ch.upper() in variant.base_of):
        raise PositionError(f"{context!r}: unknown piece letter {ch!r} "
                            f"(use {' '.join(p.letter for p in variant.pieces)}, {empty})")
    return ch


def parse_hand(variant, hand: str, context: str) -> tuple[dict, dict]:
    """Counts of a hand field: ``-`` for empty hands, else one letter per piece (never both)."""
    counts = ({s: 0 for s in variant.hand_order}, {s: 0 for s in variant.hand_order})
    if hand == "-":
        return counts
    if not hand:
        raise PositionError(f"{context!r}: the hand field is empty; write '-' when no piece is in hand")
    if set(hand) == {"-"}:
        raise PositionError(f"{context!r}: the hand field {hand!r} has more than one '-'; '-' alone means no "
                            f"piece in hand")
    for ch in hand:
        if ch == "-":
            raise PositionError(f"{context!r}: the hand field {hand!r} mixes '-' with pieces; '-' alone means "
                                f"no piece in hand")
        if not (ch.isascii() and ch.upper() in variant.hand_order):
            if not variant.hand_order:
                raise PositionError(f"{context!r}: {ch!r} cannot be in hand (no piece is ever in hand in "
                                    f"{variant.name}: the hand field is '-')")
            raise PositionError(f"{context!r}: {ch!r} cannot be in hand (the hand field is '-' or pieces "
                                f"{' '.join(variant.hand_order)}, upper case Sente's, lower case Gote's)")
        counts[0 if ch.isupper() else 1][ch.upper()] += 1
    return counts


def parse_position_text(variant, text: str, context: str | None = None) -> tuple[list, tuple, str]:
    """The fields of our position text, checked against the variant's board and letters only.

    Returns
    -------
    cells : list of str
        One entry per square (a1 b1 ... row by row): a letter (upper case Sente) or ``""``.
    hands : (dict, dict)
        Sente's and Gote's counts by (upper case) letter of ``hand_order``.
    side : str
        ``"S"`` or ``"G"``.

    Raises
    ------
    PositionError
        If the text is malformed for the variant.
    """
    context = text if context is None else context
    check_length(text)
    fields = text.strip().split("/")
    n = variant.ranks + 2
    if len(fields) != n:
        names = "/".join(f"rank{r}" for r in range(1, variant.ranks + 1))
        raise PositionError(f"{context!r}: expected {n} fields 'side/{names}/hand', got {len(fields)}")
    side, *ranks, hand = fields
    if side not in ("S", "G"):
        raise PositionError(f"{context!r}: side to move must be 'S' or 'G', got {side!r}")
    cells = []
    for r, rank in enumerate(ranks, 1):
        if len(rank) != variant.files:
            raise PositionError(f"{context!r}: rank {r} must have {variant.files} cells, got {rank!r}")
        cells += ["" if ch == "-" else board_letter(variant, ch, context) for ch in rank]
    return cells, parse_hand(variant, hand, context), side
