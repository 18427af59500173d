"""The ``uci`` command: the tablebase as a UCI engine (Fairy-Stockfish's dialect) on stdin and stdout."""

from __future__ import annotations

import sys

import click

from dobutsu_tb.analysis.cli.common import tb_option


@click.command()
@tb_option
@click.option("--in-memory/--chunked", default=False, show_default=True,
              help="Read the whole tablebase into memory at start (seconds and about 1 GiB for the full one), or "
                   "read it a chunk at a time (the default: starts at once, little memory).")
def uci(tb_path, in_memory):
    """Play perfect dobutsu shogi as a UCI engine, for GUIs and match tools.

    Speaks UCI on stdin and stdout as Fairy-Stockfish does for its variants: UCI_Variant
    dobutsu, its FEN (gle/1c1/1C1/ELG[-] w 0 1) and move strings (b2b3, a3a4+, C@b3). go is
    answered at once with the exact value (score mate N, or cp 0 for a draw) and a DTM-optimal
    move; MultiPV lists the moves with their values. Errors are 'info string error: ...' lines;
    the engine stays up until quit or the end of input. A missing or damaged file is an error
    before anything is read.
    """
    from dobutsu_tb.analysis.uci import run_engine

    run_engine(tb_path, sys.stdin.buffer, sys.stdout, in_memory=in_memory)
