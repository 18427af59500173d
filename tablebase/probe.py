"""Probing a tablebase file: values of positions, of their moves, perfect-play lines.

>>> with open_tablebase("dobutsu.h5") as tb:                    # doctest: +SKIP
...     tb.probe_wdl(Position.start()), tb.probe_dtm("S/gle/-c-/-C-/ELG/-")
(-1, -78)

Positions may be given as :class:`~encoding.position.Position` objects or in SPEC §1.6 text
form, in any orientation (Gote to move, mirrored): they are canonicalised. Terminal positions are
answered from the rules (catch-terminal: win in 1; try-terminal: loss in 0). A position that the
file does not cover raises :class:`MissingPositionError` from the ``probe_*`` methods, and gives
``default`` from the ``get_*`` methods (python-chess's convention).

Lookups go through ``/index`` (the first key of each chunk, read on open) to one chunk of each
dataset, and decompressed chunks are kept in a small cache, so a single probe reads a few KiB.
A probe of a position whose chunks are cached takes microseconds; one that must inflate new
chunks takes about 0.25 ms. ``open_tablebase(path, in_memory=True)`` reads the whole file
instead (about 5 s and 1.1 GiB for the full tablebase), after which any probe takes about 5 µs:
use it for many random probes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dobutsu_tb.encoding.config import CHUNK_CACHE
from dobutsu_tb.tablebase.game.key import LION, OPPONENT, canonical_key
from dobutsu_tb.tablebase.game.notation import move_text
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.rules import CATCH, NONTERMINAL, TRY, classify, find_piece, legal_moves, make_move
from dobutsu_tb.tablebase.storage import Metadata, TablebaseFileError, open_file, read_metadata
from dobutsu_tb.tablebase.values import CATCH_DTM, DRAW, LOSS, TRY_DTM, WIN, signed_dtm


class MissingPositionError(KeyError):
    """Raised when a position is not covered by the tablebase (not reachable from its start)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "position not in the tablebase"


@dataclass(frozen=True)
class MoveValue:
    """A legal move and the value of the position it leads to.

    As in the Lichess tablebase API, ``wdl`` and ``dtm`` are the child's, from the view of the
    side to move after the move; a move is good for its player when the child is a loss.

    Attributes
    ----------
    move : str
        SPEC §1.6 notation.
    position : Position or None
        The position after the move; None when the move captures the lion (the game is over).
    wdl : int or None
        Child's WDL (1 win, 0 draw, -1 loss); None when the tablebase does not cover the child,
        which happens only after a catch-terminal position (the tablebase never expands those).
    dtm : int or None
        Child's signed DTM in plies, None with ``wdl``.
    terminal : str or None
        ``"catch"`` or ``"try"`` when the child is terminal (or ``"lion captured"`` after
        capturing the lion), else None.
    """

    move: str
    position: Position | None
    wdl: int | None
    dtm: int | None
    terminal: str | None = None

    def sort_key(self) -> tuple:
        """Best move first: wins fastest, then draws, then losses slowest, then unknown."""
        if self.wdl is None:
            return (3, 0)
        if self.wdl == LOSS:
            return (0, abs(self.dtm))
        if self.wdl == DRAW:
            return (1, 0)
        return (2, -abs(self.dtm))


def _to_position(position) -> Position:
    if isinstance(position, Position):
        return position
    if isinstance(position, str):
        return Position.from_text(position)
    raise TypeError(f"expected a Position or its text form, got {type(position).__name__}")


class Tablebase:
    """An open tablebase file; use :func:`open_tablebase`.

    Parameters
    ----------
    path : str or Path
    in_memory : bool, optional
        Read all keys and values into memory on open (about 11 bytes per position) instead of
        one chunk at a time.

    Raises
    ------
    TablebaseFileError
        If the file is missing, corrupt or not a tablebase.
    """

    def __init__(self, path, in_memory: bool = False):
        self.path = Path(path)
        self._file = open_file(self.path)
        self.metadata: Metadata = read_metadata(self._file)
        self._keys = self._file["keys"]
        self._wdl = self._file["wdl"]
        self._dtm = self._file["dtm"]
        self._index = self._file["index"][()]
        self._chunk = int(self._keys.chunks[0]) if self._keys.chunks else max(1, self._keys.shape[0])
        self._cache: dict[str, OrderedDict] = {"keys": OrderedDict(), "wdl": OrderedDict(), "dtm": OrderedDict()}
        self._all = None
        if in_memory:
            self._all = (self._keys[()], self._wdl[()], self._dtm[()])

    # --- context manager -----------------------------------------------------------------

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> "Tablebase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self._keys.shape[0])

    def __repr__(self) -> str:
        return f"<Tablebase {str(self.path)!r}: {self.metadata.nonterminal:,} positions from {self.metadata.start}>"

    # --- raw lookups ---------------------------------------------------------------------

    def _chunk_of(self, name: str, c: int) -> np.ndarray:
        cache = self._cache[name]
        arr = cache.get(c)
        if arr is None:
            dset = self._file[name]
            try:
                arr = dset[c * self._chunk: (c + 1) * self._chunk]
            except OSError as exc:
                raise TablebaseFileError(f"{self.path}: chunk {c} of /{name} is unreadable "
                                         f"(corrupt file?): {exc}") from None
            cache[c] = arr
            if len(cache) > CHUNK_CACHE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(c)
        return arr

    def lookup_key(self, key: int) -> tuple[int, int] | None:
        """``(wdl, dtm)`` stored for a canonical key (DTM unsigned, plies), or None if absent."""
        if self._all is not None:
            keys, wdl, dtm = self._all
            i = int(np.searchsorted(keys, key))
            if i < keys.shape[0] and keys[i] == key:
                return int(wdl[i]), int(dtm[i])
            return None
        c = int(np.searchsorted(self._index, key, side="right")) - 1
        if c < 0:
            return None
        keys = self._chunk_of("keys", c)
        i = int(np.searchsorted(keys, key))
        if i >= keys.shape[0] or keys[i] != key:
            return None
        return int(self._chunk_of("wdl", c)[i]), int(self._chunk_of("dtm", c)[i])

    def value(self, position) -> tuple[int, int, str | None]:
        """WDL, unsigned DTM (plies) and terminal class of a position.

        Returns
        -------
        (int, int, str or None)
            ``(wdl, dtm, terminal)`` with ``terminal`` ``"catch"``, ``"try"`` or None.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        position = _to_position(position)
        state = np.int64(position.state())
        cls = classify(state)
        if cls == CATCH:
            return WIN, CATCH_DTM, "catch"
        if cls == TRY:
            return LOSS, TRY_DTM, "try"
        found = self.lookup_key(int(canonical_key(state)))
        if found is None:
            raise MissingPositionError(f"{position.text()} is not in this tablebase "
                                       f"(not reachable from {self.metadata.start})")
        return found[0], found[1], None

    # --- the probing API -----------------------------------------------------------------

    def probe_wdl(self, position) -> int:
        """WDL of a position for its side to move: 1 win, 0 draw, -1 loss.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        encoding.position.PositionError
            If a text position is malformed or impossible.
        """
        return self.value(_to_position(position))[0]

    def probe_dtm(self, position) -> int:
        """Signed DTM in plies: ``+n`` wins in n, ``-n`` loses in n, 0 draw or try-terminal loss.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        wdl, dtm, _ = self.value(_to_position(position))
        return signed_dtm(wdl, dtm)

    def get_wdl(self, position, default=None):
        """As :meth:`probe_wdl`, but ``default`` for a position the tablebase does not cover."""
        try:
            return self.probe_wdl(position)
        except MissingPositionError:
            return default

    def get_dtm(self, position, default=None):
        """As :meth:`probe_dtm`, but ``default`` for a position the tablebase does not cover."""
        try:
            return self.probe_dtm(position)
        except MissingPositionError:
            return default

    def probe_moves(self, position) -> list[MoveValue]:
        """Every legal move with the value of the position after it, best first.

        Returns
        -------
        list of MoveValue
            Empty for a try-terminal position (the game is over). In a catch-terminal position
            the lion's capture comes first, and moves to positions the tablebase does not cover
            have ``wdl`` and ``dtm`` None.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        position = _to_position(position)
        state = position.state()
        cls = classify(np.int64(state))
        if cls == TRY:
            return []
        if cls == NONTERMINAL:
            self.value(position)  # raises MissingPositionError for a position not covered
        out = []
        for mv in legal_moves(state):
            child_state = int(make_move(np.int64(state), np.int64(mv)))
            child = _child_position(child_state, 1 - position.turn)
            text = move_text(position, int(mv))
            if child is None:  # the move captures the lion
                out.append(MoveValue(text, None, LOSS, 0, "lion captured"))
                continue
            try:
                wdl, dtm, term = self.value(child)
            except MissingPositionError:
                if cls != CATCH:
                    raise
                out.append(MoveValue(text, child, None, None, None))
                continue
            out.append(MoveValue(text, child, wdl, signed_dtm(wdl, dtm), term))
        out.sort(key=MoveValue.sort_key)
        return out

    def principal_variation(self, position, max_plies: int = 200) -> list[MoveValue]:
        """A perfect-play line from ``position`` to the end of the game.

        Each side plays a best move (:meth:`probe_moves`' first). For a win or loss the line
        has exactly ``abs(probe_dtm(position))`` plies, ending with the lion's capture or a
        successful try; a drawn line stops at ``max_plies`` or when a position repeats.

        Returns
        -------
        list of MoveValue
            The moves played, each with the value of the position it leads to.
        """
        position = _to_position(position)
        line: list[MoveValue] = []
        seen = {position.key()}
        while len(line) < max_plies:
            moves = self.probe_moves(position)
            if not moves:
                break
            best = moves[0]
            line.append(best)
            if best.terminal in ("try", "lion captured"):
                break
            position = best.position
            key = position.key()
            if best.wdl == DRAW and key in seen:
                break
            seen.add(key)
        return line


def _child_position(state: int, turn: int) -> Position | None:
    """The child as a Position, or None when a lion was captured."""
    s = np.int64(state)
    if find_piece(s, LION) < 0 or find_piece(s, LION | OPPONENT) < 0:
        return None
    return Position.from_state(state, turn)


def open_tablebase(path, in_memory: bool = False) -> Tablebase:
    """Open a tablebase file for probing (a context manager).

    Parameters
    ----------
    path : str or Path
        A file written by ``dobutsu-tb build`` (:func:`tablebase.build.build_tablebase`).
    in_memory : bool, optional
        Read the whole file into memory on open (faster for many random probes).

    Raises
    ------
    TablebaseFileError
        If the file is missing, corrupt or not a tablebase.
    """
    return Tablebase(path, in_memory=in_memory)
