"""The C++ back end's tables: IR op -> C++ expression, dtype -> C++ types, casts, literals, and
how each reduction kind's state (:mod:`fir.ir.accumulators`) is updated and merged.

An entry is a ``str.format`` pattern over the operands (``{0}``, ``{1}``, ``{2}``), which are
always names or literals, so no entry needs parentheses around its operands. The helpers the
entries call (``fir_*``) are defined in :mod:`.prelude`, overloaded by type where the semantics
differ (``fir_max`` of ints and of floats), so one line serves every dtype; the ops missing here
(``floordiv``, ``sigmoid`` …) reach the renderer written with others
(:mod:`fir.backends.plan.lowering`). Adding an op to FIR means one entry here
(``tests/backends/test_cpp_render.py`` checks that every elementwise op has one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fir.ir.accumulators import Component, extreme, merge, state
from fir.ir.dtypes import DType, round_to
from fir.ir.graph import Literal
from fir.ir.ops import BINARY_LOGICAL

_INFIX = {  # tdiv, trem: plan primitives (backends/plan/instructions.py)
    **{"add": "+", "sub": "-", "mul": "*", "div": "/", "tdiv": "/", "trem": "%"},
    **{"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="},
    **{"logical_and": "&&", "logical_or": "||", "logical_xor": "!="},
    **{"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"},
}
# op -> fir_OP(operands), the prelude's helper of that name: one operand, two operands
_CALLS = (
    "floor ceil round trunc exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan asin acos atan "
    "sinh cosh tanh asinh acosh atanh erf erfc erfinv lgamma digamma isnan signbit"
)
_CALLS2 = "fmod pow atan2 hypot copysign shl shr"
# Elementwise ops (the ``scalar=True`` entries of fir.ir.ops.OPS, less those
# fir.backends.plan.lowering writes with others, plus the plan's primitives). f16/bf16
# operands are floats.
OPS: dict[str, str] = {
    **{op: f"{{0}} {sign} {{1}}" for op, sign in _INFIX.items()},
    **{op: f"fir_{op}({{0}})" for op in _CALLS.split()},
    **{op: f"fir_{op}({{0}}, {{1}})" for op in _CALLS2.split()},
    "neg": "-{0}",
    "abs": "fir_fabs({0})",
    "maximum": "fir_max({0}, {1})",
    "minimum": "fir_min({0}, {1})",
    "logical_not": "!{0}",
    "bitwise_not": "fir_bitnot({0})",
    "where": "{0} ? {1} : {2}",
    "cast": "{cast}",  # the target dtype's entry of CASTS
}

# Integer operands: the ops whose C++ operators would overflow (undefined for signed types)
# wrap as torch's do; abs of ints needs no float helper.
INT_OPS: dict[str, str] = {
    **{op: f"fir_w{op}({{0}}, {{1}})" for op in ("add", "sub", "mul")},
    "neg": "fir_wneg({0})",
    "abs": "fir_wabs({0})",
    **dict.fromkeys(("floor", "ceil", "round", "trunc"), "{0}"),
}

# the ops this renderer writes itself: the others of fir.backends.plan.lowering are lowered
NATIVE_OPS = frozenset(OPS)

# ops on truth values: a non-bool operand is compared with zero first (``fir_truth``)
LOGICAL = ("logical_not", *BINARY_LOGICAL)

# what values of each dtype are computed in, and what a buffer of it holds
CTYPE: dict[DType, str] = {
    DType.BOOL: "bool",
    **{d: f"int{8 * d.itemsize}_t" for d in (DType.I8, DType.I16, DType.I32, DType.I64)},
    DType.U8: "uint8_t",
    **dict.fromkeys((DType.F16, DType.BF16, DType.F32), "float"),
    DType.F64: "double",
}
STORAGE: dict[DType, str] = {**CTYPE, DType.F16: "uint16_t", DType.BF16: "uint16_t"}

# cast to the dtype (from any C type): a cast to f16 or bf16 rounds the float to it
CASTS: dict[DType, str] = {d: f"fir_cast_{d}({{0}})" for d in DType}


def load_expr(dtype: DType, element: str) -> str:
    """A buffer element (``p[i]``) as a value: f16 and bf16 widen to float."""
    return f"fir_from_{dtype}({element})" if dtype.is_narrow_float else element


def store_expr(dtype: DType, value: str) -> str:
    """A value as the buffer's element type: f16 and bf16 narrow, rounding to nearest even."""
    return f"fir_to_{dtype}({value})" if dtype.is_narrow_float else value


# ---------------------------------------------------------------------------------------------
# literals


def c_int(v: int) -> str:
    if v == -(2**63):
        return "INT64_MIN"
    return str(v) if -(2**31) <= v < 2**31 else f"INT64_C({v})"


def literal(lit: Literal | bool | int | float | None, dtype: DType, exact: bool = False) -> str:
    """``lit`` as a C++ constant of ``dtype``'s compute type. ``exact``: round it to ``dtype``
    first (f16/bf16), as the interpreter does where a literal becomes a tensor of that dtype."""
    value = lit.value if isinstance(lit, Literal) else lit
    value = 0 if value is None else value
    if dtype.is_bool:
        return "true" if value else "false"
    if not dtype.is_float:
        # typed, so that it meets a value of the dtype in the overloaded helpers (fir_wadd(T, T))
        text = c_int(int(value))
        return text if text == "INT64_MIN" else f"{CTYPE[dtype]}({text})"
    single = dtype is not DType.F64
    v = round_to(float(value), dtype if exact else DType.F64)
    v = round_to(v, DType.F32) if single else v
    if math.isnan(v) or math.isinf(v):
        text = "FIR_NAN" if math.isnan(v) else "FIR_INF"
        text = text if single else f"double({text})"
        return f"(-{text})" if v < 0 else text
    if single:  # the shortest decimal that reads back as the float32 (9 digits always do)
        text = next(
            t for t in (f"{v:.{n}g}" for n in range(1, 10)) if round_to(float(t), DType.F32) == v
        )
    else:
        text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    text += "f" if single else ""
    return f"({text})" if text.startswith("-") else text


# ---------------------------------------------------------------------------------------------
# accumulators: the state of each kind is fir.ir.accumulators.state's, its components named by
# suffixes of the accumulator's name (every other kind has one component, the name itself)

SUFFIXES = {"argmax": ("", "_i"), "argmin": ("", "_i"), "welford": ("_mean", "_m2", "_n")}


def _pick(better: str) -> str:
    # argmax/argmin: the first position of the best value; NaN counts as the best (torch)
    return (
        "if ({v} " + better + " {s} || (fir_isnan({v}) && !fir_isnan({s})) || {s_i} < 0) "
        "{{ {s} = {v}; {s_i} = {i}; }}"
    )


# How a value ``{v}`` at position ``{i}`` of the reduced block updates a state of several
# components ``{s}``, ``{s_i}`` …; a state of one component merges the value in (:func:`update`).
UPDATES = {
    "argmax": _pick(">"),
    "argmin": _pick("<"),
    # Welford's online mean and sum of squared deviations
    "welford": "{{ {s_n} = {s_n} + 1; const auto d = {v} - {s_mean}; {s_mean} = {s_mean} + d / "
    "{s_n}; {s_m2} = {s_m2} + d * ({v} - {s_mean}); }}",
}
# Welford's update where every lane has seen the same number of elements (the main loop of a
# vectorised row): one reciprocal ``{inv}`` of the count per block instead of a division per
# element
UNIFORM = (
    "{{ const auto d = {v} - {s_mean}; {s_mean} = {s_mean} + d * {inv}; "
    "{s_m2} = {s_m2} + d * ({v} - {s_mean}); }}"
)


def start_value(c: Component) -> str:
    """A state component's start value in C++."""
    if c.dtype.is_bool:
        return "true" if c.start else "false"
    if c.dtype.is_float:
        return literal(c.start, c.dtype) if math.isinf(c.start) else str(int(c.start))
    for lowest, name in ((True, "fir_lowest"), (False, "fir_highest")):
        if c.start == extreme(c.dtype, lowest):  # a literal of the range's end overflows
            return f"{name}<{CTYPE[c.dtype]}>()"
    return str(c.start)


def update(kind: str, dtype: DType, names: Sequence[str], v: str, i: str, inv: str = "") -> str:
    """The statement by which value ``v`` at position ``i`` updates a state (its components'
    C++ names); ``inv``: Welford's reciprocal of the count every lane shares."""
    if kind in UPDATES:
        comps = {"s" + x: n for x, n in zip(SUFFIXES[kind], names)}
        return (UNIFORM if inv else UPDATES[kind]).format(**comps, v=v, i=i, inv=inv)
    if kind == "any":
        v = f"fir_truth({v})"
    elif kind in ("sum", "prod") and not dtype.is_float:  # in int64, wrapping
        v = f"int64_t({v})"
    return combine(kind, dtype, names, [v])


def combine(kind: str, dtype: DType, mine: Sequence[str], theirs: Sequence[str]) -> str:
    """The statement that merges a state (another lane's: its components' C++ names) into
    ``mine``: :func:`fir.ir.accumulators.merge`'s steps, each a line of the op tables."""
    names = {f"a{k}": n for k, n in enumerate(mine)} | {f"b{k}": n for k, n in enumerate(theirs)}
    dtypes = {f"{side}{k}": c.dtype for side in "ab" for k, c in enumerate(state(kind, dtype))}
    spec = merge(kind, dtype)
    lines = []
    for step in spec.steps:
        operand = dtypes[next(a for a in step.args if isinstance(a, str))]
        args = [names[a] if isinstance(a, str) else literal(a, operand) for a in step.args]
        table = INT_OPS if operand.is_int and step.op in INT_OPS else OPS
        expr = table[step.op].format(*args)
        if len(spec.steps) == 1:  # sum, max …: one statement, as a person would write it
            return f"{mine[0]} = {expr};"
        names[step.dst], dtypes[step.dst] = "fir_m_" + step.dst, step.dtype
        lines.append(f"const {CTYPE[step.dtype]} {names[step.dst]} = {expr};")
    lines += [f"{n} = {names[r]};" for n, r in zip(mine, spec.results)]
    return "{ " + " ".join(lines) + " }"
