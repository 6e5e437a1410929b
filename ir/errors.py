"""User-facing diagnostics: every error FIR reports about its input carries a source location."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in a source text; line and column are 1-based."""

    file: str
    line: int
    column: int
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class FirError(Exception):
    """An error in FIR input (text, pass pipeline, options) that a user can fix.

    Tools print it with :meth:`render` and exit with status 1; it never becomes a traceback.
    """

    def __init__(self, message: str, loc: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc

    def render(self) -> str:
        """``file:line:col: error: message`` followed by the source line and a caret."""
        if self.loc is None:
            return f"error: {self.message}"
        text = f"{self.loc}: error: {self.message}"
        if self.loc.source_line:
            line = self.loc.source_line.rstrip("\n").expandtabs(1)
            caret = " " * (max(self.loc.column, 1) - 1) + "^"
            text += f"\n{line}\n{caret}"
        return text

    def __str__(self) -> str:
        return self.render()


class ParseError(FirError):
    """The text does not follow the grammar, or names something that does not exist."""


class VerifyError(FirError):
    """The program is well-formed text but breaks a typing or scoping rule."""


class PipelineError(FirError):
    """A pass pipeline names an unknown pass, option or value, or a pass that cannot run on the
    program as it is (a loop-level pass on a tensor-level program)."""


class InterpreterError(FirError):
    """The program did something at run time that has no defined result (an index out of bounds).

    The faults that PyTorch reports with a built-in exception type are raised as subclasses that
    are also that type, so that code written against eager PyTorch catches them the same way."""


class InterpreterIndexError(InterpreterError, IndexError, RuntimeError):
    """An index out of bounds (a gather, an embedding, a load through an indirect index). Eager
    PyTorch raises :class:`IndexError` for indexing, ``index_select`` and ``embedding`` but
    :class:`RuntimeError` for ``gather`` and ``scatter``; at loop level both are the same load,
    so this is both."""


class InterpreterZeroDivisionError(InterpreterError, ZeroDivisionError, RuntimeError):
    """An integer division or modulo by zero. Eager PyTorch raises
    ``RuntimeError: ZeroDivisionError`` for it: this is both."""


class KernelIndexError(FirError, IndexError, RuntimeError):
    """A compiled kernel's indirect index fell outside its bound (a gather, an embedding): the
    kernel read nothing through it and the runtime names the kernel, the buffers and the value.
    Like :class:`InterpreterIndexError`, both the exception types eager PyTorch raises there."""


class KernelZeroDivisionError(FirError, ZeroDivisionError, RuntimeError):
    """A compiled kernel divided an integer by zero (``RuntimeError: ZeroDivisionError`` in
    eager PyTorch: this is both)."""


class ExternResultError(FirError, RuntimeError):
    """An extern call returned a result whose shape differs from its declared type. Where a
    size was known only from an assumption of the trace (``torch._check(z.size(0) == 4)`` on a
    data-dependent size), this is that assumption failing at run time, which eager PyTorch
    reports as a :class:`RuntimeError`: this is both."""


class InterpreterMemoryError(InterpreterError, MemoryError, RuntimeError):
    """A buffer the interpreter needs cannot be allocated (``nbytes`` bytes, when known). Eager
    PyTorch raises :class:`RuntimeError` when CPU memory runs out: this is both."""

    def __init__(
        self, message: str, loc: Location | None = None, nbytes: int | None = None
    ) -> None:
        super().__init__(message, loc)
        self.nbytes = nbytes


def format_bytes(n: int) -> str:
    """``399999999996`` -> ``"372.5 GiB (399999999996 bytes)"``: binary units, exact count."""
    if n < 1024:
        return f"{n} bytes"
    size, k = n / 1024, 0
    units = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    while round(size, 1) >= 1024 and k < len(units) - 1:
        size, k = size / 1024, k + 1
    return f"{size:.1f} {units[k]} ({n} bytes)"
