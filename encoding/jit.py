"""The project's one entry point to numba.

Every kernel in the project is compiled through :func:`njit` from this module. It turns numba's
on-disk cache on, but keys the cache directory on a hash of *all* of the project's source files
and of everything else a compiled kernel depends on (the versions of Python, numba, llvmlite and
numpy, and numba's bounds checking and optimisation level): numba's own cache only notices
changes to the file that defines a kernel, so a cached kernel that calls a jitted function from
another module would otherwise keep running the old callee. With the directory keyed on every
source file, any edit anywhere starts a fresh cache.

A cache entry that cannot be loaded never stops a command: it is compiled again. An index that
names a module this process cannot import (numba keeps every signature a function was compiled
for in one index file, so a generic kernel called with a test's types by the test suite lists
those types) is a plain miss; an index or entry that is damaged is a miss with one warning line
on stderr (once per process). The test suite compiles into a cache folder of its own
(``tests/conftest.py``).

Kernels that other code also wants to run *without* numba (the probing path, which must start
fast) are written as plain functions in a numba-free module that lists them in ``__kernels__``;
:func:`jit_kernels` compiles them, wiring each jitted kernel to the jitted versions of the
kernels it calls.

The cache lives under ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``; the
:data:`~dobutsu_tb.encoding.config.KEEP_CACHES` most recently used versions are kept. Set
``NUMBA_DISABLE_JIT=1`` to run the kernels as plain Python when debugging.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import shutil
import sys
import types
from pathlib import Path

import numba
import numpy as np
from numba.core import caching

from dobutsu_tb.encoding.config import KEEP_CACHES

_ROOT = Path(__file__).resolve().parent.parent
#: The project's source folders (each installed as ``dobutsu_tb.<name>``).
SOURCE_FOLDERS = ("encoding", "tablebase", "analysis")


def _compile_settings() -> bytes:
    """What a compiled kernel depends on besides its sources: versions and numba's settings."""
    import llvmlite

    return repr((sys.implementation.cache_tag, sys.version, numba.__version__, llvmlite.__version__,
                 np.__version__, numba.config.BOUNDSCHECK, int(numba.config.OPT),
                 numba.config.DEBUGINFO_DEFAULT)).encode()


def _source_digest() -> str:
    h = hashlib.sha256(_compile_settings())
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
        pass  # a read-only home: kernels are compiled in every process (_TolerantCache)
    return path


numba.config.CACHE_DIR = _cache_dir()

_warned: list[str] = []


def _warn(what: str, exc: BaseException) -> None:
    """One warning line on stderr per process: a cache entry that cannot be used is compiled again."""
    if _warned:
        return
    _warned.append(what)
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    sys.stderr.write(f"warning: the kernel cache in {numba.config.CACHE_DIR} has {what} that cannot be used "
                     f"({reason}); compiling again\n")


class _Unimportable(Exception):
    """An index names a module or class that this process cannot import (another program's)."""


class _IndexUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError) as exc:
            raise _Unimportable(f"{module}.{name}") from exc


class _TolerantIndex(caching.IndexDataCacheFile):
    """numba's index and data files, where an index that cannot be read is an empty one."""

    def _load_index(self):
        try:
            with open(self._index_path, "rb") as f:
                version = pickle.load(f)
                data = f.read()
            if version != self._version:
                return {}
            stamp, overloads = _IndexUnpickler(io.BytesIO(data)).load()
        except FileNotFoundError:
            return {}
        except _Unimportable:
            return {}  # written for another program's types: a miss; saving rewrites the index
        except Exception as exc:  # noqa: BLE001 (a damaged index: any unpickling error)
            _warn("an index", exc)
            return {}
        return overloads if stamp == self._source_stamp and isinstance(overloads, dict) else {}


class _TolerantCache(caching.FunctionCache):
    """numba's per-function cache, where an entry that cannot be loaded or saved is compiled again."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file.__class__ = _TolerantIndex

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # noqa: BLE001 (a damaged or foreign entry: compile it again)
            _warn("an entry", exc)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except Exception as exc:  # noqa: BLE001 (a full disk or a read-only folder: run without caching)
            _warn("a folder", exc)


def _cached(dispatcher):
    """``dispatcher`` with the tolerant on-disk cache (numba's ``enable_caching``, our class)."""
    if not hasattr(dispatcher, "enable_caching"):  # NUMBA_DISABLE_JIT=1: a plain function
        return dispatcher
    try:
        dispatcher._cache = _TolerantCache(dispatcher.py_func)
    except Exception as exc:  # noqa: BLE001 (numba finds no writable folder: no caching)
        _warn("no usable folder", exc)
    return dispatcher


def njit(func=None, **options):
    """``numba.njit`` with the project's cache settings; use as ``@njit`` or ``@njit(parallel=True)``.

    The kernel releases the GIL (``nogil=True``) and is cached on disk in :func:`cache_root`
    (module docstring); ``options`` go to ``numba.njit``.
    """
    options.setdefault("nogil", True)
    if func is None:
        return lambda f: _cached(numba.njit(f, **options))
    return _cached(numba.njit(func, **options))


#: For the callbacks of :func:`~dobutsu_tb.encoding.search.depth_first` (``@njit_callback``):
#: ``njit`` without reference counting. A callback gets its context, a tuple of many arrays,
#: on loan from the driver; with counting, numba would count every member of the tuple up and
#: down around each branch of the callback, which costs more than the search itself. Such a
#: function may not allocate arrays.
njit_callback = functools.partial(njit, _nrt=False)
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
