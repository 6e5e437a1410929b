"""The FIR program: a module of functions whose nodes live at tensor level or loop level.

* A :class:`TensorOp` is a tensor-level op (``%y = add %a, %b : f32[4]``).
* An :class:`ExternNode` calls a named library op (matmul, convolution, any op with no lowering).
* A :class:`LoopNode` is a loop-level buffer: a pointwise or reduction loop nest whose
  :class:`Body` computes one element from loads at index expressions.

One graph may hold both levels while a pass moves ops from one to the other. Fields that later
passes fill in (loop orders, memory plans) live in each node's ``attrs``; the dependencies
computed by the ``deps`` pass live in ``Node.deps`` (see :mod:`fir.ir.dependencies`); fusion groups
(:class:`Kernel`) live in ``Graph.kernels``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dtypes import DType
from .errors import Location
from .types import Dim, TensorType

if TYPE_CHECKING:
    import sympy

    from .dependencies import NodeDeps


@dataclass(frozen=True)
class Literal:
    """A scalar constant written in place of an operand (``add %x, 1.0``)."""

    value: bool | int | float | None

    @property
    def kind(self) -> str:
        if self.value is None:
            return "none"
        if isinstance(self.value, bool):
            return "bool"
        if isinstance(self.value, int):
            return "int"
        return "float"

    def __str__(self) -> str:
        return literal_str(self.value)


def literal_str(v: bool | int | float | None) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


class Value:
    """An SSA tensor value: a function argument or a node result."""

    __slots__ = ("name", "type", "owner", "index")

    def __init__(self, name: str, type: TensorType, owner: Node | None = None, index: int = 0):
        self.name = name
        self.type = type
        self.owner = owner
        self.index = index

    def __repr__(self) -> str:
        return f"Value(%{self.name}: {self.type})"


Operand = Value | Literal

# Attribute keys that passes write on any node, on top of an op's own attributes. Values in
# them are annotations, not uses: ``frees = [%a]`` does not keep ``%a`` alive.
ANNOTATION_KEYS = frozenset(
    {
        "realized",  # inline: why this buffer is materialized
        "reuses",  # plan-memory: takes over the storage of this dead buffer
        "inplace",  # plan-memory: writes into the storage of this input, element for element
        "frees",  # plan-memory: buffers whose last use is this node
        "mutates",  # extern calls: positional arguments written in place (``mutates = [0]``)
        "aliases",  # extern calls: the argument each result is a view of (``aliases = [0]``)
        "nofuse",  # fuse: never fuse this node (``true``) or never with these nodes (``[%a]``)
        "copy",  # lower: why a view is a copy, not an alias (no strides express it, …)
    }
)
# Attribute values: numbers, bools, strings, none, dtypes, symbolic sizes and lists of them.
# Extern call arguments may also hold Values.
AttrValue = Any


@dataclass(eq=False)
class Node:
    results: list[Value]
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    loc: Location | None = field(default=None, repr=False)
    # reads, writes, users and ancestors, once the ``deps`` pass has run (keyword-only, so that
    # the subclasses' own fields keep their positions)
    deps: NodeDeps | None = field(default=None, repr=False, kw_only=True)

    @property
    def result(self) -> Value:
        return self.results[0]

    def operand_values(self) -> list[Value]:
        raise NotImplementedError

    def describe(self) -> str:
        return ", ".join("%" + r.name for r in self.results)


@dataclass(eq=False)
class TensorOp(Node):
    op: str = ""
    operands: list[Operand] = field(default_factory=list)

    def operand_values(self) -> list[Value]:
        return [o for o in self.operands if isinstance(o, Value)]


@dataclass(eq=False)
class ExternNode(Node):
    """``%y = extern "aten.mm.default"(%a, %b) : f32[8, 8]``: a call the runtime makes as is."""

    callee: str = ""
    args: list[AttrValue] = field(default_factory=list)
    kwargs: dict[str, AttrValue] = field(default_factory=dict)

    def operand_values(self) -> list[Value]:
        out: list[Value] = []

        def walk(v: AttrValue) -> None:
            if isinstance(v, Value):
                out.append(v)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

        for a in self.args:
            walk(a)
        for a in self.kwargs.values():
            walk(a)
        return out


@dataclass(eq=False)
class AliasNode(Node):
    """``%w.t = view %w : f32[64, 128] strided [1, 64]``: the result is the storage of ``base``
    seen with other sizes, strides and offset, never a copy (Inductor's ReinterpretView).

    The result's type says how: its shape, and its layout's strides and offset index the
    storage that ``base`` lives in (the storage of the root buffer when ``base`` is itself an
    alias). An alias runs no loops and allocates nothing; it exists where a view must be a
    tensor of its own: an extern call's argument, a graph output. Loop bodies never need one:
    they read the root buffer through the index expression."""

    base: Value | None = None

    def operand_values(self) -> list[Value]:
        assert self.base is not None
        return [self.base]


def alias_root(v: Value) -> Value:
    """The buffer whose storage ``v`` lives in: ``v`` itself unless an alias node made it."""
    while isinstance(v.owner, AliasNode) and v.owner.base is not None:
        v = v.owner.base
    return v


# ---------------------------------------------------------------------------------------------
# Loop level


class BodyValue:
    """A scalar SSA value inside a loop body."""

    __slots__ = ("name", "dtype", "owner")

    def __init__(self, name: str, dtype: DType | None, owner: BodyOp | None = None):
        self.name = name
        self.dtype = dtype
        self.owner = owner

    def __repr__(self) -> str:
        return f"BodyValue(%{self.name}: {self.dtype})"


BodyOperand = BodyValue | Literal


@dataclass(eq=False)
class BodyOp:
    """One scalar op of a loop body.

    ``opcode`` is ``load``, ``indirect``, ``index``, ``constant``, ``cast`` or an elementwise op
    name (``add``, ``exp``, ``where`` …). ``load`` uses ``buffer``/``index`` and, when masked,
    ``mask``/``other``; ``indirect`` uses ``operands[0]`` and ``bound``; ``index`` uses ``index``;
    ``constant`` and ``cast`` carry their result dtype in ``dtype``.
    """

    opcode: str
    result: BodyValue
    operands: list[BodyOperand] = field(default_factory=list)
    buffer: Value | None = None
    index: sympy.Expr | int | None = None
    mask: BodyValue | None = None
    other: Literal | None = None
    bound: Dim | None = None
    dtype: DType | None = None
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    loc: Location | None = field(default=None, repr=False)


@dataclass(eq=False)
class Body:
    ops: list[BodyOp]
    result: BodyOperand
    yield_loc: Location | None = field(default=None, repr=False)

    def loads(self) -> Iterator[BodyOp]:
        return (op for op in self.ops if op.opcode == "load")


REDUCTION_KINDS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "welford")


@dataclass(frozen=True)
class Loop:
    """One loop of a :class:`LoopSchedule`: the loop variables it runs over, outermost first
    (several when loops are merged: the loop counts their row-major combinations), and its trip
    count, the product of their sizes."""

    vars: tuple[sympy.Symbol, ...]
    size: Dim


@dataclass(eq=False)
class LoopSchedule:
    """The order a loop node's loops run in (``order (…)`` in the text): the pointwise loops,
    then the reduction loops, each list outermost first. Every loop variable whose size is not 1
    appears once; one of size 1 may be left out (squeezed). A schedule changes the order of the
    iterations, never what a node computes: element ``linear(p)`` of the result is still
    computed at point ``p`` of the node's ``over`` ranges. Inside a kernel, a node's iterations
    are numbered in schedule order (which output element of the kernel each one belongs to)."""

    loops: list[Loop] = field(default_factory=list)
    reduction: list[Loop] = field(default_factory=list)
    loc: Location | None = field(default=None, repr=False)


@dataclass(eq=False)
class LoopNode(Node):
    """A buffer computed by a loop nest.

    ``ranges`` are the pointwise loops and ``reduction_ranges`` the reduced ones, each a
    (variable, size) pair. Element ``p`` of the pointwise iteration space is element number
    ``linear(p)`` of the result in row-major order, stored through the result's layout.
    ``reduction`` is None for a pointwise node, else one of :data:`REDUCTION_KINDS`;
    ``welford`` has three results: mean, m2 (sum of squared deviations) and count.
    ``schedule`` is the order the loops run in (``reorder``), None for the order of ``ranges``.
    """

    reduction: str | None = None
    ranges: list[tuple[sympy.Symbol, Dim]] = field(default_factory=list)
    reduction_ranges: list[tuple[sympy.Symbol, Dim]] = field(default_factory=list)
    body: Body | None = None
    schedule: LoopSchedule | None = None

    def scheduled_vars(self) -> tuple[list[sympy.Symbol], list[sympy.Symbol]]:
        """The pointwise and the reduction loop variables in the order they run, merged loops
        expanded (outermost first), squeezed ones left out."""
        if self.schedule is None:
            return [v for v, _ in self.ranges], [v for v, _ in self.reduction_ranges]
        pw = [v for loop in self.schedule.loops for v in loop.vars]
        red = [v for loop in self.schedule.reduction for v in loop.vars]
        return pw, red

    @property
    def is_reduction(self) -> bool:
        return self.reduction is not None

    def operand_values(self) -> list[Value]:
        seen: dict[int, Value] = {}
        assert self.body is not None
        for op in self.body.ops:
            if op.buffer is not None:
                seen.setdefault(id(op.buffer), op.buffer)
        return list(seen.values())


# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Kernel:
    """A fusion group: loop nodes that run as one kernel (``kernel @k0 over (32; 64) { … }``).

    ``nodes`` are the members in the order they run; they stand one after the other in
    :attr:`Graph.nodes`. ``local`` are member results that are never written to memory: only
    members read them and the function does not return them. ``over`` is the iteration space
    as the text declares it (``(numel, rnumel)``, ``rnumel`` None for a pointwise kernel), or
    None when it was not written; the printer always prints the computed one
    (:func:`fir.ir.kernels.kernel_space`).
    """

    name: str
    nodes: list[Node] = field(default_factory=list)
    local: list[Value] = field(default_factory=list)
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    over: tuple[Dim, Dim | None] | None = None
    loc: Location | None = field(default=None, repr=False)
    # where each name of ``local`` was written (parsed text only)
    local_locs: list[Location] = field(default_factory=list, repr=False)

    @property
    def first(self) -> Node:
        return self.nodes[0]


@dataclass(eq=False)
class Graph:
    """A function: typed arguments, nodes in program order, returned values."""

    name: str
    args: list[Value] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    output_types: list[TensorType] = field(default_factory=list)
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    loc: Location | None = field(default=None, repr=False)
    return_loc: Location | None = field(default=None, repr=False)
    # size symbols the caller passes as ints (``sizes (s1)`` after the arguments): sizes that no
    # argument type binds, such as a split size or ``s0`` where the arguments have ``s0 - 1``
    size_params: list[Any] = field(default_factory=list)
    # fusion groups (``fuse``, or written by hand); their members are among ``nodes``
    kernels: list[Kernel] = field(default_factory=list)

    def kernel_of(self) -> dict[int, Kernel]:
        """Map ``id(node)`` to the kernel it belongs to (nodes of no kernel are absent)."""
        return {id(n): k for k in self.kernels for n in k.nodes}

    def values(self) -> Iterator[Value]:
        yield from self.args
        for n in self.nodes:
            yield from n.results

    def users(self) -> dict[int, list[Node]]:
        """Map ``id(value)`` to the nodes that read it."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.operand_values():
                out.setdefault(id(v), []).append(n)
        return out

    def size_hints(self) -> dict[str, int]:
        """The size each symbol had where the graph was traced (its ``size_hints`` attribute,
        which the PyTorch import writes under ``dynamic=True``), by symbol name. A hint guides
        choices that only cost time (padding a product, a reduction's block), never one that a
        size must satisfy."""
        hints = self.attrs.get("size_hints") or []
        assert isinstance(hints, list)
        return {str(pair[0]): int(pair[1]) for pair in hints if isinstance(pair, list)}

    def fresh_name(self, prefix: str = "v") -> str:
        taken = {v.name for v in self.values()}
        k = 0
        while f"{prefix}{k}" in taken:
            k += 1
        return f"{prefix}{k}"


def unique_name(name: str, taken: set[str], sep: str = "") -> str:
    """``name``, or ``name{sep}2``, ``name{sep}3`` … : the first not in ``taken``, which it
    joins."""
    k, out = 1, name
    while out in taken:
        k += 1
        out = f"{name}{sep}{k}"
    taken.add(out)
    return out


@dataclass(eq=False)
class Module:
    funcs: list[Graph] = field(default_factory=list)

    def func(self, name: str) -> Graph:
        for f in self.funcs:
            if f.name == name:
                return f
        raise KeyError(name)
