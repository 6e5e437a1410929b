"""The C++ back end's tables: IR op -> C++ expression, dtype -> C++ types, casts, literals, and
the accumulator of each reduction kind.

An entry is a ``str.format`` pattern over the operands (``{0}``, ``{1}``, ``{2}``), which are
always names or literals, so no entry needs parentheses around its operands. The helpers the
entries call (``fir_*``) are defined in :mod:`.prelude`, overloaded by type where the semantics
differ (``fir_max`` of ints and of floats), so one line serves every dtype; the ops missing here
(``floordiv``, ``sigmoid`` …) reach the renderer written with others
(:mod:`fir.backends.plan.lowering`). Adding an op to FIR means one line here (``tests/backends/test_cpp_render.py`` checks that every elementwise op has one).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from fir.ir.accumulators import Component, extreme, merge, state
from fir.ir.dtypes import DType
from fir.ir.graph import Literal

# Elementwise ops (the ``scalar=True`` entries of fir.ir.ops.OPS, less those
# fir.backends.plan.lowering writes with others, plus the plan's primitives). f16/bf16
# operands are floats.
OPS: dict[str, str] = {
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "tdiv": "{0} / {1}",  # plan primitives (backends/plan/instructions.py)
    "trem": "{0} % {1}",
    "neg": "-{0}",
    "abs": "fir_fabs({0})",
    "maximum": "fir_max({0}, {1})",
    "minimum": "fir_min({0}, {1})",
    "fmod": "fir_fmod({0}, {1})",
    "pow": "fir_pow({0}, {1})",
    "atan2": "fir_atan2({0}, {1})",
    "hypot": "fir_hypot({0}, {1})",
    "copysign": "fir_copysign({0}, {1})",
    "floor": "fir_floor({0})",
    "ceil": "fir_ceil({0})",
    "round": "fir_round({0})",
    "trunc": "fir_trunc({0})",
    "exp": "fir_exp({0})",
    "exp2": "fir_exp2({0})",
    "expm1": "fir_expm1({0})",
    "log": "fir_log({0})",
    "log2": "fir_log2({0})",
    "log10": "fir_log10({0})",
    "log1p": "fir_log1p({0})",
    "sqrt": "fir_sqrt({0})",
    "sin": "fir_sin({0})",
    "cos": "fir_cos({0})",
    "tan": "fir_tan({0})",
    "asin": "fir_asin({0})",
    "acos": "fir_acos({0})",
    "atan": "fir_atan({0})",
    "sinh": "fir_sinh({0})",
    "cosh": "fir_cosh({0})",
    "tanh": "fir_tanh({0})",
    "asinh": "fir_asinh({0})",
    "acosh": "fir_acosh({0})",
    "atanh": "fir_atanh({0})",
    "erf": "fir_erf({0})",
    "erfc": "fir_erfc({0})",
    "erfinv": "fir_erfinv({0})",
    "lgamma": "fir_lgamma({0})",
    "digamma": "fir_digamma({0})",
    "isnan": "fir_isnan({0})",
    "signbit": "fir_signbit({0})",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "lt": "{0} < {1}",
    "le": "{0} <= {1}",
    "gt": "{0} > {1}",
    "ge": "{0} >= {1}",
    "logical_not": "!{0}",
    "logical_and": "{0} && {1}",
    "logical_or": "{0} || {1}",
    "logical_xor": "{0} != {1}",
    "bitwise_not": "fir_bitnot({0})",
    "bitwise_and": "{0} & {1}",
    "bitwise_or": "{0} | {1}",
    "bitwise_xor": "{0} ^ {1}",
    "shl": "fir_shl({0}, {1})",
    "shr": "fir_shr({0}, {1})",
    "where": "{0} ? {1} : {2}",
    "cast": "{cast}",  # the target dtype's entry of CASTS
}

# Integer operands: the ops whose C++ operators would overflow (undefined for signed types)
# wrap as torch's do; abs of ints needs no float helper.
INT_OPS: dict[str, str] = {
    "add": "fir_wadd({0}, {1})",
    "sub": "fir_wsub({0}, {1})",
    "mul": "fir_wmul({0}, {1})",
    "neg": "fir_wneg({0})",
    "abs": "fir_wabs({0})",
    "floor": "{0}",
    "ceil": "{0}",
    "round": "{0}",
    "trunc": "{0}",
}

# the ops this renderer writes itself: the others of fir.backends.plan.lowering are lowered
NATIVE_OPS = frozenset(OPS)

# ops on truth values: a non-bool operand is compared with zero first (``fir_truth``)
LOGICAL = ("logical_not", "logical_and", "logical_or", "logical_xor")


# what values of each dtype are computed in, and what a buffer of it holds
CTYPE: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.I8: "int8_t",
    DType.I16: "int16_t",
    DType.I32: "int32_t",
    DType.I64: "int64_t",
    DType.U8: "uint8_t",
    DType.F16: "float",
    DType.BF16: "float",
    DType.F32: "float",
    DType.F64: "double",
}
STORAGE: dict[DType, str] = {**CTYPE, DType.F16: "uint16_t", DType.BF16: "uint16_t"}

# cast to the dtype (from any C type): a cast to f16 or bf16 rounds the float to it
CASTS: dict[DType, str] = {
    DType.BOOL: "fir_cast_bool({0})",
    DType.I8: "fir_cast_i8({0})",
    DType.I16: "fir_cast_i16({0})",
    DType.I32: "fir_cast_i32({0})",
    DType.I64: "fir_cast_i64({0})",
    DType.U8: "fir_cast_u8({0})",
    DType.F16: "fir_cast_f16({0})",
    DType.BF16: "fir_cast_bf16({0})",
    DType.F32: "fir_cast_f32({0})",
    DType.F64: "fir_cast_f64({0})",
}


def load_expr(dtype: DType, element: str) -> str:
    """A buffer element (``p[i]``) as a value: f16 and bf16 widen to float."""
    if dtype is DType.F16:
        return f"fir_from_f16({element})"
    if dtype is DType.BF16:
        return f"fir_from_bf16({element})"
    return element


def store_expr(dtype: DType, value: str) -> str:
    """A value as the buffer's element type: f16 and bf16 narrow, rounding to nearest even."""
    if dtype is DType.F16:
        return f"fir_to_f16({value})"
    if dtype is DType.BF16:
        return f"fir_to_bf16({value})"
    return value


def is_float(dtype: DType) -> bool:
    return dtype.is_float


# ---------------------------------------------------------------------------------------------
# literals


def literal(lit: Literal | bool | int | float | None, dtype: DType, exact: bool = False) -> str:
    """``lit`` as a C++ constant of ``dtype``'s compute type. ``exact``: round it to ``dtype``
    first (f16/bf16), as the interpreter does where a literal becomes a tensor of that dtype."""
    value = lit.value if isinstance(lit, Literal) else lit
    if value is None:
        value = 0
    if dtype.is_bool:
        return "true" if value else "false"
    if not dtype.is_float:
        iv = int(value)
        if iv == -(2**63):
            return "INT64_MIN"
        text = str(iv) if -(2**31) <= iv < 2**31 else f"INT64_C({iv})"
        # typed, so that it meets a value of the dtype in the overloaded helpers (fir_wadd(T, T))
        return f"{CTYPE[dtype]}({text})"
    v = float(value)
    if exact:
        v = round_to(v, dtype)
    single = dtype is not DType.F64
    if single:
        v = _f32(v)
    if math.isnan(v):
        return "FIR_NAN" if single else "double(FIR_NAN)"
    if math.isinf(v):
        text = "FIR_INF" if single else "double(FIR_INF)"
        return text if v > 0 else f"(-{text})"
    text = _shortest_f32(v) + "f" if single else repr(v)
    if "e" not in text and "." not in text and "inf" not in text:
        text = text.replace("f", ".0f") if single else text + ".0"
    return f"({text})" if text.startswith("-") else text


def round_to(v: float, dtype: DType) -> float:
    """``v`` rounded to ``dtype`` (to nearest, ties to even), as a Python float."""
    if dtype is DType.F16:
        try:
            return struct.unpack("<e", struct.pack("<e", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    if dtype is DType.BF16:
        bits = struct.unpack("<I", struct.pack("<f", _f32(v)))[0]
        if math.isnan(v):
            return v
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if dtype is DType.F64:
        return v
    return _f32(v)


def _f32(v: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _shortest_f32(v: float) -> str:
    """The shortest decimal that reads back as the float32 nearest to ``v``."""
    target = _f32(v)
    if math.isinf(target):
        return repr(target)
    for digits in range(1, 10):
        text = f"{target:.{digits}g}"
        if _f32(float(text)) == target:
            return text
    return repr(target)  # pragma: no cover - 9 digits always round-trip


# ---------------------------------------------------------------------------------------------
# accumulators


@dataclass(frozen=True)
class Accumulator:
    """How a reduction kind accumulates, in C++ statements over its state components.

    ``state`` names the components (suffixes of the accumulator's name) and ``update`` and
    ``results`` are patterns over them: ``{s}`` / ``{s_i}`` … a component of this state,
    ``{v}`` the value, ``{i}`` its position in the reduced block (argmax/argmin). Lanes of a
    vectorised loop each keep a state and are merged in order at the end
    (:func:`combine`), so every kind can be vectorised."""

    state: tuple[str, ...]  # component suffixes; "" is the accumulator's own name
    update: str
    results: tuple[str, ...]
    # the update where every lane has seen the same number of elements ``{n}`` (the main loop of
    # a vectorised row): one reciprocal ``{inv}`` per block instead of a division per element
    uniform: str | None = None


def _pick(better: str) -> str:
    # argmax/argmin: the first position of the best value; NaN counts as the best (torch)
    return (
        "if ({v} " + better + " {s} || (fir_isnan({v}) && !fir_isnan({s})) || {s_i} < 0) "
        "{{ {s} = {v}; {s_i} = {i}; }}"
    )


ACCUMULATORS: dict[str, Accumulator] = {
    "sum": Accumulator(("",), "{s} = {s} + {v};", ("{s}",)),
    "prod": Accumulator(("",), "{s} = {s} * {v};", ("{s}",)),
    "max": Accumulator(("",), "{s} = fir_max({s}, {v});", ("{s}",)),
    "min": Accumulator(("",), "{s} = fir_min({s}, {v});", ("{s}",)),
    "any": Accumulator(("",), "{s} = {s} || fir_truth({v});", ("{s}",)),
    "argmax": Accumulator(("", "_i"), _pick(">"), ("{s_i}",)),
    "argmin": Accumulator(("", "_i"), _pick("<"), ("{s_i}",)),
    # Welford's online mean and sum of squared deviations
    "welford": Accumulator(
        ("_mean", "_m2", "_n"),
        "{{ {s_n} = {s_n} + 1; const auto d = {v} - {s_mean}; {s_mean} = {s_mean} + d / {s_n}; "
        "{s_m2} = {s_m2} + d * ({v} - {s_mean}); }}",
        ("{s_mean}", "{s_m2}", "{s_n}"),
        "{{ const auto d = {v} - {s_mean}; {s_mean} = {s_mean} + d * {inv}; "
        "{s_m2} = {s_m2} + d * ({v} - {s_mean}); }}",
    ),
}


# sums and products of integers wrap (in int64, like torch's: the same result modulo 2^n)
INT_ACCUMULATORS: dict[str, Accumulator] = {
    "sum": Accumulator(("",), "{s} = fir_wadd({s}, int64_t({v}));", ("{s}",)),
    "prod": Accumulator(("",), "{s} = fir_wmul({s}, int64_t({v}));", ("{s}",)),
}


def accumulator(kind: str, dtype: DType) -> Accumulator:
    """The accumulator of reduction ``kind`` over values of ``dtype``."""
    if kind in INT_ACCUMULATORS and not dtype.is_float:
        return INT_ACCUMULATORS[kind]
    return ACCUMULATORS[kind]


def combine(kind: str, dtype: DType) -> str:
    """The statement that merges a state ``{o}``/``{o_i}`` … (another lane's) into ``{s}``/
    ``{s_i}`` …: :func:`fir.ir.accumulators.merge`'s steps, each a line of the op tables."""
    suffixes = ACCUMULATORS[kind].state
    names = {f"a{k}": "{s" + x + "}" for k, x in enumerate(suffixes)}
    names |= {f"b{k}": "{o" + x + "}" for k, x in enumerate(suffixes)}
    dtypes = {f"{side}{k}": c.dtype for side in "ab" for k, c in enumerate(state(kind, dtype))}
    lines = []
    spec = merge(kind, dtype)
    for step in spec.steps:
        named = next(a for a in step.args if isinstance(a, str))
        operand = dtypes[named]
        args = [names[a] if isinstance(a, str) else literal(a, operand) for a in step.args]
        table = INT_OPS if operand.is_int and step.op in INT_OPS else OPS
        names[step.dst] = "fir_m_" + step.dst
        dtypes[step.dst] = step.dtype
        expr = table[step.op].format(*args)
        if len(spec.steps) == 1:  # sum, max …: one statement, as a person would write it
            return "{s} = " + expr + ";"
        lines.append(f"const {CTYPE[step.dtype]} {names[step.dst]} = {expr};")
    for x, r in zip(suffixes, spec.results):
        lines.append("{s" + x + "} = " + names[r] + ";")
    return "{{ " + " ".join(lines) + " }}"  # (a pattern: its own braces doubled)


def accumulator_types(kind: str, dtype: DType) -> tuple[tuple[str, DType], ...]:
    """The C++ type of each state component (:func:`fir.ir.accumulators.state`) and the dtype
    it stands for (for casts): a float holds an f16/bf16 value."""
    return tuple((CTYPE[c.dtype], c.dtype) for c in state(kind, dtype))


def accumulator_init(kind: str, dtype: DType) -> tuple[str, ...]:
    """The state components' start values as C++ expressions."""
    return tuple(_start(c) for c in state(kind, dtype))


def _start(c: Component) -> str:
    if c.dtype.is_bool:
        return "true" if c.start else "false"
    if isinstance(c.start, float):
        return literal(c.start, c.dtype) if math.isinf(c.start) else str(int(c.start))
    for lowest, name in ((True, "fir_lowest"), (False, "fir_highest")):
        if c.start == extreme(c.dtype, lowest):  # a literal of the range's end overflows
            return f"{name}<{CTYPE[c.dtype]}>()"
    return str(c.start)
