"""The ``dobutsu-tb`` group: its commands, each imported on first use."""

from __future__ import annotations

import importlib

import click

from dobutsu_tb.analysis.cli.common import ErrorHandlingGroup

#: Each command and where it lives (module of this package, attribute): a command's module is
#: imported only when the command runs or help is asked for, so that ``probe`` starts quickly.
COMMANDS = {"build": ("tablebase", "build"), "probe": ("tablebase", "probe"), "show": ("tablebase", "show"),
            "line": ("tablebase", "line"), "verify-line": ("checks", "verify_line_cmd"), "verify": ("checks", "verify"),
            "stats": ("checks", "stats"), "puzzle": ("puzzles", "puzzle"), "serve": ("serve", "serve"),
            "variants": ("tablebase", "variants"), "uci": ("engine", "uci"),
            "export": ("export", "export")}


class LazyGroup(ErrorHandlingGroup):
    """The top-level group: its commands are imported on first use (click's lazy loading)."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        return getattr(importlib.import_module(f"dobutsu_tb.analysis.cli.{module}"), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dobutsu-tablebase")
def main():
    """Build and probe endgame tablebases of dobutsu shogi and its variants.

    \b
    Positions (docs/rules.md §8): the side to move S or G, the ranks from rank 1
    (Gote's side) down, files from a, then the pieces in hand or -; upper case
    Sente's pieces, - an empty square. The start, Sente to move:
      S/gle/-c-/-C-/ELG/-
    after Lb4-a3, Gote to move:
      G/gle/-c-/LC-/E-G/-
    Fairy-Stockfish's FEN is read too: gle/1c1/1C1/ELG[-] w 0 1.
    Moves: Lb4-a3, Cb3xb2, Ca2-a1+, drops C*b2 (or UCI's b1a2, C@b3).
    Values (§7): a position's for its side to move, a move's for its player;
    the signed DTM in plies (+15 wins in 15, -78 loses in 78).
    The tablebase file: --tb FILE, else $DOBUTSU_TB, else dobutsu.h5.
    """
