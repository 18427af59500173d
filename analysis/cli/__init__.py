"""The ``dobutsu-tb`` command line, one module per command group.

Results go to stdout (text, or ``--json``); progress and logs to stderr. Exit codes: 0 success,
1 an expected error (bad position, missing or corrupt file, ...; one line, no traceback),
2 a usage error.
"""

from __future__ import annotations

import sys

import click

from dobutsu_tb.analysis.cli import checks, puzzles, serve, tables
from dobutsu_tb.analysis.cli.common import ErrorHandlingGroup


@click.group(cls=ErrorHandlingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dobutsu-tablebase")
def main():
    """Build and probe the dobutsu shogi endgame tablebase.

    Positions are written as in SPEC §1.6, e.g. the start position S/gle/-c-/-C-/ELG/-
    (side to move, ranks 1 to 4 from files a to c, pieces in hand; upper case Sente).
    """


for command in (tables.build, tables.probe, tables.show, tables.line, checks.verify_line_cmd, checks.verify,
                checks.stats, puzzles.puzzle, serve.serve):
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
