"""Pictures of positions (matplotlib, PNG): ``dobutsu-tb show POSITION --png FILE``.

The board is drawn as Sente sees it (rank 1 at the top), with coordinates; Sente's pieces point
up in green, Gote's are turned upside down in orange; each side's hand is drawn beside its home
rank, and the title says who is to move.
"""

from __future__ import annotations

from pathlib import Path

from dobutsu_tb.tablebase.game.layout import OPPONENT
from dobutsu_tb.tablebase.game.position import FILE_LETTERS, SIDE_NAMES, Position

COLOURS = {0: "#cde8c4", OPPONENT: "#f6d1a8"}


def _piece(ax, x, y, code, variant, size=0.8):
    from matplotlib.patches import FancyBboxPatch

    side = code & OPPONENT
    kind = variant.pieces[(code & 7) - 1]
    half = size / 2
    ax.add_patch(FancyBboxPatch((x - half, y - half), size, size, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=COLOURS[side], edgecolor="#444444", linewidth=1.5))
    rotation = 180 if side else 0
    sign = -1 if side else 1
    ax.text(x, y + sign * 0.08 * size / 0.8, kind.letter, ha="center", va="center",
            fontsize=26 * size / 0.8, fontweight="bold", rotation=rotation)
    ax.text(x, y - sign * 0.25 * size / 0.8, kind.name.capitalize(), ha="center", va="center",
            fontsize=8 * size / 0.8, rotation=rotation)


def draw_position(position: Position, path, title: str | None = None) -> Path:
    """Draw a position into a PNG file.

    Parameters
    ----------
    position : Position
    path : str or Path
        The PNG file to write (its folder must exist).
    title : str, optional
        A line above the board (e.g. the move just played).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    v = position.variant
    files, ranks = v.files, v.ranks
    slots = v.hand_order
    hand_width = max(files, 0.62 * max(2, sum(v.army.get(s, 0) for s in slots)))
    fig, ax = plt.subplots(figsize=(1.2 * (hand_width + 2), 1.2 * (ranks + 3.5)), dpi=100)
    try:
        ax.set_xlim(-0.6, hand_width + 1.4)
        ax.set_ylim(-1.6, ranks + 1.6)
        ax.set_aspect("equal")
        ax.axis("off")
        for r in range(ranks):
            for f in range(files):
                y = ranks - 1 - r
                ax.add_patch(plt.Rectangle((f, y), 1, 1, facecolor="#fbf3df" if r in (0, ranks - 1) else "#fffaf0",
                                           edgecolor="#8a6d3b", linewidth=1.2))
                code = position.board[files * r + f]
                if code:
                    _piece(ax, f + 0.5, y + 0.5, code, v)
            ax.text(-0.25, ranks - 1 - r + 0.5, str(r + 1), ha="center", va="center", fontsize=12)
        for f, name in enumerate(FILE_LETTERS[:files]):
            ax.text(f + 0.5, ranks + 0.2, name, ha="center", va="center", fontsize=12)
        # Hands: Gote's above the board (its home rank, rank 1), Sente's below.
        for side, y in ((0, -0.85), (1, ranks + 0.85)):
            x = 0.35
            ax.text(hand_width + 0.3, y, SIDE_NAMES[side] + " hand", fontsize=9, ha="left", va="center")
            for slot, letter in enumerate(slots):
                code = 1 + [p.letter for p in v.pieces].index(letter)
                for _ in range(position.hands[len(slots) * side + slot]):
                    _piece(ax, x, y, code | (OPPONENT if side else 0), v, size=0.55)
                    x += 0.62
        heading = f"{SIDE_NAMES[position.turn]} to move"
        ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=11)
        ax.text(files / 2, -1.45, position.text(), ha="center", va="center", fontsize=9, family="monospace")
        path = Path(path)
        fig.savefig(path, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def draw_plies(folder, start: Position, plies) -> None:
    """A picture of ``start`` (``ply000.png``) and of the board after each ply (``plyNNN.png``).

    Parameters
    ----------
    folder : str or Path
        Created if missing.
    start : Position
    plies : iterable of (int, int, str, Position or None)
        (ply, side that moved, move, position after it); no picture where the position is None
        (a lion was captured).

    Raises
    ------
    OSError
        If the folder or a file cannot be written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    draw_position(start, folder / "ply000.png", title="start")
    for ply, side, move, position in plies:
        if position is not None:
            draw_position(position, folder / f"ply{ply:03d}.png", title=f"{ply}. {SIDE_NAMES[side]} {move}")
