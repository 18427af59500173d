"""Probing a tablebase file: values of positions, of their moves, perfect-play lines.

>>> with open_tablebase("dobutsu.h5") as tb:                    # doctest: +SKIP
...     tb.probe_wdl(Position.start()), tb.probe_dtm("S/gle/-c-/-C-/ELG/-")
(-1, -78)

Positions may be given as :class:`~dobutsu_tb.tablebase.game.position.Position` objects or in
our text form (docs/rules.md §8), in any orientation (Gote to move, mirrored): they are
canonicalised. Values follow the one convention of :mod:`~dobutsu_tb.tablebase.values`: a
position's WDL and signed DTM are its side to move's, a move's are its player's. Terminal
positions are answered from the rules (catch-terminal: win in 1; try-terminal: loss in 0). A
position that the file does not cover raises :class:`MissingPositionError` from the ``probe_*``
methods, and gives ``default`` from the ``get_*`` methods (python-chess's convention).

Lookups go through ``/index`` (the first key of each chunk of ``/keys``, read and checked on
open) to one small chunk of ``/keys`` and one of ``/values``; every chunk is checked as it is
read (:class:`~dobutsu_tb.tablebase.reader.TablebaseFile`) and kept in a small cache, and nothing
here imports numba, nor numpy (but ``in_memory`` and :meth:`Tablebase.probe_many`).
``open_tablebase(path, in_memory=True)`` reads the whole file instead (about 11 bytes per
position), after which :meth:`Tablebase.probe_many` looks up many keys at once.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dobutsu_tb.encoding.config import CHUNK_CACHE
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.layout import CATCH, NONTERMINAL, TRY
from dobutsu_tb.tablebase.game.notation import move_text, play_move
from dobutsu_tb.tablebase.game.position import Position, PositionError
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import Metadata, TablebaseFileError
from dobutsu_tb.tablebase.values import (
    CATCH_DTM,
    DRAW,
    GAME_ENDING,
    LOSS,
    TRY_DTM,
    WIN,
    Terminal,
    decode_value,
    decode_values,
    move_rank,
    move_tie,
    move_value,
    signed_dtm,
)


class MissingPositionError(KeyError):
    """Raised when a position is not covered by the tablebase (not reachable from its start)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "position not in the tablebase"


@dataclass(frozen=True)
class MoveValue:
    """A legal move and its value for the player who makes it (docs/rules.md §7).

    Attributes
    ----------
    move : str
        Our notation (docs/rules.md §8), e.g. ``'Lb4-a3'``.
    position : Position or None
        The position after the move; None when the move captures the royal piece (the game is over).
    wdl : int or None
        The move's WDL for its player (1 win, 0 draw, -1 loss); None when the tablebase does not
        cover the position after it, which happens only after a catch-terminal position (the
        tablebase never expands those).
    dtm : int or None
        The move's signed DTM for its player, in plies from the position before the move (a
        best move's is the position's own); None with ``wdl``.
    terminal : Terminal or None
        :attr:`Terminal.CATCH` or :attr:`Terminal.TRY` when the position after the move is
        terminal, :attr:`Terminal.ROYAL_CAPTURED` after capturing the royal piece, else None.
    after_wdl, after_dtm : int or None
        The value of :attr:`position` for its side to move (the opponent), as
        :meth:`Tablebase.probe_wdl` and :meth:`Tablebase.probe_dtm` give it: a loss in 0 after
        the royal piece's capture; None when not covered.
    """

    move: str
    position: Position | None
    wdl: int | None
    dtm: int | None
    terminal: Terminal | None = None
    after_wdl: int | None = None
    after_dtm: int | None = None

    @classmethod
    def after(cls, move: str, position: Position | None, after_wdl: int | None, after_dtm: int | None,
              terminal: Terminal | None = None) -> "MoveValue":
        """The MoveValue of a move from the value of the position after it (its side to move's
        WDL and DTM, None when not covered)."""
        if after_wdl is None:
            return cls(move, position, None, None, terminal)
        wdl, dtm = move_value(after_wdl, after_dtm)
        return cls(move, position, wdl, dtm, terminal, after_wdl, signed_dtm(after_wdl, after_dtm))

    @property
    def ends_game(self) -> bool:
        """The move ends the game: it captures the royal piece or makes a successful try."""
        return self.terminal in GAME_ENDING

    def repeats_third_time(self, seen) -> bool:
        """Whether the move makes a position occur for the third time in a game, a draw
        (docs/rules.md §3; the tablebase's values know no history), ``seen`` counting the
        positions of the game so far (a :class:`collections.Counter` of :class:`Position`). A
        try ends the game as it arrives."""
        return self.position is not None and self.terminal != Terminal.TRY and seen[self.position] >= 2

    def sort_key(self) -> int:
        """Best move first (:func:`~dobutsu_tb.tablebase.values.move_rank`): wins fastest, then
        draws, then losses slowest, then unknown. Equal keys are equal values: see :meth:`order`
        for the order of :meth:`Tablebase.probe_moves`."""
        return move_rank(self.wdl, self.dtm)

    def order(self) -> tuple:
        """The place of the move in :meth:`Tablebase.probe_moves`: :meth:`sort_key`, then the one
        tie-break of every surface (:func:`~dobutsu_tb.tablebase.values.move_tie`: a capture of
        the royal piece before a try as fast, a loss that does not leave the royal piece to be
        captured before one as long that does)."""
        return move_rank(self.wdl, self.dtm), move_tie(self.wdl, self.terminal)


def _to_position(position, variant) -> Position:
    if isinstance(position, Position):
        theirs = position.variant  # the same rules and name, titles and prose apart (cached texts: quick)
        if theirs is not variant and (theirs.name != variant.name or theirs.rules_json != variant.rules_json):
            raise PositionError(f"{position.text()} is a position of {position.variant.name}; this tablebase is of "
                                f"{variant.name} ({variant.files} files, {variant.ranks} ranks)")
        return position
    if isinstance(position, str):  # our notation, or Fairy-Stockfish's FEN (as the CLI reads them)
        if Position.looks_like_fen(position):
            return Position.from_fen(position, variant)
        return Position.from_text(position, variant)
    raise TypeError(f"expected a Position or its text form, got {type(position).__name__}")


def _material(position: Position) -> dict:
    """Pieces of each kind (base letter: a promoted piece as its unpromoted kind) on the board and
    in the hands of both sides."""
    v = position.variant
    out: dict = {}
    for code in position.board:
        if code:
            base = v.base_of[v.pieces[(code & 7) - 1].letter]
            out[base] = out.get(base, 0) + 1
    for k, n in enumerate(position.hands):
        if n:
            base = v.hand_order[k % len(v.hand_order)]
            out[base] = out.get(base, 0) + n
    return out


class _Closed:
    """What a closed :class:`Tablebase` reads through: any look-up raises."""

    def __init__(self, path, n: int):
        self.path, self.n = path, n

    def __getattr__(self, name):
        raise TablebaseFileError(f"{self.path}: the tablebase is closed")


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
        self._file = TablebaseFile(self.path)
        self.metadata: Metadata = self._file.metadata
        self.variant = self.metadata.variant
        self._start_material: dict | None = None
        self.game = game_of(self.variant)
        # The chunks read last, per dataset (functools' LRU cache, in C: a hit costs a tenth of a
        # microsecond; a damaged chunk raises each time it is read, never cached).
        self._planes = lru_cache(CHUNK_CACHE)(self._file.chunk_planes)
        self._values = lru_cache(CHUNK_CACHE)(self._file.value_source)
        self._all = None
        if in_memory:
            try:
                self._all = self._file.read_all()
            except BaseException:
                self._file.close()
                raise

    # --- context manager -----------------------------------------------------------------

    def close(self) -> None:
        """Close the file. A probe of a closed tablebase raises
        :class:`~dobutsu_tb.tablebase.schema.TablebaseFileError` (closing twice is allowed)."""
        if isinstance(self._file, _Closed):
            return
        self._file.close()
        self._file = _Closed(self.path, self._file.n)
        self._all = None
        self._planes.cache_clear()
        self._values.cache_clear()

    def __enter__(self) -> "Tablebase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return self._file.n

    def __repr__(self) -> str:
        return f"<Tablebase {str(self.path)!r}: {self.metadata.nonterminal:,} positions from {self.metadata.start}>"

    # --- raw lookups ---------------------------------------------------------------------

    def _entry(self, key: int) -> int:
        """Index of a canonical key among the stored keys, or -1."""
        if self._all is not None:
            keys = self._all[0]
            i = int(keys.searchsorted(key))
            return i if i < keys.shape[0] and keys[i] == key else -1
        f = self._file
        c = bisect_right(f._index, key) - 1  # (f.chunk_of, inlined: the probes' own path)
        if c < 0:
            f.check_index()
            return -1
        return f.find(c, self._planes(c), key)

    def _value_byte(self, i: int) -> int:
        if self._all is not None:
            return int(self._all[1][i])
        f = self._file
        c, j = divmod(i, f.value_chunk)
        return f.check_value(f.value_code(c, self._values(c), j), i)

    def lookup_key(self, key: int) -> tuple[int, int] | None:
        """``(wdl, dtm)`` stored for a canonical key (the position with Sente to move; signed DTM
        in plies), or None if absent.

        Raises
        ------
        TablebaseFileError
            If the chunks holding it are damaged.
        """
        i = self._entry(int(key))
        if i < 0:
            return None
        wdl, dtm = decode_value(self._value_byte(i))
        return wdl, signed_dtm(wdl, dtm)

    def probe_many(self, positions_or_keys) -> tuple:
        """WDL and DTM of many positions at once (for training data and bulk checks).

        Parameters
        ----------
        positions_or_keys : numpy.ndarray of int64, shape (n,), or sequence of Position or str
            Canonical keys (:meth:`Position.key`; docs/rules.md §5), or positions in any orientation.
            Terminal positions are not stored: give keys of stored (non-terminal) positions, or
            positions, whose terminal ones are answered from the rules when their pieces can come
            from the file's start (as :meth:`value`).

        Returns
        -------
        wdl : numpy.ndarray of int8, shape (n,)
            1 win, 0 draw, -1 loss for the side to move; -2 where the key or position is not in the
            file.
        dtm : numpy.ndarray of int16, shape (n,)
            Signed DTM in plies (python-chess's convention), 0 where wdl is 0 or -2.

        Raises
        ------
        TablebaseFileError
            If a chunk read is damaged.
        ValueError
            If an array of keys is not one-dimensional int64, or one position's text is given.
        """
        import numpy as np

        from dobutsu_tb.tablebase.lookup import probe_keys

        arr = positions_or_keys
        terminal = None
        if isinstance(arr, str):
            raise ValueError("probe_many takes a sequence of positions (or an array of keys), not one position's "
                             "text: use probe_wdl or value for one position")
        if not isinstance(arr, np.ndarray):
            positions = [self.position(p) for p in arr]
            arr = np.fromiter((p.key() for p in positions), np.int64, len(positions))
            terminal = [self.game.classify(p.state()) for p in positions]
        if arr.ndim != 1 or arr.dtype != np.int64:
            raise ValueError(f"keys must be a one-dimensional int64 array, got {arr.dtype} of shape {arr.shape}")
        codes, found = probe_keys(self, arr)
        wdl, dtm = decode_values(codes)
        wdl = np.where(found, wdl, -2).astype(np.int8)
        signed = np.where(wdl == WIN, dtm, np.where(wdl == LOSS, -dtm.astype(np.int16), 0)).astype(np.int16)
        if terminal is not None:
            for i, cls in enumerate(terminal):
                if cls != NONTERMINAL and not self._material_reachable(positions[i]):
                    continue  # not covered, as value() says: -2
                if cls == CATCH:
                    wdl[i], signed[i] = WIN, CATCH_DTM
                elif cls == TRY:
                    wdl[i], signed[i] = LOSS, -TRY_DTM
        return wdl, signed

    def value(self, position) -> tuple[int, int, Terminal | None]:
        """WDL, signed DTM (plies) and terminal class of a position, for its side to move.

        Returns
        -------
        (int, int, Terminal or None)
            ``(wdl, dtm, terminal)`` with ``terminal`` :attr:`Terminal.CATCH`,
            :attr:`Terminal.TRY` or None.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        if type(position) is not Position or position.variant is not self.variant:
            position = self.position(position)
        state = position.state()
        found = self.lookup_key(self.game.key_of(state))  # terminal positions are never stored
        if found is not None:
            return found[0], found[1], None
        cls = self.game.classify(state)
        if cls != NONTERMINAL and not self._material_reachable(position):
            raise MissingPositionError(f"{position.text()} is not in this tablebase (its pieces are not those of "
                                       f"{self.metadata.start}: not reachable from it)")
        if cls == CATCH:
            return WIN, CATCH_DTM, Terminal.CATCH
        if cls == TRY:
            return LOSS, -TRY_DTM, Terminal.TRY
        raise MissingPositionError(f"{position.text()} is not in this tablebase "
                                   f"(not reachable from {self.metadata.start})")

    def _material_reachable(self, position: Position) -> bool:
        """Whether ``position`` has at most the pieces of the start of each kind (a promoted piece
        counted as its unpromoted kind), and as many of each kind that a capture puts in hand: no
        move adds a piece, and with drops none leaves the game, so another terminal position is not
        reachable (terminal positions are answered from the rules, not stored)."""
        if self._start_material is None:
            self._start_material = _material(Position.from_text(self.metadata.start, self.variant))
        have, start = _material(position), self._start_material
        kept = set(self.variant.hand_order)  # captured pieces of these kinds go to a hand: never fewer
        return (all(n <= start.get(base, 0) for base, n in have.items())
                and all(have.get(base, 0) == start[base] for base in kept if base in start))

    # --- the probing API -----------------------------------------------------------------

    def position(self, position) -> Position:
        """``position`` (a Position, or its text: our notation or Fairy-Stockfish's FEN) as a
        Position of this file's variant.

        Raises
        ------
        PositionError
            If the text is not a position of the variant, or the Position is of another variant.
        """
        return _to_position(position, self.variant)

    def probe_wdl(self, position) -> int:
        """WDL of a position for its side to move: 1 win, 0 draw, -1 loss.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        PositionError
            If a text position is malformed or impossible.
        """
        return self.value(position)[0]

    def probe_dtm(self, position) -> int:
        """Signed DTM in plies: ``+n`` wins in n, ``-n`` loses in n, 0 draw or try-terminal loss.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        return self.value(position)[1]

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
        """Every legal move with its value for the side to move, best first.

        Returns
        -------
        list of MoveValue
            Best first (:meth:`MoveValue.order`: among moves of one value, a capture of the royal
            piece before a try, a loss that keeps the royal piece safe before one that leaves it
            to be captured; otherwise in the order of generation). Empty for a try-terminal
            position (the game is over). In a catch-terminal position
            the royal piece's capture comes first, and moves to positions the tablebase does not
            cover have ``wdl`` and ``dtm`` None.

        Raises
        ------
        MissingPositionError
            If the tablebase does not cover the position.
        """
        position = self.position(position)
        state = position.state()
        game = self.game
        cls = game.classify(state)
        self.value(position)  # raises MissingPositionError for a position not covered (terminal ones too)
        if cls == TRY:
            return []
        out = []
        for mv in game.legal_move_list(state):
            child = play_move(position, mv)
            text = move_text(position, mv)
            if child is None:  # the move captures the royal piece
                out.append(MoveValue.after(text, None, LOSS, 0, Terminal.ROYAL_CAPTURED))
                continue
            try:
                wdl, dtm, term = self.value(child)
            except MissingPositionError:
                if cls != CATCH:
                    raise
                out.append(MoveValue.after(text, child, None, None))
                continue
            out.append(MoveValue.after(text, child, wdl, dtm, term))
        out.sort(key=MoveValue.order)
        return out

    def principal_variation(self, position, max_plies: int = 200) -> list[MoveValue]:
        """A perfect-play line from ``position``, to the end of the game or ``max_plies`` plies.

        Each side plays a best move (:meth:`probe_moves`' first). A win or loss ends after
        exactly ``abs(probe_dtm(position))`` plies, with the royal piece's capture or a successful
        try: the line has that many plies when ``max_plies`` allows, else it is cut after
        ``max_plies`` (its last move then ends nothing: ``line[-1].ends_game`` is False). A drawn
        line stops after ``max_plies`` or when a position repeats. The line is empty when the game
        is already over (try-terminal).

        Parameters
        ----------
        position : Position or str
        max_plies : int, optional
            The most plies, at least 1.

        Returns
        -------
        list of MoveValue
            The moves played, each with the value of the position it leads to.

        Raises
        ------
        ValueError
            If ``max_plies`` is less than 1.
        MissingPositionError
            If the tablebase does not cover the position.
        """
        if max_plies < 1:
            raise ValueError(f"max_plies must be >= 1, got {max_plies}")
        position = self.position(position)
        line: list[MoveValue] = []
        seen = {position.key()}
        while len(line) < max_plies:
            moves = self.probe_moves(position)
            if not moves:
                break
            best = moves[0]
            line.append(best)
            if best.ends_game:
                break
            position = best.position
            key = position.key()
            if best.wdl == DRAW and key in seen:
                break
            seen.add(key)
        return line


def open_tablebase(path, in_memory: bool = False) -> Tablebase:
    """Open a tablebase file for probing (a context manager).

    Parameters
    ----------
    path : str or Path
        A file written by ``dobutsu-tb build`` (:func:`dobutsu_tb.tablebase.build.build_tablebase`).
    in_memory : bool, optional
        Read the whole file into memory on open (faster for many random probes).

    Raises
    ------
    TablebaseFileError
        If the file is missing, corrupt or not a tablebase.
    """
    return Tablebase(path, in_memory=in_memory)
