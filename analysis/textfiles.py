"""Reading the text files that commands take as input (games, puzzle boards, routes).

Every such file is read whole and decoded strictly: UTF-8 (a leading byte order mark is
allowed), no NUL byte. Anything else raises :class:`InputFileError`, whose one-line message
names the file and where the first bad byte is, instead of a ``UnicodeDecodeError`` deep in a
parser or a NUL byte echoed back in a later message.
"""

from __future__ import annotations

from pathlib import Path

#: Longest piece of input quoted whole in a message.
QUOTE_MAX = 20


class InputFileError(ValueError):
    """Raised for an input file that is not text (not UTF-8, or holding a NUL byte); the message
    names the file."""


def read_text(path) -> str:
    """The text of an input file, decoded strictly.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    str
        The file's text (without a leading byte order mark).

    Raises
    ------
    InputFileError
        If the file is not UTF-8 text or holds a NUL byte (the message gives the line).
    OSError
        If the file cannot be read.
    """
    path = Path(path)
    data = path.read_bytes()
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


def shorten(text: str) -> str:
    """``text`` for a message: cut to :data:`QUOTE_MAX` characters, with ``...`` and its length,
    when longer (a whole line of garbage is not echoed back)."""
    return text if len(text) <= QUOTE_MAX else f"{text[:QUOTE_MAX]}... ({len(text):,} characters)"


def parse_file(path, parse, errors):
    """``parse(read_text(path))``, with the file's name in front of the message of ``parse``'s
    errors.

    Parameters
    ----------
    path : str or Path
    parse : callable
        Takes the text, returns the parsed value.
    errors : type
        The exception class (a ``ValueError``) ``parse`` raises for malformed text; raised again
        with the file's name in front of its message.

    Raises
    ------
    errors
        ``parse``'s, its message starting with the file's name.
    InputFileError
        If the file is not text.
    OSError
        If the file cannot be read.
    """
    text = read_text(path)
    try:
        return parse(text)
    except errors as exc:
        raise errors(f"{path}: {exc}") from None
