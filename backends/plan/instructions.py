"""The instructions of a kernel plan: a short, linear list that every renderer walks once.

A kernel plan is a loop nest written out: ``loop``/``end`` open and close a loop of the
kernel, the other instructions compute one scalar each (an SSA name) or write memory. A
renderer is a table from instruction (and op) to target code plus one walk over the list.

Value names are unique in a plan. ``dtype`` is always the IR's dtype: f16 and bf16 values are
computed in f32 by every renderer (loads widen, stores narrow, a ``cast`` to f16 or bf16 rounds
to it), which is what the renderers share and the plan does not repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.ops import FAILS_ON_ZERO_DIVISOR
from fir.ir.symbolic import print_expr
from fir.ir.types import Dim, dim_str

# the error code a kernel reports for an integer division by zero (index checks have codes 1, 2,
# …, unique in a program)
DIVISION_BY_ZERO = -1

# Plan primitives: ops of ``Compute`` that the IR has no op for, which :mod:`.lowering` writes
# composite ops with and each renderer maps one to one:
#
# * ``tdiv a, b``: integer division truncating toward zero (C's ``/``);
# * ``trem a, b``: its remainder, with the dividend's sign (C's ``%``).
#
# Both take a divisor that is never -1 (the lowering replaces it, so no renderer meets
# ``INT_MIN / -1``); a zero divisor is an error the kernel reports (``DIVISION_BY_ZERO``).
PLAN_OPS = frozenset({"tdiv", "trem"})

# the ops of ``Compute`` that fail on an integer zero divisor: the IR's and the plan's
DIVIDES = FAILS_ON_ZERO_DIVISOR | PLAN_OPS

Expr = Any  # an index expression over the kernel's loop variables, indirect symbols and sizes
Operand = str | Literal  # a value name or a literal


@dataclass(frozen=True)
class LoopBegin:
    """``for var in [0, size)``. ``parallel``: the loop the kernel is split across threads on
    (the outermost pointwise loop). ``reduction``: a loop over the reduced elements."""

    var: str
    size: Dim
    reduction: bool
    parallel: bool = False


@dataclass(frozen=True)
class LoopEnd:
    var: str


@dataclass(frozen=True)
class Load:
    """``dst = buffer[index]`` (element ``index`` of the buffer's storage); with a ``mask``,
    ``other`` where the mask is false, and memory is not touched there."""

    dst: str
    buffer: str
    index: Expr
    dtype: DType
    mask: str | None = None
    other: Literal | None = None


@dataclass(frozen=True)
class Compute:
    """``dst = op(args)``: an elementwise op of the IR (``add``, ``exp``, ``where``, ``cast`` …)
    with its result dtype."""

    dst: str
    op: str
    args: tuple[Operand, ...]
    dtype: DType


def checks_divisor(i: Any) -> bool:
    """Whether instruction ``i`` divides integers (``DIVIDES``) by a divisor that may be zero:
    every renderer checks such a divisor and reports ``DIVISION_BY_ZERO``. A literal divisor
    other than zero needs no check."""
    if not isinstance(i, Compute) or i.op not in DIVIDES or not i.dtype.is_int:
        return False
    d = i.args[1]
    return not (isinstance(d, Literal) and d.value not in (0, None))


@dataclass(frozen=True)
class Constant:
    dst: str
    value: Literal
    dtype: DType


@dataclass(frozen=True)
class IndexValue:
    """``dst = index`` as a number of ``dtype`` (the IR's ``index`` op)."""

    dst: str
    index: Expr
    dtype: DType


@dataclass(frozen=True)
class CheckIndex:
    """An indirect index: ``symbol = src``, checked to lie in ``[0, bound)``. Out of range, the
    kernel reports ``code`` (the runtime names the kernel, the buffers read through it and the
    value) and reads nothing through it. With a ``mask`` (the one mask of every load that uses
    the index), only points where the mask holds are checked, as the interpreter checks a
    masked load; elsewhere the index is 0 and nothing is read through it. ``proven``: the
    program guarantees the range (:func:`fir.ir.ranges.value_range`), so a renderer only binds
    the symbol (no check, no error code)."""

    symbol: str  # the name of the index symbol in index expressions (``%3``)
    src: str
    bound: Dim
    buffers: tuple[str, ...]
    code: int
    mask: str | None = None
    proven: bool = False


@dataclass(frozen=True)
class AccInit:
    """Start an accumulator before a reduction loop. ``kind``: sum, prod, max, min, argmax,
    argmin, any, welford. ``dtype``: of the reduced values."""

    acc: str
    kind: str
    dtype: DType


@dataclass(frozen=True)
class Accumulate:
    """Fold ``value`` into ``acc``. ``rindex``: for argmax/argmin, the position of the current
    element in the reduced block (row-major over the reduction loops as the IR writes them)."""

    acc: str
    kind: str
    value: Operand
    dtype: DType
    rindex: Expr | None = None


@dataclass(frozen=True)
class AccResult:
    """The results of an accumulator after its loop: one name, or three for welford (mean, m2,
    count), each with its dtype."""

    dsts: tuple[str, ...]
    acc: str
    kind: str
    dtypes: tuple[DType, ...]


@dataclass(frozen=True)
class Store:
    """``buffer[index] = value`` (narrowed to the buffer's dtype)."""

    buffer: str
    index: Expr
    value: Operand
    dtype: DType


Instr = (
    LoopBegin
    | LoopEnd
    | Load
    | Compute
    | Constant
    | IndexValue
    | CheckIndex
    | AccInit
    | Accumulate
    | AccResult
    | Store
)

# every instruction kind: a renderer must handle each (a test checks it)
INSTRUCTIONS = (
    LoopBegin,
    LoopEnd,
    Load,
    Compute,
    Constant,
    IndexValue,
    CheckIndex,
    AccInit,
    Accumulate,
    AccResult,
    Store,
)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


# the method a renderer's walk calls for each instruction kind: ``on_load``, ``on_acc_init``, …
HANDLER = {cls: "on_" + _snake(cls.__name__) for cls in INSTRUCTIONS}


class InstrWalker:
    """The one walk of a renderer: ``visit`` calls ``on_<kind>`` (see ``HANDLER``) for an
    instruction. A renderer defines a handler per kind it meets (the loop tree consumes
    ``loop``/``end`` where a renderer walks loops itself); a missing one is a renderer bug."""

    def visit(self, i: Instr) -> Any:
        return getattr(self, HANDLER[type(i)])(i)


def missing_handlers(walker: type, loops: bool = True) -> list[str]:
    """The handlers ``walker`` lacks (``loops=False``: not counting ``loop``/``end``)."""
    kinds = INSTRUCTIONS if loops else INSTRUCTIONS[2:]
    return [HANDLER[k] for k in kinds if not callable(getattr(walker, HANDLER[k], None))]


def operand_str(o: Operand) -> str:
    return str(o) if isinstance(o, Literal) else o


def instr_str(i: Instr) -> str:
    """One line of the plan's text form."""
    if isinstance(i, LoopBegin):
        tags = " reduction" if i.reduction else ""
        tags += " parallel" if i.parallel else ""
        return f"loop {i.var} < {dim_str(i.size)}{tags}"
    if isinstance(i, LoopEnd):
        return f"end {i.var}"
    if isinstance(i, Load):
        text = f"{i.dst} = load {i.buffer}[{print_expr(i.index)}] : {i.dtype}"
        if i.mask is not None:
            text += f" if {i.mask} else {i.other}"
        return text
    if isinstance(i, Compute):
        return f"{i.dst} = {i.op} {', '.join(operand_str(a) for a in i.args)} : {i.dtype}"
    if isinstance(i, Constant):
        return f"{i.dst} = constant {i.value} : {i.dtype}"
    if isinstance(i, IndexValue):
        return f"{i.dst} = index {print_expr(i.index)} : {i.dtype}"
    if isinstance(i, CheckIndex):
        if i.proven:
            return f"{i.symbol} = index {i.src} < {dim_str(i.bound)} (proven in range)"
        return (
            f"{i.symbol} = check {i.src} < {dim_str(i.bound)}"
            + (f" if {i.mask}" if i.mask is not None else "")
            + f" (reads {', '.join(i.buffers) or 'nothing'}; error {i.code})"
        )
    if isinstance(i, AccInit):
        return f"{i.acc} = init {i.kind} : {i.dtype}"
    if isinstance(i, Accumulate):
        at = f" at {print_expr(i.rindex)}" if i.rindex is not None else ""
        return f"{i.acc} <- {i.kind} {operand_str(i.value)}{at}"
    if isinstance(i, AccResult):
        types = ", ".join(str(d) for d in i.dtypes)
        return f"{', '.join(i.dsts)} = result {i.acc} : {types}"
    if isinstance(i, Store):
        return f"store {i.buffer}[{print_expr(i.index)}] = {operand_str(i.value)} : {i.dtype}"
    raise TypeError(f"unknown instruction {i!r}")  # pragma: no cover
