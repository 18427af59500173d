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

Kernels that depend on a game variant's tables, and those that other code also wants to run
*without* numba (the probing path, which must start fast), are written as plain functions that
their module lists in ``__kernels__``; :func:`bind_jitted` compiles copies of them bound to a
variant's tables, each in a cache folder of that variant's own
(:mod:`~dobutsu_tb.encoding.binding` makes the plain copies).

The cache lives under ``$DOBUTSU_TB_CACHE`` or ``~/.cache/dobutsu-tablebase``; the
:data:`~dobutsu_tb.encoding.config.KEEP_CACHES` most recently used versions are kept. Set
``NUMBA_DISABLE_JIT=1`` to run the kernels as plain Python when debugging.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import pickle
import re
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
    """The project's cache folder: ``$DOBUTSU_TB_CACHE`` or, when that is unset or empty (as for
    ``$XDG_CACHE_HOME``), ``~/.cache/dobutsu-tablebase``."""
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
        pass  # a read-only home: kernels are compiled in every process, with a warning (_cached)
    return path


numba.config.CACHE_DIR = _cache_dir()

if numba.config.DISABLE_JIT:
    # The kernels as plain Python: their integer arithmetic wraps on purpose, as compiled, where
    # numpy's scalars warn of every overflow.
    import warnings

    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning, r"dobutsu_tb\.")

_warned: list[str] = []
#: Kernels compiled in this process whose cache entry could not be saved.
_unsaved: list[str] = []


def saves_failed() -> bool:
    """Whether a kernel compiled in this process could not be saved in the cache (a full disk, a
    folder made read-only meanwhile)."""
    return bool(_unsaved)


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
    """numba's index and data files, where an index that cannot be read is an empty one, and
    where processes that compile into one folder at once (``tablebase/precompile.py``'s two
    children) do not lose or mix up each other's entries (:meth:`save`)."""

    def save(self, key, data):
        """Save an entry: its data file named by a digest of ``key`` and written first, then the
        index read, changed and written under an exclusive lock. numba numbers an entry's data
        file by the entries its index holds and writes the index first: two processes saving
        kernels of different signatures at once could both take number 1, and one's index name
        the other's code."""
        # (its repr, not its pickle: two processes pickle one signature differently, numba's types
        # carrying state of their process, and the same kernel had two data files)
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        data_name = f"{self._index_name[:-len('.nbi')]}.{digest}.nbc"
        self._save_data(data_name, data)
        with _locked(self._index_path + ".lock"):
            overloads = self._load_index()
            overloads[key] = data_name
            self._save_index(overloads)

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


@contextlib.contextmanager
def _locked(path: str):
    """An exclusive lock on the file ``path`` (made if need be) for the ``with`` block; no lock
    where ``fcntl`` is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class _OwnFolderCacheImpl(caching.CompileResultCacheImpl):
    """numba's cache of compiled kernels, in :func:`cache_root` only: where that folder cannot be
    made, numba's other locators would write beside the sources (the package's ``__pycache__``)
    or into ``~/.cache/numba``, unasked and unseen."""

    _locator_classes = [caching.UserProvidedCacheLocator]


class _TolerantCache(caching.FunctionCache):
    """numba's per-function cache, where an entry that cannot be loaded or saved is compiled again."""

    _impl_class = _OwnFolderCacheImpl

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
            _unsaved.append(str(sig))
            _warn("a folder", exc)


def _cached(dispatcher):
    """``dispatcher`` with the tolerant on-disk cache (numba's ``enable_caching``, our class)."""
    if not hasattr(dispatcher, "enable_caching"):  # NUMBA_DISABLE_JIT=1: a plain function
        return dispatcher
    try:
        dispatcher._cache = _TolerantCache(dispatcher.py_func)
    except Exception:  # noqa: BLE001 (the folder cannot be made or written: no caching)
        dispatcher._cache = _NoFolderCache()
    return dispatcher


class _NoFolderCache(caching.NullCache):
    """No caching, for a cache folder that cannot be made or written: one warning line per
    process, when the first kernel is compiled (a command that fails before compiling shows its
    own error alone)."""

    def save_overload(self, sig, data):
        _unsaved.append(str(sig))
        if not _warned:
            _warned.append("folder")
            sys.stderr.write(f"warning: the kernel cache folder {cache_root()} cannot be written; the kernels are "
                             f"compiled in every run (DOBUTSU_TB_CACHE names another folder)\n")


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


def _as_arrays(value, arrays: dict):
    """A module-level list of ints, or a :class:`~dobutsu_tb.encoding.binding.Grid`, as an int64
    array (numba freezes global arrays into the code)."""
    from dobutsu_tb.encoding.binding import Grid

    if isinstance(value, Grid):
        if id(value) not in arrays:
            arrays[id(value)] = np.asarray(value.rows, np.int64).reshape(value.shape)
        return arrays[id(value)]
    if isinstance(value, list) and value and all(type(v) is int for v in value[:16]):
        if id(value) not in arrays:
            arrays[id(value)] = np.asarray(value, np.int64)
        return arrays[id(value)]
    return value


def bind_jitted(modules, names: dict | None = None, cache_key: str | None = None,
                known: dict | None = None, invariant: str | None = None) -> types.SimpleNamespace:
    """Compile the plain kernels of ``modules`` bound to ``names`` (a game variant's tables).

    Each kernel is copied (:func:`~dobutsu_tb.encoding.binding.copy_kernels`) with the globals
    of ``names`` in place of its module's, and every kernel it calls replaced by that kernel's
    jitted copy; lists of ints and :class:`~dobutsu_tb.encoding.binding.Grid` tables among the
    globals become int64 arrays. Compilation happens on a
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
        other tables must never share a folder. It is also added to each copy's qualified name,
        from which numba names its compiled code (see ``compile_copy``). Default: the project's
        cache folder itself, for kernels bound to nothing.
    known : dict of int to object, optional
        Kernels jitted before with the same ``names`` and ``cache_key``, by ``id`` of their plain
        original: the new kernels call them. Updated with this call's kernels.
    invariant : str, optional
        The name of a parameter (``"rules"``: a variant's rules array) that no kernel writes while
        it runs: its reads compile to invariant loads
        (:func:`~dobutsu_tb.encoding.binding.invariant_code`, :func:`~dobutsu_tb.encoding.atomics.invariant_load`).

    Returns
    -------
    types.SimpleNamespace
        The jitted kernels by name.

    Raises
    ------
    ValueError
        If two modules list the same name.
    """
    from dobutsu_tb.encoding.atomics import invariant_load
    from dobutsu_tb.encoding.binding import INVARIANT_LOAD, copy_kernels

    arrays: dict = {}
    names = {k: _as_arrays(v, arrays) for k, v in (names or {}).items()}
    if invariant is not None:
        names[INVARIANT_LOAD] = invariant_load
    cache_dir = numba.config.CACHE_DIR
    if cache_key is not None:
        cache_dir = os.path.join(numba.config.CACHE_DIR, cache_key)

    def compile_copy(name, copy):
        if cache_key is not None:
            # Copies bound to other tables must also differ in their symbols: numba names a compiled
            # function after its module, qualified name and the count of functions compiled before
            # it in the process, and a cached kernel carries the code of the kernels it calls under
            # those names. Two variants compiled in the same order by two processes would otherwise
            # give the same names to different code, and a process that loads both from the cache
            # links every call to whichever it loaded first.
            copy.__qualname__ = f"{copy.__qualname__}__{re.sub(r'[^0-9A-Za-z]', '_', cache_key)}"
        saved = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = cache_dir  # read when the dispatcher's cache is made, just below
        try:
            return _cached(numba.njit(copy, nogil=True, **copy.__jit_options__))
        finally:
            numba.config.CACHE_DIR = saved

    kernels, namespaces = copy_kernels(modules, names, compile_copy, known, invariant)
    for namespace in namespaces.values():
        for key, value in list(namespace.items()):
            if key not in names:
                namespace[key] = _as_arrays(value, arrays)
            if value is range and key == "prange":
                namespace[key] = numba.prange
    return types.SimpleNamespace(**kernels)
