"""The project's one entry point to numba.

Every kernel in the project is compiled through :func:`njit` from this module. It turns numba's
on-disk cache on, but keys the cache directory on a hash of *all* of the project's source files:
numba's own cache only notices changes to the file that defines a kernel, so a cached kernel
that calls a jitted function from another module would otherwise keep running the old callee.
With the directory keyed on every source file, any edit anywhere starts a fresh cache.

Kernels that other code also wants to run *without* numba (the probing path, which must start
fast) are written as plain functions in a numba-free module that lists them in ``__kernels__``;
:func:`jit_kernels` compiles them, wiring each jitted kernel to the jitted versions of the
kernels it calls.

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


def jit_kernels(*modules) -> dict:
    """Compile the plain kernels that ``modules`` list in their ``__kernels__`` tuples.

    Each kernel is copied with a globals dictionary in which every listed kernel (of any of
    ``modules``) is replaced by its jitted version, so a jitted kernel calls jitted kernels, and
    the plain originals stay plain Python (usable without numba). Module-level lists of ints
    (tables kept as lists because plain Python indexes them fastest) become int64 arrays in
    the jitted copies.

    Parameters
    ----------
    *modules : module
        Modules with a ``__kernels__`` tuple of function names, in any order.

    Returns
    -------
    dict of str to numba dispatcher
        The jitted kernels by name (names must be unique across ``modules``).

    Raises
    ------
    ValueError
        If two modules list the same name.
    """
    plain = {}
    for module in modules:
        for name in module.__kernels__:
            if name in plain:
                raise ValueError(f"kernel name {name!r} is listed twice")
            plain[name] = getattr(module, name)
    jitted = {}
    by_identity = {}
    namespaces = []
    for name, func in plain.items():
        namespace = dict(func.__globals__)
        copy = types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__,
                                  func.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = func.__qualname__, func.__module__, func.__doc__
        jitted[name] = njit(copy)
        by_identity[id(func)] = jitted[name]
        namespaces.append(namespace)
    arrays = {}
    for namespace in namespaces:  # globals are looked up when a kernel is first compiled
        for key, value in list(namespace.items()):
            if isinstance(value, types.FunctionType) and id(value) in by_identity:
                namespace[key] = by_identity[id(value)]
            elif isinstance(value, list) and value and all(type(v) is int for v in value[:16]):
                if id(value) not in arrays:
                    arrays[id(value)] = np.asarray(value, np.int64)
                namespace[key] = arrays[id(value)]
    return jitted
