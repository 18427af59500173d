"""The project's one entry point to numba.

Every kernel in the project is compiled through :func:`njit` from this module. It turns numba's
on-disk cache on, but keys the cache directory on a hash of *all* of the project's source files:
numba's own cache only notices changes to the file that defines a kernel, so a cached kernel
that calls a jitted function from another module would otherwise keep running the old callee.
With the directory keyed on every source file, any edit anywhere starts a fresh cache.

The cache lives under ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``; set
``NUMBA_DISABLE_JIT=1`` to run the kernels as plain Python when debugging.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numba

_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("encoding", "tablebase", "analysis")


def _source_digest() -> str:
    h = hashlib.sha256(numba.__version__.encode())
    for package in _PACKAGES:
        for path in sorted((_ROOT / package).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_root() -> str:
    """The project's cache folder: ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``."""
    return os.environ.get("DOBUTSU_TB_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dobutsu-tablebase")


def _cache_dir() -> str:
    return os.path.join(cache_root(), "numba-" + _source_digest())


numba.config.CACHE_DIR = _cache_dir()

#: ``numba.njit`` with the project's cache settings; use as ``@njit`` or ``@njit(parallel=True)``.
njit = functools.partial(numba.njit, cache=True, nogil=True)
prange = numba.prange
