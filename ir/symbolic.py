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

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
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
            if isinstance(a, FloorDiv) and (inner := _const(a.args[1])) is not None and inner > 0:
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
    return _print(_evaluated(e))[0]


def _evaluated(e: sympy.Expr) -> sympy.Expr:
    """``e`` rebuilt through its constructors, which evaluate what they can: a substitution
    can leave ``Max(1, 2)`` unevaluated, which the parser would read back as ``2``, so the
    text would not survive a round trip."""
    if e.is_Atom:
        return e
    args = [_evaluated(a) for a in e.args]
    return (
        e
        if all(a is b for a, b in zip(args, e.args)) and not isinstance(e, (sympy.Min, sympy.Max))
        else e.func(*args)
    )


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
    add = next((f for f in factors if isinstance(f, sympy.Add)), None)
    if coeff != 1 and add is not None and len(factors) > 1:
        # 2*(s0 - 1)*max(2, s0) parses as (2*(s0 - 1))*max(2, s0), and sympy distributes the
        # coefficient of a two-factor product: print it distributed, as it will read back
        factors[factors.index(add)] = sympy.Mul(coeff, add)
        coeff = sympy.Integer(1)
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


def _divisor(e: Any, ranges: Mapping[sympy.Symbol, Interval]) -> Interval | None:
    """The bounds of a divisor of floor division or modulo where it is positive (a constant,
    or a size symbol given a range: ``mod(i0, s27)``), else None."""
    d = _const(e)
    if d is not None:
        return (d, d) if d > 0 else None
    b = _bounds(e, ranges)
    return b if b is not None and b[0] > 0 else None


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
        a, d = _bounds(e.args[0], ranges), _divisor(e.args[1], ranges)
        if a is None or d is None:
            return None
        if d[0] == d[1]:
            return (a[0] // d[0], a[1] // d[0])
        if a[0] < 0:  # a divisor in a range: only a numerator that is not negative
            return None
        return (a[0] // d[1], a[1] // d[0])
    if isinstance(e, Modulo):
        a, d = _bounds(e.args[0], ranges), _divisor(e.args[1], ranges)
        if d is None:
            return None
        if a is not None and a[0] >= 0 and a[1] < d[0]:
            return a
        return (0, d[1] - 1)
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


# ---------------------------------------------------------------------------------------------
# Simplification with loop ranges. ``floordiv(a, d)`` is 0 and ``mod(a, d)`` is ``a`` when
# ``0 <= a < d`` for every value of the loop variables; this is what turns the index of an
# inlined or reshaped load back into plain affine form (``floordiv(64*i0 + i1, 64)`` → ``i0``).

Ranges = Mapping[sympy.Symbol, Any]  # loop variable -> size (int or expression over sizes)


def simplify_index(e: sympy.Expr | int, ranges: Ranges) -> sympy.Expr | int:
    """Simplify ``e`` knowing ``0 <= v < ranges[v]`` for each loop variable ``v``."""
    if isinstance(e, int) or not isinstance(e, sympy.Basic) or e.is_Atom:
        return e
    key = tuple(sorted(((k, ranges[k]) for k in e.free_symbols if k in ranges), key=str))
    return _simplify_cached(e, key)


@lru_cache(maxsize=65536)
def _simplify_cached(e: sympy.Expr, key: tuple[tuple[sympy.Symbol, Any], ...]) -> sympy.Expr:
    return _simplify(e, dict(key))


def _simplify(e: sympy.Expr, ranges: dict[sympy.Symbol, Any]) -> sympy.Expr:
    if e.is_Atom:
        return e
    args = [_simplify(a, ranges) for a in e.args]
    if any(a is not b for a, b in zip(args, e.args)):
        e = e.func(*args)
    if isinstance(e, sympy.Add):
        e = _merge_divmod(e)
    if isinstance(e, (FloorDiv, Modulo)):
        a, d = e.args
        span = _symbolic_bounds(a, ranges)
        if span is not None and _nonneg(span[0]) and _lt(span[1], d):
            return sympy.Integer(0) if isinstance(e, FloorDiv) else a
        if not isinstance(d, sympy.Integer):
            split = _split_by_divisor_factor(a, d, ranges)
            if split is not None:
                f, g, q, r = split
                if isinstance(e, FloorDiv):
                    return _simplify(FloorDiv(q, g), ranges)
                return _simplify(f * Modulo(q, g) + r, ranges)
        if isinstance(e, FloorDiv) and not isinstance(d, sympy.Integer):
            # symbolic divisor: pull out the terms that d divides (``floordiv(s1*i0 + i1, s1)``)
            q, r = _split_by_factor(a, d)
            if q != 0:
                rs = _symbolic_bounds(r, ranges)
                if rs is not None and _nonneg(rs[0]) and _lt(rs[1], d):
                    return q
        if isinstance(e, Modulo) and not isinstance(d, sympy.Integer):
            q, r = _split_by_factor(a, d)
            if q != 0:
                return _simplify(Modulo(r, d), ranges)
    return e


def _split_by_divisor_factor(
    a: sympy.Expr, d: sympy.Expr, ranges: dict[sympy.Symbol, Any]
) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr] | None:
    """``(f, g, q, r)`` with ``d = f*g`` (``f`` a product of some of ``d``'s factors, ``g``
    not 1) and ``a = f*q + r``, ``0 <= r < f``: then ``a // d`` is ``q // g`` and ``a % d`` is
    ``f*(q % g) + r``; None where no factor splits ``a`` so. With symbolic sizes a view of a
    view nests such divisions: a dynamic GPT-2's GELU indexed
    ``3072*s*floordiv(3072*x0 + x1, 3072*s) + 3072*mod(x0, s) + x1`` (``f`` = 3072), and a
    dynamic Llama's rotary of the repeated keys divided ``s27*(16*x0 + x1) + x2`` by
    ``s23*s27`` (``f`` = s27) inside four more divisions: 0.125 ms a layer against 0.012 for
    the static graph, on an H200."""
    coeff, rest = d.as_coeff_Mul()
    if not isinstance(coeff, sympy.Integer) or int(coeff) < 1:
        return None
    factors = list(sympy.Mul.make_args(rest))
    # f: some of the symbolic factors, with or without the integer coefficient (its other
    # divisors tried too cost a dynamic Llama's compile 3x the time for no division less)
    candidates = [
        k * sympy.Mul(*chosen)
        for size in range(len(factors), -1, -1)
        for chosen in itertools.combinations(factors, size)
        for k in {coeff, sympy.Integer(1)}
    ]
    for f in candidates:
        if f == 1 or f == d:
            continue
        if _num(f):
            q, r = _split_divisible(a, int(f))
        else:
            q, r = _split_by_factor(a, f)
        if q == 0:
            continue
        rs = _symbolic_bounds(r, ranges)
        if rs is not None and _nonneg(rs[0]) and _lt(rs[1], f):
            return f, sympy.cancel(d / f), q, r
    return None


def _split_factor(term: sympy.Expr, kind: type) -> tuple[sympy.Expr, sympy.Expr] | None:
    """``term`` as ``coefficient * f`` with ``f`` a ``kind`` (FloorDiv or Modulo), or None."""
    found = [f for f in sympy.Mul.make_args(term) if isinstance(f, kind)]
    if len(found) != 1:
        return None
    return sympy.cancel(term / found[0]), found[0]


def _merge_divmod(e: sympy.Expr) -> sympy.Expr:
    """``c*d*floordiv(a, d) + c*mod(a, d)`` → ``c*a`` (the division identity), the form a
    reshape of a reshape leaves with symbolic sizes (``s1*floordiv(x0, s1) + mod(x0, s1)``)."""
    terms = list(sympy.Add.make_args(e))
    changed = False
    for k, t in enumerate(terms):
        m = _split_factor(t, Modulo) if t is not None else None
        if m is None:
            continue
        c, mod = m
        a, d = mod.args
        for j, u in enumerate(terms):
            q = _split_factor(u, FloorDiv) if u is not None and j != k else None
            if q is not None and q[1].args == (a, d) and sympy.expand(q[0] - c * d) == 0:
                terms[k], terms[j] = c * a, None
                changed = True
                break
    if not changed:
        return e
    return sympy.Add(*[t for t in terms if t is not None])


def _num(x: Any) -> bool:
    return isinstance(x, (int, sympy.Integer))


def _nonneg(x: sympy.Expr) -> bool:
    if _num(x):
        return int(x) >= 0
    return sympy.expand(x).is_nonnegative is True


def _lt(hi: sympy.Expr, d: sympy.Expr) -> bool:
    """``hi < d`` for every value of the size symbols."""
    if _num(hi) and _num(d):
        return int(hi) < int(d)
    return sympy.expand(d - hi).is_positive is True


def _split_by_factor(a: sympy.Expr, d: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    q: list[sympy.Expr] = []
    r: list[sympy.Expr] = []
    for term in sympy.Add.make_args(a):
        t = sympy.cancel(term / d)
        # a whole multiple: no size left in a denominator (a term may hold a floordiv or a
        # modulo, which ``is_polynomial`` refuses: ``s*floordiv(q, 4)`` divided by ``s``)
        if sympy.fraction(t)[1] == 1 and all(
            not (isinstance(f, sympy.Pow) and f.exp < 0) for f in sympy.Mul.make_args(t)
        ):
            q.append(t)
        else:
            r.append(term)
    return sympy.Add(*q), sympy.Add(*r)


def _symbolic_bounds(
    e: sympy.Expr, ranges: dict[sympy.Symbol, Any]
) -> tuple[sympy.Expr, sympy.Expr] | None:
    """Inclusive (low, high) of ``e``, as expressions over size symbols; None when unknown.
    Exact for sums of products of loop variables with positive coefficients."""
    if isinstance(e, sympy.Integer):
        return e, e
    if isinstance(e, sympy.Symbol):
        if e in ranges:
            return sympy.Integer(0), as_expr(ranges[e]) - 1
        if e.is_positive and not is_indirect(e):
            return e, e  # a size symbol
        return None
    if isinstance(e, sympy.Add):
        lo: sympy.Expr = sympy.Integer(0)
        hi: sympy.Expr = sympy.Integer(0)
        for a in e.args:
            b = _symbolic_bounds(a, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return lo, hi
    if isinstance(e, sympy.Mul):
        lo = hi = sympy.Integer(1)
        for a in e.args:
            b = _symbolic_bounds(a, ranges)
            if b is None:
                return None
            if _nonneg(b[0]) and _nonneg(lo):
                lo, hi = lo * b[0], hi * b[1]
            elif _num(a) and int(a) < 0 and _nonneg(lo):
                lo, hi = hi * a, lo * a
            else:
                return None
        return lo, hi
    if isinstance(e, FloorDiv):
        b = _symbolic_bounds(e.args[0], ranges)
        if b is None or not _nonneg(b[0]):
            return None
        return FloorDiv(b[0], e.args[1]), FloorDiv(b[1], e.args[1])
    if isinstance(e, Modulo):
        return sympy.Integer(0), e.args[1] - 1
    return None


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


# the shortest run of consecutive elements that counts as walking memory along a loop: a
# load steps by one along ``i`` over ``mod(i, 64)`` (a head's 64 features) and jumps at each
# ``floordiv(i, 64)``, which still coalesces
CONTIGUOUS_RUN = 16


def run_stride(e: Any, var: sympy.Symbol) -> Any:
    """The stride of ``e`` along ``var`` within a run of consecutive values of it: ``stride``,
    or where ``var`` is split by a constant of at least :data:`CONTIGUOUS_RUN` (``mod(i, d)``
    and ``floordiv(i, d)``: attention's heads merged back), the stride of ``mod(i, d)``."""
    step = stride(e, var)
    if step is not None or isinstance(e, int):
        return step

    def split(x: Any, kind: type[sympy.Function]) -> bool:
        if not isinstance(x, kind):
            return False
        d = _const(x.args[1])
        return d is not None and d >= CONTIGUOUS_RUN and x.args[0] == var

    within = e.replace(lambda x: split(x, FloorDiv), lambda x: sympy.Integer(0))
    within = within.replace(lambda x: split(x, Modulo), lambda x: var)
    return stride(within, var)


def walks_columns(
    indices: Iterable[Any], out_vars: Sequence[sympy.Symbol], red_vars: Sequence[sympy.Symbol]
) -> bool:
    """Whether a reduction that loads at ``indices`` walks memory along its outputs
    (``x.sum(0)``: a *column* reduction): some load steps by one element along an output loop
    (in runs: :func:`run_stride`) and by none along a reduction loop. A load that does not
    move with the reduction (one value a row, such as a layer norm's mean or the token id an
    embedding row is gathered by) is read once a row whatever the layout, and does not count.
    One rule for the
    ``split-reductions`` pass (which splits a column reduction with many programs' worth of
    outputs) and the Triton block schedule (which gives it column blocks): a layer norm's
    weight gradient, which also loads the per-row mean, once ran unsplit on 24 programs."""
    for index in indices:
        if isinstance(index, int) or all(stride(index, v) == 0 for v in red_vars):
            continue
        along_out = any(run_stride(index, v) == 1 for v in out_vars)
        if along_out and not any(stride(index, v) == 1 for v in red_vars):
            return True
    return False
