"""The C++ toolchain: a source -> a shared library in the cache -> a loaded library.

The compiler is ``$CXX`` (default ``c++``), run as ``CXX FLAGS source -o library``. The flags
and why each is there (none changes a result the interpreter computes):

* ``-O3 -march=native``: vectorise for this machine's widest units (the cache key carries the
  CPU's identity, so a cache shared between machines never serves a foreign library);
* ``-mprefer-vector-width=512``: on AVX-512 machines use the full width (GCC's default tuning
  stops at 256 bits); f16 conversions, done in integer arithmetic, run twice as fast;
* ``-fopenmp``: the ``parallel for`` / ``simd`` pragmas;
* ``-std=c++17 -shared -fPIC``: a plain C++17 library;
* ``-fno-math-errno``: libm calls are pure, so ``sqrt`` is one instruction and math calls
  vectorise (errno is never read; values are unchanged);
* ``-fno-trapping-math``: no FP exception flags are observed, so conditional code (masked
  loads, ``where``) can be if-converted (values are unchanged);
* ``-ffp-contract=off``: no fused multiply-add, which would round ``a * b + c`` once instead of
  twice and differ from PyTorch's eager kernels in the last bit;
* ``-DFIR_LIBMVEC ... -lmvec`` where glibc's vector math library is present (GCC on x86-64):
  ``exp``, ``tanh``, ``erf`` … get vector variants (at most a few ulp from libm's).

No ``-ffast-math``: it would break NaN and infinity semantics (``max`` propagating NaN).

This module knows nothing of FIR's programs (:mod:`.build` renders and loads those), so that
other code that compiles C++ (the CPU probes of ``fir.backends.cpu_tuning``) can use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from fir.backends.cache import Cache, cache_key, private_tempdir
from fir.ir.errors import FirError

_FLAG_WORDS = (
    "-O3 -march=native -mprefer-vector-width=512 -fopenmp -std=c++17 -shared -fPIC "
    "-fno-math-errno -fno-trapping-math -ffp-contract=off"
)
FLAGS = tuple(_FLAG_WORDS.split())
COMPILE_TIMEOUT_S = 600
_TAIL = 4000  # characters of compiler output an error shows


class BuildError(FirError):
    """The generated C++ did not compile (the message names the source and quotes the
    compiler), or no compiler could be run."""


class CompilerNotFound(BuildError):
    """``$CXX`` (or ``c++``) is not a program on PATH."""


def compiler() -> list[str]:
    """The compiler command: ``$CXX`` split like a shell would (``ccache g++`` works)."""
    return shlex.split(os.environ.get("CXX") or "c++")


def _run(cmd: list[str], timeout: int, what: object) -> subprocess.CompletedProcess[str]:
    """Run the compiler on ``what`` (an error names it): one that is not there, cannot be run
    or runs too long is an error."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise CompilerNotFound(
            f"no C++ compiler: '{cmd[0]}' is not on PATH (set CXX to a C++17 compiler with "
            "OpenMP, such as g++)"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"cannot run the C++ compiler '{cmd[0]}' on {what}: {e}") from None


@lru_cache(maxsize=8)
def compiler_identity(cxx: tuple[str, ...]) -> str:
    """``cxx --version``, once per process and compiler."""
    done = _run([*cxx, "--version"], 60, "--version")
    if done.returncode != 0:
        raise BuildError(
            f"the C++ compiler '{' '.join(cxx)}' failed on --version "
            f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()[:_TAIL]}"
        )
    return done.stdout.strip()


@lru_cache(maxsize=1)
def cpu_identity() -> str:
    """What ``-march=native`` depends on: the CPU model and its feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.machine() + platform.processor()


@lru_cache(maxsize=8)
def flags(identity: str) -> tuple[str, ...]:
    """The flags for a compiler (by its ``--version``): :data:`FLAGS`, plus the vector math
    library where GCC can use it."""
    out: tuple[str, ...] = FLAGS
    gcc = "Free Software Foundation" in identity and "clang" not in identity.lower()
    if gcc and platform.machine() in ("x86_64", "AMD64") and ctypes.util.find_library("mvec"):
        out = (*out, "-DFIR_LIBMVEC")
    return out


def library_key(source: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The compiler, its flags and the cache key of the library of ``source`` (everything the
    library depends on: the source, the compiler and its ``--version``, the flags, the CPU)."""
    cxx = tuple(compiler())
    if not cxx:
        raise CompilerNotFound("no C++ compiler: CXX is empty")
    identity = compiler_identity(cxx)
    flag_list = flags(identity)
    key = cache_key(source, " ".join(cxx), identity, " ".join(flag_list), cpu_identity())
    return cxx, flag_list, key


def compile_source(source: str, cache: Cache | None = None) -> Path:
    """The shared library of ``source``: from the cache, or compiled into it.

    The compiler reads the source from, and writes the library into, a private temporary
    folder of its own (``0700``, a fresh name): nobody can swap the source between its writing
    and its compilation, or the library before it is copied into the cache (atomically). The
    cache keeps a copy of the source beside the library for people to read; the compiler never
    reads it."""
    cache = cache or Cache("cpp")
    cxx, flag_list, key = library_key(source)
    hit = cache.lookup(key + ".so")
    if hit is not None:
        return hit
    shown = cache.write_text(key + ".cpp", source)  # what an error message points at
    scratch = private_tempdir("fir-build-")
    try:
        source_path = scratch / "kernels.cpp"
        source_path.write_text(source)
        built = scratch / "kernels.so"
        libraries = ["-lmvec"] if "-DFIR_LIBMVEC" in flag_list else []
        cmd = [*cxx, *flag_list, str(source_path), "-o", str(built), *libraries]
        done = _run(cmd, COMPILE_TIMEOUT_S, shown)
        if done.returncode != 0 or not built.exists():
            output = (done.stderr + done.stdout).strip()
            if len(output) > _TAIL:
                output = "…\n" + output[-_TAIL:]
            raise BuildError(
                f"C++ compilation failed (exit {done.returncode}) for {shown}\n"
                f"command: {shlex.join(cmd)}\n{output}"
            )
        return cache.store_file(key + ".so", built)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


_loaded: dict[str, tuple[tuple[int, int], ctypes.CDLL]] = {}


def load_library(path: Path) -> ctypes.CDLL:
    """``dlopen`` ``path``, once per file. dlopen returns the library it loaded before under the
    same path even when the file was replaced since (an entry rebuilt after it was found
    corrupt): a replaced file is loaded through a fresh link of its own.

    dlopen takes a path, not the descriptor :meth:`Cache.lookup` checked. The path is safe to
    use again because every folder above it is private (the cache checks the chain from ``/``:
    only this user or root can rename anything in it), so the file dlopen maps is the file that
    was checked. (Copying the checked bytes to a fresh file to dlopen would add a copy per load
    and buy nothing while the folders are private, and could fail where the temporary folder
    is mounted ``noexec``.)"""
    st = os.lstat(path)
    identity = (st.st_dev, st.st_ino)
    known = _loaded.get(str(path))
    if known is not None and known[0] == identity:
        return known[1]
    target = path
    if known is not None:
        fd, name = tempfile.mkstemp(prefix=path.stem + ".", suffix=".so", dir=path.parent)
        os.close(fd)
        os.unlink(name)
        os.link(path, name)  # same inode, a name dlopen has not seen
        target = Path(name)
    lib = ctypes.CDLL(str(target))
    if target != path:
        os.unlink(target)
    _loaded[str(path)] = (identity, lib)
    return lib
