"""Counts said in words, for every layer's messages (the puzzles' too: they use this layer only)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``counted(1, "ply", "plies")`` is
    ``'1 ply'``, ``counted(2, "position")`` ``'2 positions'``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
