"""Values, value codes and sentinels of the tablebase, defined once (docs/rules.md §7).

The one convention of every surface (Python, command line, JSON, web page, UCI):

- a **position's value** is from its side to move's view: WDL ``1`` win, ``0`` draw, ``-1``
  loss, and the signed DTM in plies, ``+n`` a win in n, ``-n`` a loss in n, ``0`` a draw (and a
  try-terminal loss, whose game is already over);
- a **move's value** is the value of playing it for the player who makes it, counted in plies
  from the position before the move (:func:`move_value`): the best moves' value is the
  position's own.

:data:`UNKNOWN` marks a position the retrograde analysis has not decided (yet); whatever is
still unknown at the end is a draw.
"""

from enum import Enum

WIN, DRAW, LOSS = 1, 0, -1
UNKNOWN = -2

# The value byte (one uint8 per position, in memory during a build and in the file):
#
#     0          undecided; once the analysis is over, a draw
#     d + 1      decided with DTM d plies: a win when d is odd, a loss when d is even
#
# The winner always makes the last ply, so a win's DTM is odd and a loss's even (a try-terminal
# loss and a position without moves: 0).
UNDECIDED = 0
#: Largest DTM a file of one-byte values holds (the full game's longest win is 173 plies); a
#: DTM of 254 plies or more makes the file's values two bytes (docs/file-format.md), and the
#: byte's last code is :data:`LONG`.
MAX_STORED_DTM = 253
#: During the retrograde analysis, the value byte of a position whose DTM is too long for it
#: (254 plies or more); the analysis keeps those positions' DTM in a list of its own, and a file
#: whose longest DTM is that long stores two-byte values (up to :data:`MAX_WIDE_DTM`).
LONG = 255
MAX_WIDE_DTM = 65534
#: Names used in text and JSON output (as the Lichess tablebase API's ``category``).
WDL_NAMES = {WIN: "win", DRAW: "draw", LOSS: "loss"}
#: DTM of the two terminal classes: a catch-terminal position wins with its capture (1 ply);
#: a try-terminal position is already lost (0 plies).
CATCH_DTM = 1
TRY_DTM = 0


#: Ranks of moves (:func:`move_rank`): a move's signed DTM fits in ``RANK_SCALE - 1`` plies.
RANK_SCALE = 1 << 16


class Terminal(str, Enum):
    """How the position after a move stands when the game ends there or the file does not hold it
    (``MoveValue.terminal``, the JSON's ``terminal``); a ``str``, so that it compares and prints
    in JSON as its text."""

    #: The side to move can capture the enemy royal piece: a win in 1 ply (docs/rules.md §6).
    CATCH = "catch"
    #: The enemy royal piece stands safe on the side to move's home rank: a loss in 0 plies.
    TRY = "try"
    #: The move captured the royal piece: no position follows (the text predates variants,
    #: whose royal piece may be another animal).
    ROYAL_CAPTURED = "lion captured"

    def __str__(self) -> str:
        return self.value


#: The terminal kinds that end the game as the move arrives.
GAME_ENDING = (Terminal.TRY, Terminal.ROYAL_CAPTURED)


def move_tie(wdl, terminal) -> int:
    """Which of the moves of one value comes first, the lowest first: the one tie-break of
    ``probe``, ``line``, the web page, the Python API and the UCI engine (docs/rules.md §7).

    Among wins in 1 ply, the royal piece's capture comes before a try (the capture ends the game
    beyond any dispute: a GUI, or Fairy-Stockfish's rules, may judge a try otherwise); among
    equally long losses, a move that does not leave the royal piece to be captured comes before
    one that does (a GUI whose lion is a royal king calls that move illegal). Other moves keep
    the order in which they are generated.

    Parameters
    ----------
    wdl : int or None
        The move's WDL for its player.
    terminal : Terminal or None
        Its :attr:`MoveValue.terminal`.
    """
    if wdl == WIN:
        return 0 if terminal == Terminal.ROYAL_CAPTURED else 1
    if wdl == LOSS:
        return 1 if terminal == Terminal.CATCH else 0
    return 0


def describe_value(wdl: int | None, dtm: int | None, unit: bool = True) -> str:
    """``'win in 15 plies'``, ``'loss in 1 ply'``, ``'draw'``, ``'unknown'`` (None); the sign of
    ``dtm`` is ignored, and ``unit=False`` leaves the word "plies" out (``'win in 15'``)."""
    if wdl is None:
        return "unknown"
    if wdl == DRAW:
        return "draw"
    n = abs(dtm)
    return f"{WDL_NAMES[wdl]} in {n}" + (f" {'ply' if n == 1 else 'plies'}" if unit else "")


def signed_dtm(wdl: int, dtm: int) -> int:
    """Signed DTM as in python-chess's Gaviota probe: ``+n`` win, ``-n`` loss, 0 draw (plies);
    the sign of ``dtm`` is ignored."""
    return abs(dtm) if wdl == WIN else -abs(dtm) if wdl == LOSS else 0


def signed_text(dtm: int) -> str:
    """A signed DTM as text: ``'+15'``, ``'-78'``, ``'0'``."""
    return f"{dtm:+d}" if dtm else "0"


def move_value(after_wdl, after_dtm):
    """The value of a move for its player, from the value of the position after it.

    A plain function: kernels jit it too (``tablebase/replay.py``).

    Parameters
    ----------
    after_wdl : int or None
        WDL of the position after the move for its side to move (the opponent): ``LOSS`` with
        ``after_dtm`` 0 when the move captured the royal piece or made a successful try; None or
        :data:`UNKNOWN` when the file does not cover that position.
    after_dtm : int
        Its DTM in plies (the sign is ignored).

    Returns
    -------
    (int, int)
        The mover's WDL and signed DTM, counted from the position before the move (a position
        lost in d plies after the move is a win in d + 1 for the mover); ``(UNKNOWN, 0)`` when
        the position after the move is not covered.
    """
    if after_wdl == WIN:
        return LOSS, -(abs(after_dtm) + 1)
    if after_wdl == LOSS:
        return WIN, abs(after_dtm) + 1
    if after_wdl == DRAW:
        return DRAW, 0
    return UNKNOWN, 0


def move_rank(wdl, dtm):
    """A move's place among the moves of a position, best first, as one integer.

    Wins fastest first, then draws, then losses slowest, then moves to positions the file does not
    cover (``wdl`` None or :data:`UNKNOWN`). A plain function: kernels jit it too
    (``tablebase/replay.py``).

    Parameters
    ----------
    wdl, dtm : int
        The move's value for its player (:func:`move_value`): WDL and signed DTM in plies.

    Returns
    -------
    int
        Win in d: ``d``; draw: ``RANK_SCALE``; loss in d: ``3 * RANK_SCALE - 1 - d``; unknown:
        ``3 * RANK_SCALE``. :func:`value_of_rank` turns it back.
    """
    if wdl == WIN:
        return dtm
    if wdl == DRAW:
        return RANK_SCALE
    if wdl == LOSS:
        return 3 * RANK_SCALE - 1 + dtm
    return 3 * RANK_SCALE


def value_of_rank(rank: int) -> tuple:
    """The move's value (WDL and signed DTM, or ``(None, None)`` when unknown) of a :func:`move_rank`."""
    rank = int(rank)
    return (None, None) if rank >= 3 * RANK_SCALE else known_value_of_rank(rank)


def known_value_of_rank(rank):
    """:func:`value_of_rank` of a move whose value is known (a rank below ``3 * RANK_SCALE``). A
    plain function: kernels jit it too (``tablebase/replay.py``)."""
    if rank < RANK_SCALE:
        return WIN, rank
    if rank < 2 * RANK_SCALE:
        return DRAW, 0
    return LOSS, rank - (3 * RANK_SCALE - 1)


def value_code(wdl: int, dtm: int) -> int:
    """The value byte of a WDL and an unsigned DTM (plies).

    Raises
    ------
    ValueError
        If the DTM does not fit or its parity contradicts the WDL (module comment).
    """
    if wdl == DRAW:
        return UNDECIDED
    if not 0 <= dtm <= MAX_STORED_DTM or (dtm % 2 == 1) != (wdl == WIN):
        raise ValueError(f"no value byte for wdl={wdl}, dtm={dtm}")
    return dtm + 1


def decode_value(code: int) -> tuple[int, int]:
    """(WDL, unsigned DTM in plies) of a value byte; 0 is a draw (DTM 0)."""
    if code == UNDECIDED:
        return DRAW, 0
    dtm = int(code) - 1
    return (WIN if dtm % 2 else LOSS), dtm


def decode_values(codes):
    """(wdl int8, dtm) arrays of an array of values (uint8 or uint16, shape (n,)); dtm has the
    values' dtype."""
    import numpy as np

    codes = np.asarray(codes)
    if codes.dtype not in (np.uint8, np.uint16):
        codes = codes.astype(np.uint8)
    dtm = np.where(codes == UNDECIDED, 0, codes.astype(np.int32) - 1).astype(codes.dtype)
    wdl = np.where(codes == UNDECIDED, DRAW, np.where(dtm % 2 == 1, WIN, LOSS)).astype(np.int8)
    return wdl, dtm
