"""Lines, statistics, verification and the puzzle solvers."""


class PuzzleInputError(ValueError):
    """Raised for a malformed puzzle file or an impossible start; the message says what is wrong."""
