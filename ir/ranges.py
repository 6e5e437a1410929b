"""Value ranges of loop-body values by interval arithmetic: what a body can yield, so that a
back end need not check at run time what the program itself guarantees.

T5's relative-position bucket is the motivating case: an ``i64`` computed from two loop indices
through ``abs``, a ``log``, a float-to-int cast, ``minimum`` and ``where``, then used to gather
a row of a 32-row table. Every gather checks its index (an out-of-range index is reported, as
eager PyTorch reports it); here the check costs a quarter of the softmax that does the gather,
and the bucket provably lies in ``[0, 31]``. Proving that needs one step past plain interval
arithmetic: ``where(abs < 8, abs, min(8 + int(log(abs / 8) / log(16) * 8), 15))`` evaluates its
second branch knowing ``abs >= 8`` (so the ``log`` is not of 0), which :func:`value_range` does
for a ``where`` whose condition compares a value with a literal.

Ranges are closed intervals of Python floats (``-inf``/``inf`` allowed); ``None`` means
nothing is known. Float bounds are widened by a relative margin at every float op, so that
rounding in the target's f32/f16 arithmetic (and a libdevice ``log`` off by an ulp) can never
leave the interval. A NaN can only reach an integer through a cast, which turns it into 0 (the
back ends' rule), so a cast's range always includes 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from .dtypes import DType
from .graph import BodyOp, BodyValue, Literal, LoopNode, Value
from .symbolic import bounds

Range = tuple[float, float]

# relative and absolute widening of every float result (f16 rounds at 2**-11)
_REL = 2.0**-10
_ABS = 2.0**-60
# how many producers deep a load is followed to the body that wrote the buffer
MAX_DEPTH = 6
INT64_MAX = 2**63 - 1  # the largest a symbolic size (and so a loop's trip count) can be


def _int_limits(dtype: DType) -> Range | None:
    table = {
        DType.BOOL: (0.0, 1.0),
        DType.U8: (0.0, 255.0),
        DType.I8: (-128.0, 127.0),
        DType.I16: (-32768.0, 32767.0),
        DType.I32: (-(2.0**31), 2.0**31 - 1),
        DType.I64: (-(2.0**63), 2.0**63 - 1),
    }
    return table.get(dtype)


def _widen(r: Range) -> Range:
    lo, hi = r
    if math.isfinite(lo):
        lo -= abs(lo) * _REL + _ABS
    if math.isfinite(hi):
        hi += abs(hi) * _REL + _ABS
    return (lo, hi)


def _fits(r: Range, dtype: DType | None) -> Range | None:
    """``r`` as a result of ``dtype``: widened for floats; None for an integer that may wrap."""
    if dtype is None:
        return None
    if dtype.is_float:
        return _widen(r)
    limits = _int_limits(dtype)
    if limits is None or r[0] < limits[0] or r[1] > limits[1]:
        return None
    return r


def _corners(f: Callable[[float, float], float], a: Range, b: Range) -> Range | None:
    try:
        vals = [f(x, y) for x in a for y in b]
    except (ArithmeticError, ValueError):
        return None
    if any(math.isnan(v) for v in vals):
        return None
    return (min(vals), max(vals))


def _union(a: Range | None, b: Range | None) -> Range | None:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _refine(r: Range, op: str, k: float, is_int: bool) -> Range | None:
    """``r`` where ``x op k`` holds; None where it never does."""
    lo, hi = r
    step = 1.0 if is_int else 0.0  # a strict bound of an integer moves by one
    if op == "lt":
        hi = min(hi, k - step)
    elif op == "le":
        hi = min(hi, k)
    elif op == "gt":
        lo = max(lo, k + step)
    elif op == "ge":
        lo = max(lo, k)
    elif op == "eq":
        lo, hi = max(lo, k), min(hi, k)
    else:
        return r
    return (lo, hi) if lo <= hi else None


_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
_MONOTONE: dict[str, Callable[[float], float]] = {
    "exp": lambda x: math.exp(x) if x < 709 else math.inf,
    "sqrt": math.sqrt,
    "tanh": math.tanh,
    "sigmoid": lambda x: 1 / (1 + math.exp(-x)) if x > -709 else 0.0,
    "erf": math.erf,
    "floor": math.floor,
    "ceil": math.ceil,
    "trunc": math.trunc,
    "round": round,
    "relu": lambda x: max(x, 0.0),
}


class _Ranges:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.buffer_memo: dict[int, Range | None] = {}

    def buffer(self, v: Value, depth: int) -> Range | None:
        """What ``v``'s elements may hold: its dtype's limits, narrowed by the body that
        computes it where a pointwise loop node does."""
        limits = _int_limits(v.type.dtype)
        owner = v.owner
        if (
            isinstance(owner, LoopNode)
            and not owner.is_reduction
            and owner.body is not None
            and depth < self.depth
        ):
            key = id(owner)
            if key not in self.buffer_memo:
                self.buffer_memo[key] = None  # a cycle (none in SSA) finds nothing
                self.buffer_memo[key] = self.node(owner, depth + 1)
            got = self.buffer_memo[key]
            if got is not None:
                return got
        return limits

    def node(self, n: LoopNode, depth: int) -> Range | None:
        assert n.body is not None
        return _BodyRanges(self, n, depth).of(n.body.result, {})


class _BodyRanges:
    def __init__(self, shared: _Ranges, node: LoopNode, depth: int) -> None:
        self.shared = shared
        self.node = node
        self.depth = depth
        self.loops: dict[sympy.Symbol, tuple[int, int]] = {}
        for var, size in node.ranges + node.reduction_ranges:
            if isinstance(size, int) and size > 0:
                self.loops[var] = (0, size - 1)
            elif not isinstance(size, int):  # a symbolic size: at most an int64
                self.loops[var] = (0, INT64_MAX - 1)
        self.memo: dict[tuple[int, frozenset[tuple[int, Range]]], Range | None] = {}

    def of(self, v: Any, env: Mapping[int, Range]) -> Range | None:
        if isinstance(v, Literal):
            if isinstance(v.value, bool):
                return (float(v.value), float(v.value))
            if isinstance(v.value, (int, float)):
                return (float(v.value), float(v.value))
            return None
        if not isinstance(v, BodyValue):
            return None
        if id(v) in env:
            return env[id(v)]
        key = (id(v), frozenset(env.items()))
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None
        op = v.owner
        got = self.op(op, env) if op is not None else None
        if got is not None and v.dtype is not None and not v.dtype.is_float:
            limits = _int_limits(v.dtype)
            if limits is not None:  # an integer's bounds are integers
                got = (max(math.ceil(got[0]), limits[0]), min(math.floor(got[1]), limits[1]))
        self.memo[key] = got
        return got

    def op(self, op: BodyOp, env: Mapping[int, Range]) -> Range | None:
        code = op.opcode
        dtype = op.result.dtype
        args = op.operands
        if dtype is not None and dtype.is_bool:
            return (0.0, 1.0)
        if code == "load":
            assert op.buffer is not None
            got = self.shared.buffer(op.buffer, self.depth)
            if got is not None and op.mask is not None and op.other is not None:
                got = _union(got, self.of(op.other, env))
            return got
        if code == "index":
            if op.index is None:
                return None
            # a size symbol (positive, not a loop's) is at least 1 and fits an int64: a
            # dynamic T5's buckets, from ``mod(i0, s27)``, are proven as its static ones are
            free: set[sympy.Symbol] = getattr(op.index, "free_symbols", set())
            sizes = {s: (1, INT64_MAX) for s in free if s.is_positive and s not in self.loops}
            b: Range | None = bounds(op.index, {**self.loops, **sizes})
            return (float(b[0]), float(b[1])) if b is not None else None
        if code == "constant":
            return self.of(args[0], env)
        if code == "cast":
            return self.cast(args[0], dtype, env)
        if code == "where":
            return self.where(args, env)
        rs = [self.of(a, env) for a in args]
        if any(r is None for r in rs):
            return None
        a = rs[0]
        assert a is not None
        if code in ("add", "sub", "mul", "minimum", "maximum"):
            b = rs[1]
            assert b is not None
            corner_fns: dict[str, Callable[[float, float], float]] = {
                "add": lambda x, y: x + y,
                "sub": lambda x, y: x - y,
                "mul": lambda x, y: x * y,
                "minimum": min,
                "maximum": max,
            }
            got = _corners(corner_fns[code], a, b)
        elif code == "div" and dtype is not None and dtype.is_float:
            b = rs[1]
            assert b is not None
            if b[0] <= 0 <= b[1]:
                return None
            got = _corners(lambda x, y: x / y, a, b)
        elif code == "neg":
            got = (-a[1], -a[0])
        elif code == "abs":
            got = (
                0.0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1])),
                max(abs(a[0]), abs(a[1])),
            )
        elif code == "log":
            if a[0] < 0:
                return None
            got = (
                math.log(a[0]) if a[0] > 0 else -math.inf,
                math.log(a[1]) if a[1] > 0 else -math.inf,
            )
            if math.isinf(a[1]):
                got = (got[0], math.inf)
        elif code in _MONOTONE:
            if code == "sqrt" and a[0] < 0:
                return None
            f = _MONOTONE[code]
            try:
                got = (float(f(a[0])), float(f(a[1])))
            except (ArithmeticError, ValueError):
                return None
        else:
            return None
        return _fits(got, dtype) if got is not None else None

    def cast(self, x: Any, dtype: DType | None, env: Mapping[int, Range]) -> Range | None:
        r = self.of(x, env)
        if dtype is None:
            return None
        if r is None:
            return _int_limits(dtype)
        src = x.dtype if isinstance(x, BodyValue) else None
        if dtype.is_float:
            return _widen(r)
        limits = _int_limits(dtype)
        if limits is None:
            return None
        if src is not None and src.is_float:
            # truncation toward zero, saturating; NaN becomes 0
            lo = max(math.trunc(r[0]) if math.isfinite(r[0]) else limits[0], limits[0])
            hi = min(math.trunc(r[1]) if math.isfinite(r[1]) else limits[1], limits[1])
            return (min(lo, 0.0), max(hi, 0.0)) if lo <= hi else (0.0, 0.0)
        if r[0] < limits[0] or r[1] > limits[1]:
            return limits  # wraps: anything
        return r

    def where(self, args: list[Any], env: Mapping[int, Range]) -> Range | None:
        cond = args[0]
        yes, no = dict(env), dict(env)
        test = cond.owner if isinstance(cond, BodyValue) else None
        if test is not None and test.opcode in _NEGATE and len(test.operands) == 2:
            x, k = test.operands
            code = test.opcode
            if isinstance(x, Literal):
                x, k, code = k, x, _MIRROR[code]
            if isinstance(x, BodyValue) and isinstance(k, Literal):
                kv = k.value
                xr = self.of(x, env)
                if xr is not None and isinstance(kv, (int, float)) and not isinstance(kv, bool):
                    is_int = x.dtype is not None and not x.dtype.is_float
                    taken = _refine(xr, code, float(kv), is_int)
                    # a NaN fails every comparison but ``ne``: the else branch keeps it, so
                    # only an integer's else branch is refined
                    other = _refine(xr, _NEGATE[code], float(kv), is_int) if is_int else xr
                    if taken is None:
                        return self.of(args[2], env)
                    if other is None:
                        return self.of(args[1], env)
                    yes[id(x)] = taken
                    no[id(x)] = other
        return _union(self.of(args[1], yes), self.of(args[2], no))


def value_range(v: Any, node: LoopNode, depth: int = MAX_DEPTH) -> Range | None:
    """The closed interval that body value ``v`` of ``node`` lies in at every iteration, or
    None where nothing is known. Loads follow the buffer to the pointwise loop node that
    computes it, ``depth`` producers deep."""
    return _BodyRanges(_Ranges(depth), node, 0).of(v, {})
