"""Value codes and sentinels of the tablebase, defined once (SPEC §1.5).

WDL is from the side to move's point of view; DTM counts plies to the end of the game with best
play. :data:`UNKNOWN` marks a position the retrograde analysis has not decided (yet); whatever is
still unknown at the end is a draw.
"""

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
#: Largest DTM a value byte holds (the full game's longest win is 173 plies).
MAX_STORED_DTM = 254
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
    """Signed DTM as in python-chess's Gaviota probe: ``+n`` win, ``-n`` loss, 0 draw (plies)."""
    return dtm if wdl == WIN else -dtm if wdl == LOSS else 0


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
