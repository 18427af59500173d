"""The rules on packed states: moves, terminal classes, perft (docs/rules.md).

All kernels take and return normalised packed states ``(board, hand)``
(:mod:`~dobutsu_tb.tablebase.game.layout`): the side to move plays upwards, towards rank index
0. Making a move returns the child already normalised for the opponent, i.e. flipped. They
assume a valid state with both royal pieces unless they say otherwise; the Python API that
validates its input is :class:`~dobutsu_tb.tablebase.game.game.Game`'s. Like those of
:mod:`~dobutsu_tb.tablebase.game.key`, they are plain functions bound to a board's shape, which
read the variant's rules from the rules array ``rules``, their first argument.

Move layout
-----------
A move is a small ``int``, in the frame of the normalised state it is played from::

    bits 0..4   from-square 0..19 for a board move, or DROP + hand slot for a drop
    bits 5..9   to-square 0..19
    bit  10     promotion (the piece moved into its promotion zone)

Terminal classes, for the side to move of a normalised state: :data:`CATCH` it can capture the
enemy royal piece; :data:`TRY` otherwise, the enemy royal stands on its home rank (only with the
try rule); :data:`NONTERMINAL` otherwise.
"""

from __future__ import annotations

from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.tablebase.game.key import cell_at, flip_state, flipped_board_key, with_cell
from dobutsu_tb.tablebase.game.layout import (
    CATCH,
    COUNT_FIELD,
    COUNT_SHIFT,
    DROP_CELLS,
    ENEMY_TARGETS,
    HAND_SLOT,
    HOME_ZONE,
    N_CELLS,
    N_SLOTS,
    NONTERMINAL,
    OPPONENT,
    PIECE_MASK,
    PROMO_ZONE,
    PROMOTES,
    ROYAL,
    SLOT_PIECE,
    TARGET_COUNT,
    TARGET_LIST,
    TARGETS,
    TRY,
    TRY_ZONE,
)

#: Move layout: from-square field, first from-code of a drop, to-square shift and mask, promotion.
FROM_MASK = 31
DROP = 24
TO_SHIFT = 5
TO_MASK = 31
PROMOTION = 1 << 10

__kernels__ = ("find_piece", "attacks", "attackers_of", "classify", "game_over", "gen_moves", "make_move",
               "child_keys", "perft_count")


def find_piece(board, hand, nibble):
    """Square of the first piece with this nibble (code plus side), or -1."""
    for i in range(N_CELLS):
        if cell_at(board, hand, i) == nibble:
            return i
    return -1


def attacks(rules, board, hand, target):
    """True when a piece of the side to move attacks square ``target``."""
    for i in range(N_CELLS):
        p = cell_at(board, hand, i)
        if p != 0 and p < OPPONENT and (rules[TARGETS + N_CELLS * p + i] >> target) & 1:
            return True
    return False


def attackers_of(rules, board, hand, target):
    """Squares (bit mask) of the opponent's pieces that attack square ``target``."""
    mask = 0
    for i in range(N_CELLS):
        p = cell_at(board, hand, i)
        if p >= OPPONENT and (rules[ENEMY_TARGETS + N_CELLS * (p & PIECE_MASK) + i] >> target) & 1:
            mask |= 1 << i
    return mask


def classify(rules, board, hand):
    """:data:`CATCH`, :data:`TRY` or :data:`NONTERMINAL` of a state with both royal pieces."""
    enemy = find_piece(board, hand, rules[ROYAL] | OPPONENT)
    if attacks(rules, board, hand, enemy):
        return CATCH
    if (rules[HOME_ZONE] >> enemy) & 1:
        return TRY
    return NONTERMINAL


def game_over(rules, board, hand):
    """The game-over test of move generation and perft: a royal piece is gone, or the enemy royal
    stands on the side to move's home rank and cannot be captured (a try). Any state is accepted."""
    own = find_piece(board, hand, rules[ROYAL])
    enemy = find_piece(board, hand, rules[ROYAL] | OPPONENT)
    if own < 0 or enemy < 0:
        return True
    return (rules[HOME_ZONE] >> enemy) & 1 == 1 and not attacks(rules, board, hand, enemy)


def gen_moves(rules, board, hand, moves):
    """Write the moves of a state into ``moves`` (at least ``MAX_MOVES`` long); return how many:
    board moves square by square and target by target ascending, then drops slot by slot.
    Game-over states are not checked here: the caller asks :func:`game_over` first."""
    n = 0
    empty = 0
    for i in range(N_CELLS):
        p = cell_at(board, hand, i)
        if p == 0:
            empty |= 1 << i
            continue
        if p >= OPPONENT:
            continue
        for k in range(rules[TARGET_COUNT + N_CELLS * p + i]):
            j = rules[TARGET_LIST + (N_CELLS * p + i) * N_CELLS + k]
            q = cell_at(board, hand, j)
            if q != 0 and q < OPPONENT:
                continue
            move = i | (j << TO_SHIFT)
            if rules[PROMOTES + p] != 0 and (rules[PROMO_ZONE + p] >> j) & 1:
                move |= PROMOTION
            moves[n] = move
            n += 1
    for slot in range(rules[N_SLOTS]):
        if (hand >> rules[COUNT_SHIFT + slot]) & rules[COUNT_FIELD + slot]:
            m = empty & rules[DROP_CELLS + slot]
            for j in range(N_CELLS):
                if (m >> j) & 1:
                    moves[n] = (DROP + slot) | (j << TO_SHIFT)
                    n += 1
    return n


def make_move(rules, board, hand, move):
    """The child of a state after ``move``, normalised for the opponent (flipped). The move is not
    checked (:meth:`Game.play` checks it)."""
    src = move & FROM_MASK
    dst = (move >> TO_SHIFT) & TO_MASK
    if src >= DROP:
        slot = src - DROP
        hand -= 1 << rules[COUNT_SHIFT + slot]
        board, hand = with_cell(board, hand, dst, rules[SLOT_PIECE + slot])
        return flip_state(rules, board, hand)
    p = cell_at(board, hand, src)
    q = cell_at(board, hand, dst)
    if q != 0:
        slot = rules[HAND_SLOT + q]
        if slot >= 0:
            hand += 1 << rules[COUNT_SHIFT + slot]
    if move & PROMOTION:
        p = rules[PROMOTES + p]
    board, hand = with_cell(board, hand, src, 0)
    board, hand = with_cell(board, hand, dst, p)
    return flip_state(rules, board, hand)


@kernel_options(inline="always")
def child_keys(rules, board, hand, moves, keys, classes):
    """The moves of a state (into ``moves``, in :func:`gen_moves`' order), the canonical key of each
    child (``keys``) and its terminal class (``classes``: :data:`NONTERMINAL`, :data:`CATCH` or
    :data:`TRY`, as :func:`classify` of the child); returns how many. The state must be
    non-terminal. The same as :func:`gen_moves`, :func:`make_move`, ``canonical_key`` and
    :func:`classify`, faster (the builder's inner loop):

    - the class comes from the parent's attack map in O(1) a child: no piece slides, so after a
      move the opponent attacks our royal's square with the pieces that attacked it before, less
      the one just captured; a child is a try (for us) when our royal stands on the far rank
      unattacked;
    - the child's key is joined from per-rank code tables (the child is the mover's board turned
      round, so the mover's last rank comes first in its key)."""
    royal = find_piece(board, hand, rules[ROYAL])
    attacked = 0  # squares the opponent attacks
    on_royal = 0  # the opponent's pieces that attack our royal
    empty = 0
    for i in range(N_CELLS):
        p = cell_at(board, hand, i)
        if p == 0:
            empty |= 1 << i
        elif p >= OPPONENT:
            reach = rules[ENEMY_TARGETS + N_CELLS * (p & PIECE_MASK) + i]
            attacked |= reach
            if (reach >> royal) & 1:
                on_royal |= 1 << i
    try_zone = rules[TRY_ZONE]
    n = 0
    for i in range(N_CELLS + rules[N_SLOTS]):
        if i < N_CELLS:
            p = cell_at(board, hand, i)
            if p == 0 or p >= OPPONENT:
                continue
            count = rules[TARGET_COUNT + N_CELLS * p + i]
            lifted, lifted_hand = with_cell(board, hand, i, 0)
            drops = 0
        else:
            slot = i - N_CELLS
            if (hand >> rules[COUNT_SHIFT + slot]) & rules[COUNT_FIELD + slot] == 0:
                continue
            p = rules[SLOT_PIECE + slot]
            count = N_CELLS
            lifted, lifted_hand = board, hand - (1 << rules[COUNT_SHIFT + slot])
            drops = empty & rules[DROP_CELLS + slot]
        for k in range(count):
            if i < N_CELLS:
                j = rules[TARGET_LIST + (N_CELLS * p + i) * N_CELLS + k]
                q = cell_at(board, hand, j)
                if q != 0 and q < OPPONENT:
                    continue
                move = i | (j << TO_SHIFT)
                placed = p
                promoted = rules[PROMOTES + p]
                if promoted != 0 and (rules[PROMO_ZONE + p] >> j) & 1:
                    move |= PROMOTION
                    placed = promoted
                after, h = with_cell(lifted, lifted_hand, j, placed)
                if q != 0:
                    s = rules[HAND_SLOT + q]
                    if s >= 0:
                        h += 1 << rules[COUNT_SHIFT + s]
            else:
                if drops == 0:
                    break  # no empty square left to drop on
                j = k
                bit = drops & 1
                drops >>= 1
                if not bit:
                    continue
                move = (DROP + slot) | (j << TO_SHIFT)
                after, h = with_cell(lifted, lifted_hand, j, p)
            keys[n] = flipped_board_key(rules, after, h)
            if i == royal:
                caught = (attacked >> j) & 1  # a piece never attacks its own square
                square = j
            else:
                caught = (on_royal & ~(1 << j)) != 0  # a captured attacker attacks no more
                square = royal
            if caught:
                classes[n] = CATCH
            elif (try_zone >> square) & 1:
                classes[n] = TRY
            else:
                classes[n] = NONTERMINAL
            moves[n] = move
            n += 1
    return n


def perft_count(rules, board, hand, depth, moves_buf):
    """Move sequences of ``depth`` plies from a state; ``moves_buf`` is (depth + 1, MAX_MOVES)."""
    if depth == 0:
        return 1
    if game_over(rules, board, hand):
        return 0
    moves = moves_buf[depth]
    n = gen_moves(rules, board, hand, moves)
    if depth == 1:
        return n
    total = 0
    for k in range(n):
        b, h = make_move(rules, board, hand, moves[k])
        total += perft_count(rules, b, h, depth - 1, moves_buf)
    return total
