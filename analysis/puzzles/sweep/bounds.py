"""The Room Sweeper search's bounds, its choice of the next cleaner, and the key of its table of
dead nodes (see :mod:`.search`).

:func:`hopeless` proves that a node cannot be finished, from lower bounds that hold for every way
of finishing it. The *movers* are the current cleaner (from its cell, with its steps left) and
the cleaners whose routes are not chosen yet (from their start cells, with their whole budgets):

- an item taken but not dumped must be dumped within the current cleaner's steps left, if it
  holds it, or else be taken over by a mover (of its kind, arriving there earlier, or at the
  same time with a lower number, and then able to dump it);
- every cell still to clean must be within reach of a mover that can clean it (an apple or a
  bottle: reach it and then the nearest place to dump it), except, with meetings, dirty floor
  that a meeting could clean: dirty floor in the 3x3 block of a cell where two movers, or a
  mover and a chosen route, could arrive at the same time step (only cleaners whose start cells
  have the same colour ever arrive together, since every step changes the colour of one's cell);
- each step cleans at most one cell by itself, so the cells left (but that dirty floor, or with
  a cap on meetings, plus what the meetings still allowed for can clean) may not outnumber the
  movers' steps, nor the puddles, apples and bottles those of the boys, girls and robots, nor
  the cells that only one mover can reach its steps;
- the cells only the current cleaner can reach must fit in one walk: for any two of them a and b,
  the nearer from its cell plus the walk from a to b may not exceed its steps left;
- a step onto a clean cell cleans nothing, and every group of cells still to clean (connected
  orthogonally) must be entered from a clean cell, except one group per mover standing next to
  it: the groups beyond the movers next to them are wasted steps, added to the count above.

:func:`next_cleaner` picks whose route comes next: the mover with the most cells that only it can
clean for its budget, then the one whose kind has the most items left for its kind's steps.

:func:`state_hashes` gives the two 64-bit hashes of everything the rest of the search depends on:
the cells left, the chosen routes' cleaners, the current cleaner, its cell, previous cell, steps
and items, when and by whom each apple or bottle was taken (where a mover could still reach it
in time), and with meetings the cells and time steps of the chosen routes where a mover could
still meet them with some dirty floor around.
"""

from __future__ import annotations

from dobutsu_tb.analysis.puzzles.sweep.arrays import ANY, INF
from dobutsu_tb.encoding.bits import (
    WORD_SHIFT,
    lowest_bit_word,
    popcount_word,
    wide_add,
    wide_has,
    wide_remove,
)
from dobutsu_tb.encoding.jit import njit_callback
from dobutsu_tb.encoding.search.fingerprints import FINGERPRINT_SEED1, FINGERPRINT_SEED2, fingerprint_add

#: Most cells only the current cleaner can reach for which the pairwise walk bound is checked.
PAIR_CELLS = 32
#: A search context's ``cap`` on meetings: none simulated, or no cap (the complete search).
NO_MEETINGS, UNLIMITED = -1, 1 << 30
#: The scale of :func:`next_cleaner`'s ratios (integers, so that the choice is exact).
_SCALE = 1 << 16


@njit_callback
def unplaced(ctx, d):
    """The cleaners whose routes are not chosen yet, but the current one (a set of cleaners)."""
    n_cl = ctx.arrays.kind.shape[0]
    everyone = (1 << n_cl) - 1
    i = ctx.cur[d]
    return everyone & ~ctx.placed[d] & ~((1 << i) if i < n_cl else 0)


@njit_callback
def _or_blocks(ctx, d, src, dst):
    """``scratch[dst] |=`` the dirty floor of the 3x3 block of every cell in ``scratch[src]``;
    returns the most cells still to clean in one of those blocks."""
    arrays = ctx.arrays
    best = 0
    for w in range(ctx.scratch.shape[1]):
        word = ctx.scratch[src, w]
        while word:
            x = (w << WORD_SHIFT) + lowest_bit_word(word)
            word &= word - 1
            dirty = 0
            for v in range(ctx.scratch.shape[1]):
                ctx.scratch[dst, v] |= arrays.block_dirt[x, v]
                dirty += popcount_word(arrays.block_dirt[x, v] & ctx.room[d, v])
            best = max(best, dirty)
    return best


@njit_callback
def _can_be_at(ctx, d, x, s, colour, rest):
    """Whether a mover of start colour ``colour`` could step onto cell ``x`` at time step ``s``
    (the current cleaner only after its steps so far; ``rest`` the unplaced cleaners)."""
    arrays = ctx.arrays
    i = ctx.cur[d]
    sigma = ctx.step[d]
    if arrays.colour[i] == colour and sigma < s <= arrays.budget[i] and arrays.dist[ctx.pos[d], x] <= s - sigma:
        return True
    while rest:
        k = lowest_bit_word(rest)
        rest &= rest - 1
        if arrays.colour[k] == colour and arrays.dist[arrays.start[k], x] <= s <= arrays.budget[k]:
            return True
    return False


@njit_callback
def _meeting_cover(ctx, d, rest, mc, cover):
    """``scratch[cover]``: the dirty floor that some future meeting could clean (``scratch[mc]``
    is used for the cells where two movers could meet). Returns the most cells still to clean
    in the 3x3 block of one such meeting's cell."""
    arrays = ctx.arrays
    i = ctx.cur[d]
    sigma = ctx.step[d]
    p = ctx.pos[d]
    radius = arrays.ball.shape[1] - 1
    W = ctx.scratch.shape[1]
    for w in range(W):
        ctx.scratch[mc, w] = 0
        ctx.scratch[cover, w] = 0
    a_set = rest
    while a_set:
        a = lowest_bit_word(a_set)
        a_set &= a_set - 1
        b_set = a_set
        while b_set:  # two unplaced cleaners
            b = lowest_bit_word(b_set)
            b_set &= b_set - 1
            for w in range(W):
                ctx.scratch[mc, w] |= arrays.pair_meet[a, b, w]
        r = min(arrays.budget[i], arrays.budget[a])  # the current cleaner with an unplaced one
        if arrays.colour[a] == arrays.colour[i] and r > sigma:
            u, v = min(r - sigma, radius), min(r, radius)
            for w in range(W):
                ctx.scratch[mc, w] |= arrays.ball[p, u, w] & arrays.ball[arrays.start[a], v, w]
    best = _or_blocks(ctx, d, mc, cover)
    movers = ctx.placed[d] | (1 << i)
    while movers:  # a mover and a chosen route (or the current one's steps so far)
        j = lowest_bit_word(movers)
        movers &= movers - 1
        n = ctx.length[j] if j != i else sigma
        for s in range(1, n + 1):
            x = ctx.traj[j, s]
            if _can_be_at(ctx, d, x, s, arrays.colour[j], rest):
                dirty = 0
                for w in range(W):
                    ctx.scratch[cover, w] |= arrays.block_dirt[x, w]
                    dirty += popcount_word(arrays.block_dirt[x, w] & ctx.room[d, w])
                best = max(best, dirty)
    return best


@njit_callback
def _can_take_over(ctx, d, q, dump, rest):
    """Whether a mover could take item ``q`` over from the one who took it (and then dump it,
    with ``dump``)."""
    arrays = ctx.arrays
    x = arrays.item_cell[q]
    need = arrays.need[x]
    t, by = ctx.taken_at[d, q], ctx.taken_by[d, q]
    i = ctx.cur[d]
    if arrays.kind[i] == need and i != by:
        arrive = ctx.step[d] + arrays.dist[ctx.pos[d], x]
        if (arrive < t or (arrive == t and i < by)) and arrive + dump * arrays.extra[x] <= arrays.budget[i]:
            return True
    while rest:
        k = lowest_bit_word(rest)
        rest &= rest - 1
        arrive = arrays.dist[arrays.start[k], x]
        if (arrays.kind[k] == need and (arrive < t or (arrive == t and k < by))
                and arrive + dump * arrays.extra[x] <= arrays.budget[k]):
            return True
    return False


@njit_callback
def _wasted_entries(ctx, d, rest, cover, use_cover, work, frontier):
    """The groups of orthogonally connected cells still to clean (those with a cell no meeting
    can clean, with ``use_cover``) minus the movers next to one: a lower bound on the steps onto
    clean cells still to come. ``scratch[work]`` and ``scratch[frontier]`` are overwritten."""
    arrays = ctx.arrays
    W = ctx.room.shape[1]
    for w in range(W):
        ctx.scratch[work, w] = ctx.room[d, w]
        ctx.scratch[frontier, w] = 0
    groups = 0
    for w in range(W):
        while ctx.scratch[work, w]:
            y = (w << WORD_SHIFT) + lowest_bit_word(ctx.scratch[work, w])
            wide_remove(ctx.scratch, work, y)
            wide_add(ctx.scratch, frontier, y)
            visit = not (use_cover and wide_has(ctx.scratch, cover, y))
            left = 1
            while left:
                left = 0
                for v in range(W):
                    word = ctx.scratch[frontier, v]
                    if word:
                        x = (v << WORD_SHIFT) + lowest_bit_word(word)
                        ctx.scratch[frontier, v] = word & (word - 1)
                        for c in range(4):
                            z = arrays.nbr[x, c]
                            if z >= 0 and wide_has(ctx.scratch, work, z):
                                wide_remove(ctx.scratch, work, z)
                                wide_add(ctx.scratch, frontier, z)
                                visit |= not (use_cover and wide_has(ctx.scratch, cover, z))
                        left = 1
                        break
            groups += visit
    near = 0
    movers = rest | (1 << ctx.cur[d])
    while movers:
        k = lowest_bit_word(movers)
        movers &= movers - 1
        p = ctx.pos[d] if k == ctx.cur[d] else arrays.start[k]
        hit = wide_has(ctx.room, d, p)
        for c in range(4):
            z = arrays.nbr[p, c]
            hit |= z >= 0 and wide_has(ctx.room, d, z)
        near += hit
    return max(0, groups - near)


@njit_callback
def hopeless(ctx, d):
    """True when the node at depth ``d`` cannot be finished (the bounds of the module docstring).

    ``ctx`` is a search context of :mod:`.search`; its last four ``scratch`` rows, ``counts``
    and ``cells`` are overwritten."""
    arrays = ctx.arrays
    i = ctx.cur[d]
    kind = arrays.kind[i]
    rem = arrays.budget[i] - ctx.step[d]
    p = ctx.pos[d]
    rest = unplaced(ctx, d)
    dumps = ctx.hold[d] == 0 or arrays.dump_dist[kind, p] <= rem
    for q in range(ctx.taken_at.shape[1]):
        if ctx.taken_at[d, q] < INF and not ctx.dumped[d, q]:
            if not (dumps and ctx.taken_by[d, q] == i) and not _can_take_over(ctx, d, q, True, rest):
                return True
    mc, cover, work, frontier = range(ctx.scratch.shape[0] - 4, ctx.scratch.shape[0])
    allowance = 0 if ctx.cap == NO_MEETINGS else max(0, ctx.cap - ctx.met[d])
    gain = 0  # what the meetings still allowed for can clean beyond one cell a step
    if allowance > 0:
        best = _meeting_cover(ctx, d, rest, mc, cover)
        if ctx.cap != UNLIMITED:
            gain = allowance * max(0, best - 2)
    steps = rem
    kind_steps = ctx.counts[-3:]
    for q in range(3):
        kind_steps[q] = 0
    kind_steps[kind] = rem
    others = rest
    while others:
        k = lowest_bit_word(others)
        others &= others - 1
        ctx.counts[k] = 0
        steps += arrays.budget[k]
        kind_steps[arrays.kind[k]] += arrays.budget[k]
    total = puddles = apples = bottles = 0
    mine = 0  # cells only the current cleaner can reach (listed in ctx.cells)
    for w in range(ctx.room.shape[1]):
        word = ctx.room[d, w]
        while word:
            y = (w << WORD_SHIFT) + lowest_bit_word(word)
            word &= word - 1
            q = arrays.need[y]
            total += 1
            if q == ANY and allowance > 0 and wide_has(ctx.scratch, cover, y):
                total -= ctx.cap == UNLIMITED
                continue
            if q == 0:
                puddles += 1
            elif q == 1:
                apples += 1
            elif q == 2:
                bottles += 1
            reach = (q == ANY or q == kind) and arrays.dist[p, y] + arrays.extra[y] <= rem
            who = arrays.can[y] & rest
            if who == 0:
                if not reach:
                    return True
                if mine < ctx.cells.shape[0]:
                    ctx.cells[mine] = y
                mine += 1
            elif who & (who - 1) == 0 and not reach:
                ctx.counts[lowest_bit_word(who)] += 1
    if total > steps + gain or mine > rem:
        return True
    if puddles > kind_steps[0] or apples > kind_steps[1] or bottles > kind_steps[2]:
        return True
    others = rest
    while others:
        k = lowest_bit_word(others)
        others &= others - 1
        if ctx.counts[k] > arrays.budget[k]:
            return True
    if mine <= PAIR_CELLS:
        for a in range(mine):
            x = ctx.cells[a]
            for b in range(a + 1, mine):
                y = ctx.cells[b]
                if min(arrays.dist[p, x], arrays.dist[p, y]) + arrays.dist[x, y] > rem:
                    return True
    return total + _wasted_entries(ctx, d, rest, cover, allowance > 0, work, frontier) > steps + gain


@njit_callback
def next_cleaner(ctx, d, rest):
    """Whose route to choose next among ``rest`` (a non-empty set of cleaners), given the cells
    left at depth ``d``: the most cells only it can clean for its budget, then the most items of
    its kind left for the steps of its kind, then the lowest number."""
    arrays = ctx.arrays
    n_cl = arrays.kind.shape[0]
    for k in range(n_cl):
        ctx.counts[k] = 0
    items = ctx.counts[n_cl:n_cl + 3]
    steps = ctx.counts[n_cl + 3:n_cl + 6]
    for q in range(3):
        items[q] = steps[q] = 0
    others = rest
    while others:
        k = lowest_bit_word(others)
        others &= others - 1
        steps[arrays.kind[k]] += arrays.budget[k]
    for w in range(ctx.room.shape[1]):
        word = ctx.room[d, w]
        while word:
            y = (w << WORD_SHIFT) + lowest_bit_word(word)
            word &= word - 1
            if arrays.need[y] >= 0:
                items[arrays.need[y]] += 1
            who = arrays.can[y] & rest
            if who != 0 and who & (who - 1) == 0:
                ctx.counts[lowest_bit_word(who)] += 1
    best, best_own, best_kind = -1, -1, -1
    others = rest
    while others:
        k = lowest_bit_word(others)
        others &= others - 1
        own = ctx.counts[k] * _SCALE // max(1, arrays.budget[k])
        pressure = items[arrays.kind[k]] * _SCALE // max(1, steps[arrays.kind[k]])
        if own > best_own or (own == best_own and pressure > best_kind):
            best, best_own, best_kind = k, own, pressure
    return best


@njit_callback
def _taken_word(ctx, d, q, rest):
    """The hash word of item ``q``: when and by whom it was taken and whether it was dumped, or
    only whether it was dumped when no mover can reach it in time any more (0 while it lies on
    the floor: the cells left say so)."""
    t = ctx.taken_at[d, q]
    if t >= INF:
        return 0
    if _can_take_over(ctx, d, q, False, rest):
        return (t << 12) | (ctx.taken_by[d, q] << 1) | ctx.dumped[d, q]
    return -1 - ctx.dumped[d, q]


@njit_callback
def state_hashes(ctx, d):
    """The two 64-bit hashes of the node at depth ``d`` (see the module docstring); with
    meetings, ``ctx.scratch`` rows 1..T are used (and left zero)."""
    arrays = ctx.arrays
    h1, h2 = FINGERPRINT_SEED1, FINGERPRINT_SEED2
    W = ctx.room.shape[1]
    rest = unplaced(ctx, d)
    for w in range(W):
        h1, h2 = fingerprint_add(h1, h2, ctx.room[d, w])
    small = (ctx.cur[d] | (ctx.step[d] << 8) | ((ctx.pos[d] + 1) << 20) | ((ctx.prev[d] + 1) << 32)
             | (ctx.hold[d] << 44))
    h1, h2 = fingerprint_add(h1, h2, small)
    h1, h2 = fingerprint_add(h1, h2, ctx.placed[d])
    for q in range(ctx.taken_at.shape[1]):
        h1, h2 = fingerprint_add(h1, h2, _taken_word(ctx, d, q, rest))
    if ctx.cap != NO_MEETINGS:
        if ctx.cap != UNLIMITED:
            h1, h2 = fingerprint_add(h1, h2, max(0, ctx.cap - ctx.met[d]))
        i = ctx.cur[d]
        horizon = ctx.traj.shape[1] - 1
        movers = ctx.placed[d] | (1 << i)
        while movers:
            j = lowest_bit_word(movers)
            movers &= movers - 1
            n = ctx.length[j] if j != i else ctx.step[d]
            for s in range(1, n + 1):
                x = ctx.traj[j, s]
                if wide_has(ctx.scratch, s, x):
                    continue
                dirty = False
                for w in range(W):
                    if arrays.block_dirt[x, w] & ctx.room[d, w]:
                        dirty = True
                if dirty and _can_be_at(ctx, d, x, s, arrays.colour[j], rest):
                    wide_add(ctx.scratch, s, x)
        for s in range(1, horizon + 1):
            for w in range(W):
                h1, h2 = fingerprint_add(h1, h2, ctx.scratch[s, w])
                ctx.scratch[s, w] = 0
    return h1, h2
