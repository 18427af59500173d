"""The project's one entry point to numba.

Every kernel in the project is compiled through :func:`njit` from this module. It turns numba's
on-disk cache on, but keys the cache directory on a hash of *all* of the project's source files:
numba's own cache only notices changes to the file that defines a kernel, so a cached kernel
that calls a jitted function from another module would otherwise keep running the old callee.
With the directory keyed on every source file, any edit anywhere starts a fresh cache.

Kernels that depend on a game variant's tables, and those that other code also wants to run
*without* numba (the probing path, which must start fast), are written as plain functions that
their module lists in ``__kernels__``; :func:`bind_jitted` compiles copies of them bound to a
variant's tables, each in a cache folder of that variant's own
(:mod:`~dobutsu_tb.encoding.binding` makes the plain copies).

The cache lives under ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``; the
:data:`~dobutsu_tb.encoding.config.KEEP_CACHES` most recently used versions are kept. Set
``NUMBA_DISABLE_JIT=1`` to run the kernels as plain Python when debugging.
``NUMBA_BOUNDSCHECK=1`` needs a fresh cache folder (``DOBUTSU_TB_CACHE``): numba's cache does not
notice the flag.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import types
from pathlib import Path

import numba
import numpy as np

from dobutsu_tb.encoding.config import KEEP_CACHES

_ROOT = Path(__file__).resolve().parent.parent
#: The project's source folders (each installed as ``dobutsu_tb.<name>``).
SOURCE_FOLDERS = ("encoding", "tablebase", "analysis")


def _source_digest() -> str:
    h = hashlib.sha256(numba.__version__.encode())
    for folder in SOURCE_FOLDERS:
        for path in sorted((_ROOT / folder).rglob("*.py")):
            h.update(str(path.relative_to(_ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_root() -> str:
    """The project's cache folder: ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``."""
    return os.environ.get("DOBUTSU_TB_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dobutsu-tablebase")


def _cache_dir() -> str:
    root = cache_root()
    path = os.path.join(root, "numba-" + _source_digest())
    try:
        os.makedirs(path, exist_ok=True)
        os.utime(path)
        old = sorted((e for e in os.scandir(root) if e.name.startswith("numba-") and e.is_dir()),
                     key=lambda e: e.stat().st_mtime, reverse=True)[KEEP_CACHES:]
        for entry in old:
            shutil.rmtree(entry.path, ignore_errors=True)
    except OSError:
        pass  # a read-only home: numba falls back to compiling without a cache
    return path


numba.config.CACHE_DIR = _cache_dir()

#: ``numba.njit`` with the project's cache settings; use as ``@njit`` or ``@njit(parallel=True)``.
njit = functools.partial(numba.njit, cache=True, nogil=True)
#: For the callbacks of :func:`~dobutsu_tb.encoding.search.depth_first` (``@njit_callback``):
#: ``njit`` without reference counting. A callback gets its context, a tuple of many arrays,
#: on loan from the driver; with counting, numba would count every member of the tuple up and
#: down around each branch of the callback, which costs more than the search itself. Such a
#: function may not allocate arrays.
njit_callback = functools.partial(numba.njit, cache=True, nogil=True, _nrt=False)
prange = numba.prange


def njit_driver(func=None, **options):
    """Decorator for kernels that take jitted callbacks as arguments (the search drivers):
    ``@njit_driver`` or ``@njit_driver(parallel=True)``; ``njit`` without the on-disk cache.

    numba's cache cannot serve such a kernel: the signature holds the callbacks' dispatcher
    types, which never compare equal to those of another process (every run misses), and
    saving an index that already holds other signatures can fail ("underlying object has
    vanished"). So these kernels are compiled once per process; the callbacks they call are
    cached as usual.
    """
    if func is None:
        return lambda f: numba.njit(f, nogil=True, **options)
    return numba.njit(func, nogil=True, **options)


def _as_arrays(value, arrays: dict):
    """A module-level list of ints as an int64 array (numba freezes global arrays into the code)."""
    if isinstance(value, list) and value and all(type(v) is int for v in value[:16]):
        if id(value) not in arrays:
            arrays[id(value)] = np.asarray(value, np.int64)
        return arrays[id(value)]
    return value


def bind_jitted(modules, names: dict | None = None, cache_key: str | None = None,
                known: dict | None = None) -> types.SimpleNamespace:
    """Compile the plain kernels of ``modules`` bound to ``names`` (a game variant's tables).

    Each kernel is copied (:func:`~dobutsu_tb.encoding.binding.copy_kernels`) with the globals
    of ``names`` in place of its module's, and every kernel it calls replaced by that kernel's
    jitted copy; lists of ints among the globals become int64 arrays. Compilation happens on a
    kernel's first call. Its numba options come from
    :func:`~dobutsu_tb.encoding.binding.kernel_options`.

    Parameters
    ----------
    modules : sequence of module
        Modules with a ``__kernels__`` tuple of function names.
    names : dict, optional
        Replacement globals; none by default.
    cache_key : str, optional
        A folder name for the on-disk cache of these copies, unique to ``names`` (a variant's
        name and digest): numba's cache knows a kernel by its source only, so copies bound to
        other tables must never share a folder. Default: the project's cache folder itself,
        for kernels bound to nothing.
    known : dict of int to object, optional
        Kernels jitted before with the same ``names`` and ``cache_key``, by ``id`` of their plain
        original: the new kernels call them. Updated with this call's kernels.

    Returns
    -------
    types.SimpleNamespace
        The jitted kernels by name.

    Raises
    ------
    ValueError
        If two modules list the same name.
    """
    from dobutsu_tb.encoding.binding import copy_kernels

    arrays: dict = {}
    names = {k: _as_arrays(v, arrays) for k, v in (names or {}).items()}
    cache_dir = numba.config.CACHE_DIR
    if cache_key is not None:
        cache_dir = os.path.join(numba.config.CACHE_DIR, cache_key)

    def compile_copy(name, copy):
        saved = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = cache_dir  # read when the dispatcher's cache is made, just below
        try:
            return numba.njit(copy, cache=True, nogil=True, **copy.__jit_options__)
        finally:
            numba.config.CACHE_DIR = saved

    kernels, namespaces = copy_kernels(modules, names, compile_copy, known)
    for namespace in namespaces.values():
        for key, value in list(namespace.items()):
            if key not in names:
                namespace[key] = _as_arrays(value, arrays)
            if value is range and key == "prange":
                namespace[key] = numba.prange
    return types.SimpleNamespace(**kernels)
