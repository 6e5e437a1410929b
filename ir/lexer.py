"""A fast lexer for the FIR grammar, plugged into lark's LALR parser.

Lark's own lexers cost several microseconds per token; this one matches a single regular
expression per token and builds tokens directly. Like lark's contextual lexer it resolves a word
to a keyword only where the parser can take that keyword, so ``max`` is both the name of a
reduction op and the index function ``max(a, b)``. A name glued to ``[`` is a type token
(``f32[8, 16]``), whose dimensions the parser reads separately.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._lark import Lexer, LexerState, Token
from .errors import Location, ParseError

# The tokens, in the order they are tried at a position (the first that matches wins). The
# fast path (``fast_parse``) splits lines with the same patterns.
TOKEN_PATTERNS: list[tuple[str, str]] = [
    ("WS", r"[ \t\r\n]+"),
    ("COMMENT", r"//[^\n]*"),
    ("VALUE", r"%[A-Za-z0-9_][A-Za-z0-9_.$]*"),
    ("FUNC_NAME", r"@[A-Za-z_][A-Za-z0-9_.$]*"),
    ("TYPE", r"[A-Za-z_][A-Za-z0-9_]*\[[^\]\n]*\]"),
    ("NAME", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("FLOAT", r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"),
    ("INT", r"[0-9]+"),
    ("STRING", r'"(?:[^"\\\n]|\\.)*"'),
    ("PUNCT", r"->|[-+*<>=,:;()\[\]{}]"),
]
TOKEN_RE = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in TOKEN_PATTERNS))
_TOKEN_RE = TOKEN_RE  # the name tests/strategies.py imports

_new_str = str.__new__
_EQUAL_AHEAD = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*=(?!=)")


def _followed_by_equal(text: str, pos: int) -> bool:
    return _EQUAL_AHEAD.match(text, pos) is not None


def make_token(kind: str, value: str, pos: int, line: int, column: int) -> Token:
    tok = _new_str(Token, value)
    tok.type = kind
    tok.value = value
    tok.start_pos = pos
    tok.line = line
    tok.column = column
    tok.end_line = line
    tok.end_column = column + len(value)
    tok.end_pos = pos + len(value)
    return tok


class Origin:
    """Where the text being lexed starts in its file (nested parses of a type's dimensions)."""

    filename = "<input>"
    lines: list[str] = []
    line_offset = 0
    # for a nested parse: (line, column) of the first character
    base: tuple[int, int] | None = None


class FirLexer(Lexer):
    __future_interface__ = 2  # lex(lexer_state, parser_state), full text or a slice

    def __init__(self, lexer_conf: Any) -> None:
        self.punct: dict[str, str] = {}
        self.keywords: dict[str, str] = {}
        word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
        for term in lexer_conf.terminals:
            if term.pattern.type != "str":
                continue
            if word.match(term.pattern.value):
                self.keywords[term.pattern.value] = term.name
            else:
                self.punct[term.pattern.value] = term.name

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:
        text_obj: Any = lexer_state.text  # a TextSlice, or the full text
        text: str = getattr(text_obj, "text", text_obj)
        pos = getattr(text_obj, "start", 0)
        end = getattr(text_obj, "end", len(text))
        states = parser_state.parse_conf.states
        stack = parser_state.state_stack
        keywords, punct = self.keywords, self.punct
        match = TOKEN_RE.match
        base = Origin.base
        line, line_start = (base[0], -(base[1] - 1)) if base else (1, 0)
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise ParseError(
                    f"unexpected character '{text[pos]}'", self._loc(line, pos - line_start + 1)
                )
            # every alternative of TOKEN_RE is a named group, so a match always has one
            kind: str = m.lastgroup  # type: ignore[assignment]
            value = m.group()
            if kind == "WS" or kind == "COMMENT":
                n = value.count("\n")
                if n:
                    line += n
                    line_start = pos + value.rindex("\n") + 1
                pos = m.end()
                continue
            if kind == "TYPE":
                word = value[: value.index("[")]
                if word in keywords:  # `strided[1, 8]`: a keyword, then the bracket
                    kind, value = "NAME", word
            if kind == "NAME":
                kw = keywords.get(value)
                # no keyword is ever followed by '=': `min = 0.0` names an argument
                if (
                    kw is not None
                    and kw in states[stack[-1]]
                    and not _followed_by_equal(text, pos + len(value))
                ):
                    kind = kw
            elif kind == "PUNCT":
                if value not in punct:
                    raise ParseError(
                        f"unexpected character '{value}'", self._loc(line, pos - line_start + 1)
                    )
                kind = punct[value]
            yield make_token(kind, value, pos, line, pos - line_start + 1)
            pos += len(value)

    @staticmethod
    def _loc(line: int, column: int) -> Location:
        lines = Origin.lines
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        return Location(Origin.filename, line + Origin.line_offset, column, src)
