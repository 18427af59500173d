"""The dobutsu shogi game: packed states and keys, positions and their text forms, rules, unmoves, notation."""
