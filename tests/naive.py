"""A slow, obviously-correct reference for dobutsu shogi and its variants, written from the rules
(docs/rules.md) and a variant's plain description alone.

It shares no code with the kernels: it reads a variant's TOML file (or the same fields as a
dict) itself, a position is a dict of squares, moves are generated from the piece descriptions,
keys are built as bit strings. The tests compare the kernels with it on random positions, and
solve small variants with it value by value.
"""

from __future__ import annotations

import random
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10 (the package depends on tomli there)
    import tomli as tomllib

VARIANTS = Path(__file__).resolve().parent.parent / "tablebase" / "game" / "variants"
FILES = "abcdefghijklmno"
DIRECTIONS = {"f": (0, 1), "b": (0, -1), "l": (-1, 0), "r": (1, 0),
              "fl": (-1, 1), "fr": (1, 1), "bl": (-1, -1), "br": (1, -1)}
#: The standard game's Huffman codes, literally as the rules give them (a test compares).
STANDARD_CODES = {"E": "100", "G": "101", "L": "110", "C": "1110", "R": "1111"}


class NaiveGame:
    """A variant read from its plain description (a TOML file's fields)."""

    def __init__(self, data: dict):
        self.name = data["name"]
        self.files, self.ranks = data["files"], data["ranks"]
        self.drops = data.get("drops", True)
        self.try_rule = data.get("try_rule", True)
        self.letters = [p["letter"] for p in data["pieces"]]
        self.steps, self.promotes, self.zone, self.forbidden = {}, {}, {}, {}
        for p in data["pieces"]:
            self.steps[p["letter"]] = [DIRECTIONS[s] if isinstance(s, str) else tuple(s) for s in p["steps"]]
            if p.get("promotes_to"):
                self.promotes[p["letter"]] = p["promotes_to"]
                self.zone[p["letter"]] = p.get("promotion_ranks", 1)
            self.forbidden[p["letter"]] = set(p.get("forbidden_drop_ranks", []))
        self.royal = next(p["letter"] for p in data["pieces"] if p.get("royal"))
        self.base = {x: x for x in self.letters}
        for x, y in self.promotes.items():
            self.base[y] = x
        droppable = [p["letter"] for p in data["pieces"] if self.drops and p.get("drop", True)
                     and p["letter"] != self.royal and p["letter"] not in self.promotes.values()]
        self.hand_order = data.get("hand_order", "".join(droppable))
        self.start = data["start"]
        start = NaivePosition.from_text(self.start, self, check=False)
        self.army = {x: 0 for x in self.letters if self.base[x] == x}
        for _, letter in start.board.values():
            self.army[self.base[letter]] += 1
        for side in "SG":
            for x, n in start.hands[side].items():
                self.army[x] += n
        self.symmetric = all(set(s) == {(-f, r) for f, r in s} for s in self.steps.values())
        self.codes = self._codes()

    def _codes(self) -> dict:
        """Each kind's code: the strings of d bits in order, the last ones split in two when n is
        no power of two (the shorter codes first)."""
        n = len(self.letters)
        d = n.bit_length() - 1
        extra = n - (1 << d)
        words = [format(i, f"0{d}b") if d else "" for i in range(1 << d)]
        keep, split = words[: len(words) - extra], words[len(words) - extra:]
        codes = keep + [w + b for w in split for b in "01"]
        return {x: "1" + c for x, c in zip(self.letters, codes)}


def load_game(name: str) -> NaiveGame:
    """The naive game of a shipped variant, read from its TOML file."""
    with open(VARIANTS / f"{name}.toml", "rb") as f:
        return NaiveGame(tomllib.load(f))



class NaivePosition:
    """board: {(file 0.., rank 1..): (side 'S'/'G', letter)}; hands: {'S': {letter -> n}, 'G': ...}."""

    def __init__(self, board, hands, turn, game=None):
        self.board = dict(board)
        self.hands = {s: dict(h) for s, h in hands.items()}
        self.turn = turn
        self.game = game or STANDARD

    @classmethod
    def from_text(cls, text, game=None, check=True):
        game = game or STANDARD
        side, *ranks, hand = text.split("/")
        board = {}
        for r, row in enumerate(ranks, 1):
            for f, ch in enumerate(row):
                if ch != "-":
                    board[(f, r)] = ("S" if ch.isupper() else "G", ch.upper())
        order = game.hand_order if check else "".join(sorted(set(hand.upper()) - {"-"}))
        hands = {"S": {p: 0 for p in order}, "G": {p: 0 for p in order}}
        for ch in hand.replace("-", ""):
            hands["S" if ch.isupper() else "G"][ch.upper()] += 1
        return cls(board, hands, side, game)

    def text(self):
        g = self.game
        ranks = []
        for r in range(1, g.ranks + 1):
            row = ""
            for f in range(g.files):
                if (f, r) in self.board:
                    side, letter = self.board[(f, r)]
                    row += letter if side == "S" else letter.lower()
                else:
                    row += "-"
            ranks.append(row)
        hand = "".join(p * self.hands["S"][p] for p in g.hand_order) + "".join(
            p.lower() * self.hands["G"][p] for p in g.hand_order)
        return "/".join([self.turn, *ranks, hand or "-"])


STANDARD = load_game("dobutsu")


def other(side):
    return "G" if side == "S" else "S"


def square(f, r):
    return FILES[f] + str(r)


def targets(pos, sq, side, letter):
    g = pos.game
    f, r = sq
    for df, dr in g.steps[letter]:
        # Sente plays towards rank 1 (a step forward lowers the rank); Gote is turned round.
        t = (f + df, r - dr) if side == "S" else (f - df, r + dr)
        if 0 <= t[0] < g.files and 1 <= t[1] <= g.ranks:
            yield t


def distance_from_far(pos, side, rank):
    """1 for the far rank of ``side``, 2 for the next, ..."""
    return rank if side == "S" else pos.game.ranks + 1 - rank


def royal_square(pos, side):
    for sq, (s, letter) in pos.board.items():
        if s == side and letter == pos.game.royal:
            return sq
    return None


lion_square = royal_square


def attacks(pos, side, target):
    return any(target in targets(pos, sq, s, letter)
               for sq, (s, letter) in pos.board.items() if s == side)


def home_rank(pos, side):
    return pos.game.ranks if side == "S" else 1


def game_over(pos):
    """A royal piece is gone, or (with the try rule) the enemy royal stands on the side to move's
    home rank and cannot be captured."""
    me, them = pos.turn, other(pos.turn)
    if royal_square(pos, me) is None or royal_square(pos, them) is None:
        return True
    enemy = royal_square(pos, them)
    return pos.game.try_rule and enemy[1] == home_rank(pos, me) and not attacks(pos, me, enemy)


def classify(pos):
    """'catch', 'try' or None."""
    me, them = pos.turn, other(pos.turn)
    enemy = royal_square(pos, them)
    if attacks(pos, me, enemy):
        return "catch"
    if pos.game.try_rule and enemy[1] == home_rank(pos, me):
        return "try"
    return None


def moves(pos):
    """[(move text, child NaivePosition)] for a position whose game is not over."""
    g = pos.game
    me = pos.turn
    out = []
    for sq, (side, letter) in list(pos.board.items()):
        if side != me:
            continue
        for t in targets(pos, sq, side, letter):
            occupant = pos.board.get(t)
            if occupant and occupant[0] == me:
                continue
            child = NaivePosition(pos.board, pos.hands, other(me), g)
            del child.board[sq]
            new_letter = letter
            promote = letter in g.promotes and distance_from_far(pos, me, t[1]) <= g.zone[letter]
            if promote:
                new_letter = g.promotes[letter]
            if occupant:
                captured = g.base[occupant[1]]
                if captured in g.hand_order:
                    child.hands[me][captured] += 1
            child.board[t] = (me, new_letter)
            text = f"{letter}{square(*sq)}{'x' if occupant else '-'}{square(*t)}{'+' if promote else ''}"
            out.append((text, child))
    for p in g.hand_order:
        if pos.hands[me][p]:
            for r in range(1, g.ranks + 1):
                if distance_from_far(pos, me, r) in g.forbidden[p]:
                    continue
                for f in range(g.files):
                    if (f, r) not in pos.board:
                        child = NaivePosition(pos.board, pos.hands, other(me), g)
                        child.hands[me][p] -= 1
                        child.board[(f, r)] = (me, p)
                        out.append((f"{p}*{square(f, r)}", child))
    return out


def key_bits(pos, mirrored=False):
    """The Huffman-style bit string of the normalised position."""
    g = pos.game
    me = pos.turn
    bits = ""
    for i in range(g.files * g.ranks):
        nr, nf = divmod(i, g.files)  # normalised rank index, file
        if mirrored:
            nf = g.files - 1 - nf
        # Normalised frame: side to move plays upwards; for Gote, rotate the board by 180°.
        sq = (nf, nr + 1) if me == "S" else (g.files - 1 - nf, g.ranks - nr)
        if sq not in pos.board:
            bits += "0"
            continue
        side, letter = pos.board[sq]
        bits += g.codes[letter] + ("0" if side == me else "1")
    for side in (me, other(me)):
        for p in g.hand_order:
            n, most = pos.hands[side][p], g.army[p]
            bits += "1" * n + ("0" if n < most else "")
    return bits


def canonical_key(pos):
    """The smaller of the keys of the position and of its mirror image (for mirror-symmetric
    variants), the bits left-aligned below bit 63."""
    keys = []
    for mirrored in (False, True) if pos.game.symmetric else (False,):
        bits = key_bits(pos, mirrored)
        assert len(bits) <= 63
        keys.append(int(bits, 2) << (63 - len(bits)))
    return min(keys)


def perft(pos, depth):
    if depth == 0:
        return 1
    if game_over(pos):
        return 0
    return sum(perft(child, depth - 1) for _, child in moves(pos))


def random_position(rng: random.Random, game=None, material=None):
    """A random position: both royal pieces on the board, each other piece of the army on the
    board (either side, promotable ones sometimes promoted), in a hand (when it can be), or
    (rarely) out of the game."""
    game = game or STANDARD
    squares = [(f, r) for f in range(game.files) for r in range(1, game.ranks + 1)]
    rng.shuffle(squares)
    board = {squares.pop(): ("S", game.royal), squares.pop(): ("G", game.royal)}
    hands = {"S": {p: 0 for p in game.hand_order}, "G": {p: 0 for p in game.hand_order}}
    if material is None:
        material = [x for x, n in game.army.items() if x != game.royal for _ in range(n)]
    for p in material:
        where = rng.random()
        side = rng.choice("SG")
        if (where < 0.6 or p not in game.hand_order) and squares and where < 0.95:
            letter = game.promotes[p] if p in game.promotes and rng.random() < 0.3 else p
            board[squares.pop()] = (side, letter)
        elif where < 0.95:
            hands[side][p] += 1
    return NaivePosition(board, hands, rng.choice("SG"), game)


def children_values(pos, value):
    """[(wdl, dtm) of each child, from the child's side to move], terminal children by the rules;
    ``value(child)`` answers the stored ones."""
    out = []
    for _, child in moves(pos):
        if royal_square(child, child.turn) is None:
            out.append((-1, 0))  # the royal piece was captured
            continue
        cls = classify(child)
        if cls == "catch":
            out.append((1, 1))
        elif cls == "try":
            out.append((-1, 0))
        else:
            out.append(value(child))
    return out


def expected_value(child_values):
    """Minimax with DTM from the children's (wdl, dtm); no move at all loses at once."""
    if not child_values:
        return -1, 0
    losses = [d for w, d in child_values if w == -1]
    if losses:
        return 1, min(losses) + 1
    if all(w == 1 for w, _ in child_values):
        return -1, max(d for _, d in child_values) + 1
    return 0, 0


def reachable(game, start_text):
    """{canonical key: NaivePosition} of every non-terminal position reachable from a start
    (breadth first; terminal positions are reached but not expanded), and the number of distinct
    terminal ones."""
    start = NaivePosition.from_text(start_text, game)
    seen = {canonical_key(start): start}
    terminal = set()
    frontier = [start]
    while frontier:
        nxt = []
        for pos in frontier:
            for _, child in moves(pos):
                if royal_square(child, child.turn) is None:
                    continue
                k = canonical_key(child)
                if classify(child) is not None:
                    terminal.add(k)
                elif k not in seen:
                    seen[k] = child
                    nxt.append(child)
        frontier = nxt
    return seen, len(terminal)


def solve(game, start_text, no_move_loses=True):
    """The (wdl, dtm) of every non-terminal position reachable from a start, straight from the
    definitions (slow: for tiny variants): round n decides the positions whose value is at
    distance n. A win in n (n odd) has a child lost in n - 1, found in an earlier round; a loss in
    n (n even) has only winning children, all decided, the slowest in n - 1; no move at all loses
    at once (unless ``no_move_loses`` is false: then it is never decided, as jh85/dobutsushogi's
    solver leaves it); what no round decides is a draw.

    Returns
    -------
    dict
        {canonical key: (wdl, dtm)}.
    """
    positions, _ = reachable(game, start_text)
    value = {}
    children = {k: [(c, canonical_key(c)) for _, c in moves(p)] for k, p in positions.items()}

    def child_value(c, ck):
        if royal_square(c, c.turn) is None:
            return (-1, 0)
        cls = classify(c)
        if cls == "catch":
            return (1, 1)
        if cls == "try":
            return (-1, 0)
        return value.get(ck)

    for k, kids in children.items():
        if not kids and no_move_loses:
            value[k] = (-1, 0)
    n, last = 1, 0
    while n <= last + 2:
        decided = {}
        for k, kids in children.items():
            if k in value:
                continue
            vals = [child_value(c, ck) for c, ck in kids]
            if n % 2 == 1 and any(v == (-1, n - 1) for v in vals):
                decided[k] = (1, n)
            elif (n % 2 == 0 and vals and all(v is not None and v[0] == 1 for v in vals)
                  and max(v[1] for v in vals) == n - 1):
                decided[k] = (-1, n)
        value.update(decided)
        if decided:
            last = n
        n += 1
    return {k: value.get(k, (0, 0)) for k in positions}
