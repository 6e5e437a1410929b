"""Random well-formed FIR programs, built as IR objects, for property tests.

Every program these strategies produce passes ``verify_module``:

* tensor level: chains of elementwise ops (unary, binary, compare, where, cast) with
  broadcasting and literal operands of every kind, reductions (dims, keepdim, correction,
  multi-result ``var_mean``), views (reshape, permute, transpose, expand, slice, select,
  squeeze, unsqueeze), ``cat``, creation ops (``full``, ``arange``, ``constant``), a few
  composite ops with attributes of every kind, extern calls; symbolic sizes and strided
  argument layouts sometimes;
* loop level: pointwise nodes and reductions of every kind (``welford`` with three results)
  whose bodies load at random index expressions (affine, ``floordiv``, ``mod``, ``min``,
  ``max``) that stay in bounds, masked loads, indirect loads, ``index``/``constant``/``cast``
  and random scalar ops; mixed with extern nodes.

The generators are written against a small :class:`Chooser` interface so that the same code
serves hypothesis (``HypothesisChooser``, which shrinks) and plain ``random.Random``
(``RandomChooser``, for very large deterministic graphs).

The strategies steer clear of constructs that trigger library bugs already reported (see
``KNOWN_BUGS``; each has its own failing regression test), so that a property test failing
means a new bug and does not spend minutes shrinking a known one. Remove a bug's entry once it
is fixed, or set ``FIR_TESTS_INCLUDE_KNOWN_BUGS=1`` to generate those constructs anyway.
``FIR_TESTS_EXAMPLES_SCALE=N`` multiplies the example counts of the property tests.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Sequence
from typing import Any

import sympy
from fir.ir.dtypes import DType
from fir.ir.graph import (
    Body,
    BodyOp,
    BodyValue,
    ExternNode,
    Graph,
    Literal,
    LoopNode,
    Module,
    Node,
    TensorOp,
    Value,
)
from fir.ir.ops import (
    BINARY_FLOAT,
    BINARY_INT,
    BINARY_LOGICAL,
    BINARY_NUMERIC,
    COMPARE,
    OPS,
    UNARY_FLOAT,
    UNARY_NUMERIC,
    UNARY_TO_BOOL_FLOAT,
    TypeRule,
    literal_fits,
)
from fir.ir.symbolic import FloorDiv, Modulo, bounds, index_var, indirect_symbol, size_symbol
from fir.ir.types import Layout, TensorType, broadcast_shapes, contiguous_strides, dims_mul
from hypothesis import strategies as st

# Library bugs found by these tests and not fixed yet: key -> description. Constructs that
# trigger one are generated only with FIR_TESTS_INCLUDE_KNOWN_BUGS=1; each bug also has its own
# regression test. Fixed so far (regression tests kept): "keyword-kwarg" (extern keyword
# arguments named min/max/true/...), "unlocated-stride-error" ('strided [f32]'),
# "keyword-kwarg-newline" (`min\n= 0.0`), "negative-strides" (now rejected by the parser).
KNOWN_BUGS: dict[str, str] = {}

AVOID_KNOWN_BUGS = bool(KNOWN_BUGS) and os.environ.get("FIR_TESTS_INCLUDE_KNOWN_BUGS", "") in (
    "",
    "0",
)
EXAMPLES_SCALE = max(1, int(os.environ.get("FIR_TESTS_EXAMPLES_SCALE", "1") or 1))


def examples(n: int) -> int:
    """A test's example count, scaled by FIR_TESTS_EXAMPLES_SCALE."""
    return n * EXAMPLES_SCALE


# Words that are keywords where an attribute value may start; an extern keyword argument with
# one of these names cannot be parsed (bug "keyword-kwarg").
VALUE_KEYWORDS = ("min", "max", "mod", "floordiv", "true", "false", "none", "inf", "nan")

ALL_DTYPES = list(DType)
INT_RANGES = {
    DType.I8: (-(2**7), 2**7 - 1),
    DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1),
    DType.I64: (-(2**63), 2**63 - 1),
    DType.U8: (0, 255),
}
FLOAT_DTYPES = [d for d in DType if d.is_float]
INT_DTYPES = [d for d in DType if d.is_int]
INDEX_DTYPES = [DType.I64, DType.I32]
SIZE_SYMBOL_NAMES = ["s0", "s1", "s2", "n", "batch", "seq_len", "N"]
# Loop variable names, some of which are keywords elsewhere in the grammar (the lexer resolves
# keywords by parser state, so these must still work as loop variables).
LOOP_VAR_NAMES = [
    "i0",
    "i1",
    "i2",
    "r0",
    "r1",
    "x",
    "y",
    "k",
    "a_1",
    "if",
    "load",
    "index",
    "over",
    "yield",
    "pointwise",
    "f32",
    "sum",
]
ATTR_NAMES = [
    "a",
    "b",
    "tag",
    "group",
    "reads",
    "order",
    "min",
    "max",
    "mod",
    "true",
    "none",
    "inf",
    "load",
    "over",
    "if",
    "f32",
    "dims",
    "x_1",
]
KWARG_NAMES = [
    "alpha",
    "dim",
    "keepdim",
    "out_dtype",
    "padding",
    "k1",
    "beta_2",
    "reduction",
    "load",
    "over",
    "f32",
    "index",
]
# an extern calls an operator (NAMESPACE.OP.OVERLOAD or NAMESPACE.OP) or torch.tensor: the
# verifier rejects any other name (no code runs from a file)
CALLEES = [
    "aten.mm.default",
    "aten.convolution.default",
    "aten._scaled_dot_product",
    "my_ns.my_op",
    "lib.op_2.Tensor_out",
    "_c10d_functional.wait_tensor.default",
    "torch.tensor",
]
VALUE_PREFIXES = ["", "v", "t.", "x$", "_", "buf", "0."]
FUNC_PREFIXES = ["f", "main", "f.", "_g$", "fn_"]
SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-06,
    1e-300,
    5e-324,
    1e300,
    1.7976931348623157e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    3.141592653589793,
    -2.5,
    1e16,
    123456.789,
]


# ---------------------------------------------------------------------------------------------
# Choosers


class Chooser:
    """The random decisions a generator makes."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, seq: Sequence[Any]) -> Any:
        seq = list(seq)
        return seq[self.integer(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        """True with about ``percent``% probability; shrinks toward False."""
        return self.integer(0, 99) >= 100 - percent

    def subset(self, seq: Sequence[Any]) -> list[Any]:
        return [x for x in seq if self.chance(50)]

    def permutation(self, seq: Sequence[Any]) -> list[Any]:
        items = list(seq)
        out = []
        while items:
            out.append(items.pop(self.integer(0, len(items) - 1)))
        return out

    def float_value(self) -> float:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError


class HypothesisChooser(Chooser):
    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def float_value(self) -> float:
        if self.chance(60):
            return self.choice(SPECIAL_FLOATS)
        return self.draw(st.floats(allow_nan=True, allow_infinity=True))

    def text(self) -> str:
        return self.draw(st.text(max_size=8))


class RandomChooser(Chooser):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def float_value(self) -> float:
        if self.chance(50):
            return self.choice(SPECIAL_FLOATS)
        return self.rng.uniform(-1e6, 1e6)

    def text(self) -> str:
        return "".join(self.rng.choice('ab "\\\n\té%$') for _ in range(self.rng.randint(0, 6)))


# ---------------------------------------------------------------------------------------------
# Literals and attribute values


def literal_value(c: Chooser, dtype: DType | None) -> bool | int | float:
    """A Python literal value that fits ``dtype`` (any literal kind when dtype is None)."""
    kinds = ["bool"]
    if dtype is None or not dtype.is_bool:
        kinds.append("int")
    if dtype is None or dtype.is_float:
        kinds += ["float", "float"]
    kind = c.choice(kinds)
    if kind == "bool":
        return c.chance(50)
    if kind == "int":
        lo, hi = INT_RANGES.get(dtype, (-(2**80), 2**80))
        return c.choice(
            [v for v in (0, 1, 2, -1, c.integer(-100, 100), lo, hi, 10**20) if lo <= v <= hi]
        )
    return c.float_value()


def literal(c: Chooser, dtype: DType | None) -> Literal:
    lit = Literal(literal_value(c, dtype))
    assert dtype is None or literal_fits(lit, dtype)
    return lit


def sym_expr(c: Chooser, syms: Sequence[sympy.Symbol]) -> Any:
    """A symbolic size expression over ``syms`` (which must be non-empty)."""
    s = c.choice(syms)
    form = c.integer(0, 5)
    if form == 0:
        return s
    if form == 1:
        return c.integer(2, 4) * s
    if form == 2:
        return s + c.integer(-3, 3)
    if form == 3:
        return s * c.choice(syms)
    if form == 4:
        return FloorDiv(s, sympy.Integer(c.integer(2, 4)))
    if c.chance(30):
        return Modulo(s + 1, sympy.Integer(3))
    return sympy.Max(s, c.integer(1, 9)) if c.chance(50) else sympy.Min(s, c.choice(syms))


def attr_value(
    c: Chooser, syms: Sequence[sympy.Symbol], values: Sequence[Value] = (), depth: int = 0
) -> Any:
    """An attribute value of any kind (extern arguments may also hold tensor values)."""
    kinds = ["int", "float", "bool", "none", "str", "dtype", "list", "special"]
    if syms:
        kinds.append("sym")
    if values:
        kinds += ["value", "value"]
    if depth >= 2:
        kinds = [k for k in kinds if k != "list"]
    kind = c.choice(kinds)
    if kind == "int":
        return c.choice([0, 1, -1, 7, -12345, 2**70, c.integer(-1000, 1000)])
    if kind == "float":
        return c.float_value()
    if kind == "special":
        return c.choice([float("inf"), float("-inf"), float("nan"), None, True, False, -0.0])
    if kind == "bool":
        return c.chance(50)
    if kind == "none":
        return None
    if kind == "str":
        return c.text()
    if kind == "dtype":
        return c.choice(ALL_DTYPES)
    if kind == "sym":
        return sym_expr(c, syms)
    if kind == "value":
        return c.choice(values)
    return [attr_value(c, syms, values, depth + 1) for _ in range(c.integer(0, 3))]


def attr_dict(
    c: Chooser, syms: Sequence[sympy.Symbol], names: Sequence[str] = ATTR_NAMES, max_size: int = 3
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(c.integer(0, max_size)):
        out[c.choice(names)] = attr_value(c, syms)
    return out


# ---------------------------------------------------------------------------------------------
# Functions


class FuncBuilder:
    """Builds one function; tracks names, size symbols and the values defined so far."""

    def __init__(self, c: Chooser, name: str, symbolic: bool) -> None:
        self.c = c
        self.graph = Graph(name=name)
        self.counter = 0
        self.taken: set[str] = set()
        self.syms: list[sympy.Symbol] = []
        if symbolic:
            names = c.subset(SIZE_SYMBOL_NAMES[:4]) or [SIZE_SYMBOL_NAMES[0]]
            self.syms = [size_symbol(n) for n in names]
        self.values: list[Value] = []

    # -- names

    def fresh(self) -> str:
        while True:
            self.counter += 1
            name = f"{self.c.choice(VALUE_PREFIXES)}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    # -- sizes and types

    def dim(self, allow_zero: bool = False) -> Any:
        c = self.c
        if self.syms and c.chance(25):
            if c.chance(80):
                return c.choice(self.syms)
            return sym_expr(c, self.syms)
        if allow_zero and c.chance(3):
            return 0
        return c.integer(1, 5)

    def shape(self, rank: int, allow_zero: bool = False) -> tuple[Any, ...]:
        return tuple(self.dim(allow_zero) for _ in range(rank))

    def layout(self, shape: tuple[Any, ...], overlap: bool = True) -> Layout | None:
        """A layout for ``shape``, or None; ``overlap``: broadcast (overlapping) strides may
        come out (arguments, views, extern results), not for what a loop node computes."""
        c = self.c
        if not c.chance(30):
            return None
        form = c.integer(0, 2)
        if form == 1 and not overlap:
            form = 0
        if form == 0:  # a permuted (non-overlapping) layout
            order = c.permutation(range(len(shape)))
            perm_strides = contiguous_strides(tuple(shape[k] for k in order))
            strides: list[Any] = [0] * len(shape)
            for pos, k in enumerate(order):
                strides[k] = perm_strides[pos]
        elif form == 1:  # broadcast / overlapping strides
            strides = [c.integer(0, 3) for _ in shape]
        else:
            strides = list(contiguous_strides(shape))
        offset: Any = 0
        if c.chance(50):
            offset = c.integer(0, 7)
            if self.syms and c.chance(30):
                offset = c.choice(self.syms) + offset
        return Layout(tuple(strides), offset)

    def settle_sizes(self) -> None:
        """Keep only the size symbols that the argument types declare."""
        declared: set[Any] = set()
        for a in self.graph.args:
            t = a.type
            for d in list(t.shape) + list(t.strides) + [t.offset]:
                if not isinstance(d, int):
                    declared |= d.free_symbols
        self.syms = [s for s in self.syms if s in declared]

    def add_arg(self, ty: TensorType, name: str | None = None) -> Value:
        if name is None or name in self.taken:
            name = self.fresh()
        self.taken.add(name)
        v = Value(name, ty)
        self.graph.args.append(v)
        self.values.append(v)
        return v

    def add_node(self, node: Node, types: Sequence[TensorType]) -> Node:
        node.results = [Value(self.fresh(), t, node, k) for k, t in enumerate(types)]
        self.graph.nodes.append(node)
        self.values.extend(node.results)
        return node

    def pick(self, pred: Callable[[Value], bool] = lambda v: True) -> Value | None:
        cands = [v for v in self.values if pred(v)]
        return self.c.choice(cands) if cands else None

    def finish(self, max_outputs: int = 3) -> Graph:
        c = self.c
        g = self.graph
        outs: list[Value] = []
        results = [r for n in g.nodes for r in n.results]
        if results:
            outs.append(results[-1])
        for _ in range(c.integer(0, max_outputs - 1)):
            outs.append(c.choice(self.values))
        if not c.chance(90):
            outs = []  # a function may return nothing
        g.outputs = outs
        g.output_types = [v.type for v in outs]
        if c.chance(30):
            g.attrs = attr_dict(c, self.syms)
        return g

    # -- extern calls (both levels)

    def add_extern(self) -> None:
        c = self.c
        args = [attr_value(c, self.syms, self.values) for _ in range(c.integer(0, 4))]
        kwargs: dict[str, Any] = {}
        # "keyword-kwarg": clamp-like calls have min/max keyword arguments
        names = KWARG_NAMES + (
            [] if AVOID_KNOWN_BUGS and "keyword-kwarg" in KNOWN_BUGS else ["min", "max"]
        )
        for _ in range(c.integer(0, 3)):
            kwargs[c.choice(names)] = attr_value(c, self.syms, self.values)
        attrs = attr_dict(c, self.syms)
        if c.chance(50):
            attrs["pure"] = c.chance(50)
        types = []
        for _ in range(c.integer(1, 3)):
            shape = self.shape(c.integer(0, 3))
            types.append(TensorType(c.choice(ALL_DTYPES), shape, self.layout(shape)))
        node = ExternNode(
            results=[], attrs=attrs, callee=c.choice(CALLEES), args=args, kwargs=kwargs
        )
        self.add_node(node, types)


def module_of(c: Chooser, make_func: Callable[[Chooser, str], Graph], max_funcs: int = 3) -> Module:
    funcs = []
    names: set[str] = set()
    for k in range(c.integer(1, max_funcs)):
        name = f"{c.choice(FUNC_PREFIXES)}{k}"
        if name in names:
            name = f"f{k}"
        names.add(name)
        funcs.append(make_func(c, name))
    return Module(funcs)


# ---------------------------------------------------------------------------------------------
# Tensor level


class TensorFuncBuilder(FuncBuilder):
    def __init__(
        self, c: Chooser, name: str, symbolic: bool, static_only_ops: bool = False
    ) -> None:
        super().__init__(c, name, symbolic)
        # Arguments share a base shape (with dims set to 1 or dropped) so that they broadcast.
        rank = c.integer(0, 3) if c.chance(20) else c.integer(1, 3)
        self.base = self.shape(rank)
        self.simple = static_only_ops

    def arg_type(self, dtype: DType | None = None, layout_ok: bool = True) -> TensorType:
        c = self.c
        keep = len(self.base) if c.chance(50) else c.integer(0, len(self.base))
        shape = tuple(1 if c.chance(25) else d for d in self.base[len(self.base) - keep :])
        if not self.simple and c.chance(5):
            shape = self.shape(c.integer(0, 3), allow_zero=True)
        dtype = dtype or c.choice(ALL_DTYPES + FLOAT_DTYPES * 2)
        return TensorType(
            dtype, shape, self.layout(shape) if layout_ok and not self.simple else None
        )

    def emit(
        self,
        op: str,
        operands: list[Any],
        attrs: dict[str, Any],
        decl: list[TensorType] | None = None,
    ) -> bool:
        """Add ``op`` if it type-checks, with the result types the op's rule infers."""
        types = [o.type if isinstance(o, Value) else o for o in operands]
        try:
            inferred = OPS[op].infer(types, attrs, list(decl or []))
        except TypeRule:
            return False
        for t in inferred:
            if not _printable(t):
                return False
        self.add_node(TensorOp(results=[], attrs=attrs, op=op, operands=list(operands)), inferred)
        return True

    # -- op generators; each returns whether it added an op

    def operand_like(self, v: Value, literal_ok: bool = True) -> Any:
        """A second operand for an elementwise op with ``v``: a broadcastable value or a literal."""
        c = self.c
        if literal_ok and c.chance(35):
            return literal(c, v.type.dtype)
        w = self.pick(
            lambda w: (
                w.type.dtype == v.type.dtype
                and broadcast_shapes(v.type.shape, w.type.shape) is not None
            )
        )
        return w if w is not None else literal(c, v.type.dtype)

    def gen_unary(self) -> bool:
        c = self.c
        v = self.pick()
        if v is None:
            return False
        dt = v.type.dtype
        ops = ["logical_not"]
        if dt.is_float:
            ops += UNARY_FLOAT + UNARY_TO_BOOL_FLOAT
        if not dt.is_bool:
            ops += UNARY_NUMERIC
        if dt.is_int or dt.is_bool:
            ops.append("bitwise_not")
        return self.emit(c.choice(ops), [v], {})

    def gen_binary(self) -> bool:
        c = self.c
        v = self.pick()
        if v is None:
            return False
        dt = v.type.dtype
        ops = list(BINARY_LOGICAL) + list(COMPARE)
        if not dt.is_bool:
            ops += BINARY_NUMERIC
        if dt.is_float:
            ops += BINARY_FLOAT
        if dt.is_int or dt.is_bool:
            ops += BINARY_INT
        other = self.operand_like(v)
        operands = [other, v] if isinstance(other, Literal) and c.chance(30) else [v, other]
        return self.emit(c.choice(ops), operands, {})

    def gen_where(self) -> bool:
        c = self.c
        cond: Any = self.pick(lambda w: w.type.dtype == DType.BOOL)
        if cond is None or c.chance(10):
            cond = Literal(c.chance(50))
        v = self.pick(
            lambda w: (
                isinstance(cond, Literal)
                or broadcast_shapes(cond.type.shape, w.type.shape) is not None
            )
        )
        if v is None:
            return False
        other = self.operand_like(v)
        if (
            not isinstance(cond, Literal)
            and isinstance(other, Value)
            and broadcast_shapes(cond.type.shape, v.type.shape, other.type.shape) is None
        ):
            other = literal(c, v.type.dtype)
        a, b = (v, other) if c.chance(50) else (other, v)
        return self.emit("where", [cond, a, b], {})

    def gen_cast(self) -> bool:
        v = self.pick()
        if v is None:
            return False
        dt = self.c.choice(ALL_DTYPES)
        return self.emit("cast", [v], {}, [TensorType(dt, v.type.shape)])

    def gen_reduction(self) -> bool:
        c = self.c
        v = self.pick()
        if v is None:
            return False
        dt = v.type.dtype
        rank = v.type.rank
        # max, min, argmax and argmin over no element are errors (eager raises, the verifier
        # refuses them): only over a value with elements
        empty = any(isinstance(d, int) and d == 0 for d in v.type.shape)
        ops = ["any", "all"] if empty else ["max", "min", "any", "all"]
        if not dt.is_bool:
            ops += ["sum", "prod"] if empty else ["sum", "prod", "argmax", "argmin"]
        if dt.is_float:
            ops += ["mean", "logsumexp", "var", "std", "var_mean"]
        op = c.choice(ops)
        attrs: dict[str, Any] = {}
        if op in ("argmax", "argmin"):
            if rank and c.chance(70):
                attrs["dim"] = c.integer(-rank, rank - 1)
        elif c.chance(75):
            dims = c.subset(range(rank))
            attrs["dims"] = [d - rank if c.chance(30) else d for d in c.permutation(dims)]
        if c.chance(60):
            attrs["keepdim"] = c.chance(50)
        if op in ("var", "std", "var_mean") and c.chance(50):
            attrs["correction"] = c.integer(0, 2)
        if c.chance(30):  # attributes in a random order
            attrs = dict(c.permutation(list(attrs.items())))
        return self.emit(op, [v], attrs)

    def gen_view(self) -> bool:
        c = self.c
        v = self.pick()
        if v is None:
            return False
        shape, rank = v.type.shape, v.type.rank
        op = c.choice(
            ["reshape", "permute", "transpose", "expand", "slice", "select", "squeeze", "unsqueeze"]
        )
        if op == "reshape":
            new = self.reshape_target(shape)
            return new is not None and self.emit(
                "reshape", [v], {}, [TensorType(v.type.dtype, new)]
            )
        if op == "permute":
            dims = [d - rank if c.chance(25) else d for d in c.permutation(range(rank))]
            return self.emit("permute", [v], {"dims": dims})
        if op == "transpose":
            if not rank:
                return False
            return self.emit(
                "transpose",
                [v],
                {"dim0": c.integer(-rank, rank - 1), "dim1": c.integer(-rank, rank - 1)},
            )
        if op == "expand":
            if rank >= 5:
                return False
            lead = tuple(self.dim() for _ in range(c.integer(0, 2)))
            new = lead + tuple(self.dim() if d == 1 and c.chance(70) else d for d in shape)
            return self.emit("expand", [v], {}, [TensorType(v.type.dtype, new)])
        if op == "slice":
            if not rank:
                return False
            dim = c.integer(0, rank - 1)
            size = shape[dim]
            attrs: dict[str, Any] = {"dim": dim - rank if c.chance(25) else dim}
            if isinstance(size, int):
                if c.chance(70):
                    attrs["start"] = c.integer(-size - 1, size + 1)
                if c.chance(60):
                    attrs["end"] = c.choice([None, c.integer(-size - 1, size + 1)])
                if c.chance(50):
                    attrs["step"] = c.integer(1, 3)
            elif c.chance(50):
                attrs["start"] = c.integer(0, 1)
            return self.emit("slice", [v], attrs)
        if op == "select":
            if not rank:
                return False
            dim = c.integer(0, rank - 1)
            size = shape[dim]
            if isinstance(size, int):
                if size == 0:
                    return False
                index: Any = c.integer(-size, size - 1)
            else:
                index = c.choice([0, size - 1])
            return self.emit(
                "select", [v], {"dim": dim - rank if c.chance(25) else dim, "index": index}
            )
        if op == "squeeze":
            attrs = {}
            if c.chance(50):
                attrs["dims"] = c.subset(range(rank))
            return self.emit("squeeze", [v], attrs)
        if rank >= 5:
            return False
        return self.emit("unsqueeze", [v], {"dim": c.integer(-rank - 1, rank)})

    def reshape_target(self, shape: tuple[Any, ...]) -> tuple[Any, ...] | None:
        c = self.c
        if all(isinstance(d, int) for d in shape):
            n = math.prod(shape)
            factors: list[int] = []
            m, p = n, 2
            while m > 1 and p * p <= m:
                while m % p == 0:
                    factors.append(p)
                    m //= p
                p += 1
            if m > 1:
                factors.append(m)
            if n == 0:
                factors = [0]
            factors = c.permutation(factors)
            groups: list[int] = []
            for f in factors:
                if groups and c.chance(50):
                    groups[-1] *= f
                else:
                    groups.append(f)
            while c.chance(20):
                groups.insert(c.integer(0, len(groups)), 1)
            return tuple(groups)
        if c.chance(50):
            return (dims_mul(shape),)
        out = list(shape)
        out.insert(c.integer(0, len(out)), 1)
        return tuple(out)

    def gen_cat(self) -> bool:
        c = self.c
        v = self.pick(lambda w: w.type.rank > 0)
        if v is None:
            return False
        rank = v.type.rank
        dim = c.integer(0, rank - 1)
        mates = [
            w
            for w in self.values
            if w.type.dtype == v.type.dtype
            and w.type.rank == rank
            and all(w.type.shape[j] == v.type.shape[j] for j in range(rank) if j != dim)
        ]
        operands = [v] + [c.choice(mates) for _ in range(c.integer(0, 2))]
        operands = c.permutation(operands)
        return self.emit("cat", operands, {"dim": dim - rank if c.chance(25) else dim})

    def gen_creation(self) -> bool:
        c = self.c
        op = c.choice(["full", "arange", "constant"])
        dt = c.choice(ALL_DTYPES)
        if op == "full":
            shape = self.shape(c.integer(0, 3))
            return self.emit("full", [literal(c, dt)], {}, [TensorType(dt, shape)])
        if op == "arange":
            if dt.is_bool:
                dt = DType.I64
            if self.syms and c.chance(30):
                end = c.choice(self.syms)
                return self.emit("arange", [], {"end": end}, [TensorType(dt, (end,))])
            start = c.integer(-5, 5)
            step = c.choice([1, 2, 3, -1, -2])
            end = c.integer(-10, 10)
            if dt.is_float and c.chance(30):
                start, end, step = start + 0.5, float(end), step * 0.5
            n = max(0, math.ceil((end - start) / step))
            attrs: dict[str, Any] = {"end": end}
            if start != 0 or c.chance(30):
                attrs["start"] = start
            if step != 1 or c.chance(30):
                attrs["step"] = step
            return self.emit(
                "arange", [], dict(c.permutation(list(attrs.items()))), [TensorType(dt, (n,))]
            )
        shape = tuple(c.integer(0, 3) for _ in range(c.integer(0, 2)))

        def nested(dims: tuple[int, ...]) -> Any:
            if not dims:
                return literal_value(c, dt)
            return [nested(dims[1:]) for _ in range(dims[0])]

        return self.emit("constant", [], {"value": nested(shape)}, [TensorType(dt, shape)])

    def gen_composite(self) -> bool:
        c = self.c
        op = c.choice(
            [
                "clamp",
                "activation",
                "softmax",
                "layer_norm",
                "rms_norm",
                "pad",
                "masked_fill",
                "matmul",
                "index_select",
                "embedding",
                "gather",
            ]
        )
        if op == "clamp":
            v = self.pick(lambda w: not w.type.dtype.is_bool)
            if v is None:
                return False
            attrs = {}
            for key in c.subset(["min", "max"]):
                attrs[key] = c.choice([None, c.integer(-3, 3), c.float_value()])
            return self.emit("clamp", [v], attrs)
        floats = self.pick(lambda w: w.type.dtype.is_float)
        if op == "activation":
            if floats is None:
                return False
            name = c.choice(
                [
                    "gelu",
                    "silu",
                    "mish",
                    "softplus",
                    "hardswish",
                    "leaky_relu",
                    "elu",
                    "hardtanh",
                    "dropout",
                ]
            )
            attrs = {}
            if name == "gelu" and c.chance(60):
                attrs["approximate"] = c.choice(["none", "tanh"])
            elif name == "softplus":
                attrs = {"beta": c.choice([1, 2.0]), "threshold": c.float_value()}
            elif name == "leaky_relu" and c.chance(60):
                attrs["negative_slope"] = c.float_value()
            elif name == "hardtanh":
                attrs = {"min_val": -1, "max_val": c.float_value()}
            elif name == "dropout":
                attrs = {"p": c.choice([0.0, 0.25, 1]), "train": c.chance(50)}
            return self.emit(name, [floats], attrs)
        if op == "softmax":
            if floats is None:
                return False
            rank = max(floats.type.rank, 1)
            return self.emit(
                c.choice(["softmax", "log_softmax"]), [floats], {"dim": c.integer(-rank, rank - 1)}
            )
        if op in ("layer_norm", "rms_norm"):
            if floats is None or not floats.type.rank:
                return False
            k = c.integer(1, floats.type.rank)
            nshape = list(floats.type.shape[floats.type.rank - k :])
            if not all(isinstance(d, int) for d in nshape):
                return False
            params = [Literal(None)] * c.integer(0, 2 if op == "layer_norm" else 1)
            attrs = {"normalized_shape": nshape}
            if c.chance(60):
                attrs["eps"] = c.choice([1e-05, 1e-6, None]) if op == "rms_norm" else 1e-05
            return self.emit(op, [floats] + params, attrs)
        if op == "pad":
            v = self.pick()
            if v is None or not v.type.rank:
                return False
            pad = [c.integer(-1, 2) for _ in range(2 * c.integer(1, v.type.rank))]
            attrs = {"pad": pad}
            if c.chance(70) or not v.type.dtype.is_float:
                attrs["value"] = literal_value(c, v.type.dtype)
            return self.emit("pad", [v], attrs)
        if op == "masked_fill":
            m = self.pick(lambda w: w.type.dtype == DType.BOOL)
            if m is None:
                return False
            v = self.pick(lambda w: broadcast_shapes(w.type.shape, m.type.shape) == w.type.shape)
            if v is None:
                return False
            return self.emit("masked_fill", [v, m, literal(c, v.type.dtype)], {})
        if op == "matmul":
            a = self.pick(lambda w: w.type.rank > 0 and not w.type.dtype.is_bool)
            if a is None:
                return False
            b = self.pick(lambda w: w.type.dtype == a.type.dtype and w.type.rank > 0)
            return b is not None and self.emit("matmul", [a, b], {})
        idx = self.pick(lambda w: w.type.dtype in INDEX_DTYPES)
        if idx is None:
            return False
        if op == "index_select":
            v = self.pick(lambda w: w.type.rank > 0)
            if v is None or idx.type.rank != 1:
                return False
            return self.emit(
                "index_select", [v, idx], {"dim": c.integer(-v.type.rank, v.type.rank - 1)}
            )
        if op == "embedding":
            w = self.pick(lambda w: w.type.rank == 2)
            return w is not None and self.emit("embedding", [w, idx], {})
        v = self.pick(lambda w: w.type.rank == idx.type.rank and w.type.rank > 0)
        return v is not None and self.emit(
            "gather", [v, idx], {"dim": c.integer(0, v.type.rank - 1)}
        )

    def gen_foldable(self) -> bool:
        """Patterns that canonicalize folds: identities, double negation, view chains."""
        c = self.c
        v = self.pick()
        if v is None:
            return False
        dt, rank = v.type.dtype, v.type.rank
        form = c.integer(0, 6)
        if form == 0 and not dt.is_bool:
            op, lit = c.choice([("add", 0), ("sub", 0), ("mul", 1), ("add", -0.0), ("mul", 1.0)])
            if not literal_fits(Literal(lit), dt):
                lit = int(lit)
            operands = [Literal(lit), v] if op != "sub" and c.chance(30) else [v, Literal(lit)]
            return self.emit(op, operands, {})
        if form == 1:
            op = "logical_not" if dt.is_bool or c.chance(30) else "neg"
            if op == "neg" and dt.is_bool:
                return False
            return self.emit(op, [v], {}) and self.emit(op, [self.values[-1]], {})
        if form == 2:
            return self.emit("cast", [v], {}, [TensorType(dt, v.type.shape)])
        if form == 3 and rank >= 2:
            a, b = c.integer(-rank, rank - 1), c.integer(-rank, rank - 1)
            if not self.emit("transpose", [v], {"dim0": a, "dim1": b}):
                return False
            if c.chance(50):
                return self.emit("transpose", [self.values[-1]], {"dim0": b, "dim1": a})
            return self.emit("permute", [self.values[-1]], {"dims": c.permutation(range(rank))})
        if form == 4:
            new = self.reshape_target(v.type.shape)
            if new is None or not self.emit("reshape", [v], {}, [TensorType(dt, new)]):
                return False
            return self.emit("reshape", [self.values[-1]], {}, [TensorType(dt, v.type.shape)])
        if form == 5 and rank:
            return self.emit(
                c.choice(["expand", "reshape"]), [v], {}, [v.type.contiguous()]
            ) or self.emit("slice", [v], {"dim": c.integer(0, rank - 1)})
        # a repeated node (what cse merges)
        ops = [n for n in self.graph.nodes if isinstance(n, TensorOp)]
        if not ops:
            return False
        n = c.choice(ops)
        copy = TensorOp(results=[], attrs=dict(n.attrs), op=n.op, operands=list(n.operands))
        self.add_node(copy, [r.type for r in n.results])
        return True

    def gen_op(self, kinds: Sequence[str]) -> None:
        c = self.c
        for _ in range(10):
            kind = c.choice(kinds)
            if kind == "extern":
                self.add_extern()
                return
            if getattr(self, "gen_" + kind)():
                return


TENSOR_OP_KINDS = [
    "unary",
    "binary",
    "binary",
    "binary",
    "where",
    "cast",
    "reduction",
    "view",
    "view",
    "cat",
    "creation",
    "composite",
    "extern",
    "foldable",
]
SIMPLE_OP_KINDS = [
    "unary",
    "binary",
    "binary",
    "where",
    "cast",
    "reduction",
    "view",
    "cat",
    "foldable",
    "foldable",
]


def tensor_func(
    c: Chooser,
    name: str,
    max_ops: int = 10,
    symbolic: bool | None = None,
    kinds: Sequence[str] = TENSOR_OP_KINDS,
    simple: bool = False,
) -> Graph:
    if symbolic is None:
        symbolic = c.chance(30)
    b = TensorFuncBuilder(c, name, symbolic, static_only_ops=simple)
    for _ in range(c.integer(1 if max_ops else 0, 4)):
        if not simple and c.chance(20):
            b.add_arg(b.arg_type(c.choice(INDEX_DTYPES)))
        else:
            b.add_arg(b.arg_type())
    b.settle_sizes()
    for _ in range(c.integer(1 if max_ops else 0, max_ops)):
        b.gen_op(kinds)
    return b.finish()


@st.composite
def tensor_modules(draw: Any, max_funcs: int = 3, max_ops: int = 10) -> Module:
    """Random tensor-level modules (extern calls included)."""
    c = HypothesisChooser(draw)
    return module_of(c, lambda c, name: tensor_func(c, name, max_ops), max_funcs)


@st.composite
def simple_tensor_funcs(draw: Any, max_ops: int = 8) -> Graph:
    """One static-shaped function of elementwise ops, reductions, views and cat on contiguous
    arguments (what an interpreter-based semantics test can run)."""
    c = HypothesisChooser(draw)
    return tensor_func(c, "main", max_ops, symbolic=False, kinds=SIMPLE_OP_KINDS, simple=True)


def big_tensor_module(num_ops: int = 10_000, seed: int = 0) -> Module:
    """One function with ``num_ops`` tensor ops (deterministic)."""
    c = RandomChooser(seed)
    b = TensorFuncBuilder(c, "big", symbolic=False)
    b.base = (4, 8)
    b.add_arg(TensorType(DType.F32, (4, 8)), "x")
    b.add_arg(TensorType(DType.F32, (8,)), "w")
    b.add_arg(TensorType(DType.I64, (4, 1)), "i")
    kinds = [
        "unary",
        "binary",
        "binary",
        "binary",
        "where",
        "cast",
        "reduction",
        "view",
        "cat",
        "creation",
    ]
    while len(b.graph.nodes) < num_ops:
        # Keep the pool small and recent so that shapes stay small and ops chain.
        b.values = b.graph.args + b.values[-12:] if len(b.values) > 40 else b.values
        b.gen_op(kinds)
    g = b.graph
    g.outputs = [n.results[0] for n in g.nodes[-3:]]
    g.output_types = [v.type for v in g.outputs]
    return Module([g])


# ---------------------------------------------------------------------------------------------
# Loop level


class BodyBuilder:
    """Builds the body of one loop node."""

    def __init__(self, fb: LoopFuncBuilder, loop_vars: list[tuple[sympy.Symbol, Any]]) -> None:
        self.fb = fb
        self.c = fb.c
        self.ops: list[BodyOp] = []
        self.values: list[BodyValue] = []
        self.counter = 0
        self.name_style = self.c.choice(["", "", "t", "v.", "a$"])
        # leaves of index expressions: symbol -> interval (None when unbounded/symbolic)
        self.leaves: dict[sympy.Symbol, tuple[int, int] | None] = {
            v: ((0, s - 1) if isinstance(s, int) else None) for v, s in loop_vars
        }

    def add(self, opcode: str, result_dtype: DType, **fields: Any) -> BodyValue:
        name = f"{self.name_style}{self.counter}"
        self.counter += 1
        result = BodyValue(name, result_dtype)
        op = BodyOp(opcode, result, **fields)
        result.owner = op
        self.ops.append(op)
        self.values.append(result)
        return result

    def pick(self, pred: Callable[[BodyValue], bool]) -> BodyValue | None:
        cands = [v for v in self.values if pred(v)]
        return self.c.choice(cands) if cands else None

    # -- index expressions

    def expr(self, depth: int = 0) -> Any:
        c = self.c
        leaves = list(self.leaves)
        form = c.integer(0, 9) if depth < 3 else c.integer(0, 2)
        if form == 0 or not leaves:
            return sympy.Integer(c.integer(0, 9))
        if form in (1, 2):
            return c.choice(leaves)
        if form == 3:  # affine combination
            e: Any = sympy.Integer(c.integer(0, 4))
            for leaf in c.subset(leaves) or [c.choice(leaves)]:
                e = e + c.integer(1, 8) * leaf
            return e
        if form == 4:
            return self.expr(depth + 1) + self.expr(depth + 1)
        if form == 5:
            return c.integer(-3, 4) * self.expr(depth + 1) + c.integer(0, 9)
        if form == 6:
            return FloorDiv(self.expr(depth + 1), sympy.Integer(c.integer(1, 5)))
        if form == 7:
            return Modulo(self.expr(depth + 1), sympy.Integer(c.integer(1, 7)))
        if form == 8:
            args = [self.expr(depth + 1) for _ in range(c.integer(2, 3))]
            return (sympy.Min if c.chance(50) else sympy.Max)(*args)
        return self.expr(depth + 1) * c.choice(leaves)

    def in_bounds(self, e: Any, size: Any) -> Any:
        """``e`` if the verifier can see that it lies in ``[0, size)``, else a wrapped form."""
        c = self.c
        intervals = {k: v for k, v in self.leaves.items() if v is not None}
        if isinstance(size, int):
            b = bounds(e, intervals)
            if b is not None and b[0] >= 0 and b[1] < size:
                return e
            if b is not None and c.chance(50):
                clamped = sympy.Min(sympy.Max(e, 0), size - 1)
                # sympy may drop the Max where it proves e >= 0 (i0*(i0 + 1) - i0), leaving a
                # form whose interval bounds are wider than the truth: keep it only if the
                # verifier's arithmetic sees it in range
                cb = bounds(clamped, intervals)
                if cb is not None and cb[0] >= 0 and cb[1] < size:
                    return clamped
            return Modulo(e, sympy.Integer(size))
        if size.is_positive:
            return Modulo(e, size)
        return sympy.Integer(0)

    # -- ops

    def load(self, masked: bool = False) -> BodyValue | None:
        c = self.c
        buf = self.fb.pick(
            lambda v: not (isinstance(v.type.storage_size(), int) and v.type.storage_size() == 0)
        )
        if buf is None:
            return None
        size = buf.type.storage_size()
        if masked:
            mask = self.pick(lambda v: v.dtype == DType.BOOL) or self.compare()
            # no `else` value means 0, which does not fit a bool buffer
            other = literal(c, buf.type.dtype) if c.chance(80) or buf.type.dtype.is_bool else None
            index = self.expr()  # a masked load may index anything
            return self.add("load", buf.type.dtype, buffer=buf, index=index, mask=mask, other=other)
        return self.add("load", buf.type.dtype, buffer=buf, index=self.in_bounds(self.expr(), size))

    def indirect(self) -> BodyValue | None:
        c = self.c
        src = self.pick(lambda v: v.dtype is not None and v.dtype.is_int)
        if src is None:
            src = self.index_op()
        bound: Any = c.integer(1, 8)
        if self.fb.syms and c.chance(20):
            bound = c.choice(self.fb.syms)
        v = self.add("indirect", DType.I64, operands=[src], bound=bound)
        self.leaves[indirect_symbol("%" + v.name)] = (
            (0, bound - 1) if isinstance(bound, int) else None
        )
        return self.load()

    def index_op(self) -> BodyValue:
        c = self.c
        dt = c.choice(INDEX_DTYPES + INT_DTYPES)
        return self.add("index", dt, index=self.expr(), dtype=dt)

    def constant(self, dtype: DType | None = None) -> BodyValue:
        dt = dtype or self.c.choice(ALL_DTYPES)
        return self.add("constant", dt, operands=[literal(self.c, dt)], dtype=dt)

    def cast(self, dtype: DType | None = None) -> BodyValue:
        src = self.pick(lambda v: True) or self.constant()
        dt = dtype or self.c.choice(ALL_DTYPES)
        return self.add("cast", dt, operands=[src], dtype=dt)

    def operand(self, v: BodyValue) -> Any:
        c = self.c
        if c.chance(35):
            return literal(c, v.dtype)
        return self.pick(lambda w: w.dtype == v.dtype) or v

    def compare(self) -> BodyValue:
        c = self.c
        v = self.pick(lambda v: True) or self.index_op()
        a, b = v, self.operand(v)
        if isinstance(b, Literal) and c.chance(30):
            a, b = b, a
        return self.add(c.choice(COMPARE), DType.BOOL, operands=[a, b])

    def scalar(self) -> BodyValue | None:
        c = self.c
        v = self.pick(lambda v: True)
        if v is None:
            return None
        dt = v.dtype
        kind = c.choice(["unary", "binary", "binary", "compare", "where", "logical"])
        if kind == "compare":
            return self.compare()
        if kind == "where":
            cond = self.pick(lambda w: w.dtype == DType.BOOL) or self.compare()
            other = self.operand(v)
            a, b = (v, other) if c.chance(50) else (other, v)
            return self.add("where", dt, operands=[cond, a, b])
        if kind == "logical":
            op = c.choice(list(BINARY_LOGICAL) + ["logical_not"])
            operands = [v] if op == "logical_not" else [v, self.operand(v)]
            return self.add(op, DType.BOOL, operands=operands)
        if kind == "unary":
            ops = []
            if dt.is_float:
                ops += [(o, dt) for o in UNARY_FLOAT] + [
                    (o, DType.BOOL) for o in UNARY_TO_BOOL_FLOAT
                ]
            if not dt.is_bool:
                ops += [(o, dt) for o in UNARY_NUMERIC]
            if dt.is_int or dt.is_bool:
                ops.append(("bitwise_not", dt))
            if not ops:
                return None
            op, rdt = c.choice(ops)
            return self.add(op, rdt, operands=[v])
        ops = []
        if not dt.is_bool:
            ops += BINARY_NUMERIC
        if dt.is_float:
            ops += BINARY_FLOAT
        if dt.is_int or dt.is_bool:
            ops += BINARY_INT
        if not ops:
            return None
        other = self.operand(v)
        operands = [other, v] if isinstance(other, Literal) and c.chance(30) else [v, other]
        return self.add(c.choice(ops), dt, operands=operands)

    def build(self, n_ops: int) -> None:
        c = self.c
        self.load()
        for _ in range(n_ops):
            kind = c.choice(
                [
                    "load",
                    "load",
                    "masked",
                    "indirect",
                    "index",
                    "constant",
                    "cast",
                    "scalar",
                    "scalar",
                    "scalar",
                    "compare",
                ]
            )
            if kind == "load":
                self.load()
            elif kind == "masked":
                self.load(masked=True)
            elif kind == "indirect":
                self.indirect()
            elif kind == "index":
                self.index_op()
            elif kind == "constant":
                self.constant()
            elif kind == "cast":
                self.cast()
            elif kind == "compare":
                self.compare()
            else:
                self.scalar()

    def yielded(self, want: Callable[[DType], bool], fallback: DType) -> BodyValue:
        v = self.pick(lambda v: want(v.dtype))
        if v is None or self.c.chance(10):
            v = self.cast(fallback)
        return v


class LoopFuncBuilder(FuncBuilder):
    def loop_vars(
        self, count: int, used: set[str], static_sizes: bool
    ) -> list[tuple[sympy.Symbol, Any]]:
        c = self.c
        out = []
        for _ in range(count):
            names = [n for n in LOOP_VAR_NAMES if n not in used]
            name = c.choice(names)
            used.add(name)
            if self.syms and not static_sizes and c.chance(25):
                size: Any = c.choice(self.syms)
            else:
                size = c.integer(1, 6)
            out.append((index_var(name), size))
        return out

    def gen_loop(self) -> None:
        c = self.c
        kind = c.choice(
            [None, None, None, "sum", "prod", "max", "min", "argmax", "argmin", "any", "welford"]
        )
        used: set[str] = set()
        ranges = self.loop_vars(c.integer(0 if c.chance(15) else 1, 3), used, False)
        red = self.loop_vars(c.integer(1, 2), used, False) if kind is not None else []
        bb = BodyBuilder(self, ranges + red)
        bb.build(c.integer(0, 6))
        result: Any
        if kind is None:
            if c.chance(10):
                dt = c.choice(ALL_DTYPES)
                result, ydt = literal(c, dt), dt
            else:
                result = bb.yielded(lambda d: True, DType.F32)
                ydt = result.dtype
            out_dt = ydt
        elif kind == "any":
            result = bb.yielded(lambda d: d == DType.BOOL, DType.BOOL)
            out_dt = DType.BOOL
        elif kind == "welford":
            result = bb.yielded(lambda d: d.is_float, c.choice(FLOAT_DTYPES))
            out_dt = result.dtype
        elif kind in ("argmax", "argmin"):
            result = bb.yielded(lambda d: not d.is_bool, DType.F32)
            out_dt = DType.I64
        elif kind in ("sum", "prod"):
            result = bb.yielded(lambda d: not d.is_bool, c.choice([DType.F32, DType.I64]))
            out_dt = result.dtype
        else:
            result = bb.yielded(lambda d: True, DType.F32)
            out_dt = result.dtype
        shape = tuple(s for _, s in ranges)
        if shape and all(isinstance(s, int) for s in shape) and c.chance(25):
            shape = (math.prod(shape),)
        if c.chance(15):
            shape = shape + (1,)
        layout = self.layout(shape, overlap=False) if c.chance(30) else None
        types = [TensorType(out_dt, shape, layout)] * (3 if kind == "welford" else 1)
        attrs = attr_dict(c, self.syms) if c.chance(25) else {}
        node = LoopNode(
            results=[],
            attrs=attrs,
            reduction=kind,
            ranges=ranges,
            reduction_ranges=red,
            body=Body(ops=bb.ops, result=result),
        )
        self.add_node(node, types)


def loop_func(c: Chooser, name: str, max_nodes: int = 5, symbolic: bool | None = None) -> Graph:
    if symbolic is None:
        symbolic = c.chance(30)
    b = LoopFuncBuilder(c, name, symbolic)
    for k in range(c.integer(1, 4)):
        dt = (
            c.choice(INDEX_DTYPES)
            if k == 0 or c.chance(25)
            else c.choice(ALL_DTYPES + FLOAT_DTYPES)
        )
        shape = b.shape(c.integer(0, 3))
        b.add_arg(TensorType(dt, shape, b.layout(shape)))
    b.settle_sizes()
    for _ in range(c.integer(1, max_nodes)):
        if c.chance(12):
            b.add_extern()
        else:
            b.gen_loop()
    return b.finish()


@st.composite
def loop_modules(draw: Any, max_funcs: int = 2, max_nodes: int = 5) -> Module:
    """Random loop-level modules (extern nodes included)."""
    c = HypothesisChooser(draw)
    return module_of(c, lambda c, name: loop_func(c, name, max_nodes), max_funcs)


@st.composite
def mixed_modules(draw: Any) -> Module:
    """Modules whose functions are at either level."""
    c = HypothesisChooser(draw)
    return module_of(
        c, lambda c, name: tensor_func(c, name, 6) if c.chance(50) else loop_func(c, name, 3), 3
    )


def any_modules() -> st.SearchStrategy[Module]:
    return st.one_of(tensor_modules(), loop_modules(), mixed_modules())


# ---------------------------------------------------------------------------------------------


def _printable(t: TensorType) -> bool:
    """Sympy can produce sizes (ceiling, rationals) that an index expression cannot spell."""
    from fir.ir.symbolic import print_expr

    try:
        for d in t.shape:
            if not isinstance(d, int):
                print_expr(d)
                if d.has(sympy.ceiling, sympy.floor) or any(
                    not r.is_Integer for r in d.atoms(sympy.Rational)
                ):
                    return False
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Text helpers shared by the round-trip and fuzz tests

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(_TESTS_DIR)


def corpus_files() -> list[str]:
    """The .fir files of the repository: examples/*.fir and tests/lit/**/*.fir."""
    import glob

    files = sorted(glob.glob(os.path.join(_REPO_DIR, "examples", "**", "*.fir"), recursive=True))
    lit = sorted(glob.glob(os.path.join(_TESTS_DIR, "lit", "**", "*.fir"), recursive=True))
    return files + [f for f in lit if os.sep + "Output" + os.sep not in f]


def strip_run_lines(text: str) -> str:
    """Drop lit RUN lines (they name tools, not IR); CHECK lines are comments and stay."""
    return "\n".join(line for line in text.split("\n") if "RUN:" not in line)


def corpus_texts() -> list[str]:
    out = []
    for path in corpus_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            out.append(strip_run_lines(f.read()))
    return out


def generated_texts(count: int, seed: int = 0) -> list[str]:
    """Printed random programs at both levels, built deterministically (no hypothesis)."""
    from fir.ir.printer import print_module

    out = []
    for k in range(count):
        c = RandomChooser(seed + k)
        if k % 2:
            m = module_of(c, lambda c, name: tensor_func(c, name, 8), 2)
        else:
            m = module_of(c, lambda c, name: loop_func(c, name, 3), 2)
        out.append(print_module(m))
    return out


def reformat(c: Chooser, text: str) -> str:
    """The same program spelled differently: other whitespace and comments between tokens,
    other spellings of numbers (``1e-06`` as ``1.00000000000000000e-06``, ``4`` as ``04``)."""
    from fir.ir.lexer import _TOKEN_RE

    seps = [" ", " ", "  ", "\n", "\t", " // a comment\n", "\n\n    ", " \r\n"]
    pieces: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        assert m is not None, text[pos : pos + 20]
        kind, tok = m.lastgroup, m.group()
        pos = m.end()
        if kind in ("WS", "COMMENT"):
            continue
        if kind == "FLOAT" and c.chance(50):
            tok = f"{float(tok):.17e}"
        elif kind == "INT" and c.chance(20):
            tok = "0" + tok
        elif kind == "TYPE" and c.chance(50):
            tok = tok.replace(", ", c.choice([",", " , ", ",\t"]))
        pieces.append(tok)
    out = []
    for k, p in enumerate(pieces):
        out.append(p)
        sep = c.choice(seps) if c.chance(40) else " "
        if (
            AVOID_KNOWN_BUGS
            and "keyword-kwarg-newline" in KNOWN_BUGS
            and p in VALUE_KEYWORDS
            and pieces[k + 1 : k + 2] == ["="]
        ):
            sep = " "
        out.append(sep)
    return "".join(out)
