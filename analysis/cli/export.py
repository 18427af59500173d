"""``dobutsu-tb export``: every stored position, its value and its moves' values, in a Parquet file
(docs/export.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dobutsu_tb.analysis.cli.common import (
    FILE_OUT,
    refuse_inputs,
    resolve_variant,
    tb_option,
    variant_options,
    variant_rules,
)

#: The names an output may end with: Parquet's (a name of another format, ``x.csv``, is a mistake).
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def _filters(ctx, param, values):
    """Click callback: each ``--where`` parsed (a usage error names the bad one)."""
    from dobutsu_tb.tablebase.export import parse_filter

    out = []
    for text in values:
        try:
            out.append(parse_filter(text))
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return tuple(out)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:,} bytes"


@click.command()
@tb_option
@click.option("--out", "out", type=FILE_OUT, default=None, metavar="PATH",
              help="Parquet file to write, named .parquet (default: the tablebase's name with .parquet, in the "
                   "current folder); a file there is replaced once the export is complete.")
@click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
              help="Write N positions drawn uniformly at random without replacement (from those that pass "
                   "--where), in key order.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="S",
              help="The seed of --sample: the same seed, file and options give the same rows.")
@click.option("--where", "filters", multiple=True, metavar="FILTER", callback=_filters,
              help="Keep the positions whose value passes FILTER, FIELD OP VALUE: FIELD wdl (1, 0, -1 or win, draw, "
                   "loss) or dtm (signed plies), OP one of = != < <= > >=; e.g. 'wdl=1', 'dtm>=30'. Repeat it: a "
                   "position must pass all.")
@variant_options
@click.pass_context
def export(ctx, tb_path, out, sample, seed, filters, variant, variant_file):
    """Write every stored position of the tablebase, its value and its moves' values to a Parquet
    file: perfect play as data (docs/export.md).

    One row per stored position (the non-terminal positions reachable from the file's start),
    normalised: Sente to move. Columns: position (our notation), fen (Fairy-Stockfish's), wdl
    and dtm (the side to move's value, signed plies), moves (every legal move in UCI notation,
    best first), move_dtm (each move's value for its player), best_moves (those that keep the
    position's value), key. The file's key-value metadata says the same. The file's variant is
    read from it; --variant or --variant-file only check that it is the one expected.

    Needs pyarrow: pip install 'dobutsu-tablebase[data]'.
    """
    from tqdm import tqdm

    from dobutsu_tb.tablebase.export import export_parquet, require_pyarrow
    from dobutsu_tb.tablebase.reader import TablebaseFile

    if ctx.get_parameter_source("seed") is not click.core.ParameterSource.DEFAULT and sample is None:
        raise click.UsageError("--seed goes with --sample", ctx)
    require_pyarrow()
    expected = resolve_variant(variant, variant_file) if variant is not None or variant_file is not None else None
    with TablebaseFile(tb_path) as f:
        theirs = f.metadata.variant
    if expected is not None and variant_rules(theirs) != variant_rules(expected):
        name = theirs.name if theirs.name != expected.name else f"a {expected.name} whose rules differ from the asked"
        raise click.UsageError(f"{tb_path} is a tablebase of {name}, not of {expected.name}: give a tablebase of "
                               f"{expected.name}, or leave out --variant/--variant-file to export the file's own "
                               f"game", ctx)
    out = Path(tb_path.stem + ".parquet") if out is None else out
    refuse_inputs([out], {"the tablebase": tb_path})
    if variant_file is not None:
        files = sorted(Path(variant_file).glob("*.toml")) if Path(variant_file).is_dir() else [Path(variant_file)]
        for path in files:
            refuse_inputs([out], {"a variant file": path})
    if out.suffix and out.suffix.lower() not in PARQUET_SUFFIXES:
        raise click.BadParameter(f"'{out}': the export writes Parquet; name the file .parquet (or have no suffix)",
                                 ctx, param_hint="'--out'")
    with tqdm(desc="export", unit=" pos", unit_scale=True, disable=None, file=sys.stderr) as bar:
        def progress(done, total):
            bar.total = total
            bar.update(done - bar.n)
        report = export_parquet(tb_path, out, filters=filters, sample=sample, seed=seed, progress=progress)
    secs = sum(report.seconds[k] for k in ("read", "select", "rows and write"))
    click.echo(f"{report.path}: {report.rows:,} positions, {_size(report.bytes)} ({secs:.1f} s)")
