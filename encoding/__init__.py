"""The generic encoding layer: numba set-up, hash tables, search drivers, bit helpers, tunables. It knows no game."""
