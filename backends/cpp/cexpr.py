"""Index expressions (sympy, over loop variables, sizes and indirect indices) as C++ int64
arithmetic.

Every symbol of an index is non-negative: loop variables and sizes by construction, indirect
indices because the kernel checked them against ``[0, bound)`` before using them. So floor
division and modulo by a positive divisor are C++'s ``/`` and ``%`` whenever the dividend is a sum
of non-negative terms; only a dividend that can be negative (``x1 - 2``) needs the
floor-rounding helpers ``fir_idiv`` / ``fir_imod``. Terms print in the order of FIR's own
printer, so the C++ reads like the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
from fir.ir.symbolic import FloorDiv, Modulo

_ADD, _MUL, _ATOM = 1, 2, 3


def c_int(v: int) -> str:
    if v == -(2**63):
        return "INT64_MIN"
    return str(v) if -(2**31) <= v < 2**31 else f"INT64_C({v})"


def c_index(e: Any, name: Callable[[str], str]) -> str:
    """``e`` as a C++ expression; ``name`` maps a symbol's name to its C++ identifier."""
    if isinstance(e, int):
        return c_int(e)
    return _print(sympy.sympify(e), name)[0]


def nonnegative(e: Any) -> bool:
    """Whether ``e`` is non-negative for every value of its (non-negative) symbols."""
    if isinstance(e, int):
        return e >= 0
    if isinstance(e, sympy.Integer):
        return int(e) >= 0
    if isinstance(e, sympy.Symbol):
        return True
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Max)):
        return all(nonnegative(a) for a in e.args)
    if isinstance(e, sympy.Min):
        return all(nonnegative(a) for a in e.args)
    if isinstance(e, sympy.Pow):
        return nonnegative(e.args[0])
    if isinstance(e, Modulo):
        return True
    if isinstance(e, FloorDiv):
        return nonnegative(e.args[0])
    return False


def _print(e: sympy.Expr, name: Callable[[str], str]) -> tuple[str, int]:
    if isinstance(e, sympy.Integer):
        v = int(e)
        return c_int(v), (_ATOM if v >= 0 else _ADD)
    if isinstance(e, sympy.Symbol):
        return name(e.name), _ATOM
    if isinstance(e, sympy.Add):
        parts: list[str] = []
        for i, term in enumerate(e.as_ordered_terms()):
            coeff, rest = term.as_coeff_Mul()
            if isinstance(coeff, sympy.Number) and coeff < 0:
                text = _product(-coeff, rest, name)
                parts.append(("-" if i == 0 else " - ") + text)
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
        fast = nonnegative(a)
        sa, sd = _print(a, name)[0], _print(d, name)[0]
        if isinstance(e, FloorDiv):
            text = f"({_operand(a, sa)} / {_operand(d, sd)})" if fast else f"fir_idiv({sa}, {sd})"
        else:
            text = f"({_operand(a, sa)} % {_operand(d, sd)})" if fast else f"fir_imod({sa}, {sd})"
        return text, _ATOM
    if isinstance(e, (sympy.Min, sympy.Max)):
        helper = "fir_imin" if isinstance(e, sympy.Min) else "fir_imax"
        args = [_print(a, name)[0] for a in sorted(e.args, key=sympy.default_sort_key)]
        text = args[0]
        for a in args[1:]:
            text = f"{helper}({text}, {a})"
        return text, _ATOM
    raise ValueError(f"index expression {e} uses {type(e).__name__}, which C++ cannot print")


def _operand(e: sympy.Expr, text: str) -> str:
    """Operands of ``/`` and ``%`` bind tighter than sums and products: parenthesize those."""
    return text if isinstance(e, (sympy.Integer, sympy.Symbol)) else f"({text})"


def _product(coeff: sympy.Expr, rest: sympy.Expr, name: Callable[[str], str]) -> str:
    factors = [f for f in sympy.Mul.make_args(rest) if f != 1]
    texts: list[str] = []
    if coeff != 1 or not factors:
        texts.append(c_int(int(coeff)))
    texts += [_factor(f, name) for f in factors]
    return "*".join(texts)


def _factor(f: sympy.Expr, name: Callable[[str], str]) -> str:
    text, prec = _print(f, name)
    return f"({text})" if prec < _MUL else text


def stride(e: Any, var: sympy.Symbol) -> Any:
    """How much ``e`` grows when ``var`` grows by one: an int or sympy expression when ``e`` is
    affine in ``var`` (``0`` when it does not use it), None otherwise (``var`` inside a floor
    division or modulo, or multiplied by another loop variable)."""
    if isinstance(e, int) or var not in getattr(e, "free_symbols", ()):
        return 0
    e = sympy.expand(e)
    total: Any = 0
    for term in sympy.Add.make_args(e):
        if var not in term.free_symbols:
            continue
        c = term / var
        if var in c.free_symbols or not isinstance(term, (sympy.Mul, sympy.Symbol)):
            return None
        if any(not s.is_positive for s in c.free_symbols):  # only size symbols may scale it
            return None
        total += c
    return int(total) if isinstance(total, (int, sympy.Integer)) else total
