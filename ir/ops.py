"""The op table: every tensor-level op, its operands, attributes and typing rule.

Each op has one :class:`OpSpec`. The verifier checks operands and attributes against it and
compares the declared result types with what ``infer`` computes; the interpreter and later
passes look ops up here. Elementwise ops (``scalar=True``) are also the scalar ops of loop
bodies.

Typing is explicit, as in MLIR: tensor operands of an elementwise op share one dtype (the
importer inserts ``cast`` where PyTorch would promote); a scalar literal takes the dtype of the
tensor it meets, and an int literal may meet a float tensor but not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .dtypes import DType
from .graph import Literal
from .types import Dim, TensorType, broadcast_shapes, dim_str

OperandType = TensorType | Literal


class TypeRule(Exception):
    """An operand, attribute or result breaks an op's rule; the message says which."""


@dataclass(frozen=True)
class AttrSpec:
    kind: str  # int, ints, float, optfloat, bool, str, dtype, dim, optdim, any
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()


Infer = Callable[[list[OperandType], dict[str, Any], list[TensorType]], list[TensorType]]


@dataclass(frozen=True)
class OpSpec:
    name: str
    category: str
    min_operands: int
    max_operands: int | None
    infer: Infer
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    scalar: bool = False  # usable as a scalar op in loop bodies
    doc: str = ""
    num_results: int = 1

    def attr(self, attrs: dict[str, Any], name: str) -> Any:
        return attrs.get(name, self.attrs[name].default)


OPS: dict[str, OpSpec] = {}


def _register(spec: OpSpec) -> None:
    OPS[spec.name] = spec


# ---------------------------------------------------------------------------------------------
# helpers


def _fmt(t: OperandType) -> str:
    return str(t) if isinstance(t, TensorType) else f"literal {t}"


def _tensors(ops: Sequence[OperandType]) -> list[TensorType]:
    return [o for o in ops if isinstance(o, TensorType)]


def _require_tensor(ops: Sequence[OperandType], i: int, what: str = "operand") -> TensorType:
    o = ops[i]
    if not isinstance(o, TensorType):
        raise TypeRule(f"{what} #{i} must be a tensor, got {_fmt(o)}")
    return o


_INT_RANGE = {
    DType.I8: (-(2**7), 2**7 - 1),
    DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1),
    DType.I64: (-(2**63), 2**63 - 1),
    DType.U8: (0, 255),
}


def literal_fits(lit: Literal, dtype: DType) -> bool:
    if lit.kind == "none":
        return False
    if dtype.is_bool:
        return lit.kind == "bool"
    if dtype.is_int:
        if lit.kind == "int":
            lo, hi = _INT_RANGE[dtype]
            return lo <= lit.value <= hi  # type: ignore[operator]
        return lit.kind == "bool"
    return lit.kind in ("int", "float", "bool")


def common_dtype(ops: Sequence[OperandType], opname: str) -> DType:
    tensors = _tensors(ops)
    if not tensors:
        raise TypeRule(f"'{opname}' needs at least one tensor operand")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype != dtype:
            raise TypeRule(
                f"operand dtypes differ ({dtype} and {t.dtype}); insert a 'cast' to make them agree"
            )
    for o in ops:
        if isinstance(o, Literal) and not literal_fits(o, dtype):
            raise TypeRule(f"{o.kind} literal {o} does not fit operand dtype {dtype}")
    return dtype


def _broadcast(ops: Sequence[OperandType]) -> tuple[Dim, ...]:
    shapes = [t.shape for t in _tensors(ops)]
    out = broadcast_shapes(*shapes)
    if out is None:
        raise TypeRule(
            "operand shapes do not broadcast: "
            + ", ".join("[" + ", ".join(dim_str(d) for d in s) + "]" for s in shapes)
        )
    return out


def _norm_dim(d: int, rank: int, allow_end: bool = False) -> int:
    hi = rank + 1 if allow_end else rank
    if not -hi <= d < hi:
        raise TypeRule(f"dimension {d} is out of range for rank {rank}")
    return d % hi if hi else 0


def _norm_dims(dims: Sequence[int] | None, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    out = [_norm_dim(d, rank) for d in dims]
    if len(set(out)) != len(out):
        raise TypeRule(f"dimensions {list(dims)} repeat")
    return out


def _dtype_check(dtype: DType, rule: str, opname: str) -> None:
    ok = {
        "float": dtype.is_float,
        "numeric": not dtype.is_bool,
        "int": dtype.is_int or dtype.is_bool,
        "any": True,
    }[rule]
    if not ok:
        wanted = {
            "float": "a floating-point",
            "numeric": "a numeric",
            "int": "an integer or bool",
        }[rule]
        raise TypeRule(f"'{opname}' needs {wanted} dtype, got {dtype}")


# ---------------------------------------------------------------------------------------------
# elementwise


def _elementwise(opname: str, rule: str, result: str) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        dtype = common_dtype(ops, opname)
        _dtype_check(dtype, rule, opname)
        shape = _broadcast(ops)
        out = DType.BOOL if result == "bool" else dtype
        return [TensorType(out, shape)]

    return infer


UNARY_FLOAT = [
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "sigmoid",
    "erf",
    "erfc",
    "erfinv",
    "lgamma",
    "digamma",
    "reciprocal",
]
# What a scalar op costs to compute again, in simple ops: a transcendental function (a libdevice
# or libm call of tens of instructions), a division or a power counts COSTLY; the rest count 1.
# The plan keeps costly values in scratch rows instead of computing them twice, the inline pass
# realizes costly bodies that broadcast readers would compute again for every element, and the
# renderers pick their launch shapes by how many costly ops a kernel has.
COSTLY = 8
COSTLY_OPS = frozenset(
    [
        *(n for n in UNARY_FLOAT if n != "reciprocal"),
        "tan",
        "div",
        "truediv",
        "pow",
        "atan2",
    ]
)

UNARY_NUMERIC = ["neg", "abs", "relu", "square", "sign", "floor", "ceil", "round", "trunc"]
UNARY_TO_BOOL_FLOAT = ["isnan", "isinf", "isfinite", "signbit"]
BINARY_NUMERIC = ["add", "sub", "mul", "maximum", "minimum", "floordiv", "mod"]
# Integer ops that fail on a zero divisor (the interpreter raises ZeroDivisionError; a compiled
# kernel reports the error): every back end checks the divisor of these, and a plan keeps such
# an op even where nothing reads its value. On floats they follow IEEE (inf, nan) instead.
FAILS_ON_ZERO_DIVISOR = frozenset({"floordiv", "mod"})
BINARY_FLOAT = ["div", "pow", "atan2", "hypot", "fmod", "copysign"]
BINARY_INT = ["bitwise_and", "bitwise_or", "bitwise_xor", "shl", "shr"]
BINARY_LOGICAL = ["logical_and", "logical_or", "logical_xor"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]

# Elementwise ops that eager PyTorch (on the CPU) applies to a trailing Python scalar at the
# compute precision (f32 for f16 and bf16) instead of rounding it to the tensor's dtype first:
# ``x * 0.1`` multiplies by 0.1f, ``x + 0.1`` adds 0.1 rounded to half. The interpreter hands
# torch the scalar, so this is its rule too (tests/backends/test_literal_rounding.py checks the
# table against it).
SCALAR_AT_COMPUTE_PRECISION = frozenset({"mul", "div", "floordiv"})


def literal_in_op_dtype(op: str, position: int, leading_tensor: bool) -> bool:
    """Whether literal operand ``position`` of elementwise ``op`` is a value of the op's dtype
    (rounded to it, for f16 and bf16) rather than of its compute dtype: every literal but a
    trailing one of :data:`SCALAR_AT_COMPUTE_PRECISION` after a tensor (``leading_tensor``:
    the first operand is not a literal). ``where``'s condition is no float."""
    return not (leading_tensor and position > 0 and op in SCALAR_AT_COMPUTE_PRECISION)


# Ops whose kernels take a Python scalar in the tensor's dtype on every device: rounded to it
# first for f16/bf16. On a GPU eager keeps the scalar of most other binary ops at the compute
# precision (f32), which its CUDA kernels take it as ("opmath"); not these (measured on an H200:
# ``x % 0.3`` on f16 with 0.3 at f32 differed from eager in 1,060 of 2,048 elements, ``x ** 0.3``
# in 225; the other binary ops and comparisons agreed with it at f32). The plan rounds them once
# for every back end (backends/plan/lowering.py).
SCALAR_IN_OP_DTYPE = frozenset({"mod", "fmod", "atan2", "hypot", "pow"})


for _n in UNARY_FLOAT:
    _register(OpSpec(_n, "unary", 1, 1, _elementwise(_n, "float", "same"), scalar=True))
for _n in UNARY_NUMERIC:
    _register(OpSpec(_n, "unary", 1, 1, _elementwise(_n, "numeric", "same"), scalar=True))
for _n in UNARY_TO_BOOL_FLOAT:
    _register(OpSpec(_n, "unary", 1, 1, _elementwise(_n, "float", "bool"), scalar=True))
_register(
    OpSpec("logical_not", "unary", 1, 1, _elementwise("logical_not", "any", "bool"), scalar=True)
)
_register(
    OpSpec("bitwise_not", "unary", 1, 1, _elementwise("bitwise_not", "int", "same"), scalar=True)
)
for _n in BINARY_NUMERIC:
    _register(OpSpec(_n, "binary", 2, 2, _elementwise(_n, "numeric", "same"), scalar=True))
for _n in BINARY_FLOAT:
    _register(OpSpec(_n, "binary", 2, 2, _elementwise(_n, "float", "same"), scalar=True))
for _n in BINARY_INT:
    _register(OpSpec(_n, "binary", 2, 2, _elementwise(_n, "int", "same"), scalar=True))
for _n in BINARY_LOGICAL:
    _register(OpSpec(_n, "binary", 2, 2, _elementwise(_n, "any", "bool"), scalar=True))
for _n in COMPARE:
    _register(OpSpec(_n, "compare", 2, 2, _elementwise(_n, "any", "bool"), scalar=True))


def _where(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    cond = ops[0]
    if isinstance(cond, TensorType):
        if cond.dtype != DType.BOOL:
            raise TypeRule(f"'where' condition must be bool, got {cond.dtype}")
    elif cond.kind != "bool":
        raise TypeRule(f"'where' condition must be bool, got literal {cond}")
    dtype = common_dtype(ops[1:], "where")
    return [TensorType(dtype, _broadcast(ops))]


_register(OpSpec("where", "ternary", 3, 3, _where, scalar=True))


def _cast(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    src = _require_tensor(ops, 0)
    if not decl:
        raise TypeRule("'cast' needs a result type")
    return [TensorType(decl[0].dtype, src.shape)]


_register(OpSpec("cast", "cast", 1, 1, _cast, scalar=True, doc="convert to the result dtype"))


def _clamp(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    _dtype_check(x.dtype, "numeric", "clamp")
    return [TensorType(x.dtype, x.shape)]


_register(
    OpSpec(
        "clamp",
        "unary",
        1,
        1,
        _clamp,
        attrs={"min": AttrSpec("optfloat"), "max": AttrSpec("optfloat")},
    )
)

# Composite activations: same type in, same type out (floating point).


def _same_float(opname: str) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x = _require_tensor(ops, 0)
        _dtype_check(x.dtype, "float", opname)
        return [TensorType(x.dtype, x.shape)]

    return infer


_ACTIVATIONS: dict[str, dict[str, AttrSpec]] = {
    "gelu": {"approximate": AttrSpec("str", "none", choices=("none", "tanh"))},
    "silu": {},
    "mish": {},
    "softplus": {"beta": AttrSpec("float", 1.0), "threshold": AttrSpec("float", 20.0)},
    "hardswish": {},
    "hardsigmoid": {},
    "leaky_relu": {"negative_slope": AttrSpec("float", 0.01)},
    "elu": {"alpha": AttrSpec("float", 1.0)},
    "hardtanh": {"min_val": AttrSpec("float", -1.0), "max_val": AttrSpec("float", 1.0)},
    "dropout": {"p": AttrSpec("float", 0.5), "train": AttrSpec("bool", False)},
}
for _n, _a in _ACTIVATIONS.items():
    _register(OpSpec(_n, "composite", 1, 1, _same_float(_n), attrs=_a))


def _softmax_like(opname: str) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x = _require_tensor(ops, 0)
        _dtype_check(x.dtype, "float", opname)
        _norm_dim(attrs["dim"], max(x.rank, 1))
        return [TensorType(x.dtype, x.shape)]

    return infer


for _n in ("softmax", "log_softmax"):
    _register(
        OpSpec(
            _n, "composite", 1, 1, _softmax_like(_n), attrs={"dim": AttrSpec("int", required=True)}
        )
    )

# ---------------------------------------------------------------------------------------------
# reductions


def _reduced_shape(x: TensorType, dims: list[int], keepdim: bool) -> tuple[Dim, ...]:
    if keepdim:
        return tuple(1 if k in dims else d for k, d in enumerate(x.shape))
    return tuple(d for k, d in enumerate(x.shape) if k not in dims)


def _reduction(opname: str, rule: str, result: str, nresults: int = 1) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x = _require_tensor(ops, 0)
        _dtype_check(x.dtype, rule, opname)
        dims = _norm_dims(attrs.get("dims"), x.rank)
        shape = _reduced_shape(x, dims, attrs.get("keepdim", False))
        out = {"same": x.dtype, "bool": DType.BOOL}[result]
        return [TensorType(out, shape)] * nresults

    return infer


_RED_ATTRS = {"dims": AttrSpec("ints"), "keepdim": AttrSpec("bool", False)}
_VAR_ATTRS = {**_RED_ATTRS, "correction": AttrSpec("int", 1)}
for _n, _rule, _res in (
    ("sum", "numeric", "same"),
    ("prod", "numeric", "same"),
    ("max", "any", "same"),
    ("min", "any", "same"),
    ("any", "any", "bool"),
    ("all", "any", "bool"),
):
    _register(OpSpec(_n, "reduction", 1, 1, _reduction(_n, _rule, _res), attrs=_RED_ATTRS))
for _n in ("mean", "logsumexp"):
    _register(OpSpec(_n, "reduction", 1, 1, _reduction(_n, "float", "same"), attrs=_RED_ATTRS))
for _n in ("var", "std"):
    _register(OpSpec(_n, "reduction", 1, 1, _reduction(_n, "float", "same"), attrs=_VAR_ATTRS))
_register(
    OpSpec(
        "var_mean",
        "reduction",
        1,
        1,
        _reduction("var_mean", "float", "same", 2),
        attrs=_VAR_ATTRS,
        num_results=2,
        doc="results: variance, mean",
    )
)
# The single-pass form that `decompose` rewrites var/std/var_mean/layer_norm/group_norm into;
# `lower` turns it into a loop-level `reduction welford`.
_register(
    OpSpec(
        "welford",
        "reduction",
        1,
        1,
        _reduction("welford", "float", "same", 3),
        attrs=_RED_ATTRS,
        num_results=3,
        doc="one pass over the reduced elements; results: mean, m2 (sum of squared deviations "
        "from the mean), count (number of reduced elements, in the operand's dtype); "
        "no elements: mean 0, m2 0, count 0",
    )
)


def _arg_reduction(opname: str) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x = _require_tensor(ops, 0)
        _dtype_check(x.dtype, "numeric", opname)
        dim = attrs.get("dim")
        if dim is None:
            shape: tuple[Dim, ...] = tuple(1 for _ in x.shape) if attrs.get("keepdim") else ()
        else:
            shape = _reduced_shape(x, [_norm_dim(dim, x.rank)], attrs.get("keepdim", False))
        return [TensorType(DType.I64, shape)]

    return infer


for _n in ("argmax", "argmin"):
    _register(
        OpSpec(
            _n,
            "reduction",
            1,
            1,
            _arg_reduction(_n),
            attrs={"dim": AttrSpec("int"), "keepdim": AttrSpec("bool", False)},
        )
    )

# ---------------------------------------------------------------------------------------------
# views and data movement


def _numel_equal(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy

    return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0


def _decl(decl: list[TensorType], opname: str) -> TensorType:
    if not decl:
        raise TypeRule(f"'{opname}' needs a result type")
    return decl[0]


def _reshape(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    out = _decl(decl, "reshape")
    if not _numel_equal(x.numel, out.numel):
        raise TypeRule(
            f"cannot reshape {x} ({dim_str(x.numel)} elements) to "
            f"[{', '.join(dim_str(d) for d in out.shape)}] ({dim_str(out.numel)} elements)"
        )
    return [TensorType(x.dtype, out.shape)]


_register(OpSpec("reshape", "view", 1, 1, _reshape, doc="shape from the result type"))


def _permute(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    dims = [_norm_dim(d, x.rank) for d in attrs["dims"]]
    if sorted(dims) != list(range(x.rank)):
        raise TypeRule(f"'dims' {attrs['dims']} is not a permutation of {x.rank} dimensions")
    return [TensorType(x.dtype, tuple(x.shape[d] for d in dims))]


_register(
    OpSpec("permute", "view", 1, 1, _permute, attrs={"dims": AttrSpec("ints", required=True)})
)


def _transpose(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    a, b = _norm_dim(attrs["dim0"], x.rank), _norm_dim(attrs["dim1"], x.rank)
    shape = list(x.shape)
    shape[a], shape[b] = shape[b], shape[a]
    return [TensorType(x.dtype, tuple(shape))]


_register(
    OpSpec(
        "transpose",
        "view",
        1,
        1,
        _transpose,
        attrs={"dim0": AttrSpec("int", required=True), "dim1": AttrSpec("int", required=True)},
    )
)


def _expand(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    out = _decl(decl, "expand")
    if len(out.shape) < x.rank:
        raise TypeRule(f"cannot expand {x} to fewer dimensions {list(out.shape)}")
    lead = len(out.shape) - x.rank
    for k, d in enumerate(x.shape):
        if not (d == 1 or d == out.shape[lead + k]):
            raise TypeRule(
                f"cannot expand dimension {k} of size {dim_str(d)} to {dim_str(out.shape[lead + k])}"
            )
    return [TensorType(x.dtype, out.shape)]


_register(OpSpec("expand", "view", 1, 1, _expand, doc="shape from the result type"))


def slice_size(size: Dim, start: Dim, end: Dim | None, step: int) -> Dim:
    """Length of ``x[start:end:step]`` along a dimension of ``size`` (Python clamping)."""
    if step <= 0:
        raise TypeRule(f"slice step must be positive, got {step}")
    if isinstance(size, int) and isinstance(start, int) and (end is None or isinstance(end, int)):
        s, e, _ = slice(start, end, step).indices(size)
        return max(0, -(-(e - s) // step))
    # symbolic: assume the bounds are already within range; ceil(n / step) as a floor division
    from .symbolic import FloorDiv, as_expr, to_dim

    e = size if end is None else end
    return to_dim(FloorDiv(as_expr(e) - start + step - 1, as_expr(step)))


def _slice(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    dim = _norm_dim(attrs["dim"], x.rank)
    n = slice_size(x.shape[dim], attrs.get("start", 0), attrs.get("end"), attrs.get("step", 1))
    shape = list(x.shape)
    shape[dim] = n
    return [TensorType(x.dtype, tuple(shape))]


_register(
    OpSpec(
        "slice",
        "view",
        1,
        1,
        _slice,
        attrs={
            "dim": AttrSpec("int", required=True),
            "start": AttrSpec("dim", 0),
            "end": AttrSpec("optdim"),
            "step": AttrSpec("int", 1),
        },
    )
)


def _select(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    dim = _norm_dim(attrs["dim"], x.rank)
    idx, size = attrs["index"], x.shape[dim]
    if isinstance(idx, int) and isinstance(size, int) and not -size <= idx < size:
        raise TypeRule(f"index {idx} is out of range for dimension {dim} of size {size}")
    return [TensorType(x.dtype, x.shape[:dim] + x.shape[dim + 1 :])]


_register(
    OpSpec(
        "select",
        "view",
        1,
        1,
        _select,
        attrs={"dim": AttrSpec("int", required=True), "index": AttrSpec("dim", required=True)},
    )
)


def _squeeze(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    if attrs.get("dims") is None:
        dims = [k for k, d in enumerate(x.shape) if d == 1]
    else:
        dims = _norm_dims(attrs["dims"], x.rank)
        # like PyTorch, a listed dimension that is not of size 1 stays
        dims = [k for k in dims if x.shape[k] == 1]
    return [TensorType(x.dtype, tuple(d for k, d in enumerate(x.shape) if k not in dims))]


_register(OpSpec("squeeze", "view", 1, 1, _squeeze, attrs={"dims": AttrSpec("ints")}))


def _unsqueeze(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    dim = _norm_dim(attrs["dim"], x.rank, allow_end=True)
    shape = list(x.shape)
    shape.insert(dim, 1)
    return [TensorType(x.dtype, tuple(shape))]


_register(
    OpSpec("unsqueeze", "view", 1, 1, _unsqueeze, attrs={"dim": AttrSpec("int", required=True)})
)


def _as_strided(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    out = _decl(decl, "as_strided")
    if len(attrs["strides"]) != len(out.shape):
        raise TypeRule(f"'strides' has {len(attrs['strides'])} entries for rank {len(out.shape)}")
    return [TensorType(x.dtype, out.shape)]


_register(
    OpSpec(
        "as_strided",
        "view",
        1,
        1,
        _as_strided,
        attrs={"strides": AttrSpec("ints", required=True), "offset": AttrSpec("dim", 0)},
        doc="shape from the result type; strides and offset index the operand's contiguous storage",
    )
)


def _cat(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    xs = [_require_tensor(ops, i) for i in range(len(ops))]
    dtype = common_dtype(xs, "cat")
    rank = xs[0].rank
    dim = _norm_dim(attrs["dim"], rank)
    total: Any = 0
    for k, t in enumerate(xs):
        if t.rank != rank:
            raise TypeRule(f"operand #{k} has rank {t.rank}, expected {rank}")
        for j in range(rank):
            if j != dim and t.shape[j] != xs[0].shape[j]:
                raise TypeRule(
                    f"operand #{k} has size {dim_str(t.shape[j])} in dimension {j}, expected {dim_str(xs[0].shape[j])}"
                )
        total = total + t.shape[dim]
    shape = list(xs[0].shape)
    from .types import _norm

    shape[dim] = _norm(total)
    return [TensorType(dtype, tuple(shape))]


_register(OpSpec("cat", "view", 1, None, _cat, attrs={"dim": AttrSpec("int", required=True)}))


def _pad(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    pad = attrs["pad"]
    if len(pad) % 2 or len(pad) // 2 > x.rank:
        raise TypeRule(f"'pad' must hold a (low, high) pair per dimension, got {pad}")
    shape = list(x.shape)
    for k in range(len(pad) // 2):
        dim = x.rank - 1 - k
        shape[dim] = shape[dim] + pad[2 * k] + pad[2 * k + 1]
        if isinstance(shape[dim], int) and shape[dim] < 0:
            raise TypeRule(f"padding makes dimension {dim} negative")
    value = attrs.get("value", 0.0)
    if not literal_fits(Literal(value), x.dtype):
        raise TypeRule(f"pad value {value} does not fit dtype {x.dtype}")
    return [TensorType(x.dtype, tuple(shape))]


_register(
    OpSpec(
        "pad",
        "view",
        1,
        1,
        _pad,
        attrs={"pad": AttrSpec("ints", required=True), "value": AttrSpec("any", 0.0)},
        doc="constant padding; 'pad' lists (low, high) per dimension starting from the last",
    )
)


def _index_dtype(t: TensorType, what: str) -> None:
    if t.dtype not in (DType.I64, DType.I32):
        raise TypeRule(f"{what} must be i64 or i32, got {t.dtype}")


def _gather(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x, idx = _require_tensor(ops, 0), _require_tensor(ops, 1)
    _index_dtype(idx, "'gather' index")
    _norm_dim(attrs["dim"], x.rank)
    if idx.rank != x.rank:
        raise TypeRule(f"'gather' index has rank {idx.rank}, input has rank {x.rank}")
    return [TensorType(x.dtype, idx.shape)]


_register(
    OpSpec("gather", "indexing", 2, 2, _gather, attrs={"dim": AttrSpec("int", required=True)})
)


def _index_select(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x, idx = _require_tensor(ops, 0), _require_tensor(ops, 1)
    _index_dtype(idx, "'index_select' index")
    if idx.rank != 1:
        raise TypeRule(f"'index_select' index must be 1-D, got {idx}")
    dim = _norm_dim(attrs["dim"], x.rank)
    shape = list(x.shape)
    shape[dim] = idx.shape[0]
    return [TensorType(x.dtype, tuple(shape))]


_register(
    OpSpec(
        "index_select",
        "indexing",
        2,
        2,
        _index_select,
        attrs={"dim": AttrSpec("int", required=True)},
    )
)


def _embedding(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    w, idx = _require_tensor(ops, 0), _require_tensor(ops, 1)
    _index_dtype(idx, "'embedding' indices")
    if w.rank != 2:
        raise TypeRule(f"'embedding' weight must be 2-D, got {w}")
    return [TensorType(w.dtype, idx.shape + (w.shape[1],))]


_register(
    OpSpec(
        "embedding",
        "indexing",
        2,
        2,
        _embedding,
        attrs={"padding_idx": AttrSpec("int")},
        doc="operands: weight [V, D], indices (any shape)",
    )
)

# ---------------------------------------------------------------------------------------------
# creation


def _full(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    out = _decl(decl, "full")
    v = ops[0]
    if not isinstance(v, Literal) or not literal_fits(v, out.dtype):
        raise TypeRule(f"'full' needs a scalar literal that fits {out.dtype}, got {_fmt(v)}")
    return [TensorType(out.dtype, out.shape)]


_register(
    OpSpec("full", "creation", 1, 1, _full, doc="a tensor of the result type filled with a literal")
)


def _arange(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    out = _decl(decl, "arange")
    if out.rank != 1:
        raise TypeRule(f"'arange' result must be 1-D, got {out}")
    start, end, step = attrs.get("start", 0), attrs["end"], attrs.get("step", 1)
    if step == 0:
        raise TypeRule("'arange' step must not be zero")
    if all(isinstance(v, (int, float)) for v in (start, end, step)):
        import math

        n = max(0, math.ceil((end - start) / step))
        if isinstance(out.shape[0], int) and out.shape[0] != n:
            raise TypeRule(
                f"'arange' from {start} to {end} by {step} has {n} elements, not {out.shape[0]}"
            )
    return [TensorType(out.dtype, out.shape)]


_register(
    OpSpec(
        "arange",
        "creation",
        0,
        0,
        _arange,
        attrs={
            "start": AttrSpec("any", 0),
            "end": AttrSpec("any", required=True),
            "step": AttrSpec("any", 1),
        },
    )
)


def _flat_len(v: Any) -> tuple[int, ...]:
    if isinstance(v, list):
        inner = {_flat_len(x) for x in v}
        if len(inner) > 1:
            raise TypeRule("'constant' value is a ragged list")
        return (len(v),) + (inner.pop() if inner else ())
    return ()


def _constant(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    out = _decl(decl, "constant")
    shape = _flat_len(attrs["value"])
    if tuple(out.shape) != shape:
        raise TypeRule(
            f"'constant' value has shape {list(shape)}, result type says {list(out.shape)}"
        )
    return [TensorType(out.dtype, out.shape)]


_register(
    OpSpec(
        "constant",
        "creation",
        0,
        0,
        _constant,
        attrs={"value": AttrSpec("any", required=True)},
        doc="a small dense tensor written as nested lists",
    )
)

# ---------------------------------------------------------------------------------------------
# composite: normalization, losses, matmul


def _optional_tensor(ops: list[OperandType], i: int) -> TensorType | None:
    if i >= len(ops):
        return None
    o = ops[i]
    if isinstance(o, Literal):
        if o.kind == "none":
            return None
        raise TypeRule(f"operand #{i} must be a tensor or none, got {_fmt(o)}")
    return o


def _norm_op(opname: str, params: int) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x = _require_tensor(ops, 0)
        _dtype_check(x.dtype, "float", opname)
        nshape = tuple(attrs["normalized_shape"])
        if tuple(x.shape[x.rank - len(nshape) :]) != nshape or len(nshape) > x.rank:
            raise TypeRule(f"normalized_shape {list(nshape)} does not end the input shape {x}")
        for i in range(1, 1 + params):
            p = _optional_tensor(ops, i)
            if p is not None and (p.shape != nshape or p.dtype != x.dtype):
                raise TypeRule(f"operand #{i} must be {TensorType(x.dtype, nshape)}, got {p}")
        return [TensorType(x.dtype, x.shape)]

    return infer


_register(
    OpSpec(
        "layer_norm",
        "composite",
        1,
        3,
        _norm_op("layer_norm", 2),
        attrs={"normalized_shape": AttrSpec("ints", required=True), "eps": AttrSpec("float", 1e-5)},
        doc="operands: input, weight or none, bias or none",
    )
)
_register(
    OpSpec(
        "rms_norm",
        "composite",
        1,
        2,
        _norm_op("rms_norm", 1),
        attrs={"normalized_shape": AttrSpec("ints", required=True), "eps": AttrSpec("optfloat")},
        doc="operands: input, weight or none; eps none means the dtype's machine epsilon",
    )
)


def _batch_norm(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    _dtype_check(x.dtype, "float", "batch_norm")
    if x.rank < 2:
        raise TypeRule(f"'batch_norm' input needs at least 2 dimensions, got {x}")
    c = (x.shape[1],)
    for i in range(1, 5):
        p = _optional_tensor(ops, i)
        if i >= 3 and p is None:
            raise TypeRule("'batch_norm' (inference form) needs running_mean and running_var")
        if p is not None and (p.shape != c or p.dtype != x.dtype):
            raise TypeRule(f"operand #{i} must be {TensorType(x.dtype, c)}, got {p}")
    return [TensorType(x.dtype, x.shape)]


_register(
    OpSpec(
        "batch_norm",
        "composite",
        5,
        5,
        _batch_norm,
        attrs={"eps": AttrSpec("float", 1e-5)},
        doc="inference form; operands: input, weight or none, bias or none, running_mean, running_var",
    )
)


def _group_norm(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x = _require_tensor(ops, 0)
    _dtype_check(x.dtype, "float", "group_norm")
    g = attrs["num_groups"]
    if g < 1:  # checked first: channels % 0 would be Python's ZeroDivisionError, not a rule
        raise TypeRule(f"'group_norm' needs num_groups >= 1, got {g}")
    if x.rank < 2 or (isinstance(x.shape[1], int) and x.shape[1] % g):
        raise TypeRule(f"'group_norm' needs channels divisible by num_groups={g}, got {x}")
    for i in (1, 2):
        p = _optional_tensor(ops, i)
        if p is not None and (p.shape != (x.shape[1],) or p.dtype != x.dtype):
            raise TypeRule(f"operand #{i} must be {TensorType(x.dtype, (x.shape[1],))}, got {p}")
    return [TensorType(x.dtype, x.shape)]


_register(
    OpSpec(
        "group_norm",
        "composite",
        1,
        3,
        _group_norm,
        attrs={"num_groups": AttrSpec("int", required=True), "eps": AttrSpec("float", 1e-5)},
    )
)


def _loss(opname: str) -> Infer:
    def infer(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
        x, t = _require_tensor(ops, 0), _require_tensor(ops, 1)
        _dtype_check(x.dtype, "float", opname)
        _index_dtype(t, f"'{opname}' target")
        if (
            x.rank not in (1, 2)
            or t.rank != x.rank - 1
            or (x.rank == 2 and t.shape[0] != x.shape[0])
        ):
            raise TypeRule(f"'{opname}' needs input [N, C] and target [N], got {x} and {t}")
        w = _optional_tensor(ops, 2)
        if w is not None and (w.rank != 1 or w.shape[0] != x.shape[-1]):
            raise TypeRule(f"'{opname}' class weight must be [C], got {w}")
        red = attrs.get("reduction", "mean")
        shape: tuple[Dim, ...] = t.shape if red == "none" else ()
        return [TensorType(x.dtype, shape)]

    return infer


_LOSS_ATTRS = {
    "ignore_index": AttrSpec("int", -100),
    "reduction": AttrSpec("str", "mean", choices=("mean", "sum", "none")),
}
_register(
    OpSpec(
        "cross_entropy",
        "composite",
        2,
        3,
        _loss("cross_entropy"),
        attrs={**_LOSS_ATTRS, "label_smoothing": AttrSpec("float", 0.0)},
        doc="operands: logits [N, C], class indices [N], optional class weight [C]",
    )
)
_register(
    OpSpec(
        "nll_loss",
        "composite",
        2,
        3,
        _loss("nll_loss"),
        attrs=_LOSS_ATTRS,
        doc="operands: log-probabilities [N, C], class indices [N], optional class weight [C]",
    )
)


def matmul_shape(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    if not a or not b:
        raise TypeRule("'matmul' operands must have at least one dimension")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise TypeRule(f"'matmul' inner sizes differ: {dim_str(a2[-1])} and {dim_str(b2[-2])}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    if batch is None:
        raise TypeRule("'matmul' batch dimensions do not broadcast")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _matmul(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    a, b = _require_tensor(ops, 0), _require_tensor(ops, 1)
    dtype = common_dtype([a, b], "matmul")
    _dtype_check(dtype, "numeric", "matmul")
    return [TensorType(dtype, matmul_shape(a.shape, b.shape))]


_register(OpSpec("matmul", "composite", 2, 2, _matmul, doc="numpy matmul rules (mm, bmm, batched)"))


def _addmm(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    bias, a, b = (_require_tensor(ops, i) for i in range(3))
    dtype = common_dtype([bias, a, b], "addmm")
    if a.rank != 2 or b.rank != 2:
        raise TypeRule("'addmm' needs 2-D matrices")
    shape = matmul_shape(a.shape, b.shape)
    if broadcast_shapes(bias.shape, shape) != shape:
        raise TypeRule(f"'addmm' bias {bias} does not broadcast to {list(shape)}")
    return [TensorType(dtype, shape)]


_register(
    OpSpec(
        "addmm",
        "composite",
        3,
        3,
        _addmm,
        attrs={"beta": AttrSpec("float", 1.0), "alpha": AttrSpec("float", 1.0)},
        doc="beta*bias + alpha*(a @ b)",
    )
)


def _linear(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x, w = _require_tensor(ops, 0), _require_tensor(ops, 1)
    bias = _optional_tensor(ops, 2)
    dtype = common_dtype([t for t in (x, w, bias) if t is not None], "linear")
    if w.rank != 2:
        raise TypeRule(f"'linear' weight must be 2-D, got {w}")
    shape = matmul_shape(x.shape, (w.shape[1], w.shape[0]))
    if bias is not None and broadcast_shapes(bias.shape, shape) != shape:
        raise TypeRule(f"'linear' bias {bias} does not broadcast to {list(shape)}")
    return [TensorType(dtype, shape)]


_register(
    OpSpec(
        "linear",
        "composite",
        2,
        3,
        _linear,
        doc="x @ weight.T + bias; operands: x, weight [out, in], bias or none",
    )
)


def _masked_fill(ops: list[OperandType], attrs: dict[str, Any], decl: list[TensorType]):
    x, m = _require_tensor(ops, 0), _require_tensor(ops, 1)
    if m.dtype != DType.BOOL:
        raise TypeRule(f"'masked_fill' mask must be bool, got {m.dtype}")
    v = ops[2]
    if isinstance(v, TensorType):
        if v.rank != 0 or v.dtype != x.dtype:
            raise TypeRule(
                f"'masked_fill' value must be a literal or a 0-d {x.dtype} tensor, got {v}"
            )
    elif not literal_fits(v, x.dtype):
        raise TypeRule(f"'masked_fill' value {v} does not fit {x.dtype}")
    if broadcast_shapes(x.shape, m.shape) != x.shape:
        raise TypeRule(f"'masked_fill' mask {m} does not broadcast to {x}")
    return [TensorType(x.dtype, x.shape)]


_register(
    OpSpec("masked_fill", "composite", 3, 3, _masked_fill, doc="operands: input, bool mask, value")
)


def scalar_ops() -> list[str]:
    return sorted(n for n, s in OPS.items() if s.scalar)
