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
    """A pass pipeline names an unknown pass, option or value."""


class InterpreterError(FirError):
    """The program did something at run time that has no defined result (an index out of bounds)."""
