"""Index expressions (sympy, over loop variables, sizes and indirect indices) as Triton
integer arithmetic.

Every symbol of an index is non-negative (loop variables and sizes by construction, indirect
indices after their check), so floor division and modulo by a positive divisor are Triton's
``//`` and ``%`` (which round toward zero) whenever the dividend is a sum of non-negative terms;
a dividend that can be negative goes through the helpers ``fir_idiv`` / ``fir_imod``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
from fir.backends.cpp.cexpr import nonnegative
from fir.ir.symbolic import FloorDiv, Modulo

_ADD, _MUL, _ATOM = 1, 2, 3


def t_index(e: Any, name: Callable[[str], str]) -> str:
    """``e`` as a Triton expression; ``name`` maps a symbol's name to its variable."""
    if isinstance(e, int):
        return str(e)
    return _print(sympy.sympify(e), name)[0]


def _print(e: sympy.Expr, name: Callable[[str], str]) -> tuple[str, int]:
    if isinstance(e, sympy.Integer):
        v = int(e)
        return str(v), (_ATOM if v >= 0 else _ADD)
    if isinstance(e, sympy.Symbol):
        return name(e.name), _ATOM
    if isinstance(e, sympy.Add):
        parts: list[str] = []
        for i, term in enumerate(e.as_ordered_terms()):
            coeff, rest = term.as_coeff_Mul()
            if isinstance(coeff, sympy.Number) and coeff < 0:
                parts.append(("-" if i == 0 else " - ") + _product(-coeff, rest, name))
            else:
                text = _print(term, name)[0]
                parts.append(text if i == 0 else " + " + text)
        return "".join(parts), _ADD
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        if isinstance(coeff, sympy.Number) and coeff < 0:
            return "-" + _product(-coeff, rest, name), _ADD
        return _product(coeff, rest, name), _MUL
    if isinstance(e, sympy.Pow):
        base, exp = e.args
        if isinstance(exp, sympy.Integer) and int(exp) > 0:
            return "*".join([_factor(base, name)] * int(exp)), _MUL
    if isinstance(e, (FloorDiv, Modulo)):
        a, d = e.args
        sa, sd = _print(a, name)[0], _print(d, name)[0]
        floor = isinstance(e, FloorDiv)
        if nonnegative(a):
            op = "//" if floor else "%"
            return f"({_operand(a, sa)} {op} {_operand(d, sd)})", _ATOM
        return f"{'fir_idiv' if floor else 'fir_imod'}({sa}, {sd})", _ATOM
    if isinstance(e, (sympy.Min, sympy.Max)):
        helper = "tl.minimum" if isinstance(e, sympy.Min) else "tl.maximum"
        args = [_print(a, name)[0] for a in sorted(e.args, key=sympy.default_sort_key)]
        text = args[0]
        for a in args[1:]:
            text = f"{helper}({text}, {a})"
        return text, _ATOM
    raise ValueError(f"index expression {e} uses {type(e).__name__}, which Triton cannot print")


def _operand(e: sympy.Expr, text: str) -> str:
    return text if isinstance(e, (sympy.Integer, sympy.Symbol)) else f"({text})"


def _product(coeff: sympy.Expr, rest: sympy.Expr, name: Callable[[str], str]) -> str:
    factors = [f for f in sympy.Mul.make_args(rest) if f != 1]
    texts: list[str] = []
    if coeff != 1 or not factors:
        texts.append(str(int(coeff)))
    texts += [_factor(f, name) for f in factors]
    return "*".join(texts)


def _factor(f: sympy.Expr, name: Callable[[str], str]) -> str:
    text, prec = _print(f, name)
    return f"({text})" if prec < _MUL else text
