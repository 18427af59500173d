"""Reading the text files that commands take as input (games, puzzle boards, routes).

Every such file is read whole, up to a size limit checked while reading (:data:`MAX_GAMES_BYTES`,
:data:`MAX_PUZZLE_BYTES`: ``/dev/zero`` is an error at once, not a machine out of memory), and
decoded strictly: UTF-8 (a leading byte order mark is allowed), no NUL byte. Anything else
raises :class:`InputFileError`, whose one-line message names the file and what is wrong (a
folder, no such file, too large, where the first bad byte is), instead of a
``UnicodeDecodeError`` deep in a parser or a NUL byte echoed back in a later message.
"""

from __future__ import annotations

from pathlib import Path

#: Longest piece of input quoted whole in a message.
QUOTE_MAX = 20
#: Largest file of games ``verify-line --file`` reads, in bytes: about 4.5 million plies (judging
#: them takes a few GiB of memory).
MAX_GAMES_BYTES = 32 << 20
#: Largest puzzle file (a board, a Room Sweeper problem, routes, an Othello start), in bytes: a
#: 16 x 16 problem with comments takes a few KiB, 62 routes of 1,000 steps 63 KiB.
MAX_PUZZLE_BYTES = 1 << 20


class InputFileError(ValueError):
    """Raised for an input file that is not text (not UTF-8, or holding a NUL byte); the message
    names the file."""


def read_text(path, limit: int = MAX_PUZZLE_BYTES, what: str = "an input file") -> str:
    """The text of an input file, read up to ``limit`` bytes and decoded strictly.

    Parameters
    ----------
    path : str or Path
    limit : int, optional
        Most bytes the file may hold (checked while reading: an endless file stops there).
    what : str, optional
        What the file is, for the message of a file over the limit ("a file of games").

    Returns
    -------
    str
        The file's text (without a leading byte order mark).

    Raises
    ------
    InputFileError
        If the path is a folder or names no file, the file is larger than ``limit``, or it is
        not UTF-8 text or holds a NUL byte (the message gives the line).
    OSError
        If the file cannot be read otherwise (permissions: the system's message).
    """
    path = Path(path)
    if path.is_dir():
        raise InputFileError(f"{path} is a folder, not a file")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    if len(data) > limit:
        raise InputFileError(f"{path}: larger than {limit:,} bytes, the limit for {what}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
                             "save it as UTF-8") from None
    nul = text.find("\0")
    if nul >= 0:
        raise InputFileError(f"{path}: a NUL byte on line {text.count(chr(10), 0, nul) + 1}: not a text file")
    return text


def without_comments(line: str) -> str:
    """A line of an input file without its comment: the text after a ``#``."""
    return line.split("#", 1)[0]


def shorten(text: str) -> str:
    """``text`` for a message: cut to :data:`QUOTE_MAX` characters, with ``...`` and its length,
    when longer (a whole line of garbage is not echoed back)."""
    return text if len(text) <= QUOTE_MAX else f"{text[:QUOTE_MAX]}... ({len(text):,} characters)"


def write_atomically(path, write) -> Path:
    """Write a file through a temporary one in the same folder (``.NAME.PID.partial``), renamed at
    the end: the file is complete or absent (never cut short by a full disk or Ctrl-C), and an
    existing one is only replaced by a complete one.

    Parameters
    ----------
    path : str or Path
        The file to write.
    write : callable
        ``write(tmp)`` writes the whole file at the path ``tmp``.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OSError
        If it cannot be written (``IsADirectoryError`` for a folder of that name).
    """
    import os

    from dobutsu_tb.encoding import interrupt

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    token = interrupt.at_exit(lambda: os.path.exists(tmp) and os.unlink(tmp))  # a process ended by a signal
    try:
        try:
            write(tmp)
            os.replace(tmp, path)
        except OSError as exc:  # named after the file asked for, not the temporary one
            if exc.errno is None:
                raise
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    finally:
        interrupt.forget(token)
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return path
