"""PyTorch's symbolic sizes (sympy expressions of ``torch.utils._sympy``) as FIR index expressions.

Dynamo's shape environment writes sizes with its own sympy functions: ``FloorDiv``,
``CleanDiv``, ``CeilDiv``, ``ModularIndexing``, ``Mod``, ``PythonMod``, its own ``Max`` and
``Min``, ``PowByNatural``, ``Identity``. FIR's index language has ``floordiv``, ``mod``, ``min``
and ``max`` (:mod:`fir.ir.symbolic`), which print, parse back and render in every back end, so
each of PyTorch's forms is rewritten into them with the same value:

* ``CeilDiv(a, b)`` is ``floordiv(a + b - 1, b)`` (``b`` positive);
* ``ModularIndexing(a, b, c)`` is ``mod(floordiv(a, b), c)``;
* ``Mod`` (C remainder, which PyTorch uses only for non-negative operands, where it equals
  Python's) and ``PythonMod`` are ``mod``;
* a division by a negative constant ``-c`` is a division of ``-a`` by ``c``.

Anything else (float-valued functions, a division by a size of unknown sign) raises
:class:`UnsupportedSize` naming the expression, so the graph runs with PyTorch for a stated
reason rather than with a wrong size.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import sympy
from fir.ir.symbolic import FloorDiv, Modulo, size_symbol


class UnsupportedSize(Exception):
    """A size FIR cannot express; the importer reports it as an ``UnsupportedError``."""


# a backed size symbol of the shape environment (``s0``, ``s77``); ``u0`` is data-dependent
SIZE_NAME = re.compile(r"s\d+")
# While a graph is imported: the data-dependent symbols (``u0``) it takes bound, as a whole
# dimension of a tensor input or as an int input (a part of a graph cut at the op that makes
# them, :mod:`fir.frontend.segments`); they are sizes of the program like ``s0``
BOUND_UNBACKED: ContextVar[frozenset[str]] = ContextVar("fir_bound_unbacked", default=frozenset())

# While a graph is imported: the importer's maker of *computed sizes*. A size FIR's index
# forms cannot write (``RoundToInt(IntTrueDiv(s77, 2) + 1.0)`` of ``x[:round(i / 2 + 1)]``) but
# that the call's inputs determine becomes a size parameter of the function whose value the
# compiled call evaluates; the maker returns None where the inputs do not determine it.
COMPUTED_SIZES: ContextVar[Callable[[sympy.Basic], sympy.Expr | None] | None] = ContextVar(
    "fir_computed_sizes", default=None
)
# PyTorch's int-valued functions of a float: of an ``IntTrueDiv``, floor divisions
_INT_OF_FLOAT = ("TruncToInt", "FloorToInt", "CeilToInt", "RoundToInt")


def to_fir_expr(
    expr: Any, symbol: Callable[[sympy.Symbol], sympy.Expr] | None = None
) -> int | sympy.Expr:
    """``expr`` (an int or a sympy expression of the shape environment) as a FIR index
    expression over FIR's size symbols; ``symbol`` maps a free symbol to its FIR form (by
    default, ``sN`` to the size symbol ``sN`` and anything else is unsupported)."""
    if isinstance(expr, int):
        return expr
    out = _Converter(symbol or default_symbol, expr).go(sympy.sympify(expr))
    return int(out) if isinstance(out, sympy.Integer) else out


def default_symbol(s: sympy.Symbol) -> sympy.Expr:
    if SIZE_NAME.fullmatch(s.name) or s.name in BOUND_UNBACKED.get():
        return size_symbol(s.name)
    raise UnsupportedSize(f"data-dependent size {s.name} is not supported")


class _Converter:
    def __init__(self, symbol: Callable[[sympy.Symbol], sympy.Expr], whole: Any) -> None:
        self.symbol = symbol
        self.whole = whole
        self.computed = COMPUTED_SIZES.get()

    def compute(self, e: sympy.Basic, error: UnsupportedSize) -> sympy.Expr:
        """``e`` as a computed size (see ``COMPUTED_SIZES``), else ``error``."""
        s = self.computed(e) if self.computed is not None else None
        if s is None:
            raise error
        return s

    def fail(self, why: str) -> UnsupportedSize:
        return UnsupportedSize(f"size {self.whole}: {why}")

    def go(self, e: sympy.Basic) -> sympy.Expr:
        if isinstance(e, sympy.Integer):
            return e
        if isinstance(e, sympy.Symbol):
            try:
                return self.symbol(e)
            except UnsupportedSize as error:
                return self.compute(e, error)
        if isinstance(e, sympy.Rational) or e.is_Number:
            raise self.fail(f"{e} is not an integer")
        name = type(e).__name__
        if name in _INT_OF_FLOAT:
            try:
                if name != "RoundToInt" and type(e.args[0]).__name__ == "IntTrueDiv":
                    return self.int_of_division(name, e.args[0])
                raise self.fail(f"{name} has no FIR index form")
            except UnsupportedSize as error:
                return self.compute(e, error)
        args = [self.go(a) for a in e.args] if name != "Identity" else []
        if isinstance(e, sympy.Add):
            return sympy.Add(*args)
        if isinstance(e, sympy.Mul):
            return sympy.Mul(*args)
        if isinstance(e, sympy.Pow) or name == "PowByNatural":
            return self.power(e, args)
        if name == "Identity":
            return self.go(e.args[0])
        if name in ("FloorDiv", "CleanDiv"):
            return self.floordiv(args[0], args[1])
        if name == "CeilDiv":
            return self.floordiv(args[0] + args[1] - 1, args[1])
        if name in ("Mod", "PythonMod"):
            return self.modulo(args[0], args[1])
        if name == "ModularIndexing":
            return self.modulo(self.floordiv(args[0], args[1]), args[2])
        if name == "Max" or isinstance(e, sympy.Max):
            return sympy.Max(*args)
        if name == "Min" or isinstance(e, sympy.Min):
            return sympy.Min(*args)
        raise self.fail(f"{name} has no FIR index form")

    def int_of_division(self, name: str, div: sympy.Basic) -> sympy.Expr:
        """``int(a / b)``, ``math.floor(a / b)``, ``math.ceil(a / b)`` of ints as a floor
        division (``x.view(int(x.shape[0] / 6), 6)``); truncation is flooring where ``a / b``
        is not negative."""
        a, b = self.divisor(self.go(div.args[0]), self.go(div.args[1]))
        if name == "CeilToInt":
            return FloorDiv(a + b - 1, b)
        if name == "TruncToInt" and a.is_nonnegative is not True:
            raise self.fail(f"int({div}) of a quotient that may be negative")
        return FloorDiv(a, b)

    def power(self, e: sympy.Basic, args: list[sympy.Expr]) -> sympy.Expr:
        base, exp = args
        if not isinstance(exp, sympy.Integer) or int(exp) < 0:
            raise self.fail(f"power {e} has no FIR index form")
        return sympy.Pow(base, exp)

    def divisor(self, a: sympy.Expr, b: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
        """``(a, b)`` with ``b`` positive, keeping ``a / b``: FIR divides by positive numbers."""
        if isinstance(b, sympy.Integer) and int(b) < 0:
            return -a, -b
        if b.is_positive is not True:
            raise self.fail(f"division by {b}, which may not be positive")
        return a, b

    def floordiv(self, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
        return FloorDiv(*self.divisor(a, b))

    def modulo(self, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
        if isinstance(b, sympy.Integer) and int(b) < 0:
            # Python's a % -c == -((-a) % c)
            return -Modulo(-a, -b)
        if b.is_positive is not True:
            raise self.fail(f"remainder by {b}, which may not be positive")
        return Modulo(a, b)


def evaluate_torch_expr(expr: Any, values: dict[str, int]) -> int | float:
    """The value of one of PyTorch's symbolic numbers (``RoundDecimal(123.4567*IntTrueDiv(s77,
    2), 1)``) for the symbols' values of one call: PyTorch's own sympy functions compute it
    as Python does. Raises :class:`UnsupportedSize` where a symbol has no value or the result
    is no number."""
    if isinstance(expr, (int, float)):
        return expr
    missing = sorted(s.name for s in expr.free_symbols if s.name not in values)
    if missing:
        raise UnsupportedSize(f"{expr}: no value for {', '.join(missing)}")
    out = expr.xreplace({s: sympy.Integer(values[s.name]) for s in expr.free_symbols})
    if out.is_Integer:
        return int(out)
    if out.is_Number:
        return float(out)
    raise UnsupportedSize(f"{expr} evaluates to {out}, not a number")
