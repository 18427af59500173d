#!/usr/bin/env python3
"""Write random legal games from a start position, one game per line, for ``verify-line --file``.

Usage: python scripts/make_games.py OUT [--games 200000] [--min-plies 10] [--max-plies 40]
       [--variant dobutsu] [--start S/gle/-c-/-C-/ELG/-] [--seed 0]

Each game picks its length uniformly in [min, max] plies and plays uniformly random legal moves
(our notation) from the start, except that a side that can capture the enemy lion does (a tablebase
never expands such catch-terminal positions, so a game that let the lion live would leave it); a
game that ends sooner (a lion captured, a successful try, a position's third occurrence:
docs/rules.md §3) is drawn again, so every game has min to max plies. The games are played by a
jitted kernel; the same seed gives the same file. Time ``verify-line --file`` on it::

    python scripts/make_games.py games.txt
    time dobutsu-tb verify-line --tb dobutsu.h5 --file games.txt > report.txt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from dobutsu_tb.tablebase.game import notation
from dobutsu_tb.tablebase.game.layout import CATCH, MAX_MOVES, ROYAL
from dobutsu_tb.tablebase.game.notation import Move, text_code
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.game.rules import classify, find_piece, game_over, gen_moves, make_move
from dobutsu_tb.tablebase.game.variant import get_variant

#: Bound to the variant's tables (Game.jitted).
__kernels__ = ("_games",)


def _games(rules, start_board, start_hand, turn0, n_games, min_plies, max_plies, seed, codes, lengths):
    """Play ``n_games`` games into ``codes`` (text codes, ``max_plies`` a game) and ``lengths``."""
    np.random.seed(seed)
    moves = np.empty(rules[MAX_MOVES], np.int64)
    caps = np.empty(rules[MAX_MOVES], np.int64)
    seen = np.empty((max_plies + 1, 3), np.int64)  # the game's positions so far: board, hand, turn
    for g in range(n_games):
        done, tries = False, 0
        while not done:
            tries += 1
            if tries > 100_000:
                raise ValueError("no game of the asked length from this start")
            plies = np.random.randint(min_plies, max_plies + 1)
            board, hand, turn, done = start_board, start_hand, turn0, True
            seen[0, 0], seen[0, 1], seen[0, 2] = board, hand, turn
            for ply in range(plies):
                if game_over(rules, board, hand):
                    done = False
                    break
                n = gen_moves(rules, board, hand, moves)
                if classify(rules, board, hand) == CATCH:  # take the lion: the game ends here
                    if ply + 1 < plies:
                        done = False
                        break
                    m = 0
                    for k in range(n):
                        cb, ch = make_move(rules, board, hand, moves[k])
                        if find_piece(cb, ch, rules[ROYAL]) < 0:
                            caps[m] = moves[k]
                            m += 1
                    mv = caps[np.random.randint(0, m)]
                else:
                    mv = moves[np.random.randint(0, n)]
                codes[g, ply] = text_code(rules, board, hand, turn, mv)
                board, hand = make_move(rules, board, hand, mv)
                turn = 1 - turn
                if ply + 1 < plies and game_over(rules, board, hand):
                    done = False
                    break
                before = 0
                for i in range(ply + 1):
                    if seen[i, 0] == board and seen[i, 1] == hand and seen[i, 2] == turn:
                        before += 1
                if ply + 1 < plies and before == 2:  # a third occurrence: a draw, the game is over
                    done = False
                    break
                seen[ply + 1, 0], seen[ply + 1, 1], seen[ply + 1, 2] = board, hand, turn
            lengths[g] = plies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--games", type=int, default=200_000)
    parser.add_argument("--min-plies", type=int, default=10)
    parser.add_argument("--max-plies", type=int, default=40)
    parser.add_argument("--variant", default="dobutsu")
    parser.add_argument("--start", default=None, help="default: the variant's start")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    variant = get_variant(args.variant)
    start = Position.start(variant) if args.start is None else Position.from_text(args.start, variant)
    codes = np.zeros((args.games, args.max_plies), np.int64)
    lengths = np.zeros(args.games, np.int64)
    kernels = start.game.jitted(notation, sys.modules[__name__])  # _games calls notation's text_code
    board, hand = start.state()
    kernels._games(start.game.rules_array, np.int64(board), np.int64(hand), start.turn, args.games, args.min_plies,
                   args.max_plies, args.seed, codes, lengths)
    texts: dict = {}

    def text(code: int) -> str:
        return texts.get(code) or texts.setdefault(code, str(Move.from_code(code, variant)))

    with open(args.out, "w") as out:
        out.writelines(" ".join(map(text, row[:n])) + "\n" for row, n in zip(codes.tolist(), lengths.tolist()))
    print(f"wrote {args.games:,} games, {int(lengths.sum()):,} plies, to {args.out}")


if __name__ == "__main__":
    main()
