"""Value semantics stated once: composite ops of a kernel plan rewritten as primitive ones.

A renderer declares the ops it writes itself (:func:`lower`'s ``native``, the keys of its op
table, as tinygrad's renderers declare ``supported_ops``); every other op of :data:`LOWERINGS`
becomes, here, a short sequence of :class:`~.instructions.Compute` instructions over ops the
renderer has. So torch's floor division and remainder (the result takes the divisor's sign,
``a // b * b + a % b == a``), ``sigmoid``, ``rsqrt``, ``sign`` … are written once, and the
interpreter (:mod:`fir.ir.interpreter`, i.e. eager PyTorch) is the one oracle they answer to.

What the IR has no op for is a *plan primitive* of :mod:`.instructions` (``tdiv``, ``trem``:
C's truncating integer division and remainder), which each renderer maps one to one.

The sequences use only ops every renderer has natively (``add``, ``where``, ``lt``, ``fmod``
…), each with its usual operand typing: a literal takes the dtype of the op's named operands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable

from fir.ir.accumulators import Merge
from fir.ir.dtypes import DType, literal_value
from fir.ir.graph import Literal
from fir.ir.ops import SCALAR_IN_OP_DTYPE, literal_in_op_dtype

from .instructions import AccResult, Compute, Constant, IndexValue, Instr, Load, Operand
from .kernel import KernelPlan


class _Builder:
    """Appends the instructions of one lowered op; names are fresh in the plan."""

    def __init__(self, taken: set[str], dtypes: dict[str, DType], out: list[Instr]) -> None:
        self.taken = taken
        self.dtypes = dtypes
        self.out = out
        self.base = ""

    def fresh(self) -> str:
        k = 0
        while f"{self.base}_{k}" in self.taken:
            k += 1
        name = f"{self.base}_{k}"
        self.taken.add(name)
        return name

    def op(self, op: str, *args: Operand, dtype: DType, dst: str | None = None) -> str:
        name = dst if dst is not None else self.fresh()
        self.out.append(Compute(name, op, tuple(args), dtype))
        self.dtypes[name] = dtype
        return name

    def dtype(self, o: Operand, fallback: DType) -> DType:
        return self.dtypes.get(o, fallback) if isinstance(o, str) else fallback


def _zero(d: DType) -> Literal:
    return Literal(0.0 if d.is_float else 0)


def _one(d: DType) -> Literal:
    return Literal(1.0 if d.is_float else 1)


def _negative(b: _Builder, x: Operand, d: DType) -> Operand | bool:
    """``x < 0``: a name, or a Python bool where ``x`` is a literal."""
    if isinstance(x, Literal):
        return x.value is not None and x.value < 0
    return b.op("lt", x, _zero(d), dtype=DType.BOOL)


def _wrong_sign(b: _Builder, r: str, divisor: Operand, d: DType) -> str:
    """``r != 0 and (r < 0) != (divisor < 0)``: a truncated remainder ``r`` whose sign is not
    the divisor's, so the floored quotient is one less and the floored remainder ``r + b``."""
    neg = _negative(b, divisor, d)
    if neg is True:
        return b.op("gt", r, _zero(d), dtype=DType.BOOL)
    if neg is False:
        return b.op("lt", r, _zero(d), dtype=DType.BOOL)
    nonzero = b.op("ne", r, _zero(d), dtype=DType.BOOL)
    r_neg = b.op("lt", r, _zero(d), dtype=DType.BOOL)
    differ = b.op("ne", r_neg, neg, dtype=DType.BOOL)
    return b.op("bitwise_and", nonzero, differ, dtype=DType.BOOL)


def _safe_divisor(b: _Builder, divisor: Operand, d: DType) -> tuple[Operand, str | None]:
    """The divisor of a signed integer division with -1 replaced by 1 (``INT_MIN / -1``
    overflows, and traps on x86; torch wraps) and the test for -1, which the caller applies
    to the result; ``None`` where the divisor is a literal other than -1."""
    if isinstance(divisor, Literal) and divisor.value != -1:
        return divisor, None
    minus_one = b.op("eq", divisor, Literal(-1), dtype=DType.BOOL)
    return b.op("where", minus_one, Literal(1), divisor, dtype=d), minus_one


def _in_compute_dtype(b: _Builder, i: Compute) -> tuple[Operand, Operand, DType]:
    """The operands of f16/bf16 op ``i`` as values of its compute dtype (f32), for a lowering
    whose steps eager PyTorch takes at that precision, rounding only the result: a literal
    the value it has in the op (:func:`~fir.ir.ops.literal_in_op_dtype`), a value cast."""
    c = i.dtype.compute_dtype
    leading_tensor = not isinstance(i.args[0], Literal)
    out: list[Operand] = []
    for k, a in enumerate(i.args):
        if isinstance(a, Literal) and isinstance(a.value, (int, float)):
            exact = literal_in_op_dtype(i.op, k, leading_tensor)
            out.append(Literal(literal_value(float(a.value), i.dtype, exact)))
        elif isinstance(a, Literal):
            out.append(a)
        else:
            out.append(b.op("cast", a, dtype=c))
    return out[0], out[1], c


def _in_op_dtype(a: Operand, d: DType) -> Operand:
    """A float literal rounded to ``d`` (f16/bf16), exact in every wider type."""
    if (
        isinstance(a, Literal)
        and isinstance(a.value, (int, float))
        and not isinstance(a.value, bool)
    ):
        return Literal(literal_value(float(a.value), d, True))
    return a


def _floordiv(b: _Builder, i: Compute) -> None:
    x, y = i.args
    d = i.dtype
    if _narrow(d):  # in f32, the quotient rounded once
        x, y, c = _in_compute_dtype(b, i)
        q = b.fresh()
        _floordiv(b, Compute(q, "floordiv", (x, y), c))
        b.op("cast", q, dtype=d, dst=i.dst)
        return
    if d.is_float:
        # through fmod, so that a // b * b + a % b == a (torch's): the quotient of the exact
        # multiple, one less where the remainder's sign is not the divisor's, rounded to the
        # nearest integer; a zero divisor gives a / b (inf or NaN), a zero quotient the sign
        # of a / b
        m = b.op("fmod", x, y, dtype=d)
        q0 = b.op("div", b.op("sub", x, m, dtype=d), y, dtype=d)
        fix = _wrong_sign(b, m, y, d)
        q1 = b.op("where", fix, b.op("sub", q0, Literal(1.0), dtype=d), q0, dtype=d)
        f = b.op("floor", q1, dtype=d)
        up = b.op("gt", b.op("sub", q1, f, dtype=d), Literal(0.5), dtype=DType.BOOL)
        r = b.op("where", up, b.op("add", f, Literal(1.0), dtype=d), f, dtype=d)
        q = b.op("div", x, y, dtype=d)
        zero_q = b.op("eq", q1, Literal(0.0), dtype=DType.BOOL)
        signed_zero = b.op("copysign", q1, q, dtype=d)  # q1 is +-0 where it is chosen
        last = isinstance(y, Literal) and y.value not in (0, 0.0)
        r = b.op("where", zero_q, signed_zero, r, dtype=d, dst=i.dst if last else None)
        if not last:
            zero_y = b.op("eq", y, Literal(0.0), dtype=DType.BOOL)
            b.op("where", zero_y, q, r, dtype=d, dst=i.dst)
        return
    if not d.is_signed:
        b.op("tdiv", x, y, dtype=d, dst=i.dst)  # truncating is flooring
        return
    if isinstance(y, Literal) and y.value == -1:
        b.op("neg", x, dtype=d, dst=i.dst)
        return
    y, minus_one = _safe_divisor(b, y, d)
    q = b.op("tdiv", x, y, dtype=d)
    r = b.op("sub", x, b.op("mul", q, y, dtype=d), dtype=d)  # wraps as the division does not
    fix = _wrong_sign(b, r, y, d)
    out = b.op(
        "where", fix, b.op("sub", q, Literal(1), dtype=d), q, dtype=d,
        dst=i.dst if minus_one is None else None,
    )  # fmt: skip
    if minus_one is not None:
        b.op("where", minus_one, b.op("neg", x, dtype=d), out, dtype=d, dst=i.dst)


def _mod(b: _Builder, i: Compute) -> None:
    x, y = i.args
    d = i.dtype
    if d.is_float or d.is_signed:
        if d.is_float:
            r = b.op("fmod", x, y, dtype=d)
        elif isinstance(y, Literal) and y.value == -1:
            b.out.append(Constant(i.dst, Literal(0), d))
            return
        else:
            y, _ = _safe_divisor(b, y, d)  # x % 1 is 0, as x % -1 is
            r = b.op("trem", x, y, dtype=d)
        fix = _wrong_sign(b, r, y, d)
        b.op("where", fix, b.op("add", r, y, dtype=d), r, dtype=d, dst=i.dst)
        return
    b.op("trem", x, y, dtype=d, dst=i.dst)


def _unary(build: Callable[[_Builder, Operand, DType], Operand]) -> Callable[..., None]:
    """A lowering of a one-operand op whose last instruction is ``build``'s result, renamed to
    the op's own name."""

    def lower(b: _Builder, i: Compute) -> None:
        start = len(b.out)
        out = build(b, i.args[0], i.dtype)
        last = b.out[-1]
        assert len(b.out) > start and isinstance(last, Compute) and last.dst == out
        b.out[-1] = dataclasses.replace(last, dst=i.dst)
        b.dtypes[i.dst] = last.dtype

    return lower


def _sign(b: _Builder, x: Operand, d: DType) -> Operand:
    # (x > 0) - (x < 0) in x's dtype: 1, -1 or 0 (also for NaN and -0.0)
    if d.is_bool:
        return b.op("cast", x, dtype=d)
    above = b.op("cast", b.op("gt", x, _zero(d), dtype=DType.BOOL), dtype=d)
    if not (d.is_float or d.is_signed):
        return above
    below = b.op("cast", b.op("lt", x, _zero(d), dtype=DType.BOOL), dtype=d)
    return b.op("sub", above, below, dtype=d)


def _isinf(finite: bool) -> Callable[[_Builder, Operand, DType], Operand]:
    def build(b: _Builder, x: Operand, d: DType) -> Operand:
        src = b.dtype(x, DType.F32)
        if not src.is_float:  # an integer is always finite
            return b.op("eq" if finite else "ne", x, x, dtype=DType.BOOL)
        size = b.op("abs", x, dtype=src)
        return b.op("lt" if finite else "eq", size, Literal(float("inf")), dtype=DType.BOOL)

    return build


def _extreme(cmp: str) -> Callable[[_Builder, Compute], None]:
    """``maximum`` (``cmp`` is ``gt``) or ``minimum`` (``lt``): ``x`` where it is NaN or ``cmp``
    than ``y``, else ``y``, so that a NaN on either side propagates, as torch's does."""

    def lower(b: _Builder, i: Compute) -> None:
        x, y = i.args
        if isinstance(x, Literal) and (isinstance(y, Literal) or x.value != x.value):
            lx, ly = x.value, getattr(y, "value", None)  # folded: no named operand to compare
            first = lx != lx or (lx > ly if cmp == "gt" else lx < ly)  # type: ignore[operator]
            b.out.append(Constant(i.dst, x if first else y, i.dtype))  # type: ignore[arg-type]
            return
        nan = None
        if i.dtype.is_float and not isinstance(x, Literal):
            nan = b.op("isnan", x, dtype=DType.BOOL)
        first = b.op(cmp, x, y, dtype=DType.BOOL)
        if nan is not None:
            first = b.op("logical_or", nan, first, dtype=DType.BOOL)
        b.op("where", first, x, y, dtype=i.dtype, dst=i.dst)

    return lower


# the plan primitives of shifts: by an amount in ``[0, bits)`` only (a right one arithmetic for
# a signed dtype), which each renderer writes as its shift instruction
SHIFTS = ("shl_in_range", "shr_in_range")


def _shift(left: bool) -> Callable[[_Builder, Compute], None]:
    """``shl``/``shr`` by any amount, as torch's: outside ``[0, bits)`` a left shift and an
    unsigned right one give 0, a signed right one shifts by ``bits - 1`` (the sign's bits);
    bools shift to ``x and not s``."""

    def lower(b: _Builder, i: Compute) -> None:
        x, s = i.args
        d = i.dtype
        if d.is_bool:
            b.op("bitwise_and", x, b.op("bitwise_not", s, dtype=d), dtype=d, dst=i.dst)
            return
        bits = 8 * d.itemsize
        zero_outside = left or not d.is_signed
        raw, fallback = SHIFTS[0 if left else 1], Literal(0 if zero_outside else bits - 1)
        if isinstance(s, Literal):  # a known amount: in range, or the result of the fallback
            in_range = s.value is not None and 0 <= s.value < bits
            if zero_outside and not in_range:
                b.out.append(Constant(i.dst, _zero(d), d))
            else:
                b.op(raw, x, s if in_range else fallback, dtype=d, dst=i.dst)
            return
        checks = [b.op("ge", s, _zero(d), dtype=DType.BOOL)] if d.is_signed else []
        checks.append(b.op("lt", s, Literal(bits), dtype=DType.BOOL))
        inside = b.op("bitwise_and", *checks, dtype=DType.BOOL) if d.is_signed else checks[0]
        amount = b.op("where", inside, s, fallback, dtype=d)
        if zero_outside:
            shifted = b.op(raw, x, amount, dtype=d)
            b.op("where", inside, shifted, _zero(d), dtype=d, dst=i.dst)
        else:
            b.op(raw, x, amount, dtype=d, dst=i.dst)

    return lower


# op -> how it is written with other ops (``b``: the builder, ``x``: the operand, ``d``: the
# result's dtype). Each sequence's ops are native to every renderer, or lowered here in turn.
LOWERINGS: dict[str, Callable[[_Builder, Compute], None]] = {
    "floordiv": _floordiv,
    "mod": _mod,
    "reciprocal": _unary(lambda b, x, d: b.op("div", _one(d), x, dtype=d)),
    "rsqrt": _unary(
        lambda b, x, d: b.op("div", _one(d), b.op("sqrt", x, dtype=d), dtype=d),
    ),
    "sigmoid": _unary(  # 1 / (1 + exp(-x))
        lambda b, x, d: b.op(
            "div",
            _one(d),
            b.op("add", b.op("exp", b.op("neg", x, dtype=d), dtype=d), _one(d), dtype=d),
            dtype=d,
        ),
    ),
    "square": _unary(lambda b, x, d: b.op("mul", x, x, dtype=d)),
    "relu": _unary(
        lambda b, x, d: b.op(
            "where", b.op("lt", x, _zero(d), dtype=DType.BOOL), _zero(d), x, dtype=d
        ),
    ),
    "sign": _unary(_sign),
    "isinf": _unary(_isinf(finite=False)),
    "isfinite": _unary(_isinf(finite=True)),
    "maximum": _extreme("gt"),
    "minimum": _extreme("lt"),
    "shl": _shift(left=True),
    "shr": _shift(left=False),
}


def defined(instrs: Iterable[Instr]) -> dict[str, DType]:
    """The dtype of every value the instructions define."""
    out: dict[str, DType] = {}
    for i in instrs:
        if isinstance(i, (Load, Compute, Constant, IndexValue)):
            out[i.dst] = i.dtype
        elif isinstance(i, AccResult):
            out.update(zip(i.dsts, i.dtypes))
    return out


# the ops a renderer writes itself: their names, or a test of an op and its operands' dtype
# (llvm has a vectorised f32 sigmoid, and no f64 one)
Native = Collection[str] | Callable[[str, DType], bool]


def lower_instrs(instrs: list[Instr], native: Native) -> list[Instr]:
    """``instrs`` with every op of :data:`LOWERINGS` that is not ``native`` rewritten as
    primitive ops (to a fixed point: a lowering may use another lowered op)."""
    dtypes = defined(instrs)
    taken = set(dtypes)

    def lowered(i: Instr) -> bool:
        if not isinstance(i, Compute) or i.op not in LOWERINGS:
            return False
        if callable(native):
            named = next((a for a in i.args if isinstance(a, str)), None)
            return not native(i.op, dtypes.get(named, i.dtype) if named else i.dtype)
        return i.op not in native

    todo = _scalars_in_op_dtype(instrs)
    while any(lowered(i) for i in todo):
        out: list[Instr] = []
        b = _Builder(taken, dtypes, out)
        for i in todo:
            if isinstance(i, Compute) and lowered(i):
                b.base = i.dst
                LOWERINGS[i.op](b, i)
            else:
                out.append(i)
        todo = out
    return todo


def _narrow(d: DType) -> bool:
    """f16 and bf16: floats computed in a wider dtype (f32)."""
    return d.is_float and d.compute_dtype is not d


def _scalars_in_op_dtype(instrs: list[Instr]) -> list[Instr]:
    """``instrs`` with each float literal of an f16/bf16 op of
    :data:`~fir.ir.ops.SCALAR_IN_OP_DTYPE` rounded to the op's dtype, as eager's kernels take
    it on every device (and ``mod``'s lowered steps then read it so too)."""
    out: list[Instr] = []
    for i in instrs:
        if isinstance(i, Compute) and i.op in SCALAR_IN_OP_DTYPE and _narrow(i.dtype):
            i = dataclasses.replace(i, args=tuple(_in_op_dtype(a, i.dtype) for a in i.args))
        out.append(i)
    return out if out != instrs else instrs


def lower(plan: KernelPlan, native: Native) -> KernelPlan:
    """``plan`` for a renderer that writes the ops ``native`` itself (see the module's
    docstring); the plan itself where nothing is lowered."""
    instrs = lower_instrs(plan.instrs, native)
    return plan if instrs is plan.instrs else dataclasses.replace(plan, instrs=instrs)


def lower_steps(spec: Merge, native: Native) -> tuple[dict[str, Compute], dict[str, DType]]:
    """The steps of an accumulator's update or merge (:mod:`fir.ir.accumulators`) as plan
    instructions, by the name each defines, lowered as a kernel's ops are for a renderer that
    writes the ops ``native`` itself; and the dtype of every name they read or define."""
    steps: dict[str, Compute] = {}
    computes: list[Instr] = [
        Compute(s.dst, s.op, tuple(map(_operand, s.args)), s.dtype) for s in spec.steps
    ]
    for step in lower_instrs(computes, native):
        assert isinstance(step, Compute)  # each step has a named operand: none is folded
        steps[step.dst] = step
    return steps, {**spec.dtypes, **{s.dst: s.dtype for s in steps.values()}}


def _operand(a: str | float | int | bool) -> Operand:
    """An argument of an accumulator's step as an operand of a plan instruction."""
    return a if isinstance(a, str) else Literal(a)
