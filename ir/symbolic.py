"""Index expressions and symbolic sizes, on sympy.

This module imports sympy; everything else imports it lazily so that tools working on
static-shaped tensor-level text start fast. Conventions:

* index variables (``i0``, ``r0``) are non-negative integer symbols;
* size symbols (``s0``) are positive integer symbols;
* floor division and modulo are written ``floordiv(a, b)`` and ``mod(a, b)`` (``//`` starts a
  comment in the text format);
* an indirect index (a value loaded from a tensor, ``%3``) is an integer symbol whose name keeps
  the ``%`` so that it prints as it was written.

``FloorDiv`` and ``Modulo`` have Python semantics (floor toward -inf, result with the divisor's
sign) and simplify only where that is valid for every integer argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import Any

import sympy

Expr = sympy.Expr


@cache
def index_var(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


@cache
def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


@cache
def indirect_symbol(name: str) -> sympy.Symbol:
    """The symbol standing for the indirect index value ``%name`` (name given with the ``%``)."""
    return sympy.Symbol(name, integer=True)


def is_indirect(sym: sympy.Symbol) -> bool:
    return sym.name.startswith("%")


def _const(x: Any) -> int | None:
    if isinstance(x, sympy.Integer):
        return int(x)
    return None


def _split_divisible(a: sympy.Expr, b: int) -> tuple[sympy.Expr, sympy.Expr]:
    """Split ``a`` into (q, rest) with ``a == b*q + rest`` term by term."""
    quotient: list[sympy.Expr] = []
    rest: list[sympy.Expr] = []
    for term in sympy.Add.make_args(a):
        coeff, factor = term.as_coeff_Mul()
        if isinstance(coeff, sympy.Integer) and int(coeff) % b == 0:
            quotient.append(sympy.Integer(int(coeff) // b) * factor)
        else:
            rest.append(term)
    return sympy.Add(*quotient), sympy.Add(*rest)


class FloorDiv(sympy.Function):
    """``a // b`` for integers, rounding toward negative infinity; ``b`` is a positive integer."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr | None:
        ia, ib = _const(a), _const(b)
        if ib is not None and ib == 0:
            raise ZeroDivisionError("floor division by zero in an index expression")
        if ia is not None and ib is not None:
            return sympy.Integer(ia // ib)
        if ib == 1:
            return a
        if ia == 0:
            return sympy.Integer(0)
        if ib is not None and ib > 0:
            if isinstance(a, FloorDiv) and _const(a.args[1]) is not None and _const(a.args[1]) > 0:
                return FloorDiv(a.args[0], a.args[1] * ib)
            quotient, rest = _split_divisible(a, ib)
            if quotient != 0:
                return quotient + FloorDiv(rest, b)
        return None


class Modulo(sympy.Function):
    """``a % b`` for integers with the sign of ``b`` (Python semantics); ``b`` is positive."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr | None:
        ia, ib = _const(a), _const(b)
        if ib is not None and ib == 0:
            raise ZeroDivisionError("modulo by zero in an index expression")
        if ia is not None and ib is not None:
            return sympy.Integer(ia % ib)
        if ib == 1:
            return sympy.Integer(0)
        if ia == 0:
            return sympy.Integer(0)
        if ib is not None and ib > 0:
            if isinstance(a, Modulo) and a.args[1] == b:
                return a
            quotient, rest = _split_divisible(a, ib)
            if quotient != 0:
                return Modulo(rest, b)
        return None


def integer(v: int) -> sympy.Integer:
    return sympy.Integer(v)


def as_expr(v: int | sympy.Expr) -> sympy.Expr:
    return sympy.Integer(v) if isinstance(v, int) else v


def to_dim(e: sympy.Expr | int) -> int | sympy.Expr:
    """A size as a plain int when it is constant, else the sympy expression."""
    if isinstance(e, int):
        return e
    if isinstance(e, sympy.Integer):
        return int(e)
    return e


# ---------------------------------------------------------------------------------------------
# Canonical printing. Sympy's term order is deterministic for a given expression, and the parser
# rebuilds exactly that expression, so printing, parsing and printing again gives the same text.

_ADD, _MUL, _ATOM = 1, 2, 3


def print_expr(e: sympy.Expr | int) -> str:
    if isinstance(e, int):
        return str(e)
    return _print_cached(e)


@lru_cache(maxsize=65536)
def _print_cached(e: sympy.Expr) -> str:
    # index expressions repeat across nodes (``128*i0 + i1``); printing one costs ~50 µs
    return _print(e)[0]


def _print(e: sympy.Expr) -> tuple[str, int]:
    if isinstance(e, sympy.Integer):
        v = int(e)
        return str(v), (_ATOM if v >= 0 else _ADD)
    if isinstance(e, sympy.Symbol):
        return e.name, _ATOM
    if isinstance(e, sympy.Add):
        parts: list[str] = []
        for i, term in enumerate(e.as_ordered_terms()):
            coeff, rest = term.as_coeff_Mul()
            negative = isinstance(coeff, sympy.Number) and coeff < 0
            if negative:
                text = _print_mul_body(-coeff, rest)
                parts.append(("-" if i == 0 else " - ") + text)
            else:
                text = _print(term)[0]
                parts.append(text if i == 0 else " + " + text)
        return "".join(parts), _ADD
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        if isinstance(coeff, sympy.Number) and coeff < 0:
            return "-" + _print_mul_body(-coeff, rest), _ADD
        return _print_mul_body(coeff, rest), _MUL
    if isinstance(e, sympy.Pow):
        base, exp = e.args
        if isinstance(exp, sympy.Integer) and int(exp) > 0:
            b = _wrap_factor(base)
            return "*".join([b] * int(exp)), _MUL
        raise ValueError(f"index expression {e} has a power that FIR cannot print")
    if isinstance(e, FloorDiv):
        return f"floordiv({print_expr(e.args[0])}, {print_expr(e.args[1])})", _ATOM
    if isinstance(e, Modulo):
        return f"mod({print_expr(e.args[0])}, {print_expr(e.args[1])})", _ATOM
    if isinstance(e, (sympy.Min, sympy.Max)):
        name = "min" if isinstance(e, sympy.Min) else "max"
        args = sorted(e.args, key=sympy.default_sort_key)
        return f"{name}({', '.join(print_expr(a) for a in args)})", _ATOM
    raise ValueError(f"index expression {e} uses {type(e).__name__}, which FIR cannot print")


def _print_mul_body(coeff: sympy.Expr, rest: sympy.Expr) -> str:
    factors = [f for f in sympy.Mul.make_args(rest) if f != 1]
    texts: list[str] = []
    if coeff != 1 or not factors:
        texts.append(str(int(coeff)))
    for f in factors:
        texts.append(_wrap_factor(f))
    return "*".join(texts)


def _wrap_factor(f: sympy.Expr) -> str:
    text, prec = _print(f)
    return f"({text})" if prec < _MUL else text


# ---------------------------------------------------------------------------------------------
# Static bounds by interval arithmetic; None where a bound cannot be decided.

Interval = tuple[int, int]


def bounds(e: sympy.Expr | int, ranges: Mapping[sympy.Symbol, Interval]) -> Interval | None:
    if isinstance(e, int):
        return (e, e)
    return _bounds(e, ranges)


def _bounds(e: sympy.Expr, ranges: Mapping[sympy.Symbol, Interval]) -> Interval | None:
    if isinstance(e, sympy.Integer):
        return (int(e), int(e))
    if isinstance(e, sympy.Symbol):
        return ranges.get(e)
    if isinstance(e, sympy.Add):
        lo = hi = 0
        for a in e.args:
            b = _bounds(a, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return (lo, hi)
    if isinstance(e, sympy.Mul):
        lo = hi = 1
        for a in e.args:
            b = _bounds(a, ranges)
            if b is None:
                return None
            corners = (lo * b[0], lo * b[1], hi * b[0], hi * b[1])
            lo, hi = min(corners), max(corners)
        return (lo, hi)
    if isinstance(e, sympy.Pow) and isinstance(e.args[1], sympy.Integer):
        return _bounds(sympy.Mul(*([e.args[0]] * int(e.args[1])), evaluate=False), ranges)
    if isinstance(e, FloorDiv):
        a, d = _bounds(e.args[0], ranges), _const(e.args[1])
        if a is None or d is None or d <= 0:
            return None
        return (a[0] // d, a[1] // d)
    if isinstance(e, Modulo):
        a, d = _bounds(e.args[0], ranges), _const(e.args[1])
        if d is None or d <= 0:
            return None
        if a is not None and a[0] >= 0 and a[1] < d:
            return a
        return (0, d - 1)
    if isinstance(e, (sympy.Min, sympy.Max)):
        bs = [_bounds(a, ranges) for a in e.args]
        if any(b is None for b in bs):
            return None
        pick = min if isinstance(e, sympy.Min) else max
        return (pick(b[0] for b in bs), pick(b[1] for b in bs))  # type: ignore[index]
    return None


# ---------------------------------------------------------------------------------------------
# Evaluation with caller-given arithmetic (the interpreter passes torch tensors).


def evaluate(
    e: sympy.Expr | int,
    env: Mapping[sympy.Symbol, Any],
    floordiv: Callable[[Any, Any], Any] = lambda a, b: a // b,
    mod: Callable[[Any, Any], Any] = lambda a, b: a % b,
    minimum: Callable[[Any, Any], Any] = min,
    maximum: Callable[[Any, Any], Any] = max,
) -> Any:
    """Evaluate ``e`` with symbol values from ``env``; values may be ints or tensors."""

    def go(x: sympy.Expr) -> Any:
        if isinstance(x, sympy.Integer):
            return int(x)
        if isinstance(x, sympy.Symbol):
            return env[x]
        if isinstance(x, sympy.Add):
            args = [go(a) for a in x.args]
            acc = args[0]
            for a in args[1:]:
                acc = acc + a
            return acc
        if isinstance(x, sympy.Mul):
            args = [go(a) for a in x.args]
            acc = args[0]
            for a in args[1:]:
                acc = acc * a
            return acc
        if isinstance(x, sympy.Pow) and isinstance(x.args[1], sympy.Integer):
            base = go(x.args[0])
            acc = base
            for _ in range(int(x.args[1]) - 1):
                acc = acc * base
            return acc
        if isinstance(x, FloorDiv):
            return floordiv(go(x.args[0]), go(x.args[1]))
        if isinstance(x, Modulo):
            return mod(go(x.args[0]), go(x.args[1]))
        if isinstance(x, (sympy.Min, sympy.Max)):
            f = minimum if isinstance(x, sympy.Min) else maximum
            args = [go(a) for a in x.args]
            acc = args[0]
            for a in args[1:]:
                acc = f(acc, a)
            return acc
        raise ValueError(f"cannot evaluate {type(x).__name__} in an index expression")

    if isinstance(e, int):
        return e
    return go(e)


def free_symbols(e: sympy.Expr | int) -> set[sympy.Symbol]:
    if isinstance(e, int):
        return set()
    return set(e.free_symbols)
