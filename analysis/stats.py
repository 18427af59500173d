"""What a tablebase holds (``dobutsu-tb stats``): counts per value, per DTM and per material,
the longest wins, and a plot of positions per DTM."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dobutsu_tb.analysis.no_moves import Jh85Counts, jh85_counts, no_move_keys
from dobutsu_tb.analysis.textfiles import write_atomically
from dobutsu_tb.encoding import config
from dobutsu_tb.encoding.binding import kernel_options
from dobutsu_tb.encoding.jit import prange
from dobutsu_tb.encoding.words import counted
from dobutsu_tb.tablebase.game.game import game_of
from dobutsu_tb.tablebase.game.key import cell_at, decode_key
from dobutsu_tb.tablebase.game.layout import COUNT_FIELD, COUNT_SHIFT, N_CELLS, N_SLOTS, PIECE_MASK, ROYAL
from dobutsu_tb.tablebase.game.position import Position
from dobutsu_tb.tablebase.probe import open_tablebase
from dobutsu_tb.tablebase.reader import TablebaseFile
from dobutsu_tb.tablebase.schema import HISTOGRAM_STEP, Metadata, code_histogram

#: The kernels bound to each variant's tables (Game.jitted).
__kernels__ = ("_material_table",)


@kernel_options(parallel=True)
def _material_table(rules, keys, values, out):
    """out[t, on_board, in_hand, wdl + 1] += 1, one task t per slice of the keys (royal pieces not
    counted); the WDL is that of the value code (0 a draw, DTM + 1 otherwise: a win when odd)."""
    n_tasks = out.shape[0]
    per = (keys.shape[0] + n_tasks - 1) // n_tasks
    for t in prange(n_tasks):
        for i in range(t * per, min(keys.shape[0], (t + 1) * per)):
            board, hand = decode_key(rules, keys[i])
            on_board = 0
            for c in range(N_CELLS):
                p = cell_at(board, hand, c) & PIECE_MASK
                if p != 0 and p != rules[ROYAL]:
                    on_board += 1
            in_hand = 0
            for k in range(2 * rules[N_SLOTS]):
                in_hand += (hand >> rules[COUNT_SHIFT + k]) & rules[COUNT_FIELD + k]
            code = np.int64(values[i])
            w = 1 if code == 0 else (2 if (code - 1) % 2 == 1 else 0)
            out[t, on_board, in_hand, w] += 1


@dataclass
class Stats:
    """Counts of a tablebase.

    Attributes
    ----------
    metadata : Metadata
    dtm_wins, dtm_losses : numpy.ndarray of int64, shape (max DTM + 1,)
        Stored positions per DTM (plies).
    material : numpy.ndarray of int64, shape (m + 1, m + 1, 3)
        Stored positions by pieces on the board (royal pieces not counted), pieces in hand, and
        WDL (index 0 loss, 1 draw, 2 win); m is the army's number of pieces besides the royals.
    longest : list of (Position, int)
        The longest wins, with their DTM in plies.
    jh85 : Jh85Counts or None
        With positions without a move, the counts as jh85/dobutsushogi's solver makes them
        (:mod:`~dobutsu_tb.analysis.no_moves`); None without them (the counts above are its).
    """

    metadata: Metadata
    dtm_wins: np.ndarray
    dtm_losses: np.ndarray
    material: np.ndarray
    longest: list
    jh85: Jh85Counts | None = None

    def text(self) -> str:
        """The tables, for people."""
        m = self.metadata
        n = m.nonterminal
        out = [f"start position {m.start}",
               f"{'reachable positions':<28}{m.reachable:>14,}",
               f"{'  catch-terminal (win in 1)':<28}{m.catch_terminal:>14,}",
               f"{'  try-terminal (loss in 0)':<28}{m.try_terminal:>14,}",
               f"{'  non-terminal (stored)':<28}{n:>14,}"]
        for name, count in (("wins", m.wins), ("draws", m.draws), ("losses", m.losses)):
            out.append(f"{'    ' + name:<28}{count:>14,}  {100 * count / max(n, 1):6.2f} %")
        reachable = max(m.reachable, 1)
        out += ["", "all reachable positions, terminal ones included (jh85's convention:",
                "a catch-terminal position is a win for the side to move, a try-terminal one a loss):"]
        for name, count in (("wins", m.wins + m.catch_terminal), ("draws", m.draws),
                            ("losses", m.losses + m.try_terminal)):
            out.append(f"{'    ' + name:<28}{count:>14,}  {100 * count / reachable:6.2f} %")
        if self.jh85 is not None:
            j = self.jh85
            hinge = counted(len(j.changes) - len(j.no_moves), "value")
            out += [f"  jh85's solver leaves the {counted(len(j.no_moves), 'position')} without a move undecided "
                    f"(draws), and {hinge}", "  hinge on them; its counts:"]
            for name, count in (("wins", j.wins), ("draws", j.draws), ("losses", j.losses)):
                out.append(f"{'    ' + name:<28}{count:>14,}  {100 * count / reachable:6.2f} %")
        out += ["", "positions per DTM (plies):", f"{'DTM':>5}{'wins':>14}{'losses':>14}"]
        top = max(len(self.dtm_wins), len(self.dtm_losses))
        wins = np.pad(self.dtm_wins, (0, top - len(self.dtm_wins)))
        losses = np.pad(self.dtm_losses, (0, top - len(self.dtm_losses)))
        for d in range(top):
            if wins[d] or losses[d]:
                out.append(f"{d:>5}{wins[d]:>14,}{losses[d]:>14,}")
        royal = _plural(m.variant.royal.name)
        out += ["", f"by material (pieces other than the {royal}):",
                f"{'on board':>9}{'in hand':>9}{'positions':>14}{'wins':>13}{'draws':>12}{'losses':>13}"]
        for b in range(self.material.shape[0]):
            for h in range(self.material.shape[1]):
                loss, draw, win = self.material[b, h]
                if loss + draw + win:
                    out.append(f"{b:>9}{h:>9}{loss + draw + win:>14,}{win:>13,}{draw:>12,}{loss:>13,}")
        out += ["", "longest wins:"]
        out += [f"  win in {counted(d, 'ply', 'plies')}: {p.text()}" for p, d in self.longest]
        return "\n".join(out)

    def plot(self, path) -> Path:
        """Draw positions per DTM (wins and losses, log scale) into a PNG file (written to a
        temporary name in its folder, then renamed)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
        try:
            for counts, label, colour in ((self.dtm_wins, "wins", "#2e7d32"),
                                          (self.dtm_losses, "losses", "#c62828")):
                d = np.flatnonzero(counts)
                ax.plot(d, counts[d], marker="o", markersize=3, linewidth=1, label=label, color=colour)
            ax.set_yscale("log")
            ax.set_xlabel("DTM (plies to the end of the game with best play)")
            ax.set_ylabel("positions")
            ax.set_title(f"{self.metadata.variant.title}: tablebase from {self.metadata.start}: "
                         f"{self.metadata.nonterminal:,} non-terminal positions")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
            path = write_atomically(path, lambda tmp: fig.savefig(tmp, bbox_inches="tight", format="png"))
        finally:
            plt.close(fig)
        return path


def _plural(name: str) -> str:
    return name + "s"


def _longest_wins(values: np.ndarray, per_code: np.ndarray, k: int) -> list:
    """Indices of the ``k`` wins with the highest value codes (longest DTM first, then by index),
    found in slices of ``values``."""
    win_codes = [c for c in range(per_code.shape[0] - 1, 0, -1) if per_code[c] and (c - 1) % 2 == 1]
    taken, least = 0, None
    for c in win_codes:  # the least code among the k longest wins
        if taken >= k:
            break
        taken += int(per_code[c])
        least = c
    if least is None or k <= 0:
        return []
    found = []
    for lo in range(0, values.shape[0], HISTOGRAM_STEP):
        part = values[lo:lo + HISTOGRAM_STEP].astype(np.int64)
        hit = np.flatnonzero((part >= least) & ((part - 1) % 2 == 1))
        found.append(hit + lo)
    idx = np.concatenate(found)
    order = np.argsort(-values[idx].astype(np.int64), kind="stable")
    return idx[order[:k]].tolist()


def tablebase_stats(path, longest: int = 10) -> Stats:
    """Count what a tablebase file holds.

    Parameters
    ----------
    path : str or Path
    longest : int, optional
        How many of the longest wins to list.

    Returns
    -------
    Stats

    Raises
    ------
    dobutsu_tb.tablebase.schema.TablebaseFileError
        If the file is missing, damaged or not a tablebase.
    """
    with TablebaseFile(path) as f:
        meta = f.metadata
        keys, values = f.read_all()
    per_code = code_histogram(values)  # no whole-file temporaries: the 5x3 file has 1.44 G values
    per_dtm = per_code[1:]
    odd = np.arange(per_dtm.shape[0]) % 2 == 1
    wins, losses = np.trim_zeros(per_dtm * odd, "b"), np.trim_zeros(per_dtm * ~odd, "b")
    wins = wins if wins.shape[0] else np.zeros(1, np.int64)
    losses = losses if losses.shape[0] else np.zeros(1, np.int64)
    game = game_of(meta.variant)
    most = sum(meta.variant.army.values()) - 2
    table = np.zeros((max(1, config.THREADS), most + 1, most + 1, 3), np.int64)
    game.jitted(sys.modules[__name__])._material_table(game.rules_array, keys, values, table)
    best = [(Position.from_key(int(keys[i]), meta.variant), int(values[i]) - 1)
            for i in _longest_wins(values, per_code, longest)]
    jh85 = None
    if meta.no_moves:
        with open_tablebase(path) as tb:
            jh85 = jh85_counts(tb, no_move_keys(keys, values))
    return Stats(meta, wins, losses, table.sum(axis=0), best, jh85)
