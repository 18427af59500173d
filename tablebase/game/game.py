"""The rules of one variant, ready to use: its tables, its kernels and a Python API that checks
its input.

:func:`game_of` gives the :class:`Game` of a :class:`~dobutsu_tb.tablebase.game.variant.Variant`
(one per variant and process). The kernels of :mod:`~dobutsu_tb.tablebase.game.key`, :mod:`~.rules`
and :mod:`~.unmoves` take the variant's rules as data, its rules array (:attr:`Game.rules`), and
are bound to the board's shape only (:func:`~.layout.shape_names`): every variant of a shape shares
them. :attr:`Game.kernels` are the plain copies, running as plain Python: probing uses them and
imports neither numba nor numpy (the methods on arrays import numpy when called).
:meth:`Game.jitted` compiles them, and the kernels of other modules that call them (enumeration,
retrograde analysis, ...), with numba, once per board shape in a cache folder of its own: a new
variant, a new start or a changed rule compiles nothing.

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
from dobutsu_tb.tablebase.game.layout import CELL_BITS, EXT_SHIFT, OPPONENT, derive, key_width_problem, shape_names
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
from dobutsu_tb.tablebase.game.variant import Variant, VariantError, standard_variant

#: The modules whose kernels make up a game.
GAME_MODULES = (key, rules, unmoves)

__kernels__ = ("encode_many", "decode_many")


@kernel_options(parallel=True)
def encode_many(rules, boards, hands, out, fold_mirror):
    """``out[i]`` = the key (canonical key if ``fold_mirror``) of state i, 0 if invalid."""
    for i in prange(boards.shape[0]):
        if fold_mirror:
            out[i] = canonical_key(rules, boards[i], hands[i])
        else:
            out[i] = encode_state(rules, boards[i], hands[i])


@kernel_options(parallel=True)
def decode_many(rules, keys, boards, hands):
    """``boards[i], hands[i]`` = the state of ``keys[i]``."""
    for i in prange(keys.shape[0]):
        boards[i], hands[i] = decode_key(rules, keys[i])


class Game:
    """A variant's tables and kernels.

    Parameters
    ----------
    variant : Variant

    Attributes
    ----------
    variant : Variant
    layout : dict
        Its constants and tables by name, as values (:func:`~dobutsu_tb.tablebase.game.layout.derive`).
    rules : list of int
        Its rules array (:mod:`~dobutsu_tb.tablebase.game.layout`), the first argument of every
        plain kernel; :attr:`rules_array` is the same for jitted ones.
    shape : dict
        The shape constants of its board (:func:`~dobutsu_tb.tablebase.game.layout.shape_names`).
    kernels : types.SimpleNamespace
        The plain kernels of key.py, rules.py and unmoves.py bound to its board's shape (plain
        Python; shared by the variants of that shape).
    key_problem : str or None
        Why its positions have no keys (wider than a key holds:
        :func:`~dobutsu_tb.tablebase.game.layout.key_width_problem`), or None. Such a game's
        positions are drawn and its builds estimated, but :meth:`key_of`, :meth:`jitted` and
        :meth:`check_keys` raise :class:`~dobutsu_tb.tablebase.game.variant.VariantError`.
    """

    def __init__(self, variant: Variant):
        self.variant = variant
        self.key_problem = key_width_problem(variant)
        self.layout = derive(variant)
        self.rules = self.layout["RULES"]
        self.shape = shape_names(variant.files, variant.ranks)
        self.kernels = _plain_kernels(variant.files, variant.ranks)
        self._rules_array = None

    def __repr__(self) -> str:
        return f"<Game {self.variant.name}>"

    @property
    def rules_array(self):
        """:attr:`rules` as a read-only numpy.ndarray of int64, shape (n,): what jitted kernels take."""
        if self._rules_array is None:
            import numpy as np

            rules = np.array(self.rules, np.int64)
            rules.flags.writeable = False
            self._rules_array = rules
        return self._rules_array

    @property
    def cache_key(self) -> str:
        """The folder name of the kernel cache of the board's shape (every variant of the shape
        shares its kernels)."""
        return shape_cache_key(self.variant.files, self.variant.ranks)

    def check_keys(self) -> None:
        """Refuse a game whose positions have no keys (:attr:`key_problem`).

        Raises
        ------
        VariantError
            If its keys are wider than a key holds.
        """
        if self.key_problem is not None:
            raise VariantError(f"{self.variant.name}: {self.key_problem}")

    def jitted(self, *modules) -> types.SimpleNamespace:
        """The game's kernels and those of ``modules`` (their ``__kernels__``, which may call the
        game's and those of the modules before them), compiled by numba for the board's shape;
        each kernel compiles on its first call and is cached on disk in the shape's own folder.
        Every kernel takes the rules array (:attr:`rules_array`) where the game's kernels do.

        Parameters
        ----------
        *modules : module
            Modules of plain kernels (enumeration, retrograde analysis, ...), a module after the
            ones whose kernels it calls.

        Returns
        -------
        types.SimpleNamespace
            The game's jitted kernels, this module's array kernels and the modules', by name.

        Raises
        ------
        VariantError
            If the game's keys are wider than a key holds (:attr:`key_problem`).
        """
        self.check_keys()
        return jitted_for_shape(self.variant.files, self.variant.ranks, *modules)

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
        shape = self.shape
        ok = 0 <= board < 1 << (CELL_BITS * shape["BOARD_CELLS"])
        if shape["EXT"]:  # the hand field, then the squares beyond the board word
            ok = (ok and 0 <= hand < 1 << (EXT_SHIFT + CELL_BITS * (shape["N_CELLS"] - shape["BOARD_CELLS"]))
                  and hand & ((1 << EXT_SHIFT) - 1) < 1 << self.layout["HAND_BITS"])
        else:
            ok = ok and 0 <= hand < 1 << self.layout["HAND_BITS"]
        if not ok:
            raise ValueError(f"({board:#x}, {hand:#x}) is not a packed state of {self.variant.name}")
        return board, hand

    def flip(self, board: int, hand: int) -> tuple[int, int]:
        """The state seen from the other side (key.flip_state)."""
        b, h = self.kernels.flip_state(self.rules, board, hand)
        return int(b), int(h)

    def key_of(self, state) -> int:
        """The canonical key of a state (0 if invalid).

        Raises
        ------
        VariantError
            If the game's keys are wider than a key holds (:attr:`key_problem`).
        """
        self.check_keys()
        board, hand = state
        return int(self.kernels.canonical_key(self.rules, board, hand))

    def classify(self, state) -> int:
        """:data:`~.rules.CATCH`, :data:`~.rules.TRY` or :data:`~.rules.NONTERMINAL` of a state with
        both royal pieces."""
        return int(self.kernels.classify(self.rules, *state))

    def game_over(self, state) -> bool:
        """Whether the game is over (a royal piece gone, or a successful try against the side to move)."""
        return bool(self.kernels.game_over(self.rules, *state))

    def has_both_royals(self, state) -> bool:
        """Whether both royal pieces are on the board (False after a move that captured one)."""
        board, hand = state
        royal = self.layout["ROYAL"]
        return (self.kernels.find_piece(board, hand, royal) >= 0
                and self.kernels.find_piece(board, hand, royal | OPPONENT) >= 0)

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
        if self.kernels.game_over(self.rules, board, hand):
            return []
        buf = [0] * self.layout["MAX_MOVES"]
        n = self.kernels.gen_moves(self.rules, board, hand, buf)
        return buf[:n]

    def make_move(self, state, move: int) -> tuple[int, int]:
        """The child of a state after a move (not checked), normalised for the opponent."""
        b, h = self.kernels.make_move(self.rules, int(state[0]), int(state[1]), int(move))
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
        n = self.kernels.gen_unmoves(self.rules, board, hand, boards, hands, nonterminal_only)
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
        return int(self.jitted().perft_count(self.rules_array, np.int64(board), np.int64(hand), depth, buf))

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
        self.jitted().encode_many(self.rules_array, boards, hands, out, fold_mirror)
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
        self.jitted().decode_many(self.rules_array, keys, boards, hands)
        back = np.empty_like(keys)
        self.jitted().encode_many(self.rules_array, boards, hands, back, False)
        bad = np.flatnonzero(back != keys)
        if bad.size:
            raise ValueError(f"{int(keys[bad[0]]):#x} is not a valid position key")
        return boards, hands


_GAMES: dict = {}
_PLAIN: dict = {}  # (files, ranks) -> the plain kernels bound to that shape
_JITTED: dict = {}  # (files, ranks) -> (jitted kernels by id of their plain original, by module group)


def shape_cache_key(files: int, ranks: int) -> str:
    """The folder name of the kernel cache of a board shape."""
    return f"shape-{files}x{ranks}"


def _plain_kernels(files: int, ranks: int) -> types.SimpleNamespace:
    """The game's plain kernels bound to a board shape (made once per shape and process)."""
    kernels = _PLAIN.get((files, ranks))
    if kernels is None:
        kernels = _PLAIN[(files, ranks)] = bind_plain(GAME_MODULES, shape_names(files, ranks))
    return kernels


def jitted_for_shape(files: int, ranks: int, *modules) -> types.SimpleNamespace:
    """The jitted kernels of the game and of ``modules`` for a board shape (:meth:`Game.jitted`)."""
    from dobutsu_tb.encoding.jit import bind_jitted

    known, groups = _JITTED.setdefault((files, ranks), ({}, {}))
    names = shape_names(files, ranks)
    wanted = [GAME_MODULES, (sys.modules[__name__],)] + [(m,) for m in modules]
    out = {}
    for group in wanted:
        name = ",".join(m.__name__ for m in group)
        if name not in groups:
            groups[name] = vars(bind_jitted(group, names, shape_cache_key(files, ranks), known, invariant="rules"))
        out.update(groups[name])
    return types.SimpleNamespace(**out)


def game_of(variant: Variant | None = None) -> Game:
    """The :class:`Game` of a variant (default: the standard game), made once per process."""
    variant = variant or standard_variant()
    game = _GAMES.get(variant.canonical_json)
    if game is None:
        game = _GAMES[variant.canonical_json] = Game(variant)
    return game


__all__ = ["Game", "game_of", "GAME_MODULES", "CATCH", "TRY", "NONTERMINAL", "DROP", "FROM_MASK", "PROMOTION",
           "TO_MASK", "TO_SHIFT"]
