"""Build and load: the C++ of a program -> a shared library in the cache -> ctypes functions.

The compiler, its flags (and why each is there), the cache of libraries and their loading are
:mod:`.compiler`'s; this module renders a program, builds it there and calls its kernels.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fir.backends.cache import Cache
from fir.backends.plan.program import ProgramPlan

from .compiler import (  # noqa: F401 (the toolchain's names, as this module gave them before)
    COMPILE_TIMEOUT_S,
    FLAGS,
    BuildError,
    CompilerNotFound,
    compile_source,
    compiler,
    compiler_identity,
    cpu_identity,
    flags,
    library_key,
    load_library,
)
from .render import kernel_symbol, render_program


class CppKernels:
    """The kernels of a built library, by name. ``call`` may run from several threads at once:
    a call takes a set of argument arrays (pointers, sizes, the error value and a reference to
    it) that no other call holds, copies the pointers and sizes in and passes the arrays as
    they are (no ``argtypes`` conversions, which would double the cost of a call), then gives
    the set back. A set is made when none is free: one per thread that calls at the same time,
    kept for the next calls (``list.pop`` and ``append`` are atomic: no lock)."""

    def __init__(
        self, library: Path, kernels: Iterable[tuple[str, int, int]], source: str | None = None
    ) -> None:
        self.path = library
        self.source = source
        self.lib = load_library(library)
        self._kernels: dict[str, tuple[Any, int, int, list[tuple[Any, ...]]]] = {}
        for name, nargs, nsizes in kernels:
            fn: Any = self.lib[kernel_symbol(name)]
            fn.restype = ctypes.c_int64
            fn.argtypes = None  # arguments are ctypes arrays and a byref: passed as pointers
            self._kernels[name] = (fn, nargs, nsizes, [])

    def names(self) -> list[str]:
        return list(self._kernels)

    def call(self, name: str, args: Sequence[int], sizes: Sequence[int] = ()) -> tuple[int, int]:
        """Run kernel ``name`` on data pointers ``args`` and size values ``sizes``; return the
        error code (0: none) and the value that failed."""
        fn, nargs, nsizes, free = self._kernels[name]
        if len(args) != nargs or len(sizes) != nsizes:
            raise ValueError(
                f"kernel {name} takes {nargs} pointer(s) and {nsizes} size(s), "
                f"got {len(args)} and {len(sizes)}"
            )
        try:
            arrays = free.pop()
        except IndexError:  # every set is held by another call: one of this call's own
            error = ctypes.c_int64(0)
            pointers = (ctypes.c_uint64 * max(nargs, 1))()
            arrays = (pointers, (ctypes.c_int64 * max(nsizes, 1))(), error, ctypes.byref(error))
        pointers, values, error, error_ref = arrays
        if nargs:
            pointers[:] = args
        if nsizes:
            values[:] = sizes
        code = fn(pointers, values, error_ref)
        failed = error.value if code else 0
        free.append(arrays)
        return code, failed


def build_program(plan: ProgramPlan, cache: Cache | None = None) -> CppKernels:
    """Render, compile (or find in the cache) and load every kernel of ``plan``."""
    source = render_program(plan)
    library = compile_source(source, cache)
    kernels = [(k.name, len(k.args), len(k.sizes)) for k in plan.kernels()]
    return CppKernels(library, kernels, source)
