"""The one place FIR imports lark.

lark imports the optional ``regex`` module at load time (~30 ms) for an option FIR does not use;
it is hidden during that import so that ``fir-opt`` starts fast, then other code may import it.
"""

from __future__ import annotations

import sys

_hide_regex = "regex" not in sys.modules
if _hide_regex:
    sys.modules["regex"] = None  # type: ignore[assignment]
try:
    from lark import Lark, Token, Transformer
    from lark.exceptions import (
        UnexpectedCharacters,
        UnexpectedEOF,
        UnexpectedInput,
        UnexpectedToken,
    )
    from lark.lexer import Lexer, LexerState
finally:
    if _hide_regex:
        del sys.modules["regex"]

__all__ = [
    "Lark",
    "Lexer",
    "LexerState",
    "Token",
    "Transformer",
    "UnexpectedCharacters",
    "UnexpectedEOF",
    "UnexpectedInput",
    "UnexpectedToken",
]
