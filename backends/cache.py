"""The on-disk cache every back end shares: compiled libraries, generated sources.

Entries live under ``$FIR_CACHE_DIR`` (default ``~/.cache/fir``), one folder per back end, named
by a key the back end computes with :func:`cache_key` (a hash of everything the entry depends
on: the source, the compiler's identity, the flags).

* Writes are atomic: an entry is written to a temporary file in its folder and renamed over its
  name (``os.replace``), so a reader never sees half a file and two processes that build the
  same entry at once both succeed (the last rename wins; the contents are the same).
* Every binary entry has a checksum beside it (``NAME.sha256``, renamed into place after the
  entry). An entry whose checksum is missing or wrong (a truncated library, a crash between the
  two renames) is a miss: it is built again, never loaded.
* A cache folder that cannot be written (read-only, full, not a folder) is not an error: the
  cache warns once and carries on in a temporary folder of this process.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = ["Cache", "cache_key", "cache_root"]


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


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_fallback_root: Path | None = None


def _temporary_root() -> Path:
    global _fallback_root
    if _fallback_root is None:
        _fallback_root = Path(tempfile.mkdtemp(prefix="fir-cache-"))
        atexit.register(shutil.rmtree, _fallback_root, True)
    return _fallback_root


class Cache:
    """The entries of one back end (``namespace``: ``cpp``, ``llvm``, ``triton``)."""

    def __init__(self, namespace: str, root: str | os.PathLike[str] | None = None) -> None:
        self.namespace = namespace
        self.root = Path(root) if root is not None else cache_root()
        self._dir: Path | None = None
        self.fell_back = False

    @property
    def dir(self) -> Path:
        """The folder of this back end's entries (made on first use)."""
        if self._dir is None:
            wanted = self.root / self.namespace
            try:
                wanted.mkdir(parents=True, exist_ok=True)
                self._dir = wanted
            except OSError as e:
                self._fall_back(e)
        assert self._dir is not None
        return self._dir

    def _fall_back(self, error: OSError) -> None:
        self._dir = _temporary_root() / self.namespace
        self._dir.mkdir(parents=True, exist_ok=True)
        if not self.fell_back:
            warnings.warn(
                f"FIR cache {self.root / self.namespace} is not writable ({error.strerror or error}); "
                f"using the temporary folder {self._dir} for this process",
                RuntimeWarning,
                stacklevel=3,
            )
        self.fell_back = True

    def path(self, name: str) -> Path:
        return self.dir / name

    # -- reading

    def lookup(self, name: str) -> Path | None:
        """The entry ``name`` if it is complete (its checksum agrees), else None."""
        path = self.path(name)
        try:
            want = (path.parent / (path.name + ".sha256")).read_text().strip()
            if want and _digest(path) == want:
                return path
        except OSError:
            pass
        return None

    # -- writing

    def write_text(self, name: str, text: str) -> Path:
        """Write a text entry (a generated source) atomically; no checksum (it is never read
        back as a cache hit)."""
        return self._atomic(name, lambda tmp: tmp.write_text(text))

    def store(self, name: str, produce: Callable[[Path], None]) -> Path:
        """Make entry ``name``: ``produce(path)`` writes it at a temporary path; the entry and
        then its checksum are renamed into place. Returns where the entry is (in the
        temporary folder if the cache cannot be written)."""
        path = self._atomic(name, produce)
        marker = self._atomic(name + ".sha256", lambda tmp: tmp.write_text(_digest(path) + "\n"))
        if marker.parent != path.parent:  # fell back in between: the entry joins its checksum
            first = path
            path = self._atomic(name, lambda tmp: shutil.copyfile(first, tmp))
        return path

    def store_file(self, name: str, source: Path) -> Path:
        """Copy ``source`` into the cache as entry ``name``."""
        return self.store(name, lambda tmp: shutil.copyfile(source, tmp))

    def _atomic(self, name: str, produce: Callable[[Path], None]) -> Path:
        for attempt in range(2):
            tmp: Path | None = None
            try:
                fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.dir)
                os.close(fd)
                tmp = Path(tmp_name)
                produce(tmp)
                os.replace(tmp, self.path(name))
                tmp = None
                return self.path(name)
            except OSError as e:
                if attempt == 1 or self.fell_back:
                    raise
                self._fall_back(e)
            finally:
                if tmp is not None:  # never leave half an entry behind
                    with contextlib.suppress(OSError):
                        tmp.unlink()
        raise AssertionError("unreachable")  # pragma: no cover
