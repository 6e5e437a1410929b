"""The C++ back end's tables: IR op -> C++ expression, dtype -> C++ types, casts, literals, and
how each reduction kind's state (:mod:`fir.ir.accumulators`) is updated and merged.

An entry is a ``str.format`` pattern over the operands (``{0}``, ``{1}``, ``{2}``), which are
names or literals (or, in an accumulator's update, parenthesised where they need it), so no
entry needs parentheses around its operands. The helpers the
entries call (``fir_*``) are defined in :mod:`.prelude`, overloaded by type where the semantics
differ (``fir_max`` of ints and of floats), so one line serves every dtype; the ops missing here
(``floordiv``, ``sigmoid`` …) reach the renderer written with others
(:mod:`fir.backends.plan.lowering`). Adding an op to FIR means one entry here
(``tests/backends/test_cpp_render.py`` checks that every elementwise op has one).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from fir.backends.plan.op_forms import MATH1, MATH2, OPERATORS, ROUNDING, operand_dtype
from fir.ir import accumulators
from fir.ir.accumulators import Component, extreme, merge
from fir.ir.dtypes import DType, literal_value, round_to
from fir.ir.graph import Literal
from fir.ir.ops import BINARY_LOGICAL

# tdiv, trem: plan primitives (backends/plan/instructions.py)
_INFIX = {**OPERATORS, "tdiv": "/", "trem": "%"}
_INFIX |= {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}
# Elementwise ops (the ``scalar=True`` entries of fir.ir.ops.OPS, less those
# fir.backends.plan.lowering writes with others, plus the plan's primitives). f16/bf16
# operands are floats. A function call: the prelude's helper of the op's name.
OPS: dict[str, str] = {
    **{op: f"{{0}} {sign} {{1}}" for op, sign in _INFIX.items()},
    **{op: f"fir_{op}({{0}})" for op in (*MATH1, *ROUNDING, "isnan", "signbit")},
    **{op: f"fir_{op}({{0}}, {{1}})" for op in (*MATH2, "shl", "shr")},
    "neg": "-{0}",
    "abs": "fir_fabs({0})",
    "maximum": "fir_max({0}, {1})",
    "minimum": "fir_min({0}, {1})",
    "logical_not": "!{0}",
    "bitwise_not": "fir_bitnot({0})",
    "where": "{0} ? {1} : {2}",
    "cast": "{cast}",  # the target dtype's entry of CASTS
}
# C++'s precedence of the entries, the most tightly binding first (calls: 0): where operands
# are written inline (:func:`update`), those that bind more loosely than the op take parentheses
_PRECEDENCE = "neg logical_not, mul div tdiv trem, add sub, lt le gt ge, eq ne logical_xor, "
_PRECEDENCE += "bitwise_and, bitwise_xor, bitwise_or, logical_and, logical_or, where"
BINDING = {op: k for k, ops in enumerate(_PRECEDENCE.split(","), 1) for op in ops.split()}

# Integer operands: the ops whose C++ operators would overflow (undefined for signed types)
# wrap as torch's do; abs of ints needs no float helper.
INT_OPS: dict[str, str] = {
    **{op: f"fir_w{op}({{0}}, {{1}})" for op in ("add", "sub", "mul")},
    "neg": "fir_wneg({0})",
    "abs": "fir_wabs({0})",
    **dict.fromkeys(ROUNDING, "{0}"),
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
    v = literal_value(float(value), dtype, exact)
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


def start_value(c: Component) -> str:
    """A state component's start value in C++ (a small integer bare: it converts exactly)."""
    if c.dtype.is_bool or c.dtype.is_float and math.isinf(c.start):
        return literal(c.start, c.dtype)
    for lowest, name in ((True, "fir_lowest"), (False, "fir_highest")):
        if c.start == extreme(c.dtype, lowest):  # a literal of the range's end overflows
            return f"{name}<{CTYPE[c.dtype]}>()"
    return str(int(c.start))


def update(kind: str, dtype: DType, names: Sequence[str], v: str, i: str, inv: str = "") -> str:
    """The statement by which value ``v`` at position ``i`` updates a state (its components'
    C++ names): the steps of :func:`fir.ir.accumulators.update`, a step read once written
    into its reader, a result into its component once nothing reads the old value; ``inv``:
    Welford's reciprocal of the count every lane shares."""
    if kind == "any":
        v = f"fir_truth({v})"
    elif kind in ("sum", "prod") and not dtype.is_float:  # in int64, wrapping
        v = f"int64_t({v})"
    spec = accumulators.update(kind, dtype, uniform=bool(inv))
    # a name's C++ text and how tightly that binds (BINDING)
    exprs = {f"a{k}": (n, 0) for k, n in enumerate(names)}
    exprs |= {"v": (v, 0), "i": (i, BINDING["where"]), "inv": (inv, 0)}
    reads = Counter([spec.guard, *(a for s in spec.steps for a in s.args if isinstance(a, str))])
    lines: list[str] = []
    pending: set[str] = set()  # steps written into a reader still to come
    for n, step in enumerate(spec.steps):
        parts = [exprs[a] if isinstance(a, str) else _number(a) for a in step.args]
        text, binding = inline(step.op, parts, step.dtype.is_int)
        pending.difference_update(step.args)
        later = {a for s in spec.steps[n + 1 :] for a in s.args}
        k = spec.results.index(step.dst) if step.dst in spec.results else -1
        if k >= 0 and spec.guard is None and not pending and f"a{k}" not in later:
            lines.append(f"{names[k]} = {text};")
            exprs[step.dst] = (names[k], 0)
        elif k < 0 and reads[step.dst] == 1:
            exprs[step.dst] = (text, binding)
            pending.add(step.dst)
        else:
            lines.append(f"const auto {step.dst} = {text};")
            exprs[step.dst] = (step.dst, 0)
    assigns = [f"{n} = {exprs[r][0]};" for n, r in zip(names, spec.results) if exprs[r][0] != n]
    if spec.guard is not None:
        assigns = [f"if ({exprs[spec.guard][0]}) {{ {' '.join(assigns)} }}"]
    lines += assigns
    return lines[0] if len(lines) == 1 else "{ " + " ".join(lines) + " }"


def _number(a: float | int | bool) -> tuple[str, int]:
    # an update's numbers: small integers, exact in any operand's type, so written bare
    assert a == int(a), f"{a} in an accumulator update"
    return c_int(int(a)), BINDING["neg"] if a < 0 else 0


def inline(op: str, parts: Sequence[tuple[str, int]], integer: bool) -> tuple[str, int]:
    """``op`` of operands (their C++ text, how tightly it binds), and how tightly the result
    binds. An operand is parenthesised where C++ would group it otherwise, and a bitwise or
    logical operator inside another, as GCC's -Wparentheses asks."""
    outer = 0 if integer and op in INT_OPS else BINDING.get(op, 0)  # 0: a call
    args = []
    for k, (text, inner) in enumerate(parts):
        left = k == 0 and len(parts) == 2  # C++'s binary operators group from the left
        loose = inner > outer or (inner == outer and not left)
        mixed = outer > inner >= BINDING["bitwise_and"]
        args.append(f"({text})" if outer and inner and (loose or mixed) else text)
    text = apply(op, args, integer)
    return (text, parts[0][1]) if text == args[0] else (text, outer)  # an int's floor: itself


def apply(op: str, args: Sequence[str], integer: bool) -> str:
    """``op`` of ``args`` in C++; integer operands take INT_OPS's entry where it has one."""
    return (INT_OPS if integer and op in INT_OPS else OPS)[op].format(*args)


def combine(kind: str, dtype: DType, mine: Sequence[str], theirs: Sequence[str]) -> str:
    """The statement that merges a state (another lane's: its components' C++ names) into
    ``mine``: :func:`fir.ir.accumulators.merge`'s steps, each a line of the op tables."""
    names = {f"a{k}": n for k, n in enumerate(mine)} | {f"b{k}": n for k, n in enumerate(theirs)}
    spec = merge(kind, dtype)
    lines = []
    for step in spec.steps:
        operand = operand_dtype(step.op, step.args, step.dtype, spec.dtypes)
        args = [names[a] if isinstance(a, str) else literal(a, operand) for a in step.args]
        expr = apply(step.op, args, operand.is_int)
        if len(spec.steps) == 1:  # sum, max …: one statement, as a person would write it
            return f"{mine[0]} = {expr};"
        names[step.dst] = "fir_m_" + step.dst
        lines.append(f"const {CTYPE[step.dtype]} {names[step.dst]} = {expr};")
    lines += [f"{n} = {names[r]};" for n, r in zip(mine, spec.results)]
    return "{ " + " ".join(lines) + " }"
