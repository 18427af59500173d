"""dobutsu-tablebase's public face: ``from dobutsu_tb import open_tablebase, Position, Move``.

>>> from dobutsu_tb import open_tablebase, Position               # doctest: +SKIP
>>> with open_tablebase("dobutsu.h5") as tb:
...     start = Position.start()
...     tb.probe_dtm(start)                      # -78: the side to move (Sente) loses in 78 plies
...     best = tb.probe_moves(start)[0]          # its moves, best first, valued for their player
...     after = start.push(best.move)            # a move as text (ours or UCI's) or a Move
...     [str(m) for m in after.legal_moves]

Values follow one convention everywhere (docs/rules.md §7): a position's WDL and signed DTM in
plies are its side to move's; a move's are its player's, counted from the position before it.

This module imports nothing until a name is used (the command line's start stays quick); the
names live deeper, where they keep working: ``dobutsu_tb.tablebase.probe``,
``dobutsu_tb.tablebase.game.position``, ``dobutsu_tb.tablebase.game.notation``, ... The
repository's root is this package: ``encoding/`` is ``dobutsu_tb.encoding``, and so on.
"""

from __future__ import annotations

import importlib

#: Each public name and the module that defines it.
_PUBLIC = {
    "open_tablebase": "dobutsu_tb.tablebase.probe",
    "Tablebase": "dobutsu_tb.tablebase.probe",
    "MoveValue": "dobutsu_tb.tablebase.probe",
    "MissingPositionError": "dobutsu_tb.tablebase.probe",
    "Position": "dobutsu_tb.tablebase.game.position",
    "PositionError": "dobutsu_tb.tablebase.game.position",
    "SENTE": "dobutsu_tb.tablebase.game.position",
    "GOTE": "dobutsu_tb.tablebase.game.position",
    "Move": "dobutsu_tb.tablebase.game.notation",
    "IllegalMoveError": "dobutsu_tb.tablebase.game.notation",
    "Variant": "dobutsu_tb.tablebase.game.variant",
    "get_variant": "dobutsu_tb.tablebase.game.variant",
    "known_variants": "dobutsu_tb.tablebase.game.variant",
    "Terminal": "dobutsu_tb.tablebase.values",
    "WIN": "dobutsu_tb.tablebase.values",
    "DRAW": "dobutsu_tb.tablebase.values",
    "LOSS": "dobutsu_tb.tablebase.values",
    "TablebaseFileError": "dobutsu_tb.tablebase.schema",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'dobutsu_tb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
