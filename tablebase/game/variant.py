"""Game variants as data: one frozen description from which every table of the game is derived.

A :class:`Variant` holds the board (files and ranks), the piece kinds with their steps, which
kind promotes to which and where, which kinds can be dropped and where, the royal piece, the try
rule, the start position and whether captured pieces go to the captor's hand. The key layout,
move and unmove generation, notation and pictures are all derived from it
(:mod:`~dobutsu_tb.tablebase.game.layout`); ``docs/rules.md`` says what each field means for
play, and ``docs/variants.md`` how to write one.

Variants are read from TOML files: the shipped ones live in this package's ``variants/`` folder,
and a user adds more with ``--variant-file PATH`` (a file or a folder of them)::

    name = "dobutsu"
    title = "Dobutsu shogi (Let's Catch the Lion!)"
    files = 3
    ranks = 4
    start = "S/gle/-c-/-C-/ELG/-"
    hand_order = "CEG"

    [[pieces]]                  # the order of the pieces is the order of the key's codes
    letter = "E"
    name = "elephant"
    steps = ["fl", "fr", "bl", "br"]
    ...

A step is a direction word (``f`` forward, ``b`` backward, ``l`` left, ``r`` right, ``fl``,
``fr``, ``bl``, ``br``) or a ``[file, rank]`` offset as Sente sees it (``rank`` +1 forward,
``file`` +1 to the right): pieces step or leap, none slides. Every error in a file names the
field and the reason (:class:`VariantError`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

#: Direction words of a step, as ``(file, rank)`` offsets for Sente: rank +1 is forward.
DIRECTIONS = {"f": (0, 1), "b": (0, -1), "l": (-1, 0), "r": (1, 0),
              "fl": (-1, 1), "fr": (1, 1), "bl": (-1, -1), "br": (1, -1)}
#: Limits of the kernels' packed state (tablebase/game/layout.py): 4 bits a square, at most 20
#: squares in two int64 words, at most 6 files, 7 piece kinds a side; the hand field at most 16
#: bits (a table of 2**bits entries codes it).
MAX_FILES = 6
MAX_CELLS = 20
MAX_KINDS = 7
MAX_HAND_BITS = 16
#: The folder of the shipped variant files.
SHIPPED_FOLDER = Path(__file__).resolve().parent / "variants"
#: The standard game's name.
STANDARD_NAME = "dobutsu"
#: The largest variant file read (a description is a few KiB).
MAX_FILE_BYTES = 1 << 16

_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_FIELDS = {"name", "title", "description", "files", "ranks", "start", "pieces", "drops", "try_rule", "hand_order"}
_PIECE_FIELDS = {"letter", "name", "steps", "royal", "promotes_to", "promotion_ranks", "drop",
                 "forbidden_drop_ranks"}


class VariantError(ValueError):
    """Raised for a variant description that cannot be used; the message names the field (and the
    file) and says what is wrong."""


@dataclass(frozen=True)
class PieceKind:
    """One kind of piece.

    Attributes
    ----------
    letter : str
        Its letter in our notation, upper case (Sente's; Gote's is the lower case).
    name : str
        Its name, lower case (``"lion"``).
    steps : tuple of (int, int)
        Where it moves, as ``(file, rank)`` offsets for Sente (rank +1 forward, file +1 to the
        right), one step or leap each.
    royal : bool
        Capturing it wins the game (the lion).
    promotes_to : str or None
        The letter of the kind it becomes when it moves into its promotion zone (always).
    promotion_ranks : int
        The promotion zone: the far ``promotion_ranks`` ranks (1: the far rank only).
    drop : bool
        Whether a captured piece of this kind goes to the captor's hand and may be dropped.
    forbidden_drop_ranks : tuple of int
        Ranks it may not be dropped on, counted from the dropping side's far rank (1 = far rank).
    """

    letter: str
    name: str
    steps: tuple
    royal: bool = False
    promotes_to: str | None = None
    promotion_ranks: int = 1
    drop: bool = True
    forbidden_drop_ranks: tuple = ()

    def to_dict(self) -> dict:
        """The kind as plain data (TOML/JSON), defaults included, steps as offsets."""
        return {"letter": self.letter, "name": self.name, "steps": [list(s) for s in self.steps],
                "royal": self.royal, "promotes_to": self.promotes_to or "", "promotion_ranks": self.promotion_ranks,
                "drop": self.drop, "forbidden_drop_ranks": list(self.forbidden_drop_ranks)}


@dataclass(frozen=True)
class Variant:
    """A game variant: the board, the pieces, the rules' options and the start position.

    Attributes
    ----------
    name : str
        Short name (``"dobutsu-5x3"``): lower case letters, digits and hyphens.
    title : str
        One line for people. Neither it nor ``description`` takes part in comparisons: two
        variants of one name and equal rules are equal (``==``) whatever their prose, so that a
        file built before a title changed still takes the positions of the variant as shipped.
    files, ranks : int
        Board size: files ``a``, ``b``, ... from Sente's left; ranks 1 (Gote's home rank, at the
        top) to ``ranks`` (Sente's home rank).
    pieces : tuple of PieceKind
        The kinds, in key order (their Huffman-style codes follow this order: docs/rules.md).
    start : str
        The start position in our notation at this board size (Sente to move usually).
    drops : bool
        Captured pieces go to the captor's hand (as their unpromoted kind) and can be dropped;
        False: they leave the game.
    try_rule : bool
        A royal piece that reaches the far rank wins if it cannot be captured at once.
    hand_order : str
        The letters of the kinds that can be in hand, in the key's order of hand counts.
    description : str
        Longer text: where the variant comes from.

    Raises
    ------
    VariantError
        From :func:`parse_variant`, which is how variants are made; build with it, not directly.
    """

    name: str
    title: str = field(compare=False)
    files: int
    ranks: int
    pieces: tuple
    start: str
    drops: bool = True
    try_rule: bool = True
    hand_order: str = ""
    description: str = field(default="", compare=False)

    # --- derived facts ------------------------------------------------------------------------

    @property
    def cells(self) -> int:
        """Squares on the board."""
        return self.files * self.ranks

    @property
    def size(self) -> str:
        """``"3 files x 4 ranks"``: the board's size for people (files first, as everywhere)."""
        return board_size(self.files, self.ranks)

    def kind(self, letter: str) -> PieceKind:
        """The kind with this (upper case) letter.

        Raises
        ------
        KeyError
            If there is none.
        """
        for p in self.pieces:
            if p.letter == letter:
                return p
        raise KeyError(letter)

    @cached_property
    def royal(self) -> PieceKind:
        """The royal kind (exactly one: checked when parsed)."""
        return next(p for p in self.pieces if p.royal)

    @cached_property
    def base_of(self) -> dict:
        """Letter -> the letter of the unpromoted kind it counts as (itself if not promoted)."""
        out = {p.letter: p.letter for p in self.pieces}
        for p in self.pieces:
            if p.promotes_to:
                out[p.promotes_to] = p.letter
        return out

    @cached_property
    def army(self) -> dict:
        """Unpromoted letter -> how many pieces of it the start position holds (both sides, board and
        hands, promoted ones counted as their base): the most any position of the variant holds."""
        from dobutsu_tb.tablebase.game.text import parse_position_text

        board, hands, _ = parse_position_text(self, self.start)
        counts = {p.letter: 0 for p in self.pieces if self.base_of[p.letter] == p.letter}
        for letter in board:
            if letter:
                counts[self.base_of[letter.upper()]] += 1
        for side in hands:
            for letter, n in side.items():
                counts[letter] += n
        return counts

    @cached_property
    def mirror_symmetric(self) -> bool:
        """Whether every kind's steps are the same mirrored (files reversed): then a position and its
        mirror image have the same value, and the tablebase stores one of the two."""
        return all(set(p.steps) == {(-f, r) for f, r in p.steps} for p in self.pieces)

    @cached_property
    def canonical_json(self) -> str:
        """:meth:`to_json`, made once: two variants with equal rules have equal texts (what
        :func:`~dobutsu_tb.tablebase.game.game.game_of` tells variants apart by)."""
        return self.to_json()

    @cached_property
    def rules_json(self) -> str:
        """:meth:`to_json` less the name, title and description: two variants with equal texts
        are the same game under any names (what tells whether a variant is a shipped one)."""
        rules = {k: v for k, v in self.to_dict().items() if k not in ("name", "title", "description")}
        return json.dumps(rules, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @cached_property
    def digest(self) -> str:
        """A hash of the description (16 hex digits): two variants with equal rules have equal digests."""
        import hashlib  # (here: probing never needs a digest, and hashlib takes milliseconds to import)

        return hashlib.sha256(self.canonical_json.encode()).hexdigest()[:16]

    # --- plain data ---------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The description as plain data: what a TOML file holds, defaults included."""
        return {"name": self.name, "title": self.title, "description": self.description, "files": self.files,
                "ranks": self.ranks, "start": self.start, "drops": self.drops, "try_rule": self.try_rule,
                "hand_order": self.hand_order, "pieces": [p.to_dict() for p in self.pieces]}

    def to_json(self) -> str:
        """The description as canonical JSON (sorted keys, no spaces): what a tablebase file records."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def to_toml(self) -> str:
        """The description as a TOML file's text (what :func:`load_variant_file` reads back)."""
        def value(v):
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, str):
                return json.dumps(v, ensure_ascii=False)
            if isinstance(v, list):
                return "[" + ", ".join(value(x) for x in v) + "]"
            return str(v)

        d = self.to_dict()
        lines = [f"{k} = {value(d[k])}" for k in ("name", "title", "description", "files", "ranks", "start",
                                                    "drops", "try_rule", "hand_order")]
        for p in d["pieces"]:
            lines += ["", "[[pieces]]"] + [f"{k} = {value(v)}" for k, v in p.items()]
        return "\n".join(lines) + "\n"

    @property
    def fairy_name(self) -> str:
        """The name of a shipped variant in Fairy-Stockfish's style (its ``UCI_Variant``):
        ``dobutsu`` for the standard game; for others the name without hyphens (the name a
        ``variants.ini`` section defining it carries: tests/data/fairy-variants.ini). Only a
        variant whose rules are a shipped one's may be offered under it: see
        :func:`shipped_twin` and ``analysis/uci.py``."""
        return self.name.replace("-", "")

    def __repr__(self) -> str:
        return f"<Variant {self.name}: {self.files}x{self.ranks}, {''.join(p.letter for p in self.pieces)}>"


def board_size(files: int, ranks: int) -> str:
    """A board's size as every message writes it: ``"3 files x 5 ranks"`` (a bare ``3x5`` reads
    either way round, and the 5x3 game's name counts its ranks first)."""
    return f"{files} file{'s' if files != 1 else ''} x {ranks} rank{'s' if ranks != 1 else ''}"


# --- parsing -----------------------------------------------------------------------------------


def _fail(where: str, message: str):
    raise VariantError(f"{where}: {message}")


def _text(data: dict, key: str, default: str, allowed: str) -> str:
    """A text field for people (``title``, ``description``): printed as it is, so without control
    or format characters (a NUL, a newline in a title, a right-to-left override), ``allowed`` apart."""
    value = _typed(data, key, str, "", default=default)
    unprintable = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")  # controls, formats, surrogates, private use, separators
    bad = next((ch for ch in value if ch not in allowed and unicodedata.category(ch) in unprintable), None)
    if bad is not None:
        _fail(key, f"holds the control character U+{ord(bad):04X}; write plain text")
    return value


def _typed(data: dict, key: str, kind, where: str, default=None, required: bool = False):
    if key not in data:
        if required:
            _fail(f"{where}.{key}" if where else key, "this field is missing")
        return default
    value = data[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        _fail(f"{where}.{key}" if where else key, f"must be an integer, got {value!r}")
    if kind is not int and not isinstance(value, kind):
        names = {str: "a string", bool: "true or false", list: "a list", dict: "a table"}
        _fail(f"{where}.{key}" if where else key, f"must be {names.get(kind, kind.__name__)}, got {value!r}")
    return value


def _steps(raw, where: str, files: int, ranks: int) -> tuple:
    if not isinstance(raw, list):
        _fail(where, f"must be a list of steps, got {raw!r}")
    out = []
    for k, step in enumerate(raw):
        here = f"{where}[{k}]"
        if isinstance(step, str):
            if step not in DIRECTIONS:
                _fail(here, f"unknown direction {step!r} (use f b l r fl fr bl br, or [file, rank])")
            offset = DIRECTIONS[step]
        elif (isinstance(step, list) and len(step) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) for x in step)):
            offset = (step[0], step[1])
        else:
            _fail(here, f"a step is a direction word or [file, rank], got {step!r}")
        if offset == (0, 0):
            _fail(here, "a step of [0, 0] goes nowhere")
        if abs(offset[0]) >= files or abs(offset[1]) >= ranks:
            _fail(here, f"the step {list(offset)} leaves every square of a board of {board_size(files, ranks)}")
        if offset in out:
            _fail(here, f"the step {list(offset)} is listed twice")
        out.append(offset)
    return tuple(out)


def _piece(raw, k: int, files: int, ranks: int) -> PieceKind:
    where = f"pieces[{k}]"
    if not isinstance(raw, dict):
        _fail(where, f"must be a table ([[pieces]]), got {raw!r}")
    unknown = sorted(set(raw) - _PIECE_FIELDS)
    if unknown:
        _fail(f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(_PIECE_FIELDS))})")
    letter = _typed(raw, "letter", str, where, required=True)
    if not re.fullmatch(r"[A-Z]", letter):
        _fail(f"{where}.letter", f"must be one upper case letter A-Z, got {letter!r}")
    where = f"pieces[{k}] ({letter})"
    name = _typed(raw, "name", str, where, required=True)
    if not re.fullmatch(r"[a-z][a-z -]{0,23}", name):
        _fail(f"{where}.name", f"must be a lower case word of at most 24 letters, got {name!r}")
    steps = _steps(_typed(raw, "steps", list, where, required=True), f"{where}.steps", files, ranks)
    promotion_ranks = _typed(raw, "promotion_ranks", int, where, default=1)
    if not 1 <= promotion_ranks < ranks:
        _fail(f"{where}.promotion_ranks", f"must be 1 to {ranks - 1} (the far ranks), got {promotion_ranks}")
    forbidden = _typed(raw, "forbidden_drop_ranks", list, where, default=[])
    for r in forbidden:
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= ranks:
            _fail(f"{where}.forbidden_drop_ranks", f"ranks are 1 (the far rank) to {ranks}, got {r!r}")
    if len(set(forbidden)) == ranks:
        _fail(f"{where}.forbidden_drop_ranks", "forbids every rank: set drop = false instead")
    promotes_to = _typed(raw, "promotes_to", str, where, default="") or None
    return PieceKind(letter=letter, name=name, steps=steps, royal=_typed(raw, "royal", bool, where, default=False),
                     promotes_to=promotes_to, promotion_ranks=promotion_ranks,
                     drop=_typed(raw, "drop", bool, where, default=True),
                     forbidden_drop_ranks=tuple(sorted(set(forbidden))))


def parse_variant(data: dict, source: str = "variant") -> Variant:
    """A variant from plain data (a parsed TOML file, or :meth:`Variant.to_dict`), fully checked.

    Parameters
    ----------
    data : dict
        The fields of the module docstring.
    source : str, optional
        Where the data comes from (a file name), for error messages.

    Returns
    -------
    Variant

    Raises
    ------
    VariantError
        Naming the field and the reason: an unknown or missing field, a board too big for the
        kernels, an unknown piece letter, a step off every board, not exactly one royal piece, a
        start position that does not fit the board, a key wider than 64 bits, ...
    """
    try:
        return _parse(data)
    except VariantError as exc:
        raise VariantError(f"{source}: {exc}") from None


def _parse(data: dict) -> Variant:
    if not isinstance(data, dict):
        _fail("variant", "must be a table of fields")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        _fail(unknown[0], f"unknown field (known: {', '.join(sorted(_FIELDS))})")
    name = _typed(data, "name", str, "", required=True)
    if not _NAME.fullmatch(name):
        _fail("name", f"must be 1 to 40 lower case letters, digits or hyphens, got {name!r}")
    files = _typed(data, "files", int, "", required=True)
    ranks = _typed(data, "ranks", int, "", required=True)
    if not 1 <= files <= MAX_FILES:
        _fail("files", f"must be 1 to {MAX_FILES}, got {files}")
    if ranks < 2:
        _fail("ranks", f"must be at least 2, got {ranks}")
    if files * ranks > MAX_CELLS:
        _fail("ranks", f"a board of {board_size(files, ranks)} has {files * ranks} squares; the kernels hold at most "
                       f"{MAX_CELLS}")
    raw_pieces = _typed(data, "pieces", list, "", required=True)
    if not 1 <= len(raw_pieces) <= MAX_KINDS:
        _fail("pieces", f"1 to {MAX_KINDS} kinds of piece, got {len(raw_pieces)}")
    pieces = tuple(_piece(p, k, files, ranks) for k, p in enumerate(raw_pieces))
    _check_pieces(pieces)
    drops = _typed(data, "drops", bool, "", default=True)
    promoted = {p.promotes_to for p in pieces if p.promotes_to}
    droppable = [p.letter for p in pieces if drops and p.drop and not p.royal and p.letter not in promoted]
    hand_order = _typed(data, "hand_order", str, "", default="".join(droppable))
    if sorted(hand_order) != sorted(droppable):
        _fail("hand_order", f"must list each kind that can be dropped once ({''.join(droppable) or 'none'}), "
                            f"got {hand_order!r}")
    variant = Variant(name=name, title=_text(data, "title", name, "\t"), files=files, ranks=ranks,
                      pieces=pieces, start=_typed(data, "start", str, "", required=True), drops=drops,
                      try_rule=_typed(data, "try_rule", bool, "", default=True), hand_order=hand_order,
                      description=_text(data, "description", "", "\t\n"))
    variant = replace(variant, pieces=tuple(replace(p, drop=p.letter in droppable) for p in pieces))
    _check_start(variant)
    from dobutsu_tb.tablebase.game.layout import check_layout

    check_layout(variant)
    return variant


def _check_pieces(pieces: tuple) -> None:
    letters = [p.letter for p in pieces]
    for k, p in enumerate(pieces):
        if letters.index(p.letter) != k:
            _fail(f"pieces[{k}].letter", f"the letter {p.letter!r} is used twice")
        if [q.name for q in pieces].index(p.name) != k:
            _fail(f"pieces[{k}].name", f"the name {p.name!r} is used twice")
    royal = [p.letter for p in pieces if p.royal]
    if len(royal) != 1:
        _fail("pieces", f"exactly one kind must be royal (royal = true), got {len(royal)}"
                        + (f": {', '.join(royal)}" if royal else ""))
    targets = {}
    for k, p in enumerate(pieces):
        where = f"pieces[{k}] ({p.letter}).promotes_to"
        if p.promotes_to is None:
            continue
        if p.promotes_to not in letters:
            _fail(where, f"unknown piece {p.promotes_to!r}")
        if p.promotes_to == p.letter:
            _fail(where, "a kind cannot promote to itself")
        if p.royal or pieces[letters.index(p.promotes_to)].royal:
            _fail(where, "the royal piece neither promotes nor is a promotion")
        if p.promotes_to in targets:
            _fail(where, f"{p.promotes_to} is already the promotion of {targets[p.promotes_to]}")
        targets[p.promotes_to] = p.letter
    for k, p in enumerate(pieces):
        if p.letter in targets and p.promotes_to:
            _fail(f"pieces[{k}] ({p.letter}).promotes_to", "a promoted kind does not promote again")


def _check_start(variant: Variant) -> None:
    from dobutsu_tb.tablebase.game.text import parse_position_text

    try:
        board, hands, _ = parse_position_text(variant, variant.start)
    except ValueError as exc:
        _fail("start", str(exc))
    royal = variant.royal.letter
    for side, letter in (("Sente", royal), ("Gote", royal.lower())):
        if board.count(letter) != 1:
            _fail("start", f"{side} needs exactly one {variant.royal.name} ({letter}) on the board, "
                           f"got {board.count(letter)}")


# --- files and the registry --------------------------------------------------------------------


def load_variant_file(path, regular_only: bool = False) -> Variant:
    """Read one variant from a TOML file (UTF-8, a byte order mark allowed).

    Parameters
    ----------
    path : str or Path
    regular_only : bool, optional
        Refuse what is not a regular file (a named pipe, a device, a socket) instead of reading
        it, without waiting for a pipe's writer: how the files of a folder are read. A file
        named alone is read whatever it is (a pipe waits for its writer, as any reader would).

    Raises
    ------
    VariantError
        If the file cannot be read, is not TOML, is larger than :data:`MAX_FILE_BYTES`, or holds an
        unusable description (the message names the file and the field); with ``regular_only``,
        if it is not a regular file.
    """
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    path = Path(path)
    try:
        raw = _read_bytes(path, regular_only)
    except OSError as exc:
        raise VariantError(f"{path}: cannot read the variant file ({exc.strerror or exc})") from None
    if isinstance(raw, str):
        raise VariantError(f"{path}: {raw}, not a variant file; the variant files of a folder are regular files")
    if len(raw) > MAX_FILE_BYTES:
        raise VariantError(f"{path}: a variant file is at most {MAX_FILE_BYTES:,} bytes")
    try:
        data = tomllib.loads(raw.decode("utf-8").removeprefix("\ufeff"))  # (a byte order mark, as Notepad writes)
    except UnicodeDecodeError:
        raise VariantError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise VariantError(f"{path}: not a TOML file ({exc})") from None
    except RecursionError:  # arrays or tables nested hundreds deep: tomllib recurses per level
        raise VariantError(f"{path}: not a variant file (its arrays or tables are nested too deep)") from None
    return parse_variant(data, str(path))


def _read_bytes(path: Path, regular_only: bool) -> bytes | str:
    """The first :data:`MAX_FILE_BYTES` + 1 bytes of a file; with ``regular_only``, what it is
    instead when it is not a regular file (``"a folder"``, ``"a named pipe"``, ...). It is then
    opened without blocking, so that a named pipe is refused at once, not waited on (for a regular
    file the flag changes nothing), and checked once open (no other file can take its place)."""
    import os
    import stat

    if not regular_only:
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))
            return next((name for test, name in kinds if test(mode)), "a device")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


def load_variants(path) -> list[Variant]:
    """The variants of a TOML file, or of every ``*.toml`` file of a folder (sorted by file name).

    Raises
    ------
    VariantError
        If the path does not exist, a folder holds no ``*.toml`` file, or a file is bad (in a
        folder, also one that is not a regular file: a named pipe is refused, never waited on);
        or if two of the files define the same name.
    """
    import os

    path = Path(path)
    folder = path.is_dir()
    if folder:
        files = sorted(path.glob("*.toml"))
        if not files:
            raise VariantError(f"{path}: the folder holds no *.toml variant file")
    elif os.path.lexists(path):  # (a link to nowhere or in a loop: reading it says which)
        files = [path]
    else:
        raise VariantError(f"{path}: no such variant file or folder")
    out: list[Variant] = []
    for f in files:
        v = load_variant_file(f, regular_only=folder)
        if any(o.name == v.name for o in out):
            raise VariantError(f"{f}: the variant name {v.name!r} is defined twice")
        out.append(v)
    return out


_SHIPPED: dict | None = None
_LOADED: dict = {}


def shipped_variants() -> dict:
    """The variants shipped with the project, by name (the standard game first, then by name)."""
    global _SHIPPED
    if _SHIPPED is None:
        found = sorted(load_variants(SHIPPED_FOLDER), key=lambda v: (v.name != STANDARD_NAME, v.name))
        if _STANDARD and found[0].name == STANDARD_NAME and found[0] == _STANDARD[0]:
            found[0] = _STANDARD[0]  # the object standard_variant() gave before: one object per variant
        _SHIPPED = {v.name: v for v in found}
    return dict(_SHIPPED)


_STANDARD: list = []


def standard_variant() -> Variant:
    """Dobutsu shogi itself (the variant ``dobutsu``): its file alone is read, once (the other
    shipped variants are read when first asked for)."""
    if _SHIPPED is not None:
        return _SHIPPED[STANDARD_NAME]
    if not _STANDARD:
        v = load_variant_file(SHIPPED_FOLDER / f"{STANDARD_NAME}.toml")
        if not _STANDARD:  # (reading it may have asked for it already: the layout's defaults)
            _STANDARD.append(v)
    return _STANDARD[0]


def add_variants(path) -> list[Variant]:
    """Load the variants of a TOML file or folder (:func:`load_variants`) so that
    :func:`get_variant` finds them by name; returns them.

    Raises
    ------
    VariantError
        As :func:`load_variants`, or if a name is already a shipped variant's with other rules.
    """
    found = load_variants(path)
    shipped = shipped_variants()
    for v in found:
        if v.name in shipped and shipped[v.name] != v:  # (equal rules, other prose: the same variant)
            raise VariantError(f"{path}: the variant {v.name!r} is a shipped variant's name; choose another")
    for v in found:
        _LOADED[v.name] = v
    return found


def get_variant(name: str) -> Variant:
    """A shipped or loaded variant by name.

    Raises
    ------
    VariantError
        If there is no such variant (the message lists the known ones).
    """
    known = {**shipped_variants(), **_LOADED}
    if name not in known:
        raise VariantError(f"unknown variant {name!r} (known: {', '.join(known)}; "
                           f"add one with --variant-file PATH)")
    return known[name]


def shipped_twin(variant: Variant) -> Variant | None:
    """The shipped variant whose rules are ``variant``'s (:attr:`Variant.rules_json`: whatever the
    names and prose), or None."""
    return next((v for v in shipped_variants().values() if v.rules_json == variant.rules_json), None)


def known_variants() -> dict:
    """Every shipped and loaded variant, by name."""
    return {**shipped_variants(), **_LOADED}


def variant_from_json(text: str, source: str = "variant") -> Variant:
    """The variant of :meth:`Variant.to_json`'s text (what a tablebase file records).

    Raises
    ------
    VariantError
        If the text is not such a description.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise VariantError(f"{source}: not a JSON variant description") from None
    return parse_variant(data, source)


__all__ = ["PieceKind", "Variant", "VariantError", "parse_variant", "load_variant_file", "load_variants",
           "shipped_variants", "standard_variant", "add_variants", "get_variant", "known_variants",
           "variant_from_json", "shipped_twin", "board_size"]
