"""Pictures of positions (matplotlib, PNG): ``dobutsu-tb show POSITION --png FILE``, and a
picture per ply of a line (``--png-dir``).

The board is drawn as Sente sees it (rank 1 at the top), with coordinates; Sente's pieces point
up in green, Gote's are turned upside down in orange; each side's hand is drawn beside its home
rank, and the title says who is to move. Every picture is written to a temporary file and
renamed, so a picture is complete or absent.
"""

from __future__ import annotations

import re
from pathlib import Path

from dobutsu_tb.analysis.textfiles import write_atomically
from dobutsu_tb.tablebase.game.layout import OPPONENT
from dobutsu_tb.tablebase.game.notation import Move
from dobutsu_tb.tablebase.game.position import FILE_LETTERS, SIDE_NAMES, Position, parse_square

#: Names of the pictures of :func:`draw_plies` (and of their temporary files, left by a process
#: that was killed), and of the folders of one game each.
PLY_PICTURE = re.compile(r"ply\d{3,}\.png|\.ply\d{3,}\.png\.\d+\.partial")
GAME_FOLDER = re.compile(r"game\d+")

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
    """Draw a position into a PNG file (written to a temporary name in its folder, then renamed).

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
    return _draw(position.variant, position.board, position.hands, f"{SIDE_NAMES[position.turn]} to move",
                 position.text(), path, title)


def _draw(variant, board, hands, heading: str, caption: str, path, title: str | None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files, ranks = variant.files, variant.ranks
    slots = variant.hand_order
    hand_width = max(files, 0.62 * max(2, sum(variant.army.get(s, 0) for s in slots)))
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
                code = board[files * r + f]
                if code:
                    _piece(ax, f + 0.5, y + 0.5, code, variant)
            ax.text(-0.25, ranks - 1 - r + 0.5, str(r + 1), ha="center", va="center", fontsize=12)
        for f, name in enumerate(FILE_LETTERS[:files]):
            ax.text(f + 0.5, ranks + 0.2, name, ha="center", va="center", fontsize=12)
        # Hands: Gote's above the board (its home rank, rank 1), Sente's below.
        for side, y in ((0, -0.85), (1, ranks + 0.85)):
            x = 0.35
            ax.text(hand_width + 0.3, y, SIDE_NAMES[side] + " hand", fontsize=9, ha="left", va="center")
            for slot, letter in enumerate(slots):
                code = 1 + [p.letter for p in variant.pieces].index(letter)
                for _ in range(hands[len(slots) * side + slot]):
                    _piece(ax, x, y, code | (OPPONENT if side else 0), variant, size=0.55)
                    x += 0.62
        ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=11)
        ax.text(files / 2, -1.45, caption, ha="center", va="center", fontsize=9, family="monospace")
        write_atomically(path, lambda tmp: fig.savefig(tmp, bbox_inches="tight", format="png"))
    finally:
        plt.close(fig)
    return Path(path)


def captured(position: Position, move: str):
    """The board after ``move`` captures the enemy royal piece in ``position`` (which no Position
    can hold): the captor on the royal piece's square, promoted if the move says so.

    Returns
    -------
    list of int
        One code per square, as :attr:`Position.board`.
    """
    v = position.variant
    board = list(position.board)
    played = Move.from_text(move, v)
    if played.drop:  # pragma: no cover - a capture is always written so
        return board
    src, dst = parse_square(played.from_square, v), parse_square(played.to_square, v)
    piece = board[src]
    if played.promotion:
        promoted = v.pieces[(piece & 7) - 1].promotes_to
        piece = (piece & OPPONENT) | (1 + [p.letter for p in v.pieces].index(promoted))
    board[src], board[dst] = 0, piece
    return board


def pictures_in(folder) -> list[Path]:
    """The pictures of an earlier :func:`draw_plies` in ``folder`` (``plyNNN.png``, also in its
    ``gameN`` folders): only files of those names, nothing else of the folder's."""
    folder = Path(folder)
    found = []
    for place in [folder] + sorted(p for p in _entries(folder) if GAME_FOLDER.fullmatch(p.name) and p.is_dir()):
        found += [p for p in _entries(place) if PLY_PICTURE.fullmatch(p.name) and p.is_file()]
    return found


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def clear_pictures(folder) -> None:
    """Remove the pictures of an earlier :func:`draw_plies` from ``folder`` (:func:`pictures_in`),
    and the ``gameN`` folders that are empty then.

    Raises
    ------
    OSError
        If one cannot be removed.
    """
    folder = Path(folder)
    for path in pictures_in(folder):
        path.unlink()
    for place in _entries(folder):
        if GAME_FOLDER.fullmatch(place.name) and place.is_dir() and not _entries(place):
            place.rmdir()


def draw_plies(folder, start: Position, plies) -> None:
    """A picture of ``start`` (``ply000.png``) and of the board after each ply (``plyNNN.png``),
    the last one included when it captures the lion (the captor on the lion's square). The
    caller removes the pictures of an earlier run first (:func:`clear_pictures`).

    Parameters
    ----------
    folder : str or Path
        Created if missing.
    start : Position
    plies : iterable of (int, int, str, Position or None)
        (ply, side that moved, move, position after it); None where the move captured the lion.

    Raises
    ------
    OSError
        If the folder or a file cannot be written (a file of the folder's name: "File exists").
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    draw_position(start, folder / "ply000.png", title="start")
    before = start
    for ply, side, move, position in plies:
        title = f"{ply}. {SIDE_NAMES[side]} {move}"
        if position is not None:
            draw_position(position, folder / f"ply{ply:03d}.png", title=title)
            before = position
        else:  # the lion is captured: the game's last picture
            _draw(before.variant, captured(before, move), before.hands,
                  f"{SIDE_NAMES[side]} captures the {before.variant.royal.name}", f"after {move}: the game is over",
                  folder / f"ply{ply:03d}.png", title)
