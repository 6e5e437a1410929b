"""A fast path for parsing FIR text laid out the way the printer writes it.

Why: lark's LALR driver and the lexer cost about 4 µs per token, and a loop-level program has
about ten tokens per line (a 100,000-line program took 4 s to parse). Most of those lines are a
handful of regular shapes: loop-body lines (``%3 = mul %2, 0.5``, ``%0 = load %x[64*i0 + r0]``),
dependency lines (``read %x[64*c0 + c1] over (c0 < 8, c1 < 64) bytes 2048``), closing braces.

How: this module reads the text line by line, one construct per line as the printer lays it
out, and drives the *same* callbacks as the lark parser (``parser._Builder``), in the same order
and with the same children, so that every check, IR object and location is the one the lark
path makes. The hottest line shapes are matched by one regular expression each; every other line
is split into tokens by the lexer's own regular expression and read by a small recursive
descent. Index expressions are compiled once per distinct text and evaluated again only when
their names resolve to different objects (see :meth:`_FastParser.iexpr_text`).

Never trusted blindly: whenever something is not exactly what it expects (a construct spread
over several lines, a token it does not know, a callback that raises an error, anything), it
raises :class:`Unsure` and ``parse_module`` parses the whole text again with lark. So the lark
grammar stays the specification, and every error message and location comes from the lark path.
The fast path only has to be right about the texts it accepts, and it accepts a text only where
lark reads the same tokens the same way (see the notes on keywords and line ends below).

Notes on why reading line by line gives lark's result:

* Tokens: lines are split with the lexer's regular expression (``lexer.TOKEN_RE``), so tokens
  are the lexer's. Lark turns a word into a keyword only where the parser state takes that
  keyword; the recursive descent below does the same by only looking for a keyword where the
  grammar allows one (``load`` after ``%0 =`` in a body, ``min`` at the start of an index atom,
  ``true`` where a literal may stand …) and reading the word as a name elsewhere.
* Line ends: lark ignores newlines, so a construct may continue on the next line. Every line
  this module accepts starts with ``%``, ``}`` or a keyword, and none of those can continue the
  construct on the line before, with one exception it refuses: a body op with no operands, no
  attributes and no result type (``%3 = foo`` followed by ``%4 = …`` reads ``%4`` as an operand).
"""

from __future__ import annotations

import re
from typing import Any

from ._lark import Token
from .graph import Module
from .lexer import TOKEN_PATTERNS, TOKEN_RE

_new_str = str.__new__


class Unsure(Exception):
    """The fast path cannot vouch for this text; the lark parser reads it instead."""


def parse_canonical(builder: Any, lines: list[str]) -> Module:
    """Parse the text of ``lines`` (``text.split("\\n")``) through ``builder``'s callbacks (a
    freshly reset ``parser._Builder``; typed ``Any`` because ``parser`` imports this module).
    Raises :class:`Unsure`, or the ``FirError`` of a callback, when lark has to read the text."""
    try:
        return _FastParser(builder, lines).module()
    except RecursionError:  # deeply nested input: lark reports it
        raise Unsure from None


# A token of a line: (kind as the lexer names it, its text, its 0-based column in the line).
_Tok = tuple[str, str, int]
_END: _Tok = ("END", "", -1)  # after the last token of a line

# Splits a line into (whitespace, token) pairs, trying the lexer's patterns in the lexer's order.
_SPLIT_RE = re.compile(
    r"([ \t\r\n]*)(" + "|".join(p for name, p in TOKEN_PATTERNS if name != "WS") + ")"
)
# A token's kind from its first character (then: a name ending in ']' is a type, a number with
# anything but digits is a float).
_KIND_BY_FIRST = {"%": "VALUE", "@": "FUNC_NAME", '"': "STRING", "/": "COMMENT", "_": "NAME"}
_KIND_BY_FIRST.update({c: "NAME" for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"})
_KIND_BY_FIRST.update({c: "INT" for c in "0123456789"})

# The grammar's punctuation (``>`` is in the lexer's expression but is not a token of FIR).
_PUNCT = frozenset(["->", "-", "+", "*", "<", "=", ",", ":", ";", "(", ")", "[", "]", "{", "}"])
# Literal keywords (``special_lit``) and their token types.
_SPECIAL = {"true": "TRUE", "false": "FALSE", "none": "NONE", "inf": "INF", "nan": "NAN"}
# Index functions: keywords wherever an index atom may start.
_IEXPR_FUNCS = {"floordiv": "FLOORDIV", "mod": "MOD", "min": "MIN", "max": "MAX"}
_KEYWORD_TYPES = {"read": "READ", "write": "WRITE", "users": "USERS", "ancestors": "ANCESTORS"}
_BODY_KEYWORDS = {"load": "LOAD", "indirect": "INDIRECT", "index": "INDEX"}
# what may follow an atom inside an index expression
_CONTINUES_IEXPR = frozenset(["+", "-", "*", "("])
_ARITH = {"+": ("PLUS", "add"), "-": ("MINUS", "sub"), "*": ("STAR", "mul")}

# ---- whole-line shapes of the hottest lines (after the indentation)
_V = r"%[A-Za-z0-9_][A-Za-z0-9_.$]*"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# a literal as one token (``-`` glued to the number), ended by ", " or the end of the line
_LIT = (
    r"-?(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+|inf)"
    r"|true|false|none|nan"
)
_OPERAND = rf"(?:{_V}|{_LIT})"
# ``%0 = load %x[<index>]`` (groups 2, 3) or ``%3 = mul %2, 0.5`` (groups 4, 5)
_BODY_LINE = re.compile(
    rf"({_V}) = (?:load ({_V})\[([^\]]*)\]|({_NAME}) ({_OPERAND}(?:, {_OPERAND})*))"
)
_YIELD = re.compile(rf"yield ({_OPERAND})")
_MEMORY_DEP = re.compile(
    rf"(read|write) ({_V})\[([^\]]*)\] over \(((?:{_NAME} < [0-9]+)(?:, {_NAME} < [0-9]+)*)?\)"
    r" bytes ([0-9]+)"
)
# ``%y = reduction sum {…} : f32[8] over (i0 < 8; r0 < 4) order (i0 < 8; r0 < 4) {`` with static
# types and sizes; the attribute dict, if any, is read token by token
_RANGES = rf"{_NAME} < [0-9]+(?:, {_NAME} < [0-9]+)*"
_ORDER_ITEM = rf"(?:{_NAME}|\[{_NAME}(?:, {_NAME})+\]) < [0-9]+"
_ORDER_ITEMS = rf"{_ORDER_ITEM}(?:, {_ORDER_ITEM})*"
_STATIC_TYPE = r"[A-Za-z_][A-Za-z0-9_]*\[[0-9, ]*\]"
_LOOP_HEAD = re.compile(
    rf"(?P<results>{_V}(?:, {_V})*) = (?P<kw>pointwise|reduction (?P<kind>{_NAME})) "
    rf"(?P<attrs>\{{.*\}} )?: (?P<types>{_STATIC_TYPE}(?:, {_STATIC_TYPE})*) "
    rf"over \((?P<over>{_RANGES})?(?:(?P<over_semi>;) ?(?P<over_red>{_RANGES})?)?\)"
    rf"(?: (?P<order_kw>order) \((?P<order>{_ORDER_ITEMS})?"
    rf"(?:(?P<order_semi>;) ?(?P<order_red>{_ORDER_ITEMS})?)?\))? \{{"
)
_STATIC_TYPE_RE = re.compile(_STATIC_TYPE)
_ORDER_ITEM_RE = re.compile(rf"(?:({_NAME})|\[({_NAME}(?:, {_NAME})+)\]) < ([0-9]+)")
_STAR_DEP = re.compile(rf"(read|write) ({_V})\[\*\] bytes ([0-9]+)")
_DEP_NAMES = re.compile(rf"(users|ancestors) (none|(?:{_V}|return)(?:, (?:{_V}|return))*)")
_DIGITS = re.compile(r"[0-9]+")

# ---- index expressions
# An index expression compiled to postfix order, the order in which lark's LALR parser calls the
# callbacks: ("INT" | "NAME" | "VALUE", text, offset) for an atom, (operator token type, text,
# offset, number of operands) for the rest; offsets are columns relative to the text's start.
_Instr = tuple[str, str, int, int]


def _iexpr_tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, end = 0, len(text)
    while pos < end:
        m = TOKEN_RE.match(text, pos)
        if m is None:
            raise Unsure
        kind, value = m.lastgroup, m.group()
        pos = m.end()
        if kind == "WS":
            continue
        if kind not in ("INT", "NAME", "VALUE", "PUNCT") or (
            kind == "PUNCT" and value not in ("+", "-", "*", "(", ")", ",")
        ):
            raise Unsure
        if kind == "NAME" and value in _IEXPR_FUNCS:
            kind = _IEXPR_FUNCS[value]
        out.append((kind, value, m.start()))
    return out


class _IExprCompiler:
    """Recursive descent over the ``iexpr`` rules of the grammar, emitting postfix code."""

    def __init__(self, text: str):
        self.toks = _iexpr_tokens(text)
        self.k = 0
        self.code: list[_Instr] = []

    def compile(self) -> list[_Instr]:
        self.expr()
        if self.k != len(self.toks):
            raise Unsure
        return self.code

    def peek(self) -> _Tok:
        return self.toks[self.k] if self.k < len(self.toks) else _END

    def take(self, text: str) -> None:
        if self.peek()[1] != text:
            raise Unsure
        self.k += 1

    def expr(self) -> None:  # iexpr: iterm | iexpr (PLUS | MINUS) iterm
        self.term()
        while self.peek()[1] in ("+", "-"):
            _, op, col = self.toks[self.k]
            self.k += 1
            self.term()
            self.code.append((_ARITH[op][0], op, col, 2))

    def term(self) -> None:  # iterm: iunary | iterm STAR iunary
        self.unary()
        while self.peek()[1] == "*":
            col = self.toks[self.k][2]
            self.k += 1
            self.unary()
            self.code.append(("STAR", "*", col, 2))

    def unary(self) -> None:  # iunary: iatom | MINUS iunary
        kind, text, col = self.peek()
        if text == "-":
            self.k += 1
            self.unary()
            self.code.append(("NEG", "-", col, 1))
        else:
            self.atom()

    def atom(self) -> None:
        kind, text, col = self.peek()
        self.k += 1
        if kind in ("INT", "NAME", "VALUE"):
            self.code.append((kind, text, col, 0))
        elif text == "(":
            self.expr()
            self.take(")")
        elif kind in ("FLOORDIV", "MOD", "MIN", "MAX"):
            self.take("(")
            self.expr()
            n = 1
            while self.peek()[1] == ",":
                self.k += 1
                self.expr()
                n += 1
            self.take(")")
            if kind in ("FLOORDIV", "MOD") and n != 2:
                raise Unsure
            self.code.append((kind, text, col, n))
        else:
            raise Unsure


class _FastParser:
    def __init__(self, builder: Any, lines: list[str]):
        self.b = builder
        self.lines = lines
        self.k = -1  # index of the current line
        self.lineno = 0  # its number
        self.s = ""  # the current line
        self.pos0 = 0  # offset of the current line in the text
        self.next_pos = 0
        # the current line's tokens (generic lines) and the position in them
        self.tk: list[_Tok] = []
        self.ti = 0
        # index expression text -> (code, atom instructions, what their callbacks returned, value)
        self.iexprs: dict[str, tuple[list[_Instr], list[_Instr], list[Any], Any]] = {}

    # -- lines and tokens

    def next_line(self) -> int | None:
        """Move to the next line that is not blank or a comment; its indentation (None at the end
        of the text)."""
        lines, k = self.lines, self.k
        while k + 1 < len(lines):
            k += 1
            s = lines[k]
            self.pos0 = self.next_pos
            self.next_pos += len(s) + 1
            code = s.lstrip(" ")
            if not code or code[0] in "\t\r/":  # rare: look again, with all of lark's whitespace
                code = s.lstrip(" \t\r")  # (str.strip() would remove more)
                if not code or code.startswith("//"):
                    continue
            self.k, self.lineno, self.s = k, k + 1, s
            return len(s) - len(code)
        self.k = k
        return None

    def line(self) -> int:
        i = self.next_line()
        if i is None:
            raise Unsure
        return i

    def tok(self, kind: str, text: str, col: int) -> Any:
        """A lark token as ``lexer.make_token`` makes it, at column ``col`` (0-based) of the
        current line (written out here: the fast path makes half a million of them)."""
        t = _new_str(Token, text)
        n = len(text)
        t.type = kind
        t.value = text
        t.start_pos = pos = self.pos0 + col
        t.line = t.end_line = self.lineno
        t.column = col + 1
        t.end_column = col + 1 + n
        t.end_pos = pos + n
        return t

    def split(self, i: int, end: int | None = None) -> None:
        """Tokenize the current line from column ``i`` (to ``end``) for the recursive descent. One
        ``findall`` gives each token with the whitespace before it, and the lengths give the
        columns. Where no token matches, ``findall`` skips a character: the columns then fall
        short of the end, and the line is refused."""
        s = self.s if end is None else self.s[:end]
        out: list[_Tok] = []
        col = i
        for space, text in _SPLIT_RE.findall(s, i):
            col += len(space)
            kind = _KIND_BY_FIRST.get(text[0], "PUNCT")
            if kind == "NAME":
                if text[-1] == "]":
                    kind = "TYPE"
            elif kind == "INT":
                if not text.isdigit():
                    kind = "FLOAT"
            elif kind == "COMMENT":  # it runs to the end of the line: it must start at col
                if col != len(s) - len(text):
                    raise Unsure
                col = len(s)
                break
            elif kind == "PUNCT" and text not in _PUNCT:
                raise Unsure
            out.append((kind, text, col))
            col += len(text)
        if col != len(s) and col != len(s.rstrip(" \t\r")):
            raise Unsure
        out.append(_END)  # a sentinel: the cursor never runs past the end
        self.tk, self.ti = out, 0

    def peek(self, ahead: int = 0) -> _Tok:
        k = self.ti + ahead
        return self.tk[k] if k < len(self.tk) else _END

    def at(self, text: str) -> bool:
        return self.tk[self.ti][1] == text

    def more(self) -> bool:
        return self.tk[self.ti] is not _END

    def take(self, text: str) -> int:
        """Consume the punctuation or keyword ``text``; its column."""
        _, t, col = self.tk[self.ti]
        if t != text:
            raise Unsure
        self.ti += 1
        return col

    def take_kind(self, kind: str) -> tuple[str, int]:
        k, text, col = self.tk[self.ti]
        if k != kind:
            raise Unsure
        self.ti += 1
        return text, col

    def take_tok(self, kind: str, as_type: str | None = None) -> Any:
        text, col = self.take_kind(kind)
        return self.tok(as_type or kind, text, col)

    def done(self) -> None:
        if self.tk[self.ti] is not _END:
            raise Unsure

    def closing(self, i: int) -> None:
        """The current line is a lone ``}``."""
        s = self.s
        if len(s) == i + 1 and s[i] == "}":
            return
        self.split(i)
        self.take("}")
        self.done()

    # -- index expressions

    def iexpr(self) -> Any:
        """The index expression at the cursor: it ends before the first token that cannot
        continue it (as in the LALR parser, whose lookahead ends it there)."""
        tk, start = self.tk, self.ti
        kind, text, col = tk[start]
        # a lone atom (the commonest case: a size): what its callback makes of it
        if kind in ("INT", "NAME") and tk[start + 1][1] not in _CONTINUES_IEXPR:
            if kind == "INT":
                self.ti += 1
                return int(text)  # ``int_atom``
            if text not in _IEXPR_FUNCS:
                self.ti += 1
                return self.b.name_atom([self.tok("NAME", text, col)])
        k, depth, operand = start, 0, False
        while k < len(tk):
            kind, text, _ = tk[k]
            if kind in ("INT", "NAME", "VALUE"):
                if operand:
                    break
                operand = True
            elif text == "(":
                depth, operand = depth + 1, False
            elif text == ")":
                if depth == 0:
                    break
                depth, operand = depth - 1, True
            elif text == "," and depth > 0 or text in ("+", "-", "*"):
                operand = False
            else:
                break
            k += 1
        if k == start:
            raise Unsure
        self.ti = k
        c0, c1 = tk[start][2], tk[k - 1][2] + len(tk[k - 1][1])
        return self.iexpr_text(self.s[c0:c1], c0)

    def iexpr_text(self, text: str, col: int) -> Any:
        """The value of the index expression ``text`` at column ``col`` of the current line.

        Building sympy expressions is the slow part of the callbacks, and a program repeats the
        same few index texts thousands of times. So the text is compiled once; each time it is
        read, the callbacks of its names and values (``name_atom``, ``indirect_atom``) run as
        they would in the lark path (they have effects: the free variables of a dependency are
        recorded, size symbols are declared), and when they return the same objects as last time
        the value of last time is the value (``int_atom`` and the arithmetic callbacks are pure
        functions of their operands)."""
        b = self.b
        entry = self.iexprs.get(text)
        if entry is not None and len(entry[0]) == 1 and entry[0][0][0] == "NAME":
            _, name, off, _ = entry[0][0]  # a lone name (``i0``): its value is its atom's
            return b.name_atom([self.tok("NAME", name, col + off)])
        if entry is None:
            if _DIGITS.fullmatch(text):
                return int(text)  # what ``int_atom`` makes of an INT token
            code = _IExprCompiler(text).compile()
            atoms = [ins for ins in code if ins[0] in ("NAME", "VALUE")]
            last: list[Any] | None = None
        else:
            code, atoms, last, value = entry
        got: list[Any] = []
        same = last is not None
        tok = self.tok
        for kind, t, off, _ in atoms:
            atom = tok(kind, t, col + off)
            x = b.name_atom([atom]) if kind == "NAME" else b.indirect_atom([atom])
            if same and x is not last[len(got)]:  # type: ignore[index]
                same = False
            got.append(x)
        if same:
            return value
        value = self.evaluate(code, col, got)
        self.iexprs[text] = (code, atoms, got, value)
        return value

    def evaluate(self, code: list[_Instr], col: int, atoms: list[Any]) -> Any:
        b = self.b
        stack: list[Any] = []
        next_atom = iter(atoms)
        for kind, text, off, n in code:
            if kind == "INT":
                stack.append(b.int_atom([self.tok("INT", text, col + off)]))
            elif kind in ("NAME", "VALUE"):
                stack.append(next(next_atom))
            elif kind == "NEG":
                stack.append(b.neg([self.tok("MINUS", text, col + off), stack.pop()]))
            elif n == 2 and kind in ("PLUS", "MINUS", "STAR"):
                y = stack.pop()
                x = stack.pop()
                stack.append(getattr(b, _ARITH[text][1])([x, self.tok(kind, text, col + off), y]))
            else:  # floordiv, mod, min, max
                args = stack[len(stack) - n :]
                del stack[len(stack) - n :]
                callback = {"FLOORDIV": b.floordiv, "MOD": b.mod, "MIN": b.imin, "MAX": b.imax}
                stack.append(callback[kind]([self.tok(kind, text, col + off), *args]))
        (value,) = stack
        return value

    # -- literals, attributes, types

    def literal(self) -> Any:
        """``literal``: a number or a literal keyword, ``-`` glued or not."""
        b = self.b
        kind, text, col = self.peek()
        self.ti += 1
        if kind == "INT":
            return b.int_lit([self.tok("INT", text, col)])
        if kind == "FLOAT":
            return b.float_lit([self.tok("FLOAT", text, col)])
        if kind == "NAME" and text in _SPECIAL:
            return b.special_lit([self.tok(_SPECIAL[text], text, col)])
        if text == "-":
            kind, text, col = self.peek()
            self.ti += 1
            if kind == "INT":
                return b.neg_int_lit([self.tok("INT", text, col)])
            if kind == "FLOAT":
                return b.neg_float_lit([self.tok("FLOAT", text, col)])
            if kind == "NAME" and text == "inf":
                return b.neg_inf([self.tok("INF", text, col)])
        raise Unsure

    def literal_piece(self, piece: str, col: int) -> Any:
        """A literal matched by ``_LIT`` (one piece of a whole-line match)."""
        b = self.b
        if piece in _SPECIAL:
            return b.special_lit([self.tok(_SPECIAL[piece], piece, col)])
        neg = piece[0] == "-"
        if neg:
            piece, col = piece[1:], col + 1
            if piece == "inf":
                return b.neg_inf([self.tok("INF", piece, col)])
        if _DIGITS.fullmatch(piece):
            return (b.neg_int_lit if neg else b.int_lit)([self.tok("INT", piece, col)])
        return (b.neg_float_lit if neg else b.float_lit)([self.tok("FLOAT", piece, col)])

    def body_operand_piece(self, piece: str, col: int) -> Any:
        if piece[0] == "%":
            return self.b.body_value([self.tok("VALUE", piece, col)])
        return self.literal_piece(piece, col)

    def attr_value(self) -> Any:
        b = self.b
        kind, text, col = self.peek()
        if text == "[":
            self.ti += 1
            items = []
            if not self.at("]"):
                items.append(self.attr_value())
                while self.at(","):
                    self.ti += 1
                    items.append(self.attr_value())
            self.take("]")
            return b.list_lit(items or [None])
        if kind == "STRING":
            self.ti += 1
            return b.string_lit([self.tok("STRING", text, col)])
        if kind == "FLOAT":
            self.ti += 1
            return b.float_lit([self.tok("FLOAT", text, col)])
        if kind == "NAME" and text in _SPECIAL:
            self.ti += 1
            return b.special_lit([self.tok(_SPECIAL[text], text, col)])
        if text == "-":
            kind, text, col = self.peek(1)
            if kind == "FLOAT":
                self.ti += 2
                return b.neg_float_lit([self.tok("FLOAT", text, col)])
            if kind == "NAME" and text == "inf":
                self.ti += 2
                return b.neg_inf([self.tok("INF", text, col)])
        return self.iexpr()

    def attr_dict(self) -> Any:
        self.take("{")
        items = []
        if not self.at("}"):
            while True:
                # an attribute's name is followed by '=', so the lexer never makes it a keyword
                name = self.take_tok("NAME")
                self.take("=")
                items.append(self.b.attr([name, self.attr_value()]))
                if not self.at(","):
                    break
                self.ti += 1
        self.take("}")
        return self.b.attr_dict(items or [None])

    def type(self) -> Any:
        b = self.b
        ty = self.take_tok("TYPE")
        if not self.at("strided"):
            return b.type([ty])
        children = [self.tok("STRIDED", "strided", self.take("strided"))]
        self.take("[")
        if not self.at("]"):
            children.append(self.iexpr())
            while self.at(","):
                self.ti += 1
                children.append(self.iexpr())
        else:
            children.append(None)
        self.take("]")
        if self.at("offset"):
            self.ti += 1
            children.append(b.offset([self.iexpr()]))
        return b.type([ty, b.layout(children)])

    def type_list(self) -> Any:
        types = [self.type()]
        while self.at(","):
            self.ti += 1
            types.append(self.type())
        return self.b.type_list(types)

    # -- module, functions, kernels

    def module(self) -> Module:
        funcs: list[Any] = []
        while True:
            i = self.next_line()
            if i is None:
                return self.b.start(funcs)
            funcs.append(self.func(i))

    def func(self, i: int) -> Any:
        b = self.b
        self.split(i)
        self.take("func")
        g = b.func_head([self.take_tok("FUNC_NAME")])
        self.take("(")
        args = []
        if not self.at(")"):
            while True:
                name = self.take_tok("VALUE")
                self.take(":")
                args.append(b.arg([name, self.type()]))
                if not self.at(","):
                    break
                self.ti += 1
        self.take(")")
        arg_values = b.func_args(args or [None])
        sizes = []
        if self.at("sizes"):
            names = [self.take_tok("NAME")]
            self.take("(")
            names.append(self.take_tok("NAME"))
            while self.at(","):
                self.ti += 1
                names.append(self.take_tok("NAME"))
            self.take(")")
            sizes.append(b.func_sizes(names))
        self.take("->")
        self.take("(")
        types: list[Any] = [None]
        if not self.at(")"):
            types = [self.type()]
            while self.at(","):
                self.ti += 1
                types.append(self.type())
        self.take(")")
        attrs = []
        if self.at("attributes"):
            self.ti += 1
            attrs.append(b.func_attrs([self.attr_dict()]))
        self.take("{")
        self.done()
        items: list[Any] = []
        while True:
            i = self.line()
            s = self.s
            if s[i] == "%":
                items.append(self.stmt(i))
            elif s.startswith("kernel", i):
                items.append(self.kernel(i))
            elif s.startswith("return", i):
                ret = self.return_stmt(i)
                break
            else:
                raise Unsure
        self.closing(self.line())
        return b.func([g, arg_values, *sizes, *types, *attrs, *items, ret])

    def return_stmt(self, i: int) -> Any:
        self.split(i)
        children = [self.tok("RETURN", "return", self.take("return"))]
        if self.more():
            children.append(self.take_tok("VALUE"))
            while self.at(","):
                self.ti += 1
                children.append(self.take_tok("VALUE"))
        else:
            children.append(None)
        self.done()
        return self.b.return_stmt(children)

    def kernel(self, i: int) -> Any:
        b = self.b
        self.split(i)
        kw = self.tok("KERNEL", "kernel", self.take("kernel"))
        name = self.take_tok("FUNC_NAME")
        over = local = attrs = None
        if self.at("over"):
            self.ti += 1
            self.take("(")
            numel = self.iexpr()
            if self.at(";"):
                semi = self.tok("SEMI", ";", self.take(";"))
                over = b.kernel_over([numel, semi, self.iexpr()])
            else:
                over = b.kernel_over([numel, None, None])
            self.take(")")
        if self.at("local"):
            children = [self.tok("LOCAL", "local", self.take("local"))]
            self.take("(")
            children.append(self.take_tok("VALUE"))
            while self.at(","):
                self.ti += 1
                children.append(self.take_tok("VALUE"))
            self.take(")")
            local = b.kernel_local(children)
        if self.at("attributes"):
            self.ti += 1
            attrs = b.kernel_attrs([self.attr_dict()])
        self.take("{")
        self.done()
        k = b.kernel_head([kw, name, over, local, attrs])
        items: list[Any] = []
        while True:
            i = self.line()
            if self.s[i] != "%":
                self.closing(i)
                break
            items.append(self.stmt(i))
        if not items:
            raise Unsure
        return b.kernel([k, *items])

    # -- statements

    def stmt(self, i: int) -> Any:
        b = self.b
        m = _LOOP_HEAD.fullmatch(self.s, i)
        if m is not None:
            result_list, kw, children = self.loop_head(m)
            node, deps_col = self.loop_rest(kw, children)
            deps = (
                None if deps_col is None else self.deps_clause(self.tok("DEPS", "deps", deps_col))
            )
            return b.stmt([result_list, node, deps])
        self.split(i)
        results = [self.take_tok("VALUE")]
        while self.at(","):
            self.ti += 1
            results.append(self.take_tok("VALUE"))
        self.take("=")
        result_list = b.result_list(results)
        kind, word, col = self.peek()
        if kind != "NAME":
            raise Unsure
        deps = None
        if word in ("pointwise", "reduction"):
            node, deps_col = self.loop_node()
            if deps_col is not None:
                deps = self.deps_clause(self.tok("DEPS", "deps", deps_col))
        else:
            node = self.extern_op() if word == "extern" else self.tensor_op()
            if self.at("deps"):
                deps_tok = self.tok("DEPS", "deps", self.take("deps"))
                self.take("{")
                self.done()
                deps = self.deps_clause(deps_tok)
            else:
                self.done()
        return b.stmt([result_list, node, deps])

    def tensor_op(self) -> Any:
        b = self.b
        name = self.take_tok("NAME")
        children: list[Any] = [name]
        if not (self.at("{") or self.at(":")):
            children.append(self.operand())
            while self.at(","):
                self.ti += 1
                children.append(self.operand())
        else:
            children.append(None)
        if self.at("{"):
            children.append(self.attr_dict())
        self.take(":")
        children.append(self.type_list())
        return b.tensor_op(children)

    def operand(self) -> Any:
        kind, text, col = self.peek()
        if kind == "VALUE":
            self.ti += 1
            return self.b.value_operand([self.tok("VALUE", text, col)])
        return self.literal()

    def extern_op(self) -> Any:
        b = self.b
        self.take("extern")
        callee = self.take_tok("STRING")
        self.take("(")
        children: list[Any] = [b.extern_head([callee])]
        if not self.at(")"):
            while True:
                kind, text, col = self.peek()
                # a word followed by '=' is a keyword argument's name, never a keyword
                if kind == "NAME" and self.peek(1)[1] == "=":
                    self.ti += 2
                    children.append(b.kwarg([self.tok("NAME", text, col), self.attr_value()]))
                else:
                    children.append(b.call_arg([self.attr_value()]))
                if not self.at(","):
                    break
                self.ti += 1
        else:
            children.append(None)
        self.take(")")
        if self.at("{"):
            children.append(self.attr_dict())
        self.take(":")
        children.append(self.type_list())
        return b.extern_op(children)

    def loop_node(self) -> tuple[Any, int | None]:
        """A loop node from its header line to its closing line; the node and, when the closing
        line opens a ``deps`` clause (``} deps {``), the column of ``deps``."""
        b = self.b
        kw_text, kw_col = self.take_kind("NAME")
        children = [self.tok(kw_text.upper(), kw_text, kw_col)]
        if kw_text == "reduction":
            children.append(self.take_tok("NAME"))  # only a name may follow: never a keyword
        if self.at("{"):
            children.append(self.attr_dict())
        self.take(":")
        children.append(self.type_list())
        self.take("over")
        children.append(self.loop_list(self.loop_range, b.over_clause, None))
        order = None
        if self.at("order"):
            order_tok = self.tok("ORDER", "order", self.take("order"))
            order = self.loop_list(self.order_loop, b.order_clause, order_tok)
        children.append(order)
        self.take("{")
        self.done()
        return self.loop_rest(kw_text, children)

    def loop_head(self, m: re.Match[str]) -> tuple[Any, str, list[Any]]:
        """The header line of a loop node matched by ``_LOOP_HEAD``: what the result list's
        callback returns, the keyword, and the children of the node so far."""
        b, tok = self.b, self.tok
        col = m.start("results")
        results = []
        for name in m.group("results").split(", "):
            results.append(tok("VALUE", name, col))
            col += len(name) + 2
        result_list = b.result_list(results)
        kw = m.group("kw")[:9]  # "pointwise" or "reduction"
        children = [tok(kw.upper(), kw, m.start("kw"))]
        if kw == "reduction":
            children.append(tok("NAME", m.group("kind"), m.start("kind")))
        if m.group("attrs"):
            self.split(m.start("attrs"), m.end("attrs") - 1)
            children.append(self.attr_dict())
            self.done()
        types = []
        for t in _STATIC_TYPE_RE.finditer(self.s, m.start("types"), m.end("types")):
            types.append(b.type([tok("TYPE", t.group(), t.start())]))
        children.append(b.type_list(types))
        over = self.matched_loops(m, "over", self.loop_range, [])
        children.append(b.over_clause(over))
        order = None
        if m.group("order_kw"):
            order_tok = tok("ORDER", "order", m.start("order_kw"))
            order = b.order_clause(self.matched_loops(m, "order", self.order_loop, [order_tok]))
        children.append(order)
        return result_list, kw, children

    def matched_loops(self, m: re.Match[str], part: str, item: Any, children: list[Any]) -> Any:
        """The children of ``over_clause`` or ``order_clause`` from the groups of ``_LOOP_HEAD``,
        laid out as ``loop_list`` lays them out."""
        children += self.matched_items(m, part, item) or [None]
        if m.group(part + "_semi"):
            children.append(self.tok("SEMI", ";", m.start(part + "_semi")))
            children += self.matched_items(m, part + "_red", item) or [None]
        else:
            children += [None, None]
        return children

    def matched_items(self, m: re.Match[str], group: str, item: Any) -> list[Any]:
        if not m.group(group):
            return []
        out = []
        for loop in _ORDER_ITEM_RE.finditer(self.s, m.start(group), m.end(group)):
            single, merged, size = loop.groups()
            if single is not None:
                names = [self.tok("NAME", single, loop.start(1))]
            else:
                col = loop.start(2)
                names = []
                for name in merged.split(", "):
                    names.append(self.tok("NAME", name, col))
                    col += len(name) + 2
            out.append(item([*names, int(size)]))
        return out

    def loop_rest(self, kw_text: str, children: list[Any]) -> tuple[Any, int | None]:
        """A loop node's body and closing line, after its header."""
        b = self.b
        children.append(self.body())
        i = self.line()
        s = self.s
        deps_col: int | None = None
        if len(s) == i + 1 and s[i] == "}":
            pass
        elif s.startswith("} deps {", i) and len(s) == i + 8:
            deps_col = i + 2
        else:
            self.split(i)
            self.take("}")
            if self.at("deps"):
                deps_col = self.take("deps")
                self.take("{")
            self.done()
        node = (b.pointwise_op if kw_text == "pointwise" else b.reduction_op)(children)
        return node, deps_col

    def loop_list(self, item: Any, callback: Any, kw: Any) -> Any:
        """``(a < 4, b < 8; r < 16)``: the children lark gives ``over_clause`` and
        ``order_clause`` (``None`` where an optional part is missing)."""
        self.take("(")
        children = [] if kw is None else [kw]
        children += self.loop_items(item) or [None]
        if self.at(";"):
            children.append(self.tok("SEMI", ";", self.take(";")))
            children += self.loop_items(item) or [None]
        else:
            children += [None, None]
        self.take(")")
        return callback(children)

    def loop_items(self, item: Any) -> list[Any]:
        if self.at(")") or self.at(";"):
            return []
        out = [item(self.loop_item_children())]
        while self.at(","):
            self.ti += 1
            out.append(item(self.loop_item_children()))
        return out

    def loop_item_children(self) -> list[Any]:
        """``i0 < 8`` or, in an order, ``[i0, i1] < 64``."""
        if self.at("["):
            self.ti += 1
            names = [self.take_tok("NAME")]
            while self.at(","):
                self.ti += 1
                names.append(self.take_tok("NAME"))
            self.take("]")
            if len(names) < 2:
                raise Unsure
        else:
            names = [self.take_tok("NAME")]
        self.take("<")
        return [*names, self.iexpr()]

    def loop_range(self, children: list[Any]) -> Any:
        if len(children) != 2:  # merged loops are for orders only
            raise Unsure
        return self.b.loop_range(children)

    def order_loop(self, children: list[Any]) -> Any:
        return (self.b.single_loop if len(children) == 2 else self.b.merged_loop)(children)

    # -- loop bodies

    def body(self) -> Any:
        b = self.b
        tok, body_stmt, body_value = self.tok, b.body_stmt, b.body_value
        match_line = _BODY_LINE.fullmatch
        children: list[Any] = []
        while True:
            i = self.line()
            s = self.s
            m = match_line(s, i) if s[i] == "%" else None
            if m is not None:
                result, buf, index_text, name, operand_text = m.groups()
                if buf is not None:
                    index = self.iexpr_text(index_text, m.start(3))
                    col = m.start(2)
                    load = [tok("LOAD", "load", col - 5), tok("VALUE", buf, col), index]
                    op = b.load_op([*load, None, None, None])
                    children.append(body_stmt([tok("VALUE", result, i), op]))
                    continue
                if name not in _BODY_KEYWORDS:
                    col = m.start(5)
                    children_op = [tok("NAME", name, m.start(4))]
                    for piece in operand_text.split(", "):
                        if piece[0] == "%":
                            children_op.append(body_value([tok("VALUE", piece, col)]))
                        else:
                            children_op.append(self.literal_piece(piece, col))
                        col += len(piece) + 2
                    children_op.append(None)
                    op = b.scalar_op(children_op)
                    children.append(body_stmt([tok("VALUE", result, i), op]))
                    continue
            elif s.startswith("yield", i):
                m = _YIELD.fullmatch(s, i)
                if m is not None:
                    operand = self.body_operand_piece(m.group(1), m.start(1))
                else:
                    self.split(i)
                    self.take("yield")
                    operand = self.body_operand()
                    self.done()
                children.append(b.yield_stmt([self.tok("YIELD", "yield", i), operand]))
                return b.body(children)
            children.append(self.body_stmt(i))

    def body_operand(self) -> Any:
        kind, text, col = self.peek()
        if kind == "VALUE":
            self.ti += 1
            return self.b.body_value([self.tok("VALUE", text, col)])
        return self.literal()

    def body_stmt(self, i: int) -> Any:
        """A body line in any spelling the whole-line shapes do not cover."""
        b = self.b
        self.split(i)
        result = self.take_tok("VALUE")
        self.take("=")
        kind, word, col = self.peek()
        if kind != "NAME":
            raise Unsure
        self.ti += 1
        kw = _BODY_KEYWORDS.get(word)
        if kw == "LOAD":
            buf = self.take_tok("VALUE")
            self.take("[")
            index = self.iexpr()
            self.take("]")
            mask: list[Any] = [None, None, None]
            if self.at("if"):
                if_tok = self.tok("IF", "if", self.take("if"))
                mask_tok = self.take_tok("VALUE")
                self.take("else")
                mask = [if_tok, mask_tok, self.literal()]
            op = b.load_op([self.tok(kw, word, col), buf, index, *mask])
        elif kw == "INDIRECT":
            src = self.take_tok("VALUE")
            self.take("<")
            op = b.indirect_op([self.tok(kw, word, col), src, self.iexpr()])
        elif kw == "INDEX":
            expr = self.iexpr()
            self.take(":")
            op = b.index_op([self.tok(kw, word, col), expr, self.take_tok("NAME")])
        else:
            children: list[Any] = [self.tok("NAME", word, col)]
            if self.more() and not (self.at("{") or self.at(":")):
                children.append(self.body_operand())
                while self.at(","):
                    self.ti += 1
                    children.append(self.body_operand())
            else:
                children.append(None)
            if self.at("{"):
                children.append(self.attr_dict())
            if self.at(":"):
                self.ti += 1
                children.append(self.take_tok("NAME"))
            else:
                # with nothing after its name, the op would take the next line's '%4' as an
                # operand in the lark parser
                if len(children) == 2 and children[1] is None:
                    raise Unsure
                children.append(None)
            op = b.scalar_op(children)
        self.done()
        return b.body_stmt([result, op])

    # -- dependencies

    def deps_clause(self, deps_tok: Any) -> Any:
        b = self.b
        tok, dep_range = self.tok, b.dep_range
        access = {"read": b.read_dep, "write": b.write_dep}
        children = [b.deps_head([deps_tok])]
        while True:
            i = self.line()
            s = self.s
            first = s[i]
            m = _MEMORY_DEP.fullmatch(s, i) if first in "rw" else None
            if m is not None:
                kw, buf, index_text, ranges, nbytes = m.groups()
                dep_children = [tok("VALUE", buf, m.start(2))]
                dep_children.append(self.iexpr_text(index_text, m.start(3)))
                if ranges:
                    col = m.start(4)
                    for piece in ranges.split(", "):
                        name, _, size = piece.partition(" < ")
                        dep_children.append(dep_range([tok("NAME", name, col), int(size)]))
                        col += len(piece) + 2
                else:
                    dep_children.append(None)
                dep_children += [tok("BYTES", "bytes", m.start(5) - 6), int(nbytes)]
                dep = b.memory_dep(dep_children)
                children.append(access[kw]([tok(_KEYWORD_TYPES[kw], kw, i), dep]))
                continue
            m = _STAR_DEP.fullmatch(s, i) if first in "rw" else None
            if m is not None:
                kw, buf, nbytes = m.group(1, 2, 3)
                dep = b.star_dep(
                    [
                        self.tok("VALUE", buf, m.start(2)),
                        self.tok("STAR", "*", m.end(2) + 1),
                        self.tok("BYTES", "bytes", m.start(3) - 6),
                        int(nbytes),
                    ]
                )
                children.append(access[kw]([tok(_KEYWORD_TYPES[kw], kw, i), dep]))
                continue
            m = _DEP_NAMES.fullmatch(s, i) if first in "ua" else None
            if m is not None:
                kw, names = m.group(1, 2)
                col = m.start(2)
                if names == "none":
                    toks = [self.tok("NONE", names, col)]
                else:
                    toks = []
                    for piece in names.split(", "):
                        kind = "RETURN" if piece == "return" else "VALUE"
                        toks.append(b.dep_name([self.tok(kind, piece, col)]))
                        col += len(piece) + 2
                kw_tok = tok(_KEYWORD_TYPES[kw], kw, i)
                callback = b.users_dep if kw == "users" else b.ancestors_dep
                children.append(callback([kw_tok, b.dep_names(toks)]))
                continue
            if first == "}" and len(s) == i + 1:
                return b.deps_clause(children)
            line = self.dep_line(i)
            if line is None:
                return b.deps_clause(children)
            children.append(line)

    def dep_line(self, i: int) -> Any:
        """A dependency line in any spelling the whole-line shapes do not cover (None for the
        clause's closing brace)."""
        b = self.b
        self.split(i)
        kind, word, col = self.peek()
        if word == "}":
            self.ti += 1
            self.done()
            return None
        if kind != "NAME":
            raise Unsure
        self.ti += 1
        kw = self.tok(word.upper(), word, col)
        if word in ("read", "write"):
            buf = self.take_tok("VALUE")
            self.take("[")
            if self.at("*"):
                star = self.tok("STAR", "*", self.take("*"))
                self.take("]")
                bytes_tok = self.tok("BYTES", "bytes", self.take("bytes"))
                dep = b.star_dep([buf, star, bytes_tok, self.iexpr()])
            else:
                children = [buf, self.iexpr()]
                self.take("]")
                self.take("over")
                self.take("(")
                if not self.at(")"):
                    while True:
                        name = self.take_tok("NAME")
                        self.take("<")
                        children.append(b.dep_range([name, self.iexpr()]))
                        if not self.at(","):
                            break
                        self.ti += 1
                else:
                    children.append(None)
                self.take(")")
                children.append(self.tok("BYTES", "bytes", self.take("bytes")))
                children.append(self.iexpr())
                dep = b.memory_dep(children)
            line = (b.read_dep if word == "read" else b.write_dep)([kw, dep])
        elif word == "weak":
            node = self.take_tok("VALUE")
            for_tok = self.tok("FOR", "for", self.take("for"))
            line = b.weak_dep([kw, node, for_tok, self.take_tok("VALUE")])
        elif word in ("users", "ancestors"):
            if self.at("none"):
                names = [self.tok("NONE", "none", self.take("none"))]
            else:
                names = [b.dep_name([self.dep_name()])]
                while self.at(","):
                    self.ti += 1
                    names.append(b.dep_name([self.dep_name()]))
            callback = b.users_dep if word == "users" else b.ancestors_dep
            line = callback([kw, b.dep_names(names)])
        else:
            raise Unsure
        self.done()
        return line

    def dep_name(self) -> Any:
        if self.at("return"):
            return self.tok("RETURN", "return", self.take("return"))
        return self.take_tok("VALUE")
