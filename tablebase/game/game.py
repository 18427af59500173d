"""The rules of one variant, ready to use: its tables, its kernels and a Python API that checks
its input.

:func:`game_of` gives the :class:`Game` of a :class:`~dobutsu_tb.tablebase.game.variant.Variant`
(one per variant and process). A game's plain kernels (:attr:`Game.kernels`) are copies of those
of :mod:`~dobutsu_tb.tablebase.game.key`, :mod:`~.rules` and :mod:`~.unmoves` bound to its tables,
running as plain Python: probing uses them and imports neither numba nor numpy (the methods on
arrays import numpy when called). :meth:`Game.jitted` compiles them, and the kernels of other
modules that call them (enumeration, retrograde analysis, ...), with numba, each variant in a
cache folder of its own.

>>> game = game_of(get_variant("dobutsu"))                       # doctest: +SKIP
>>> game.perft(Position.start().state(), 3)
123
"""

from __future__ import annotations

import sys
import types

from dobutsu_tb.encoding.binding import bind_plain, kernel_options, prange
from dobutsu_tb.tablebase.game import key, rules, unmoves
from dobutsu_tb.tablebase.game.key import as_int64_array, canonical_key, decode_key, encode_state
from dobutsu_tb.tablebase.game.layout import derive
from dobutsu_tb.tablebase.game.rules import (
    CATCH,
    DROP,
    FROM_MASK,
    NONTERMINAL,
    PROMOTION,
    TO_MASK,
    TO_SHIFT,
    TRY,
)
from dobutsu_tb.tablebase.game.variant import Variant, standard_variant

#: The modules whose kernels make up a game.
GAME_MODULES = (key, rules, unmoves)

__kernels__ = ("encode_many", "decode_many")


@kernel_options(parallel=True)
def encode_many(boards, hands, out, fold_mirror):
    """``out[i]`` = the key (canonical key if ``fold_mirror``) of state i, 0 if invalid."""
    for i in prange(boards.shape[0]):
        out[i] = canonical_key(boards[i], hands[i]) if fold_mirror else encode_state(boards[i], hands[i])


@kernel_options(parallel=True)
def decode_many(keys, boards, hands):
    """``boards[i], hands[i]`` = the state of ``keys[i]``."""
    for i in prange(keys.shape[0]):
        boards[i], hands[i] = decode_key(keys[i])


class Game:
    """A variant's tables and kernels.

    Parameters
    ----------
    variant : Variant

    Attributes
    ----------
    variant : Variant
    layout : dict
        Its constants and tables by name (:func:`~dobutsu_tb.tablebase.game.layout.derive`).
    kernels : types.SimpleNamespace
        The plain kernels of key.py, rules.py and unmoves.py bound to them (plain Python).
    """

    def __init__(self, variant: Variant):
        self.variant = variant
        self.layout = derive(variant)
        self.kernels = bind_plain(GAME_MODULES, self.layout)
        self._known: dict = {}  # jitted kernels by id of their plain original
        self._jitted: dict = {}  # module name -> its jitted kernels

    def __repr__(self) -> str:
        return f"<Game {self.variant.name}>"

    @property
    def cache_key(self) -> str:
        """The folder name of the variant's kernel cache: its name and the digest of its rules."""
        return f"variant-{self.variant.name}-{self.variant.digest}"

    def jitted(self, *modules) -> types.SimpleNamespace:
        """The game's kernels and those of ``modules`` (their ``__kernels__``, which may call the
        game's and those of the modules before them), compiled by numba for this variant; each
        kernel compiles on its first call and is cached on disk in the variant's own folder.

        Parameters
        ----------
        *modules : module
            Modules of plain kernels (enumeration, retrograde analysis, ...), a module after the
            ones whose kernels it calls.

        Returns
        -------
        types.SimpleNamespace
            The game's jitted kernels, this module's array kernels and the modules', by name.
        """
        from dobutsu_tb.encoding.jit import bind_jitted

        wanted = [GAME_MODULES, (sys.modules[__name__],)] + [(m,) for m in modules]
        out = {}
        for group in wanted:
            name = ",".join(m.__name__ for m in group)
            if name not in self._jitted:
                self._jitted[name] = vars(bind_jitted(group, self.layout, self.cache_key, self._known))
            out.update(self._jitted[name])
        return types.SimpleNamespace(**out)

    # --- one position at a time (plain Python, checked) ----------------------------------------

    def check_state(self, state) -> tuple[int, int]:
        """``state`` as ``(board, hand)`` ints after a range check.

        Raises
        ------
        ValueError
            If it is not two words of the variant's board and hand widths.
        """
        try:
            board, hand = (int(w) for w in state)
        except (TypeError, ValueError):
            raise ValueError(f"{state!r} is not a packed state (board, hand)") from None
        if not 0 <= board < 1 << self.layout["BOARD_BITS"] or not 0 <= hand < 1 << self.layout["HAND_BITS"]:
            raise ValueError(f"({board:#x}, {hand:#x}) is not a packed state of {self.variant.name}")
        return board, hand

    def flip(self, board: int, hand: int) -> tuple[int, int]:
        """The state seen from the other side (key.flip_state)."""
        b, h = self.kernels.flip_state(board, hand)
        return int(b), int(h)

    def key_of(self, state) -> int:
        """The canonical key of a state (0 if invalid)."""
        board, hand = state
        return int(self.kernels.canonical_key(board, hand))

    def classify(self, state) -> int:
        """:data:`~.rules.CATCH`, :data:`~.rules.TRY` or :data:`~.rules.NONTERMINAL` of a state with
        both royal pieces."""
        return int(self.kernels.classify(*state))

    def game_over(self, state) -> bool:
        """Whether the game is over (a royal piece gone, or a successful try against the side to move)."""
        return bool(self.kernels.game_over(*state))

    def has_both_royals(self, state) -> bool:
        """Whether both royal pieces are on the board (False after a move that captured one)."""
        board = state[0]
        royal = self.layout["ROYAL"]
        return self.kernels.find_piece(board, royal) >= 0 and self.kernels.find_piece(board, royal | 8) >= 0

    def legal_moves(self, state):
        """Legal moves of a normalised state, in generation order.

        Parameters
        ----------
        state : (int, int)
            Packed normalised state.

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
            Moves (layout in rules.py); empty when the game is over.

        Raises
        ------
        ValueError
            If ``state`` is not a packed state of the variant.
        """
        import numpy as np

        return np.array(self.legal_move_list(state), np.int64)

    def legal_move_list(self, state) -> list[int]:
        """:meth:`legal_moves` as a list of ints (no numpy: what probing uses).

        Raises
        ------
        ValueError
            If ``state`` is not a packed state of the variant.
        """
        board, hand = self.check_state(state)
        if self.kernels.game_over(board, hand):
            return []
        buf = [0] * self.layout["MAX_MOVES"]
        n = self.kernels.gen_moves(board, hand, buf)
        return buf[:n]

    def make_move(self, state, move: int) -> tuple[int, int]:
        """The child of a state after a move (not checked), normalised for the opponent."""
        b, h = self.kernels.make_move(int(state[0]), int(state[1]), int(move))
        return int(b), int(h)

    def play(self, state, move: int) -> tuple[int, int]:
        """The child state after ``move``, normalised for the opponent.

        Raises
        ------
        ValueError
            If ``move`` is not a legal move of ``state``.
        """
        state = self.check_state(state)
        if int(move) not in set(self.legal_move_list(state)):
            raise ValueError(f"move {int(move):#x} is not legal here")
        return self.make_move(state, move)

    def predecessors(self, state, nonterminal_only: bool = False) -> list[tuple[int, int]]:
        """Every state from which one move leads to ``state`` (unmoves), duplicates removed, sorted.

        Unreachable or terminal predecessors are included unless ``nonterminal_only``: the rules do
        not know the start position.

        Raises
        ------
        ValueError
            If ``state`` is not a packed state of the variant.
        """
        import numpy as np

        board, hand = self.check_state(state)
        size = self.layout["MAX_UNMOVES"]
        boards, hands = np.empty(size, np.int64), np.empty(size, np.int64)
        n = self.kernels.gen_unmoves(board, hand, boards, hands, nonterminal_only)
        if n < 0:
            raise RuntimeError("MAX_UNMOVES is too small")
        return sorted(set(zip(boards[:n].tolist(), hands[:n].tolist())))

    def perft(self, state, depth: int) -> int:
        """Number of move sequences of ``depth`` plies from ``state``; game-over positions are leaves
        (moves that end the game are counted but not expanded).

        Raises
        ------
        ValueError
            If ``depth`` is negative or ``state`` is not a packed state of the variant.
        """
        import numpy as np

        if depth < 0:
            raise ValueError(f"perft depth must be >= 0, got {depth}")
        board, hand = self.check_state(state)
        buf = np.empty((depth + 1, self.layout["MAX_MOVES"]), np.int64)
        return int(self.jitted().perft_count(np.int64(board), np.int64(hand), depth, buf))

    # --- arrays (jitted, in parallel) ------------------------------------------------------------

    def encode(self, boards, hands, fold_mirror: bool = True):
        """Keys (canonical keys when ``fold_mirror``) of packed states.

        Parameters
        ----------
        boards, hands : array_like of int64, shape (n,)

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        ValueError
            If a state is invalid (a bad nibble, a hand count too high).
        """
        import numpy as np

        boards = as_int64_array(boards, "boards")
        hands = as_int64_array(hands, "hands")
        out = np.empty(boards.shape[0], np.int64)
        self.jitted().encode_many(boards, hands, out, fold_mirror)
        if out.size and out.min() == 0:
            i = int(np.argmin(out))
            raise ValueError(f"invalid packed state ({int(boards[i]):#x}, {int(hands[i]):#x})")
        return out

    def decode(self, keys) -> tuple:
        """Packed states ``(boards, hands)`` (numpy.ndarray of int64, shape (n,) each) of keys.

        Raises
        ------
        ValueError
            If a key is not the key of any state (checked by encoding the result again).
        """
        import numpy as np

        keys = as_int64_array(keys, "keys")
        boards = np.empty(keys.shape[0], np.int64)
        hands = np.empty(keys.shape[0], np.int64)
        self.jitted().decode_many(keys, boards, hands)
        back = np.empty_like(keys)
        self.jitted().encode_many(boards, hands, back, False)
        bad = np.flatnonzero(back != keys)
        if bad.size:
            raise ValueError(f"{int(keys[bad[0]]):#x} is not a valid position key")
        return boards, hands


_GAMES: dict = {}


def game_of(variant: Variant | None = None) -> Game:
    """The :class:`Game` of a variant (default: the standard game), made once per process."""
    variant = variant or standard_variant()
    game = _GAMES.get(variant.canonical_json)
    if game is None:
        game = _GAMES[variant.canonical_json] = Game(variant)
    return game


__all__ = ["Game", "game_of", "GAME_MODULES", "CATCH", "TRY", "NONTERMINAL", "DROP", "FROM_MASK", "PROMOTION",
           "TO_MASK", "TO_SHIFT"]
