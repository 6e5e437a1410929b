"""The C++ back end: kernel plans -> one C++17/OpenMP translation unit (:mod:`.render`), built
with the system compiler into a shared library and called through ctypes (:mod:`.build`).

``fir-translate FILE -p fusion --target cpp`` prints the translation unit.
"""

from __future__ import annotations

from .build import BuildError, CompilerNotFound, CppKernels, build_program, compile_source
from .render import DIVISION_BY_ZERO, render_kernel, render_program

__all__ = [
    "DIVISION_BY_ZERO",
    "BuildError",
    "CompilerNotFound",
    "CppKernels",
    "build_program",
    "compile_source",
    "render_kernel",
    "render_program",
]
