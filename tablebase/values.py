"""Value codes and sentinels of the tablebase, defined once (SPEC §1.5).

WDL is from the side to move's point of view; DTM counts plies to the end of the game with best
play. :data:`UNKNOWN` marks a position the retrograde analysis has not decided (yet); whatever is
still unknown at the end is a draw.
"""

WIN, DRAW, LOSS = 1, 0, -1
UNKNOWN = -2
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
