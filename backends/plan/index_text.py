"""Index expressions (sympy, over loop variables, sizes and indirect indices) as the integer
arithmetic of a renderer's language: one printer, the operators and helpers given by an
:class:`IndexSyntax` (C++ and Triton share it).

Every symbol of an index is non-negative: loop variables and sizes by construction, indirect
indices because the kernel checked them against ``[0, bound)`` before using them. So floor
division and modulo by a positive divisor are the language's truncating operators whenever the
dividend is a sum of non-negative terms; only a dividend that can be negative (``x1 - 2``) needs
the floor-rounding helpers. Terms print in the order of FIR's own printer, so the code reads
like the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy
from fir.ir.symbolic import FloorDiv, Modulo

_ADD, _MUL, _ATOM = 1, 2, 3


@dataclass(frozen=True)
class IndexSyntax:
    language: str
    integer: Callable[[int], str]  # an integer literal
    div: str  # truncating division and remainder operators (non-negative dividends)
    mod: str
    floor_div: str  # helpers: floor division and modulo of any dividend, min and max
    floor_mod: str
    minimum: str
    maximum: str


def nonnegative(e: Any) -> bool:
    """Whether ``e`` is non-negative for every value of its (non-negative) symbols."""
    if isinstance(e, int):
        return e >= 0
    if isinstance(e, sympy.Integer):
        return int(e) >= 0
    if isinstance(e, sympy.Symbol):
        return True
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
        return all(nonnegative(a) for a in e.args)
    if isinstance(e, sympy.Pow):
        return nonnegative(e.args[0])
    if isinstance(e, Modulo):
        return True
    if isinstance(e, FloorDiv):
        return nonnegative(e.args[0])
    return False


def print_index(e: Any, name: Callable[[str], str], syntax: IndexSyntax) -> str:
    """``e`` in ``syntax``; ``name`` maps a symbol's name to its identifier."""
    if isinstance(e, int):
        return syntax.integer(e)
    return _Printer(name, syntax).print(sympy.sympify(e))[0]


class _Printer:
    def __init__(self, name: Callable[[str], str], syntax: IndexSyntax) -> None:
        self.name = name
        self.s = syntax

    def print(self, e: sympy.Expr) -> tuple[str, int]:
        if isinstance(e, sympy.Integer):
            v = int(e)
            return self.s.integer(v), (_ATOM if v >= 0 else _ADD)
        if isinstance(e, sympy.Symbol):
            return self.name(e.name), _ATOM
        if isinstance(e, sympy.Add):
            parts: list[str] = []
            for i, term in enumerate(e.as_ordered_terms()):
                coeff, rest = term.as_coeff_Mul()
                if isinstance(coeff, sympy.Number) and coeff < 0:
                    parts.append(("-" if i == 0 else " - ") + self.product(-coeff, rest))
                else:
                    text = self.print(term)[0]
                    parts.append(text if i == 0 else " + " + text)
            return "".join(parts), _ADD
        if isinstance(e, sympy.Mul):
            coeff, rest = e.as_coeff_Mul()
            if isinstance(coeff, sympy.Number) and coeff < 0:
                return "-" + self.product(-coeff, rest), _ADD
            return self.product(coeff, rest), _MUL
        if isinstance(e, sympy.Pow):
            base, exp = e.args
            if isinstance(exp, sympy.Integer) and int(exp) > 0:
                return "*".join([self.factor(base)] * int(exp)), _MUL
        if isinstance(e, (FloorDiv, Modulo)):
            a, d = e.args
            sa, sd = self.print(a)[0], self.print(d)[0]
            floor = isinstance(e, FloorDiv)
            if nonnegative(a):
                op = self.s.div if floor else self.s.mod
                return f"({_operand(a, sa)} {op} {_operand(d, sd)})", _ATOM
            return f"{self.s.floor_div if floor else self.s.floor_mod}({sa}, {sd})", _ATOM
        if isinstance(e, (sympy.Min, sympy.Max)):
            helper = self.s.minimum if isinstance(e, sympy.Min) else self.s.maximum
            args = [self.print(a)[0] for a in sorted(e.args, key=sympy.default_sort_key)]
            text = args[0]
            for a in args[1:]:
                text = f"{helper}({text}, {a})"
            return text, _ATOM
        raise ValueError(
            f"index expression {e} uses {type(e).__name__}, which {self.s.language} cannot print"
        )

    def product(self, coeff: sympy.Expr, rest: sympy.Expr) -> str:
        factors = [f for f in sympy.Mul.make_args(rest) if f != 1]
        texts: list[str] = []
        if coeff != 1 or not factors:
            texts.append(self.s.integer(int(coeff)))
        texts += [self.factor(f) for f in factors]
        return "*".join(texts)

    def factor(self, f: sympy.Expr) -> str:
        text, prec = self.print(f)
        return f"({text})" if prec < _MUL else text


def _operand(e: sympy.Expr, text: str) -> str:
    """Operands of division and remainder bind tighter than sums and products."""
    return text if isinstance(e, (sympy.Integer, sympy.Symbol)) else f"({text})"
