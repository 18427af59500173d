"""Writing a file so that nothing is lost: lock, leftovers, temporary name, permissions, rename.

:class:`ReservedOutput` holds a target path from before a long job starts until its file is in
place:

- A lock file ``.NAME.lock`` beside the target, locked with ``flock``: a second job for the
  same target fails at once with :class:`OutputError` (it does not wait). The lock goes with
  the process, so a killed job never leaves a stale lock.
- Temporary files ``.NAME.*.partial`` beside the target can only be left by a job that no
  longer holds the lock, i.e. one that was killed: they are removed.
- The temporary file is created at once (so an unwritable folder fails before any work is done)
  with mode ``0o666`` less the umask, as any new file.
- An existing target that ``replaceable`` does not accept is never replaced unless ``force``.
- :meth:`ReservedOutput.commit` flushes the temporary file to disk and renames it over the
  target in one step; leaving the block without a commit removes it, and so does a process
  ended by a signal while the block runs (:func:`~dobutsu_tb.encoding.interrupt.at_exit`).
  Either the old file or the complete new one is in place at every moment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Callable

from dobutsu_tb.encoding import interrupt

LOCK_SUFFIX = ".lock"
PARTIAL_SUFFIX = ".partial"


class OutputError(OSError):
    """Raised when a file cannot be written where asked: no such folder, not writable, another
    job writing it, a file there that must not be replaced, or the disk full; the message says
    which, and that nothing was written."""


def wait_for_writer(path, on_wait: Callable[[str], None] | None = None) -> bool:
    """Wait while another job holds ``path`` (:class:`ReservedOutput`'s lock), e.g. a build of a
    cached tablebase that another command started.

    Parameters
    ----------
    path : str or Path
        The target file of the other job.
    on_wait : callable, optional
        Called once with the holder's process number (text, maybe empty) before waiting.

    Returns
    -------
    bool
        True if it waited (the other job ended meanwhile: its file is in place if it succeeded).

    Raises
    ------
    OSError
        If the lock file cannot be opened (a folder not readable).
    """
    path = Path(path)
    lock = path.parent / f".{path.name}{LOCK_SUFFIX}"
    try:
        fd = os.open(lock, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            pass
        if on_wait is not None:
            on_wait(os.read(fd, 32).decode("ascii", "replace").strip())
        fcntl.flock(fd, fcntl.LOCK_SH)  # until the writer ends (a signal handler may interrupt it)
        return True
    finally:
        os.close(fd)


def describe_os_error(exc: BaseException) -> str:
    """One line for an OS or HDF5 error: the system's text for its errno when there is one
    (HDF5 puts ``errno = 28`` in its message), else its message with the line breaks removed."""
    import re

    errno = getattr(exc, "errno", None)
    if not errno:
        found = re.search(r"errno = (\d+)", str(exc))
        errno = int(found.group(1)) if found else None
    if errno:
        return os.strerror(errno)
    return " ".join(str(exc).split()) or type(exc).__name__


def folder_error(folder: Path) -> OutputError:
    """The error for an output whose folder is not there: ``FOLDER: no such folder``, or
    ``FOLDER: not a folder`` when a file stands there."""
    return OutputError(f"{folder}: " + ("not a folder" if folder.exists() else "no such folder"))


#: The file in a work folder (:func:`make_work_folder`) whose lock its process holds while it lives.
WORK_LOCK = ".lock"


def make_work_folder(prefix: str, base=None) -> tuple[Path, int]:
    """A new folder ``PREFIX<process id>-<random>`` in ``base`` (the folder for temporary files
    when None), with a lock file (:data:`WORK_LOCK`) whose ``flock`` this process holds until the
    descriptor returned is closed, or the process ends however it ends: so that
    :func:`remove_orphans` removes it only once its process is gone.

    Returns
    -------
    (pathlib.Path, int)
        The folder and the lock file's descriptor (close it after removing the folder).

    Raises
    ------
    OSError
        If the folder cannot be made there.
    """
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
    try:
        fd = os.open(path / WORK_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    fcntl.flock(fd, fcntl.LOCK_EX)
    return path, fd


def remove_orphans(base, prefix: str, need_lock: bool = False) -> list[str]:
    """Remove the work folders (:func:`make_work_folder`) in ``base`` that processes ended outright
    left (SIGKILL, which no handler sees, or the system out of memory): the folders of this user
    named ``PREFIX<process id>-...`` whose process id no longer runs and whose lock file no
    process holds (one of a live process in another PID namespace or on another host sharing the
    folder holds it). With ``need_lock``, a folder without a lock file is left alone (not made by
    :func:`make_work_folder`). The lock file goes last, so that a folder that could not be removed
    whole is tried again.

    Returns
    -------
    list of str
        The names of the folders removed.
    """
    removed = []
    try:
        found = [p for p in Path(base).iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    for folder in found:
        pid = folder.name[len(prefix):].split("-")[0]
        if not (pid.isascii() and pid.isdigit()) or len(pid) > 9:
            continue
        try:
            st = folder.lstat()
            if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
                continue
            fd = os.open(folder / WORK_LOCK, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            if need_lock:
                continue
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (held: its process lives, here or elsewhere)
            os.kill(int(pid), 0)
        except ProcessLookupError:  # (the lock free and the process gone: an orphan)
            _remove_lock_last(folder)
            if not folder.exists():
                removed.append(folder.name)
        except OSError:  # (held, or running: not an orphan)
            pass
        finally:
            if fd is not None:
                os.close(fd)
    return removed


def _remove_lock_last(folder: Path) -> None:
    """Remove a work folder, its lock file last."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.name != WORK_LOCK:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        if all(entry.name == WORK_LOCK for entry in folder.iterdir()):
            (folder / WORK_LOCK).unlink(missing_ok=True)
            folder.rmdir()


def _followed(path: Path) -> Path:
    """``path``, or the file it links to when it is a symbolic link (a link that leads nowhere: the
    file it names), so that a build replaces the file and keeps the link.

    Raises
    ------
    OutputError
        If the links go round in a loop.
    """
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(path))
    except OSError as exc:
        raise OutputError(f"{path}: its symbolic links cannot be followed ({describe_os_error(exc)})") from None


class ReservedOutput:
    """A target path held for one job (module docstring); a context manager.

    Parameters
    ----------
    path : str or Path
        The file to write.
    replaceable : callable, optional
        ``replaceable(path)`` says whether an existing file at ``path`` may be replaced
        (default: any file may).
    force : bool, optional
        Replace an existing file even if ``replaceable`` refuses it.

    Attributes
    ----------
    path : Path
        The target.
    tmp : Path
        The temporary file to write (it exists, empty, once the block is entered).
    removed : list of Path
        Leftovers of killed jobs that were removed.

    Raises
    ------
    OutputError
        On entering: the folder does not exist or is not writable, another job holds the
        target, or a file there may not be replaced.
    """

    def __init__(self, path, replaceable: Callable[[Path], bool] | None = None, force: bool = False):
        self.given = Path(path)
        self.path = _followed(self.given)
        self.folder = self.path.parent
        self.replaceable = replaceable
        self.force = force
        self.tmp: Path | None = None
        self.removed: list[Path] = []
        self._lock_fd: int | None = None
        self._lock_path = self.folder / f".{self.path.name}{LOCK_SUFFIX}"
        self.committed = False
        self._at_exit: int | None = None

    # --- entering ------------------------------------------------------------------------

    def __enter__(self) -> "ReservedOutput":
        self._check_not_special()
        if not self.folder.is_dir():
            raise folder_error(self.folder)
        if self.path.is_dir():
            raise OutputError(f"{self.path} is a folder")
        try:
            self._lock()
            self._check_target()
            self._remove_leftovers()
            self.tmp = self._create_tmp()
        except BaseException:
            self._unlock()
            raise
        self._at_exit = interrupt.at_exit(self._abandon)
        return self

    def _abandon(self) -> None:
        """For a process ended by a signal in the block: the temporary file and the lock file go."""
        for path in ((self.tmp,) if not self.committed else ()) + (self._lock_path,):
            try:
                os.unlink(path)
            except OSError:
                pass

    def _fail_write(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write in {self.folder} ({describe_os_error(exc)})")

    def _lock(self) -> None:
        while True:
            try:
                fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            except OSError as exc:
                raise self._fail_write(exc) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                who = f" (process {holder})" if holder.isdigit() else ""
                raise OutputError(f"{self.path} is being written by another build{who}; wait for it to finish "
                                  f"or write elsewhere") from None
            except OSError as exc:
                os.close(fd)
                raise self._fail_write(exc) from None
            try:  # the holder before us may have removed the lock file after we opened it: retry then
                same = os.fstat(fd).st_ino == os.stat(self._lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._lock_fd = fd
        try:  # who holds it, for the message of a job that finds it locked (on a full disk: nobody says)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass

    def _check_not_special(self) -> None:
        """Refuse a target that is a named pipe, a device or a socket, even with ``force``: the path
        given, its links followed by ``os.stat`` (``/dev/stdout`` links to a pipe that has no name
        for :func:`_followed` to give)."""
        try:
            mode = os.stat(self.given).st_mode
        except OSError:
            return
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise OutputError(f"{self.given} is not a regular file (a named pipe, a device or a socket): not "
                              f"writing there; name another file")

    def _check_target(self) -> None:
        if self.force or self.replaceable is None or not os.path.lexists(self.path):
            return
        if not self.replaceable(self.path):
            raise OutputError(f"{self.path} exists and is not a dobutsu tablebase: not replacing it "
                              f"(--force replaces it)")

    def _remove_leftovers(self) -> None:
        prefix, suffix = f".{self.path.name}.", PARTIAL_SUFFIX
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(prefix) and entry.name.endswith(suffix) and len(entry.name) > len(prefix + suffix):
                try:
                    os.unlink(entry.path)
                    self.removed.append(Path(entry.path))
                except OSError:
                    pass

    def _create_tmp(self) -> Path:
        while True:
            tmp = self.folder / f".{self.path.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
            try:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
                return tmp
            except FileExistsError:
                continue
            except OSError as exc:
                raise self._fail_write(exc) from None

    # --- leaving -------------------------------------------------------------------------

    def commit(self) -> Path:
        """Flush the temporary file to disk and rename it over the target.

        Returns
        -------
        Path
            The target.

        Raises
        ------
        OutputError
            If a file that may not be replaced appeared at the target meanwhile, or the flush or
            the rename fails (the temporary file is then removed when the block ends).
        """
        self._check_target()
        try:
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.tmp, self.path)
        except OSError as exc:
            raise OutputError(f"{self.path}: writing failed ({describe_os_error(exc)}); nothing was written") from None
        self.committed = True
        try:  # the rename itself, on disk
            fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass
        return self.path

    def __exit__(self, *exc) -> None:
        if self._at_exit is not None:
            interrupt.forget(self._at_exit)
            self._at_exit = None
        if not self.committed and self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is None:
            return
        try:  # removed while still locked: a job that opened it meanwhile sees a new file and retries
            os.unlink(self._lock_path)
        except OSError:
            pass
        os.close(self._lock_fd)
        self._lock_fd = None
