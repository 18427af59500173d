"""A slow, obviously-correct reference for dobutsu shogi, written from SPEC §1 alone.

It shares no code with the kernels: a position is a dict of squares, moves are generated from
the piece descriptions, keys are built as bit strings from the Huffman table. The tests compare
the kernels with it on random positions.
"""

from __future__ import annotations

import random

FILES = "abc"
# Steps as (file delta, rank delta) for Sente, who plays towards rank 1 (rank delta -1).
STEPS = {
    "L": [(df, dr) for df in (-1, 0, 1) for dr in (-1, 0, 1) if (df, dr) != (0, 0)],
    "G": [(0, -1), (0, 1), (-1, 0), (1, 0)],
    "E": [(-1, -1), (1, -1), (-1, 1), (1, 1)],
    "C": [(0, -1)],
    "R": [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (0, 1)],
}
HUFFMAN = {"E": "100", "G": "101", "L": "110", "C": "1110", "R": "1111"}
HAND_CODE = {0: "0", 1: "10", 2: "11"}


class NaivePosition:
    """board: {(file 0..2, rank 1..4): (side 'S'/'G', letter)}; hands: {'S': {'C','E','G' -> n}}."""

    def __init__(self, board, hands, turn):
        self.board = dict(board)
        self.hands = {s: dict(h) for s, h in hands.items()}
        self.turn = turn

    @classmethod
    def from_text(cls, text):
        side, *ranks, hand = text.split("/")
        board = {}
        for r, row in enumerate(ranks, 1):
            for f, ch in enumerate(row):
                if ch != "-":
                    board[(f, r)] = ("S" if ch.isupper() else "G", ch.upper())
        hands = {"S": {"C": 0, "E": 0, "G": 0}, "G": {"C": 0, "E": 0, "G": 0}}
        for ch in hand.replace("-", ""):
            hands["S" if ch.isupper() else "G"][ch.upper()] += 1
        return cls(board, hands, side)

    def text(self):
        ranks = []
        for r in range(1, 5):
            row = ""
            for f in range(3):
                if (f, r) in self.board:
                    side, letter = self.board[(f, r)]
                    row += letter if side == "S" else letter.lower()
                else:
                    row += "-"
            ranks.append(row)
        hand = "".join(p * self.hands["S"][p] for p in "CEG") + "".join(
            p.lower() * self.hands["G"][p] for p in "CEG")
        return "/".join([self.turn, *ranks, hand or "-"])


def other(side):
    return "G" if side == "S" else "S"


def square(f, r):
    return FILES[f] + str(r)


def targets(pos, sq, side, letter):
    f, r = sq
    sign = 1 if side == "S" else -1  # Gote plays towards rank 4
    for df, dr in STEPS[letter]:
        t = (f + df, r + sign * dr)
        if 0 <= t[0] < 3 and 1 <= t[1] <= 4:
            yield t


def lion_square(pos, side):
    for sq, (s, letter) in pos.board.items():
        if s == side and letter == "L":
            return sq
    return None


def attacks(pos, side, target):
    return any(target in targets(pos, sq, s, letter)
               for sq, (s, letter) in pos.board.items() if s == side)


def home_rank(side):
    return 4 if side == "S" else 1


def game_over(pos):
    """SPEC §1.2."""
    me, them = pos.turn, other(pos.turn)
    if lion_square(pos, me) is None or lion_square(pos, them) is None:
        return True
    enemy = lion_square(pos, them)
    return enemy[1] == home_rank(me) and not attacks(pos, me, enemy)


def classify(pos):
    """'catch', 'try' or None (SPEC §1.4)."""
    me, them = pos.turn, other(pos.turn)
    enemy = lion_square(pos, them)
    if attacks(pos, me, enemy):
        return "catch"
    if enemy[1] == home_rank(me):
        return "try"
    return None


def moves(pos):
    """[(move text, child NaivePosition)] for a position whose game is not over."""
    me = pos.turn
    out = []
    for sq, (side, letter) in list(pos.board.items()):
        if side != me:
            continue
        for t in targets(pos, sq, side, letter):
            occupant = pos.board.get(t)
            if occupant and occupant[0] == me:
                continue
            child = NaivePosition(pos.board, pos.hands, other(me))
            del child.board[sq]
            new_letter = letter
            promote = letter == "C" and t[1] == (1 if me == "S" else 4)
            if promote:
                new_letter = "R"
            if occupant:
                captured = occupant[1]
                if captured == "R":
                    captured = "C"
                if captured != "L":
                    child.hands[me][captured] += 1
            child.board[t] = (me, new_letter)
            text = f"{letter}{square(*sq)}{'x' if occupant else '-'}{square(*t)}{'+' if promote else ''}"
            out.append((text, child))
    for p in "CEG":
        if pos.hands[me][p]:
            for r in range(1, 5):
                for f in range(3):
                    if (f, r) not in pos.board:
                        child = NaivePosition(pos.board, pos.hands, other(me))
                        child.hands[me][p] -= 1
                        child.board[(f, r)] = (me, p)
                        out.append((f"{p}*{square(f, r)}", child))
    return out


def key_bits(pos, mirrored=False):
    """The Huffman bit string of SPEC §1.3 for the normalised position."""
    me = pos.turn
    bits = ""
    for i in range(12):
        nr, nf = divmod(i, 3)  # normalised rank index 0..3, file 0..2
        if mirrored:
            nf = 2 - nf
        # Normalised frame: side to move plays upwards; for Gote, rotate the board by 180°.
        sq = (nf, nr + 1) if me == "S" else (2 - nf, 4 - nr)
        if sq not in pos.board:
            bits += "0"
            continue
        side, letter = pos.board[sq]
        bits += HUFFMAN[letter] + ("0" if side == me else "1")
    for side in (me, other(me)):
        for p in "CEG":
            bits += HAND_CODE[pos.hands[side][p]]
    return bits


def canonical_key(pos):
    """min of the keys of the position and of its mirror image, as SPEC §1.3 lays them out."""
    keys = []
    for mirrored in (False, True):
        bits = key_bits(pos, mirrored)
        assert len(bits) <= 44
        keys.append(int(bits, 2) << (63 - len(bits)))
    return min(keys)


def perft(pos, depth):
    if depth == 0:
        return 1
    if game_over(pos):
        return 0
    return sum(perft(child, depth - 1) for _, child in moves(pos))


def random_position(rng: random.Random, material=("C", "C", "E", "E", "G", "G")):
    """A random position: both lions on the board, each other piece on the board (either side,
    chicks sometimes hens), in a hand, or (rarely) out of the game."""
    squares = [(f, r) for f in range(3) for r in range(1, 5)]
    rng.shuffle(squares)
    board = {squares.pop(): ("S", "L"), squares.pop(): ("G", "L")}
    hands = {"S": {"C": 0, "E": 0, "G": 0}, "G": {"C": 0, "E": 0, "G": 0}}
    for p in material:
        where = rng.random()
        side = rng.choice("SG")
        if where < 0.6:
            letter = "R" if p == "C" and rng.random() < 0.3 else p
            board[squares.pop()] = (side, letter)
        elif where < 0.95:
            hands[side][p] += 1
    return NaivePosition(board, hands, rng.choice("SG"))


def children_values(pos, value):
    """[(wdl, dtm) of each child, from the child's side to move], terminal children by the rules;
    ``value(child)`` answers the stored ones."""
    out = []
    for _, child in moves(pos):
        cls = classify(child)
        if cls == "catch":
            out.append((1, 1))
        elif cls == "try":
            out.append((-1, 0))
        else:
            out.append(value(child))
    return out


def expected_value(child_values):
    """Minimax with DTM (SPEC §1.5) from the children's (wdl, dtm); no move at all loses at once."""
    if not child_values:
        return -1, 0
    losses = [d for w, d in child_values if w == -1]
    if losses:
        return 1, min(losses) + 1
    if all(w == 1 for w, _ in child_values):
        return -1, max(d for _, d in child_values) + 1
    return 0, 0
