"""The on-disk cache every back end shares: compiled libraries, generated sources.

Entries live under ``$FIR_CACHE_DIR`` (default ``~/.cache/fir``), one folder per back end, named
by a key the back end computes with :func:`cache_key` (a hash of everything the entry depends
on: the source, the compiler's identity, the flags).

What a back end loads from here is code it runs (a shared library, an object file, a Python
module), so the cache trusts an entry only because nobody but this user can have put it there:

* The cache folder and its back ends' folders are this user's own: FIR creates them ``0700``;
  one that is a symbolic link, not owned by this user (the effective uid: root does not trust
  a folder another user owns), or writable by group or others is not used. The folders above
  the cache folder must be owned by root or this user and not writable by group or others,
  unless sticky (``/tmp``): otherwise someone could rename the cache folder away and put one of
  their own in its place. A folder that fails these checks is **not an error**: the cache warns
  (naming the folder and why) and carries on in a private temporary folder of this process, so
  the user keeps working and nothing planted is loaded.
* An entry is opened with ``O_NOFOLLOW`` (a link is never followed) and trusted only if the
  opened file is a regular file owned by this user and not writable by group or others
  (checked with ``fstat`` on the open descriptor, so what is checked is what is read).
  Anything else is a miss (with a warning): it is built again and replaced, never loaded.
* Since every folder from ``/`` down to an entry is private to this user (or root), nobody
  else can swap an entry between the check and its use: a library ``dlopen``-ed or a module
  imported by its path is the file that was checked.
* Writes are atomic: an entry is written to a temporary file in its folder and renamed over its
  name (``os.replace``), so a reader never sees half a file and two processes that build the
  same entry at once both succeed (the last rename wins; the contents are the same).
* Every stored entry has a checksum beside it (``NAME.sha256``, renamed into place after the entry).
  It catches **corruption only** (a truncated library, a crash between the two renames: such an
  entry is a miss). It is no defence against a planted entry (whoever can write an entry can
  write its checksum): ownership, permissions and refusing links are.
* A cache folder that cannot be written (read-only, full, not a folder) is not an error either:
  the cache warns once and carries on in the temporary folder.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from fir.ir.errors import FirError

__all__ = ["Cache", "CacheFolderError", "cache_key", "cache_root", "private_tempdir"]

# how an entry is opened: never through a link (ELOOP), never blocking on a FIFO
_OPEN_ENTRY = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class CacheFolderError(FirError):
    """Not even a private temporary folder could be had for the cache or a build (the system's
    temporary folder is itself not private)."""


class NotPrivate(Exception):
    """A folder of the cache that another user could write (the message says which and why)."""


def cache_root() -> Path:
    """``$FIR_CACHE_DIR``, else ``~/.cache/fir``."""
    env = os.environ.get("FIR_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fir"


def cache_key(*parts: str | bytes) -> str:
    """A hex digest of ``parts`` (each length-prefixed, so no two lists of parts collide)."""
    h = hashlib.sha256()
    for p in parts:
        data = p.encode() if isinstance(p, str) else p
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:40]


# ---------------------------------------------------------------------------------------------
# private folders


def _why_not_ours(st: os.stat_result) -> str | None:
    """Why a folder of FIR's own (the cache folder, a back end's folder) is not private."""
    euid = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if st.st_uid != euid:
        return f"is owned by uid {st.st_uid}, not by this user (uid {euid})"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _why_not_safe_above(st: os.stat_result) -> str | None:
    """Why a folder above the cache folder lets someone else replace what is below it."""
    euid = os.geteuid()
    if stat.S_ISLNK(st.st_mode):  # a link appeared after realpath resolved the path
        return "is a symbolic link"
    if st.st_uid not in (0, euid):
        return f"is owned by uid {st.st_uid}, neither root nor this user (uid {euid})"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"is writable by group or others and not sticky (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _check(path: str, why: Callable[[os.stat_result], str | None]) -> None:
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISLNK(st.st_mode):  # a file in the way
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    reason = why(st)
    if reason is not None:
        raise NotPrivate(f"{path} {reason}")


def _check_above(real: str) -> None:
    """Check every folder of ``real`` (a path without links), from ``/`` down."""
    parts = Path(real).parts
    for i in range(1, len(parts) + 1):
        _check(str(Path(*parts[:i])), _why_not_safe_above)


def private_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` as a private folder of this user: made ``0700`` (with any missing folders above
    it) where it does not exist, checked where it does. Links above ``path`` are resolved
    (``~/.cache`` may be a link to a scratch disk); ``path`` itself and the folders FIR makes
    are never links. Returns the path without links. Raises :class:`NotPrivate`, or
    ``OSError`` where a folder cannot be made."""
    wanted = Path(os.path.abspath(path))
    missing: list[str] = []
    base = wanted
    while not os.path.lexists(base) and base != base.parent:
        missing.append(base.name)
        base = base.parent
    if not missing:  # the folder exists: it must be ours, not a link
        real = Path(os.path.realpath(wanted.parent)) / wanted.name
        _check_above(str(real.parent))
        _check(str(real), _why_not_ours)
        return real
    real = Path(os.path.realpath(base))
    _check_above(str(real))
    for name in reversed(missing):
        real = real / name
        with contextlib.suppress(FileExistsError):  # made at the same time by another process
            os.mkdir(real, 0o700)
        _check(str(real), _why_not_ours)  # whoever made it, it must be ours now
    return real


def private_tempdir(prefix: str) -> Path:
    """A new private temporary folder (``tempfile.mkdtemp``: ``0700``, a fresh name), checked
    like the cache's folders, so nobody else can change what is written there before it is
    read. The caller removes it."""
    made = tempfile.mkdtemp(prefix=prefix)
    try:
        return private_folder(made)
    except (NotPrivate, OSError) as e:
        shutil.rmtree(made, ignore_errors=True)
        raise CacheFolderError(
            f"no private temporary folder: {e} (set TMPDIR to a folder only you can write)"
        ) from None


_fallback_root: Path | None = None


def _temporary_root() -> Path:
    global _fallback_root
    if _fallback_root is None:
        _fallback_root = private_tempdir("fir-cache-")
        atexit.register(shutil.rmtree, _fallback_root, True)
    return _fallback_root


# ---------------------------------------------------------------------------------------------
# entries


def _open_trusted(path: Path) -> int | None:
    """A descriptor of entry ``path`` if it is a regular file of this user that only this user
    can write (checked on the opened file, not on the name); None if it is missing or not
    trusted (warned: something other than FIR put it there)."""
    try:
        fd = os.open(path, _OPEN_ENTRY)
    except OSError as e:  # missing, unreadable or a link: a miss, and the store replaces it
        if e.errno == errno.ELOOP:
            warnings.warn(
                f"FIR cache entry {path} is a symbolic link: not followed, built again",
                RuntimeWarning,
                stacklevel=4,
            )
        return None
    st = os.fstat(fd)
    reason = None
    if not stat.S_ISREG(st.st_mode):
        reason = "is not a regular file"
    elif st.st_uid != os.geteuid():
        reason = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        reason = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if reason is None:
        return fd
    os.close(fd)
    warnings.warn(
        f"FIR cache entry {path} {reason}: not loaded, built again", RuntimeWarning, stacklevel=4
    )
    return None


def _read_fd(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as f:  # closes fd
        return f.read()


class Cache:
    """The entries of one back end (``namespace``: ``cpp``, ``llvm``, ``triton``)."""

    def __init__(self, namespace: str, root: str | os.PathLike[str] | None = None) -> None:
        self.namespace = namespace
        self.root = Path(root) if root is not None else cache_root()
        self._dir: Path | None = None
        self.fell_back = False

    @property
    def dir(self) -> Path:
        """The folder of this back end's entries (made on first use, checked private)."""
        if self._dir is None:
            try:
                root = private_folder(self.root)
                self._dir = private_folder(root / self.namespace)
            except NotPrivate as e:
                self._fall_back(f"is not private: {e}")
            except OSError as e:
                self._fall_back(f"is not writable ({e.strerror or e})")
        assert self._dir is not None
        return self._dir

    def _fall_back(self, why: str) -> None:
        temporary = _temporary_root() / self.namespace
        try:
            self._dir = private_folder(temporary)
        except (NotPrivate, OSError) as e:
            raise CacheFolderError(f"no private folder for the FIR cache: {e}") from None
        if not self.fell_back:
            warnings.warn(
                f"FIR cache {self.root / self.namespace} {why}; "
                f"using the temporary folder {self._dir} for this process",
                RuntimeWarning,
                stacklevel=4,
            )
        self.fell_back = True

    def path(self, name: str) -> Path:
        return self.dir / name

    # -- reading

    def _checksum(self, name: str) -> str | None:
        fd = _open_trusted(self.path(name + ".sha256"))
        if fd is None:
            return None
        try:
            return _read_fd(fd).decode("ascii", "replace").strip() or None
        except OSError:
            return None

    def lookup(self, name: str) -> Path | None:
        """The entry ``name`` if it is trusted (see the module docstring) and complete (its
        checksum agrees), else None. Its path is safe to open again (the folders are private);
        :meth:`read` reads it through the checked descriptor."""
        want = self._checksum(name)
        if want is None:
            return None
        fd = _open_trusted(self.path(name))
        if fd is None:
            return None
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            return None
        return self.path(name) if h.hexdigest() == want else None

    def read(self, name: str) -> bytes | None:
        """The contents of entry ``name`` if it is trusted and complete, else None; read
        through the descriptor that was checked."""
        want = self._checksum(name)
        if want is None:
            return None
        fd = _open_trusted(self.path(name))
        if fd is None:
            return None
        try:
            data = _read_fd(fd)
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == want else None

    # -- writing

    def write_text(self, name: str, text: str) -> Path:
        """Write a text entry (a generated source, for people to read) atomically; no checksum
        (it is never read back: the C++ compiler reads its own private copy)."""
        return self._atomic(name, lambda tmp: tmp.write_text(text))

    def store(self, name: str, produce: Callable[[Path], object]) -> Path:
        """Make entry ``name``: ``produce(path)`` writes it at a temporary path; the entry and
        then its checksum are renamed into place. Returns where the entry is (in the
        temporary folder if the cache cannot be written)."""
        path = self._atomic(name, produce)
        digest = _file_digest(path)
        marker = self._atomic(name + ".sha256", lambda tmp: tmp.write_text(digest + "\n"))
        if marker.parent != path.parent:  # fell back in between: the entry joins its checksum
            first = path
            path = self._atomic(name, lambda tmp: shutil.copyfile(first, tmp))
        return path

    def store_file(self, name: str, source: Path) -> Path:
        """Copy ``source`` into the cache as entry ``name``."""
        return self.store(name, lambda tmp: shutil.copyfile(source, tmp))

    def _atomic(self, name: str, produce: Callable[[Path], object]) -> Path:
        for attempt in range(2):
            tmp: Path | None = None
            try:
                # mkstemp: a fresh name, O_EXCL, mode 0600, in a folder only we can write
                fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.dir)
                os.close(fd)
                tmp = Path(tmp_name)
                produce(tmp)
                os.replace(tmp, self.path(name))  # over a link or a foreign file alike
                tmp = None
                return self.path(name)
            except OSError as e:
                if attempt == 1 or self.fell_back:
                    raise
                self._fall_back(f"is not writable ({e.strerror or e})")
            finally:
                if tmp is not None:  # never leave half an entry behind
                    with contextlib.suppress(OSError):
                        tmp.unlink()
        raise AssertionError("unreachable")  # pragma: no cover


def _file_digest(path: Path) -> str:
    """The checksum of a file this process just wrote (in its private folder)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
