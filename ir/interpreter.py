"""The reference interpreter: runs any stage of any FIR program on torch CPU tensors.

It is the oracle of the test suite, so it favours being obviously right over being clever:

* tensor-level ops call the matching eager PyTorch function, in the IR's dtype;
* loop-level nodes are evaluated vectorised: every index variable becomes a ``torch.arange``
  broadcast over the grid ``pointwise ranges + reduction ranges``, index expressions are evaluated
  on those grids, loads gather from a flat storage, and a reduction reduces the trailing
  (reduction) axes of the grid;
* anything with no defined result (an index out of bounds, integer division by zero, an input
  of the wrong shape) raises :class:`~fir.ir.errors.InterpreterError`, never a torch exception:
  an index out of bounds as :class:`~fir.ir.errors.InterpreterIndexError` (also an
  ``IndexError``), a division by zero as :class:`~fir.ir.errors.InterpreterZeroDivisionError`
  (also a ``ZeroDivisionError``), a buffer too large to allocate as
  :class:`~fir.ir.errors.InterpreterMemoryError` (also a ``MemoryError``). The message names
  the node once, then the body op, then what went wrong.

Values are kept as *logical* tensors (the shape of their type). A loop-level load addresses the
flat storage of a buffer; that storage is built on first use by placing the logical tensor
through the buffer type's layout (contiguous row-major unless the type says ``strided``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import sympy
import torch
import torch.nn.functional as F

from . import symbolic
from .dtypes import DType
from .errors import (
    ExternResultError,
    FirError,
    InterpreterError,
    InterpreterIndexError,
    InterpreterMemoryError,
    InterpreterZeroDivisionError,
    Location,
    format_bytes,
)
from .externs import call_arguments, kept_results, wrong_result
from .externs import resolve_callee as _resolve_extern
from .graph import (
    AliasNode,
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
    alias_root,
)
from .ops import OPS
from .types import TensorType

__all__ = ["ELEMENTWISE", "allocation_failure", "apply_elementwise", "run_graph", "run_module"]

Scalar = bool | int | float

# ---------------------------------------------------------------------------------------------
# Elementwise ops: one table for tensor level and loop bodies.


def _check_int_divisor(
    b: Any, name: str = "", where: Callable[[tuple[int, ...]], str] | None = None
) -> None:
    """Raise if the integer divisor ``b`` is zero anywhere; ``name`` is its operand and
    ``where`` says at which position, for the message."""
    if isinstance(b, torch.Tensor):
        if b.is_floating_point() or b.dtype == torch.bool:
            return
        bad = b == 0
        if bool(bad.any()):
            detail = ""
            if name:
                pos = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
                at = where(pos) if where else "[" + ", ".join(map(str, pos)) + "]"
                detail = f": {name} is 0 at {at}" if pos or where else f": {name} is 0"
            raise InterpreterZeroDivisionError(f"integer division by zero{detail}")
    elif isinstance(b, int) and not isinstance(b, bool) and b == 0:
        detail = f": {name} is 0" if name else ""
        raise InterpreterZeroDivisionError(f"integer division by zero{detail}")


def _is_int_tensor(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and not a.is_floating_point() and a.dtype != torch.bool


def _floordiv(a: Any, b: Any) -> torch.Tensor:
    if _is_int_tensor(a):
        _check_int_divisor(b)
    return torch.div(a, b, rounding_mode="floor")


def _mod(a: Any, b: Any) -> torch.Tensor:
    if _is_int_tensor(a):
        _check_int_divisor(b)
    return torch.remainder(a, b)


def _shift(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def shift(a: torch.Tensor, b: Any) -> torch.Tensor:
        if a.dtype == torch.bool:  # torch has no bool shift; shift 0/1 and keep the low bit
            bb = b.to(torch.uint8) if isinstance(b, torch.Tensor) else int(b)
            return fn(a.to(torch.uint8), bb).bitwise_and(1).to(torch.bool)
        return fn(a, b)

    return shift


ELEMENTWISE: dict[str, Callable[..., torch.Tensor]] = {}
_BOOL_RESULT: set[str] = set()


def _build_table() -> None:
    from .ops import (
        BINARY_FLOAT,
        BINARY_INT,
        BINARY_LOGICAL,
        BINARY_NUMERIC,
        COMPARE,
        UNARY_FLOAT,
        UNARY_NUMERIC,
        UNARY_TO_BOOL_FLOAT,
    )

    for name in UNARY_FLOAT + UNARY_NUMERIC + UNARY_TO_BOOL_FLOAT:
        ELEMENTWISE[name] = getattr(torch, name)
    ELEMENTWISE["logical_not"] = torch.logical_not
    ELEMENTWISE["bitwise_not"] = torch.bitwise_not
    special: dict[str, Callable[..., torch.Tensor]] = {
        "floordiv": _floordiv,
        "mod": _mod,
        "div": torch.div,  # true division
        "shl": _shift(torch.bitwise_left_shift),
        "shr": _shift(torch.bitwise_right_shift),
    }
    for name in BINARY_NUMERIC + BINARY_FLOAT + BINARY_INT + BINARY_LOGICAL + COMPARE:
        ELEMENTWISE[name] = special.get(name) or getattr(torch, name)
    ELEMENTWISE["where"] = torch.where
    _BOOL_RESULT.update(UNARY_TO_BOOL_FLOAT + BINARY_LOGICAL + COMPARE + ["logical_not"])
    missing = [n for n, s in OPS.items() if s.scalar and n != "cast" and n not in ELEMENTWISE]
    assert not missing, f"interpreter has no implementation for {missing}"


_build_table()


def _default_dtype(value: Scalar | None) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    return torch.float32


def literal_tensor(value: Scalar | None, dtype: torch.dtype) -> torch.Tensor:
    if value is None:
        raise InterpreterError("'none' is not a value here")
    try:
        return torch.tensor(value, dtype=dtype)
    except (RuntimeError, OverflowError, ValueError) as e:
        raise InterpreterError(f"literal {value} does not fit {dtype}: {e}") from None


def cast_tensor(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``cast`` as docs/ops.md defines it on every back end: a float converts to a signed
    integer type rounding toward zero and saturating at the type's range, NaN to 0 (torch's
    own ``.to`` is C++'s conversion there, undefined, and differs between CPU and CUDA); to u8
    through that int64 conversion, keeping the low 8 bits (torch's rule for u8: -1.5 -> 255).
    Every other conversion is torch's, which is defined: integers keep their low bits, floats
    round to nearest, anything nonzero is true."""
    if not x.dtype.is_floating_point or dtype.is_floating_point or dtype == torch.bool:
        return x.to(dtype)
    via = torch.int64 if dtype == torch.uint8 else dtype
    info = torch.iinfo(via)
    wide = x.double()  # exact for every float dtype, and so are the bounds +-2^(bits-1)
    top = float(2 ** (info.bits - 1))
    inside = (wide >= -top) & (wide < top)  # NaN is not inside
    out = torch.where(inside, wide, 0.0).to(via)  # converts in-range values only
    out = torch.where(wide >= top, info.max, torch.where(wide < -top, info.min, out))
    return out.to(dtype)


def cast_literal(value: Scalar | None, dtype: torch.dtype) -> torch.Tensor:
    """A literal cast to ``dtype``: the literal exactly (a float as f64), then :func:`cast_tensor`."""
    exact = torch.float64 if isinstance(value, float) else _default_dtype(value)
    return cast_tensor(literal_tensor(value, exact), dtype)


def cast_scalar(value: Scalar, dtype: DType) -> Scalar:
    """A literal cast to ``dtype`` as a Python value, by :func:`cast_literal`'s rule: what a
    back end folds a ``cast`` of a literal to."""
    return cast_literal(value, dtype.to_torch()).item()


def apply_elementwise(
    name: str, args: Sequence[torch.Tensor | Literal], fallback: torch.dtype | None = None
) -> torch.Tensor:
    """Apply the elementwise op ``name``; a literal operand takes the dtype of the tensor operands.

    A literal in a trailing position is passed to torch as a Python scalar, as eager PyTorch
    does with ``x + 1e-6`` (so reduced-precision ops see the scalar the way eager does); where
    torch needs a tensor, the literal becomes a 0-d tensor of the operands' dtype. ``fallback``
    is the dtype for literals when no operand is a tensor.
    """
    fn = ELEMENTWISE.get(name)
    if fn is None:
        raise InterpreterError(f"unknown elementwise op '{name}'")
    if fallback == torch.bool and name in _BOOL_RESULT:
        fallback = None  # the result dtype says nothing about the operands
    data_start = 1 if name == "where" else 0
    ref = next((a for a in args[data_start:] if isinstance(a, torch.Tensor)), None)
    if ref is not None:
        dtype = ref.dtype
    else:
        dtype = fallback or _default_dtype(
            next((a.value for a in args[data_start:] if isinstance(a, Literal)), 0.0)
        )

    def tensor_args() -> list[torch.Tensor]:
        out = []
        for i, a in enumerate(args):
            if isinstance(a, Literal):
                a = literal_tensor(a.value, torch.bool if i < data_start else dtype)
            out.append(a)
        return out

    scalar_ok = (
        ref is not None
        and isinstance(args[0], torch.Tensor)
        and all(isinstance(a, torch.Tensor) or a.value is not None for a in args)
    )
    if scalar_ok and any(isinstance(a, Literal) for a in args):
        mixed: Sequence[bool | int | float | torch.Tensor | None] = [
            a.value if isinstance(a, Literal) else a for a in args
        ]
        if name == "where" and not isinstance(args[0], torch.Tensor):
            mixed = tensor_args()
        try:
            return fn(*mixed)
        except TypeError:
            pass  # this torch function takes tensors only
    return fn(*tensor_args())


# ---------------------------------------------------------------------------------------------
# Index expressions on torch grids


def _as_long(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(int(x), dtype=torch.int64)


def _idx_floordiv(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise InterpreterZeroDivisionError("floor division by zero in an index expression")
        return a // b
    _check_int_divisor(b)
    return torch.div(_as_long(a), b, rounding_mode="floor")


def _idx_mod(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise InterpreterZeroDivisionError("modulo by zero in an index expression")
        return a % b
    _check_int_divisor(b)
    return torch.remainder(_as_long(a), b)


def _idx_min(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return torch.minimum(_as_long(a), _as_long(b))


def _idx_max(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return torch.maximum(_as_long(a), _as_long(b))


def eval_index(expr: Any, env: dict[Any, Any]) -> Any:
    """Evaluate an index expression; symbol values may be ints or int64 tensors."""
    try:
        return symbolic.evaluate(
            expr, env, floordiv=_idx_floordiv, mod=_idx_mod, minimum=_idx_min, maximum=_idx_max
        )
    except KeyError as e:
        raise InterpreterError(
            f"index expression {_expr_str(expr)} uses unbound symbol {e}"
        ) from None


def _expr_str(e: Any) -> str:
    try:
        return symbolic.print_expr(e)
    except ValueError:
        return str(e)


# ---------------------------------------------------------------------------------------------
# Running a graph


def run_module(
    module: Module, inputs: Sequence[torch.Tensor], func_name: str | None = None
) -> list[torch.Tensor]:
    """Run one function of ``module``: ``func_name``, else the only (or first) function."""
    if not module.funcs:
        raise InterpreterError("the module has no functions")
    if func_name is None:
        graph = module.funcs[0]
    else:
        try:
            graph = module.func(func_name.removeprefix("@"))
        except KeyError:
            names = ", ".join("@" + f.name for f in module.funcs)
            raise InterpreterError(
                f"no function @{func_name} in the module (it has {names})"
            ) from None
    return run_graph(graph, inputs)


def run_graph(
    graph: Graph,
    inputs: Sequence[torch.Tensor],
    kernels: str = "sequential",
    sizes: Mapping[str, int] | None = None,
) -> list[torch.Tensor]:
    """Run ``graph`` on logical input tensors and return its outputs as logical tensors.

    ``kernels`` says how a kernel (fusion group) runs: ``"sequential"``, its nodes one after the
    other over their whole loops, or ``"tiled"``, as a fused kernel would: its iteration space
    is cut into tiles of output elements (``numel``) and every node runs tile by tile, so that
    a node that reads what another node of the kernel writes may only read elements computed
    for the same tile; anything else raises :class:`InterpreterError`. ``tiled`` is the oracle
    for fusion legality (a kernel run sequentially computes the right values even when no
    fused kernel could)."""
    if kernels not in ("sequential", "tiled"):
        raise ValueError(f"kernels must be 'sequential' or 'tiled', got {kernels!r}")
    run = _Run(graph, tiled=kernels == "tiled")
    for name, value in (sizes or {}).items():  # sizes passed by name (ints of the caller)
        if value <= 0:
            raise InterpreterError(f"size symbol {name} must be positive, got {value}")
        run.sizes[symbolic.size_symbol(name)] = int(value)
    return run.run(inputs)


class _Run:
    def __init__(self, graph: Graph, tiled: bool = False) -> None:
        self.graph = graph
        self.sizes: dict[sympy.Symbol, int] = {}
        self.values: dict[Value, torch.Tensor] = {}
        self.storages: dict[Value, torch.Tensor] = {}
        self.tiled = tiled
        self.tile: _Tile | None = None  # while a kernel runs tiled

    # -- sizes

    def dim(self, d: Any) -> int:
        """A size, stride, offset or integer attribute with the size symbols substituted."""
        if isinstance(d, bool):
            return int(d)
        if isinstance(d, int):
            return d
        if isinstance(d, sympy.Integer):
            return int(d)
        if not isinstance(d, sympy.Basic):
            raise InterpreterError(f"expected an integer, got {d!r}")
        try:
            v = symbolic.evaluate(d, self.sizes)
        except KeyError as e:
            raise InterpreterError(
                f"size {_expr_str(d)} uses {e}, which no input shape binds"
            ) from None
        except (ValueError, TypeError):  # ceiling, rationals: let sympy finish
            v = d.subs(self.sizes)
            if not v.is_Integer:
                raise InterpreterError(f"size {d} does not evaluate to an integer ({v})") from None
        return int(v)

    def shape(self, t: TensorType) -> tuple[int, ...]:
        return tuple(self.dim(d) for d in t.shape)

    def resolve(self, v: Any) -> Any:
        """An attribute value with symbolic sizes substituted (lists recursively)."""
        if isinstance(v, list):
            return [self.resolve(x) for x in v]
        if isinstance(v, sympy.Basic):
            return self.dim(v)
        return v

    # -- inputs

    def bind_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        g = self.graph
        if not isinstance(inputs, (list, tuple)):
            raise InterpreterError(
                f"inputs of @{g.name} must be a list of tensors, got {type(inputs).__name__}"
            )
        if len(inputs) != len(g.args):
            raise InterpreterError(
                f"@{g.name} takes {len(g.args)} input(s) "
                f"({', '.join('%' + a.name for a in g.args)}), got {len(inputs)}"
            )
        for a, x in zip(g.args, inputs):
            if not isinstance(x, torch.Tensor):
                raise InterpreterError(
                    f"input %{a.name} must be a torch.Tensor, got {type(x).__name__}"
                )
            want = a.type.dtype.to_torch()
            if x.dtype != want:
                raise InterpreterError(
                    f"input %{a.name} must have dtype {a.type.dtype} ({want}), got {x.dtype}"
                )
            if x.dim() != a.type.rank:
                raise InterpreterError(
                    f"input %{a.name} must have rank {a.type.rank} ({a.type}), got shape {list(x.shape)}"
                )
        # Plain symbols bind first; compound sizes (2*s0) are solved or checked afterwards.
        pending: list[tuple[Value, int, Any, int]] = []
        for a, x in zip(g.args, inputs):
            for k, d in enumerate(a.type.shape):
                actual = int(x.shape[k])
                if isinstance(d, sympy.Symbol):
                    self._bind(d, actual, a)
                elif not isinstance(d, int):
                    pending.append((a, k, d, actual))
        for a, _k, d, actual in pending:
            unbound = [s for s in d.free_symbols if s not in self.sizes]
            if len(unbound) == 1:
                try:
                    roots = sympy.solve(sympy.Eq(d, actual), unbound[0])
                except (NotImplementedError, ValueError, TypeError):
                    roots = []  # e.g. floordiv(s0, 2): left unbound, reported below
                sols = [s for s in roots if s.is_Integer]
                if len(sols) == 1:
                    self._bind(unbound[0], int(sols[0]), a)
        for a, x in zip(g.args, inputs):
            want_shape = self.shape(a.type)
            if tuple(x.shape) != want_shape:
                raise InterpreterError(
                    f"input %{a.name} must have shape {list(want_shape)} ({a.type}), got {list(x.shape)}"
                )
            self.values[a] = x

    def _bind(self, sym: sympy.Symbol, actual: int, a: Value) -> None:
        if actual == 0:
            _refuse_empty_reduction(self.graph, sym, a)
        if actual <= 0:
            raise InterpreterError(
                f"size symbol {sym} (from input %{a.name}) must be positive, got {actual}"
            )
        old = self.sizes.get(sym)
        if old is not None and old != actual:
            raise InterpreterError(
                f"size symbol {sym} is {old} from an earlier input but {actual} in input %{a.name}"
            )
        self.sizes[sym] = actual

    # -- the graph

    def run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        self.bind_inputs(inputs)
        # a kernel runs as one unit: its members in order, then its local buffers are gone
        # (they never reach memory; the verifier checks that nothing outside reads them)
        local_after: dict[int, list[Value]] = {
            id(k.nodes[-1]): k.local for k in self.graph.kernels if k.local and k.nodes
        }
        kernel_of = self.graph.kernel_of() if self.tiled else {}
        done: set[int] = set()
        for node in self.graph.nodes:
            k = kernel_of.get(id(node))
            if k is not None:
                if id(k) not in done:
                    done.add(id(k))
                    try:
                        self.run_kernel_tiled(k)
                    except (RuntimeError, MemoryError) as e:
                        failed, nbytes = allocation_failure(e)
                        if isinstance(e, FirError) or not failed:
                            raise
                        results = [r for n in k.nodes for r in n.results]
                        what = f"kernel @{k.name}"
                        raise _memory_error(what, results, nbytes, self, k.loc) from e
            else:
                self.run_node(node)
            for v in local_after.get(id(node), ()):
                self.values.pop(v, None)
                self.storages.pop(v, None)
        outs = []
        input_ptrs = {x.untyped_storage().data_ptr() for x in inputs if x.numel()}
        for v in self.graph.outputs:
            t = self.get(v)
            if isinstance(v.owner, AliasNode) and any(alias_root(v) is a for a in self.graph.args):
                outs.append(t)  # a view of an input, as eager returns it
                continue
            if t.numel() and t.untyped_storage().data_ptr() in input_ptrs:
                try:
                    t = t.clone()  # never hand back an alias of a caller's input
                except (RuntimeError, MemoryError) as e:
                    failed, _ = allocation_failure(e)
                    if not failed:
                        raise
                    raise _memory_error(f"output %{v.name}", [v], None, self, None) from e
            outs.append(t)
        return outs

    def get(self, v: Value) -> torch.Tensor:
        try:
            return self.values[v]
        except KeyError:
            raise InterpreterError(f"%{v.name} is read before it is computed") from None

    def run_node(self, node: Node) -> None:
        try:
            if isinstance(node, TensorOp):
                outs = self.tensor_op(node)
            elif isinstance(node, ExternNode):
                outs = self.extern(node)
            elif isinstance(node, LoopNode):
                outs = self.loop(node)
            elif isinstance(node, AliasNode):
                outs = [self.alias(node)]
            else:
                raise InterpreterError(f"cannot run a {type(node).__name__}")
            if len(outs) != len(node.results):
                raise InterpreterError(
                    f"produced {len(outs)} result(s), the node declares {len(node.results)}"
                )
            for r, t in zip(node.results, outs):
                self.values[r] = self.conform(r, t)
        except FirError as e:
            # the one place that names the node: what was raised below names the body op (if
            # any) and what went wrong; its class (an IndexError, ...) is kept
            _add_context(e, _node_name(node), node.loc)
            raise
        except (RuntimeError, IndexError, ValueError, TypeError, OverflowError, MemoryError) as e:
            # a torch exception (an extern call, an eager op): keep its kind
            failed, nbytes = allocation_failure(e)
            if failed or self.too_large(node):
                raise _memory_error(_node_name(node), node.results, nbytes, self, node.loc) from e
            cls: type[InterpreterError] = InterpreterError
            if isinstance(e, IndexError):
                cls = InterpreterIndexError
            elif str(e) == "ZeroDivisionError":  # torch's integer division by zero
                cls = InterpreterZeroDivisionError
            raise cls(f"{_node_name(node)}: {type(e).__name__}: {e}", node.loc) from e

    def nbytes(self, v: Value) -> int | None:
        """The bytes of ``v``'s logical tensor; None where a size does not evaluate."""
        try:
            return math.prod(self.shape(v.type)) * v.type.dtype.itemsize
        except FirError:
            return None

    def too_large(self, node: Node) -> bool:
        """Whether a result of ``node`` is too large for torch to index (2**63 bytes or more)."""
        return any((self.nbytes(r) or 0) >= 2**63 for r in node.results)

    def conform(self, r: Value, t: torch.Tensor) -> torch.Tensor:
        """Check a result against its declared type; convert to the declared dtype."""
        shape = self.shape(r.type)
        if tuple(t.shape) != shape:
            # an extern's result not as the trace assumed: eager raises a RuntimeError there
            cls = ExternResultError if isinstance(r.owner, ExternNode) else InterpreterError
            raise cls(
                f"result %{r.name} has shape {list(t.shape)} but its type says {r.type} = {list(shape)}"
            )
        dtype = r.type.dtype.to_torch()
        return t if t.dtype == dtype else t.to(dtype)

    def alias(self, node: AliasNode) -> torch.Tensor:
        """A view: the storage of the base's root seen through the result's layout (a torch
        view of it, never a copy); loads of the alias index that same storage."""
        assert node.base is not None
        flat = self.storage(alias_root(node.base))
        t = node.result.type
        shape = self.shape(t)
        strides = [self.dim(s) for s in t.strides]
        offset = self.dim(t.offset)
        if math.prod(shape) and offset + sum((d - 1) * s for d, s in zip(shape, strides)) >= len(
            flat
        ):
            raise InterpreterError(
                f"view of %{node.base.name} ({t}) reaches past its storage of {len(flat)} elements"
            )
        self.storages[node.result] = flat
        return torch.as_strided(flat, shape, strides, offset)

    def storage(self, v: Value) -> torch.Tensor:
        """The flat storage of ``v`` that loop-level loads index."""
        flat = self.storages.get(v)
        if flat is not None:
            return flat
        x = self.get(v)
        t = v.type
        if t.layout is None:
            flat = x.contiguous().reshape(-1)
        else:
            size = self.dim(t.storage_size())
            flat = torch.zeros(size, dtype=x.dtype)
            if x.numel():
                idx = self.layout_index(t, x.shape)
                if int(idx.min()) < 0 or int(idx.max()) >= size:
                    raise InterpreterError(f"layout of %{v.name} ({t}) reaches outside its storage")
                flat[idx.reshape(-1)] = x.reshape(-1)
        self.storages[v] = flat
        return flat

    def layout_index(self, t: TensorType, shape: Sequence[int]) -> torch.Tensor:
        strides = [self.dim(s) for s in t.strides]
        idx = torch.full(tuple(shape), self.dim(t.offset), dtype=torch.int64)
        for k, (n, s) in enumerate(zip(shape, strides)):
            view = [1] * len(shape)
            view[k] = n
            idx = idx + torch.arange(n, dtype=torch.int64).view(view) * s
        return idx

    # -- tensor level

    def tensor_op(self, node: TensorOp) -> list[torch.Tensor]:
        spec = OPS.get(node.op)
        if spec is None:
            raise InterpreterError(f"unknown op '{node.op}'")
        args = [self.get(o) if isinstance(o, Value) else o for o in node.operands]
        out_dtype = node.results[0].type.dtype.to_torch() if node.results else None
        if node.op == "cast":
            assert out_dtype is not None  # a cast has its one result
            x = args[0]
            return [
                cast_tensor(x, out_dtype)
                if isinstance(x, torch.Tensor)
                else cast_literal(x.value, out_dtype)
            ]
        if spec.scalar:
            if node.op in ("floordiv", "mod") and len(args) == 2 and _is_int_tensor(args[0]):
                divisor = args[1].value if isinstance(args[1], Literal) else args[1]
                _check_int_divisor(divisor, _operand_name(node.operands[1]))
            return [apply_elementwise(node.op, args, out_dtype)]
        impl = _TENSOR_OPS.get(node.op)
        if impl is None:
            raise InterpreterError(f"the interpreter cannot run '{node.op}'")
        out = impl(_Call(self, node, spec, args))
        return list(out) if isinstance(out, (tuple, list)) else [out]

    # -- extern calls

    def extern(self, node: ExternNode) -> list[torch.Tensor]:
        fn = resolve_callee(node.callee)
        args, kwargs = call_arguments(node, self.get, self.dim)
        try:
            out = fn(*args, **kwargs)
        except (FirError, RuntimeError, IndexError, ValueError, TypeError, OverflowError):
            raise  # run_node names the node and keeps the kind
        except MemoryError:
            raise  # run_node says how much memory the node needed
        except Exception as e:  # a custom op's own exception: an error, not a traceback
            raise InterpreterError(f"{type(e).__name__}: {e}") from e
        if out is None and len(node.results) == 1:
            # a call made for its effect (an assertion, aten._print): its result is a token
            t = node.results[0].type
            out = torch.empty(self.shape(t), dtype=t.dtype.to_torch())
        outs = kept_results(node, out, named=False)
        for r, o in zip(node.results, outs):
            # the declared type is what every reader of the result relies on: a call that
            # returns another dtype or shape is an error, never cast or reshaped quietly
            dtype, shape = r.type.dtype.to_torch(), self.shape(r.type)
            if not isinstance(o, torch.Tensor) or o.dtype != dtype or tuple(o.shape) != shape:
                raise wrong_result(node, r.name, o, dtype, shape, named=False)
        return outs

    # -- kernels, run as a fused kernel would

    def run_kernel_tiled(self, k: Any, tiles: int = 3) -> None:
        """Run kernel ``k`` tile by tile over its output elements (see :func:`run_graph`)."""
        from .kernels import kernel_space

        info, bad, why = kernel_space(k)
        if info is None:
            raise InterpreterError(f"kernel @{k.name}: {why}", bad.loc if bad else k.loc)
        numel = self.dim(info.space.numel)
        rnumel = self.dim(info.space.rnumel)
        produced = {id(r) for n in k.nodes for r in n.results}
        results: dict[Value, torch.Tensor] = {}
        bounds = sorted({0, numel} | {numel * t // tiles for t in range(1, tiles)})
        for lo, hi in zip(bounds, bounds[1:]):
            written: dict[int, torch.Tensor] = {}  # id(value) -> storage elements of this tile
            for n in k.nodes:
                assert isinstance(n, LoopNode)
                outer = self.outer_index(n, numel, rnumel)
                inside = (outer >= lo) & (outer < hi)
                self.tile = _Tile(k, produced, written, inside)
                try:
                    self.run_node(n)
                finally:
                    self.tile = None
                for r in n.results:
                    full = self.values[r]
                    flat_inside = inside.reshape(-1)
                    acc = results.get(r)
                    if acc is None:
                        acc = torch.zeros_like(full)
                    acc.reshape(-1)[flat_inside] = full.reshape(-1)[flat_inside]
                    results[r] = acc
                    self.values[r] = acc
                    self.storages.pop(r, None)
                    written[id(r)] = self.storage_elements(r, flat_inside)
        for r, t in results.items():
            self.values[r] = t
            self.storages.pop(r, None)

    def outer_index(self, n: LoopNode, numel: int, rnumel: int) -> torch.Tensor:
        """For each output element of ``n`` (row-major over its pointwise loops), the kernel's
        output element it belongs to: its iteration's number in the order the loops run (the
        node's schedule), divided by the reduction size for a pointwise node that runs over a
        reduction's whole domain."""
        sizes = [self.dim(s) for _, s in n.ranges]
        count = math.prod(sizes)
        if n.schedule is None:
            position = torch.arange(count, dtype=torch.int64)
        else:
            size_of = {v: self.dim(s) for v, s in n.ranges}
            order, _ = n.scheduled_vars()
            stride: dict[Any, int] = {}
            inner = 1
            for v in reversed(order):
                stride[v] = inner
                inner *= size_of[v]
            position = torch.zeros(sizes, dtype=torch.int64)
            for k, (v, _) in enumerate(n.ranges):
                if v in stride:
                    view = [1] * len(sizes)
                    view[k] = sizes[k]
                    position = position + torch.arange(sizes[k]).view(view) * stride[v]
            position = position.reshape(-1)
        if n.is_reduction or count == numel:
            return position
        return position // max(rnumel, 1)  # a pointwise node over the whole reduction domain

    def storage_elements(self, v: Value, logical: torch.Tensor) -> torch.Tensor:
        """The storage elements of ``v`` that the logical elements marked in ``logical`` (a
        flat bool tensor) live in, as a bool tensor over the storage."""
        t = v.type
        if t.layout is None:
            return logical.clone()
        size = self.dim(t.storage_size())
        out = torch.zeros(size, dtype=torch.bool)
        shape = self.shape(t)
        if logical.numel():
            idx = self.layout_index(t, shape).reshape(-1)
            out[idx[logical]] = True
        return out

    # -- loop level

    def loop(self, node: LoopNode) -> list[torch.Tensor]:
        if node.body is None:
            raise InterpreterError("loop node has no body")
        pw = [self.dim(s) for _, s in node.ranges]
        red = [self.dim(s) for _, s in node.reduction_ranges]
        grid = pw + red
        env: dict[Any, Any] = dict(self.sizes)
        for k, (var, _) in enumerate(node.ranges + node.reduction_ranges):
            view = [1] * len(grid)
            view[k] = grid[k]
            env[var] = torch.arange(grid[k], dtype=torch.int64).view(view)

        y = _BodyEval(self, node, env).run(node.body)
        out_types = [r.type for r in node.results]
        numel = math.prod(pw)
        for r in node.results:
            want = math.prod(self.shape(r.type))
            if want != numel:
                raise InterpreterError(
                    f"the pointwise ranges cover {numel} elements but result %{r.name} ({r.type}) has {want}"
                )
        if isinstance(y, Literal):
            y = literal_tensor(
                y.value, out_types[0].dtype.to_torch() if node.reduction != "any" else torch.bool
            )
        y = y.expand(grid)
        if node.reduction is None:
            if len(node.results) != 1:
                raise InterpreterError("a pointwise node has exactly one result")
            return [y.reshape(self.shape(out_types[0]))]
        rows = y.reshape(pw + [math.prod(red)])
        outs = _reduce_rows(node.reduction, rows, [t.dtype.to_torch() for t in out_types])
        return [o.reshape(self.shape(t)) for o, t in zip(outs, out_types)]


_EMPTY_REDUCTIONS = ("max", "min", "argmax", "argmin")


def _refuse_empty_reduction(g: Graph, sym: sympy.Symbol, a: Value) -> None:
    """``sym = 0`` (from input ``a``) empties a max, min, argmax or argmin of ``g``: raise the
    IndexError eager raises there (any other size 0 is refused by the caller: size symbols are
    positive)."""

    def empties(d: Any) -> bool:
        return not isinstance(d, int) and sym in d.free_symbols and d.subs(sym, 0) == 0

    for n in g.nodes:
        kind, reduced = None, []
        if isinstance(n, LoopNode) and n.reduction in _EMPTY_REDUCTIONS:
            kind, reduced = n.reduction, [s for _, s in n.reduction_ranges]
        elif isinstance(n, TensorOp) and n.op in _EMPTY_REDUCTIONS and n.operands:
            x = n.operands[0]
            shape = list(x.type.shape) if isinstance(x, Value) else []
            dims = n.attrs.get("dims") if n.op in ("max", "min") else n.attrs.get("dim")
            if dims is None:
                reduced = shape
            else:
                reduced = [shape[d] for d in (dims if isinstance(dims, list) else [dims])]
            kind = n.op
        if kind is not None and any(empties(d) for d in reduced):
            raise InterpreterIndexError(
                f"{_node_name(n)}: {kind}(): Expected reduction dim to have non-zero size "
                f"(size symbol {sym} of input %{a.name} is 0)",
                n.loc,
            )


def _node_name(node: Node) -> str:
    names = ", ".join("%" + r.name for r in node.results)
    if isinstance(node, TensorOp):
        what = node.op
    elif isinstance(node, ExternNode):
        what = f'extern "{node.callee}"'
    elif isinstance(node, LoopNode):
        what = node.reduction and f"reduction {node.reduction}" or "pointwise"
    elif isinstance(node, AliasNode) and node.base is not None:
        what = f"view %{node.base.name}"
    else:
        what = type(node).__name__
    return f"{names} = {what}"


def _operand_name(o: Any) -> str:
    return f"%{o.name}" if isinstance(o, (Value, BodyValue)) else str(o)


def _body_op_name(op: BodyOp) -> str:
    """``%2 = load %w[3*%1 + i1]``, ``%2 = floordiv %0, %1``: the op as it is printed."""
    from .printer import body_op_str

    try:
        return body_op_str(op)
    except (AssertionError, AttributeError, TypeError, ValueError):  # a malformed op
        return f"%{op.result.name} = {op.opcode}"


def _add_context(e: FirError, context: str, loc: Location | None) -> None:
    """Put ``context: `` before the message of ``e`` (raised by the interpreter, re-raised as it
    is: an IndexError stays one) and locate it at ``loc`` unless it has a location."""
    e.message = f"{context}: {e.message}"
    e.args = (e.message,)
    if e.loc is None:
        e.loc = loc


_ALLOC_BYTES = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")


def allocation_failure(e: BaseException) -> tuple[bool, int | None]:
    """Whether ``e`` (raised by torch) says that memory could not be allocated, and how many
    bytes were asked for when it says so."""
    if isinstance(e, MemoryError):
        return True, None
    text = str(e)
    m = _ALLOC_BYTES.search(text)
    if m:
        return True, int(m.group(1))
    if "can't allocate memory" in text or "Storage size calculation overflowed" in text:
        return True, None
    return isinstance(e, torch.OutOfMemoryError), None


def _memory_error(
    context: str, results: Sequence[Value], requested: int | None, run: _Run, loc: Location | None
) -> InterpreterMemoryError:
    """``%y = exp: cannot allocate %y (f32[99999999999]): 372.5 GiB (399999999996 bytes)``, or,
    where the allocation that failed was not the result itself, how much it asked for."""
    sizes = [(r, run.nbytes(r)) for r in results]
    named = ", ".join(
        f"%{r.name} ({r.type}" + (f", {format_bytes(n)})" if n is not None else ")")
        for r, n in sizes
    )
    total = sum(n for _, n in sizes if n is not None)
    if requested is None or any(n == requested for _, n in sizes):
        if len(sizes) == 1 and sizes[0][1] is not None:
            r, n = sizes[0][0], sizes[0][1]
            text = f"cannot allocate %{r.name} ({r.type}): {format_bytes(n)}"
        else:
            text = f"cannot allocate memory for {named or 'it'}"
        return InterpreterMemoryError(f"{context}: {text}", loc, requested or total or None)
    text = f"cannot allocate {format_bytes(requested)}"
    if named:
        text += f" while computing {named}"
    return InterpreterMemoryError(f"{context}: {text}", loc, requested)


def resolve_callee(name: str) -> Callable[..., Any]:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default``; only operators and the written
    list of torch functions (:func:`fir.ir.externs.resolve_callee`, which the compiled runtime
    also uses)."""
    return _resolve_extern(name, InterpreterError)


def _reduce_rows(kind: str, rows: torch.Tensor, dtypes: list[torch.dtype]) -> list[torch.Tensor]:
    """Reduce the last axis of ``rows`` (shape pointwise + [reduction numel])."""
    n = rows.shape[-1]
    if kind == "welford":
        if len(dtypes) != 3:
            raise InterpreterError(
                f"a welford reduction has 3 results (mean, m2, count), got {len(dtypes)}"
            )
        x = rows.to(dtypes[0])
        if n == 0:
            mean = torch.zeros(rows.shape[:-1], dtype=dtypes[0])
            m2 = torch.zeros(rows.shape[:-1], dtype=dtypes[1])
        else:
            mean = x.mean(-1)
            m2 = ((x - mean.unsqueeze(-1)) ** 2).sum(-1).to(dtypes[1])
        count = torch.full(rows.shape[:-1], n, dtype=dtypes[2])
        return [mean, m2, count]
    if len(dtypes) != 1:
        raise InterpreterError(f"a {kind} reduction has one result, got {len(dtypes)}")
    dt = dtypes[0]
    if kind == "sum":
        out = rows.sum(-1)
    elif kind == "prod":
        out = rows.prod(-1)
    elif kind == "any":
        out = rows.bool().any(-1) if rows.dtype != torch.bool else rows.any(-1)
    elif kind in ("max", "min", "argmax", "argmin"):
        if n == 0:
            if kind.startswith("arg"):
                return [torch.zeros(rows.shape[:-1], dtype=torch.int64)]
            return [torch.full(rows.shape[:-1], _identity(kind, rows.dtype), dtype=rows.dtype)]
        out = {
            "max": torch.amax,
            "min": torch.amin,
            "argmax": torch.argmax,
            "argmin": torch.argmin,
        }[kind](rows, -1)
    else:
        raise InterpreterError(f"unknown reduction kind '{kind}'")
    return [out.to(dt)]


def _identity(kind: str, dtype: torch.dtype) -> Scalar:
    if dtype == torch.bool:
        return kind == "min"
    if dtype.is_floating_point:
        return -math.inf if kind == "max" else math.inf
    info = torch.iinfo(dtype)
    return info.min if kind == "max" else info.max


class _BodyEval:
    """One evaluation of a loop body over the node's index grid."""

    def __init__(self, run: _Run, node: LoopNode, env: dict[Any, Any]) -> None:
        self.run_ = run
        self.node = node
        self.env = env
        self.vals: dict[BodyValue, torch.Tensor] = {}
        self.bounds: dict[sympy.Symbol, tuple[int, BodyOp]] = {}

    def run(self, body: Body) -> torch.Tensor | Literal:
        for op in body.ops:
            try:
                self.vals[op.result] = self.op(op)
            except FirError as e:
                # the body op here; the node by _Run.run_node
                _add_context(e, _body_op_name(op), op.loc)
                raise
        r = body.result
        return self.operand(r) if isinstance(r, BodyValue) else r

    def operand(self, o: BodyValue | Literal) -> torch.Tensor | Literal:
        if isinstance(o, Literal):
            return o
        try:
            return self.vals[o]
        except KeyError:
            raise InterpreterError(
                f"%{o.name} is used before it is defined in this loop body"
            ) from None

    def op(self, op: BodyOp) -> torch.Tensor:
        code = op.opcode
        if code == "load":
            return self.load(op)
        if code == "indirect":
            src = self.operand(op.operands[0])
            if isinstance(src, Literal):
                src = literal_tensor(src.value, torch.int64)
            if src.is_floating_point():
                raise InterpreterError(f"an indirect index must be an integer, got {src.dtype}")
            value = src.to(torch.int64)
            sym = symbolic.indirect_symbol("%" + op.result.name)
            self.env[sym] = value
            self.bounds[sym] = (self.run_.dim(op.bound), op)
            return value
        if code == "index":
            self.check_indirect(op.index, None)
            v = _as_long(eval_index(op.index, self.env))
            return v.to(op.dtype.to_torch()) if op.dtype is not None else v
        if code == "constant":
            lit = (
                op.operands[0].value
                if op.operands and isinstance(op.operands[0], Literal)
                else None
            )
            dtype = op.dtype.to_torch() if op.dtype else _default_dtype(lit)
            return literal_tensor(lit, dtype)
        if code == "cast":
            if op.dtype is None:
                raise InterpreterError("'cast' needs a result dtype")
            x = self.operand(op.operands[0])
            dtype = op.dtype.to_torch()
            return cast_literal(x.value, dtype) if isinstance(x, Literal) else cast_tensor(x, dtype)
        args = [self.operand(o) for o in op.operands]
        if code in ("floordiv", "mod") and len(args) == 2 and _is_int_tensor(args[0]):
            divisor = args[1].value if isinstance(args[1], Literal) else args[1]
            name = _operand_name(op.operands[1])
            _check_int_divisor(divisor, name, lambda pos: self.where(pos))
        fallback = op.result.dtype or op.dtype
        return apply_elementwise(code, args, fallback.to_torch() if fallback else None)

    def check_indirect(
        self, expr: Any, mask: torch.Tensor | None, buf: Value | None = None
    ) -> None:
        """Raise if an indirect index used by ``expr`` (an index of ``buf``, if a load) is out of
        its bound where ``mask`` holds."""
        for sym in symbolic.free_symbols(expr):
            if not symbolic.is_indirect(sym):
                continue
            if sym not in self.bounds:
                raise InterpreterError(
                    f"{sym.name} in {_expr_str(expr)} is not an indirect index defined above"
                )
            bound, _ = self.bounds[sym]
            value = self.env[sym]
            bad = (value < 0) | (value >= bound)
            if mask is not None:
                bad = bad & mask
            if bool(bad.any()):
                pos = self.first(bad)
                bad_value = int(value.expand(bad.shape)[pos]) if value.dim() else int(value)
                of = f" for %{buf.name} ({buf.type})" if buf is not None else ""
                raise InterpreterIndexError(
                    f"indirect index {sym.name} = {bad_value} is out of bounds [0, {bound}){of} "
                    f"at {self.where(pos)}"
                )

    def check_tile(
        self, op: BodyOp, idx: torch.Tensor, mask: torch.Tensor | None, tile: _Tile
    ) -> None:
        """In a kernel run tiled: the points of this tile may only read elements of a kernel
        node's result that were computed for this tile."""
        buf = op.buffer
        assert buf is not None
        written = tile.written.get(id(buf))
        grid = [self.run_.dim(s) for _, s in self.node.ranges + self.node.reduction_ranges]
        pw = len(self.node.ranges)
        inside = tile.inside.reshape(
            [self.run_.dim(s) for _, s in self.node.ranges] + [1] * (len(grid) - pw)
        )
        idx = idx.expand(grid) if idx.dim() else idx.expand(grid) if grid else idx
        checked = inside.expand(grid) if grid else inside.reshape(())
        if mask is not None:
            checked = checked & mask.expand(grid) if grid else checked & mask
        if written is None:
            ok = torch.zeros_like(checked)
        else:
            ok = (
                written[idx.clamp(0, max(written.numel() - 1, 0))]
                if written.numel()
                else torch.zeros_like(checked)
            )
        bad = checked & ~ok
        if bool(bad.any()):
            pos = self.first(bad)
            element = int(idx[pos]) if idx.dim() else int(idx)
            raise InterpreterError(
                f"in kernel @{tile.kernel.name}, reads element {element} of %{buf.name} at "
                f"{self.where(pos)}, which the kernel computes for other output elements: a "
                "fused kernel cannot read it there"
            )

    def first(self, bad: torch.Tensor) -> tuple[int, ...]:
        return tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()

    def where(self, pos: tuple[int, ...]) -> str:
        names = [v.name for v, _ in self.node.ranges + self.node.reduction_ranges]
        if not pos:
            return "every iteration"
        return "(" + ", ".join(f"{n}={i}" for n, i in zip(names, pos)) + ")"

    def load(self, op: BodyOp) -> torch.Tensor:
        buf = op.buffer
        if buf is None or op.index is None:
            raise InterpreterError("'load' needs a buffer and an index")
        flat = self.run_.storage(buf)
        mask = None
        if op.mask is not None:
            m = self.operand(op.mask)
            mask = m if isinstance(m, torch.Tensor) else literal_tensor(m.value, torch.bool)
            if mask.dtype != torch.bool:
                mask = mask != 0
        self.check_indirect(op.index, mask, buf)
        idx = _as_long(eval_index(op.index, self.env))
        if mask is not None:
            idx, mask = torch.broadcast_tensors(idx, mask)
        size = flat.numel()
        bad = (idx < 0) | (idx >= size)
        if mask is not None:
            bad = bad & mask
        if bool(bad.any()):
            pos = self.first(bad)
            raise InterpreterIndexError(
                f"reads element {int(idx[pos])}, outside its storage of {size} element(s) "
                f"(%{buf.name}: {buf.type}), at {self.where(pos)}"
            )
        tile = self.run_.tile
        if tile is not None and id(buf) in tile.produced:
            self.check_tile(op, idx, mask, tile)
        if mask is None:
            return flat[idx]
        if size == 0:
            flat = torch.zeros(1, dtype=flat.dtype)
        other = op.other.value if isinstance(op.other, Literal) else op.other
        other_t = literal_tensor(0 if other is None else other, flat.dtype)
        return torch.where(mask, flat[torch.where(mask, idx, 0)], other_t)


class _Tile:
    """What a kernel run tiled knows while one of its nodes runs on one tile."""

    def __init__(
        self,
        kernel: Any,
        produced: set[int],
        written: dict[int, torch.Tensor],
        inside: torch.Tensor,
    ) -> None:
        self.kernel = kernel
        self.produced = produced  # ids of the kernel nodes' results
        self.written = written  # id(result) -> storage elements computed for this tile
        self.inside = inside  # this node's output elements that belong to the tile


# ---------------------------------------------------------------------------------------------
# Tensor-level ops other than elementwise


class _Call:
    """The operands, attributes and declared results of one tensor-level op."""

    def __init__(self, run: _Run, node: TensorOp, spec: Any, args: list[Any]) -> None:
        self.run = run
        self.node = node
        self.spec = spec
        self.args = args

    def t(self, i: int) -> torch.Tensor:
        if i >= len(self.args) or not isinstance(self.args[i], torch.Tensor):
            raise InterpreterError(f"operand #{i} of '{self.node.op}' must be a tensor")
        return self.args[i]

    def opt(self, i: int) -> torch.Tensor | None:
        if i >= len(self.args):
            return None
        a = self.args[i]
        if isinstance(a, Literal):
            if a.value is None:
                return None
            raise InterpreterError(f"operand #{i} of '{self.node.op}' must be a tensor or none")
        return a

    def attr(self, name: str) -> Any:
        return self.run.resolve(self.spec.attr(self.node.attrs, name))

    def describe(self, i: int) -> str:
        """Operand ``i`` for a message: ``%x (f32[4, 3])``."""
        o = self.node.operands[i] if i < len(self.node.operands) else None
        return f"%{o.name} ({o.type})" if isinstance(o, Value) else f"operand #{i}"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.run.shape(self.node.results[0].type)

    @property
    def dtype(self) -> torch.dtype:
        return self.node.results[0].type.dtype.to_torch()

    def dims(self, rank: int) -> list[int]:
        dims = self.attr("dims")
        if dims is None:
            return list(range(rank))
        return [d % rank if rank else 0 for d in dims]


_TENSOR_OPS: dict[str, Callable[[_Call], Any]] = {}


def _op(*names: str) -> Callable[[Callable[[_Call], Any]], Callable[[_Call], Any]]:
    def deco(fn: Callable[[_Call], Any]) -> Callable[[_Call], Any]:
        for n in names:
            _TENSOR_OPS[n] = fn
        return fn

    return deco


def _check_indices(idx: torch.Tensor, size: int, what: str, of: str) -> None:
    """Raise if an element of ``idx`` (``what``: an index, a target) is outside [0, size) of
    ``of``: ``index 7 is out of bounds [0, 4) for dimension 0 of %x (f32[4])``."""
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= size):
        bad = idx[(idx < 0) | (idx >= size)][0]
        raise InterpreterIndexError(f"{what} {int(bad)} is out of bounds [0, {size}) for {of}")


# -- activations and composites


@_op("clamp")
def _(c: _Call) -> torch.Tensor:
    lo, hi = c.attr("min"), c.attr("max")
    x = c.t(0)
    if lo is None and hi is None:
        return x.clone()
    if not x.is_floating_point() and x.dtype != torch.bool:
        # float bounds would make torch compute in f32 and round large integers
        info = torch.iinfo(x.dtype)

        def bound(v: float | None, rounding: Callable[[float], int]) -> int | None:
            if v is None or math.isnan(v):
                return None
            if math.isinf(v):
                return info.max if v > 0 else info.min
            return min(max(rounding(v), info.min), info.max)

        lo, hi = bound(lo, math.ceil), bound(hi, math.floor)
        if lo is None and hi is None:  # only nan bounds: nothing to clamp an integer to
            return x.clone()
    return torch.clamp(x, lo, hi)


@_op("gelu")
def _(c: _Call) -> torch.Tensor:
    return F.gelu(c.t(0), approximate=c.attr("approximate"))


@_op("silu")
def _(c: _Call) -> torch.Tensor:
    return F.silu(c.t(0))


@_op("mish")
def _(c: _Call) -> torch.Tensor:
    return F.mish(c.t(0))


@_op("softplus")
def _(c: _Call) -> torch.Tensor:
    return F.softplus(c.t(0), beta=c.attr("beta"), threshold=c.attr("threshold"))


@_op("hardswish")
def _(c: _Call) -> torch.Tensor:
    return F.hardswish(c.t(0))


@_op("hardsigmoid")
def _(c: _Call) -> torch.Tensor:
    return F.hardsigmoid(c.t(0))


@_op("leaky_relu")
def _(c: _Call) -> torch.Tensor:
    return F.leaky_relu(c.t(0), c.attr("negative_slope"))


@_op("elu")
def _(c: _Call) -> torch.Tensor:
    return F.elu(c.t(0), alpha=c.attr("alpha"))


@_op("hardtanh")
def _(c: _Call) -> torch.Tensor:
    return F.hardtanh(c.t(0), c.attr("min_val"), c.attr("max_val"))


@_op("dropout")
def _(c: _Call) -> torch.Tensor:
    if not c.attr("train"):
        return c.t(0)
    return F.dropout(c.t(0), c.attr("p"), training=True)


@_op("softmax")
def _(c: _Call) -> torch.Tensor:
    return torch.softmax(c.t(0), c.attr("dim"))


@_op("log_softmax")
def _(c: _Call) -> torch.Tensor:
    return torch.log_softmax(c.t(0), c.attr("dim"))


@_op("layer_norm")
def _(c: _Call) -> torch.Tensor:
    return F.layer_norm(c.t(0), c.attr("normalized_shape"), c.opt(1), c.opt(2), c.attr("eps"))


@_op("rms_norm")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    eps = c.attr("eps")
    if eps is None:
        # like torch: half types normalise with f32's machine epsilon
        eps = torch.finfo(torch.promote_types(x.dtype, torch.float32)).eps
    return F.rms_norm(x, c.attr("normalized_shape"), c.opt(1), eps)


@_op("batch_norm")
def _(c: _Call) -> torch.Tensor:
    return F.batch_norm(
        c.t(0), c.t(3), c.t(4), c.opt(1), c.opt(2), training=False, eps=c.attr("eps")
    )


@_op("group_norm")
def _(c: _Call) -> torch.Tensor:
    return F.group_norm(c.t(0), c.attr("num_groups"), c.opt(1), c.opt(2), c.attr("eps"))


def _check_targets(c: _Call) -> None:
    x, t = c.t(0), c.t(1)
    ignore = c.attr("ignore_index")
    live = t[t != ignore]
    _check_indices(live, x.shape[-1], "target", f"the classes of {c.describe(0)}")


@_op("cross_entropy")
def _(c: _Call) -> torch.Tensor:
    _check_targets(c)
    return F.cross_entropy(
        c.t(0),
        c.t(1).long(),
        weight=c.opt(2),
        ignore_index=c.attr("ignore_index"),
        reduction=c.attr("reduction"),
        label_smoothing=c.attr("label_smoothing"),
    )


@_op("nll_loss")
def _(c: _Call) -> torch.Tensor:
    _check_targets(c)
    return F.nll_loss(
        c.t(0),
        c.t(1).long(),
        weight=c.opt(2),
        ignore_index=c.attr("ignore_index"),
        reduction=c.attr("reduction"),
    )


@_op("matmul")
def _(c: _Call) -> torch.Tensor:
    return torch.matmul(c.t(0), c.t(1))


@_op("addmm")
def _(c: _Call) -> torch.Tensor:
    return torch.addmm(c.t(0), c.t(1), c.t(2), beta=c.attr("beta"), alpha=c.attr("alpha"))


@_op("linear")
def _(c: _Call) -> torch.Tensor:
    return F.linear(c.t(0), c.t(1), c.opt(2))


@_op("masked_fill")
def _(c: _Call) -> torch.Tensor:
    x, m, v = c.t(0), c.t(1), c.args[2]
    # the verifier rejects a none fill value (ops.literal_fits)
    return x.masked_fill(m, cast("bool | int | float", v.value) if isinstance(v, Literal) else v)


@_op("embedding")
def _(c: _Call) -> torch.Tensor:
    w, idx = c.t(0), c.t(1)
    _check_indices(idx, w.shape[0], "index", f"the rows of {c.describe(0)}")
    return F.embedding(idx, w)


@_op("gather")
def _(c: _Call) -> torch.Tensor:
    x, idx = c.t(0), c.t(1)
    dim = c.attr("dim") % max(x.dim(), 1)
    _check_indices(idx, x.shape[dim] if x.dim() else 1, "index", _dim_of(c, dim))
    return torch.gather(x, dim, idx.to(torch.int64))


def _dim_of(c: _Call, dim: int) -> str:
    return f"dimension {dim} of {c.describe(0)}"


@_op("index_select")
def _(c: _Call) -> torch.Tensor:
    x, idx = c.t(0), c.t(1)
    dim = c.attr("dim") % max(x.dim(), 1)
    _check_indices(idx, x.shape[dim] if x.dim() else 1, "index", _dim_of(c, dim))
    return torch.index_select(x, dim, idx)


# -- reductions


def _reduce(x: torch.Tensor, dims: list[int], keepdim: bool, fn: Callable[..., Any]) -> Any:
    """Reduce over ``dims`` (an empty list reduces nothing, unlike torch's ``dim=[]``)."""
    added = not dims
    if added:
        x = x.unsqueeze(-1)
        dims = [x.dim() - 1]
    out = fn(x, tuple(dims))  # keepdim=True

    def finish(o: torch.Tensor) -> torch.Tensor:
        if added:
            return o.squeeze(-1)
        return o if keepdim else o.squeeze(tuple(dims))

    return tuple(finish(o) for o in out) if isinstance(out, tuple) else finish(out)


def _prod(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    for d in dims:
        x = torch.prod(x, d, keepdim=True)
    return x


_REDUCERS: dict[str, Callable[[_Call, torch.Tensor, tuple[int, ...]], Any]] = {
    "sum": lambda c, x, d: torch.sum(x, d, keepdim=True),
    "prod": lambda c, x, d: _prod(x, d),
    "max": lambda c, x, d: torch.amax(x, d, keepdim=True),
    "min": lambda c, x, d: torch.amin(x, d, keepdim=True),
    "any": lambda c, x, d: torch.any(x, d, keepdim=True),
    "all": lambda c, x, d: torch.all(x, d, keepdim=True),
    "mean": lambda c, x, d: torch.mean(x, d, keepdim=True),
    "logsumexp": lambda c, x, d: torch.logsumexp(x, d, keepdim=True),
    "var": lambda c, x, d: torch.var(x, d, correction=c.attr("correction"), keepdim=True),
    "std": lambda c, x, d: torch.std(x, d, correction=c.attr("correction"), keepdim=True),
    "var_mean": lambda c, x, d: torch.var_mean(x, d, correction=c.attr("correction"), keepdim=True),
    "welford": lambda c, x, d: _welford(x, d),
}


def _welford(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """Mean, sum of squared deviations and count over ``dims`` (kept as size 1).

    Half types are computed in f32 and rounded once, as a one-pass kernel would accumulate;
    no elements give mean 0, m2 0, count 0 like the loop-level ``reduction welford``.
    """
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    n = math.prod(xf.shape[d] for d in dims)
    if n == 0:
        zeros = torch.zeros_like(torch.sum(xf, dims, keepdim=True))
        mean, m2 = zeros, zeros
    else:
        mean = torch.mean(xf, dims, keepdim=True)
        m2 = torch.sum((xf - mean) ** 2, dims, keepdim=True)
    count = torch.full_like(mean, n)
    return tuple(t.to(x.dtype) for t in (mean, m2, count))


def _reduction_op(c: _Call) -> Any:
    x = c.t(0)
    fn = _REDUCERS[c.node.op]
    return _reduce(x, c.dims(x.dim()), c.attr("keepdim"), lambda t, d: fn(c, t, d))


for _name in _REDUCERS:
    _TENSOR_OPS[_name] = _reduction_op


@_op("argmax", "argmin")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    fn = torch.argmax if c.node.op == "argmax" else torch.argmin
    dim = c.attr("dim")
    if dim is None:
        return fn(x).reshape(c.shape)
    return fn(x, dim, keepdim=c.attr("keepdim"))


# -- views and data movement


@_op("reshape", "squeeze", "unsqueeze")
def _(c: _Call) -> torch.Tensor:
    return c.t(0).reshape(c.shape)


@_op("permute")
def _(c: _Call) -> torch.Tensor:
    return c.t(0).permute(c.attr("dims"))


@_op("transpose")
def _(c: _Call) -> torch.Tensor:
    return c.t(0).transpose(c.attr("dim0"), c.attr("dim1"))


@_op("expand")
def _(c: _Call) -> torch.Tensor:
    return c.t(0).expand(c.shape)


@_op("slice")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    dim = c.attr("dim") % x.dim()
    step = c.attr("step")
    if step <= 0:
        raise InterpreterError(f"slice step must be positive, got {step}")
    index = [slice(None)] * x.dim()
    index[dim] = slice(c.attr("start"), c.attr("end"), step)
    return x[tuple(index)]


@_op("select")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    dim = c.attr("dim") % x.dim()
    index = c.attr("index")
    if not -x.shape[dim] <= index < x.shape[dim]:
        raise InterpreterError(
            f"select index {index} is out of range for dimension {dim} of size {x.shape[dim]}"
        )
    return x.select(dim, index)


@_op("as_strided")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    flat = x.contiguous().reshape(-1)
    shape = c.shape
    strides, offset = c.attr("strides"), c.attr("offset")
    if len(strides) != len(shape):
        raise InterpreterError(f"'strides' has {len(strides)} entries for rank {len(shape)}")
    idx = torch.full(shape, offset, dtype=torch.int64)
    for k, (n, s) in enumerate(zip(shape, strides)):
        view = [1] * len(shape)
        view[k] = n
        idx = idx + torch.arange(n, dtype=torch.int64).view(view) * s
    _check_indices(idx, flat.numel(), "storage index", c.describe(0))
    return flat[idx]


@_op("cat")
def _(c: _Call) -> torch.Tensor:
    xs = [c.t(i) for i in range(len(c.args))]
    return torch.cat(xs, c.attr("dim"))


@_op("pad")
def _(c: _Call) -> torch.Tensor:
    x = c.t(0)
    value = c.attr("value")
    if isinstance(value, Literal):
        value = value.value
    if x.dtype == torch.bool:
        value = bool(value)
    elif not x.is_floating_point():
        if float(value) != int(value):
            raise InterpreterError(f"pad value {value} does not fit {x.dtype}")
        value = int(value)
    return F.pad(x, c.attr("pad"), mode="constant", value=value)


# -- creation


@_op("full")
def _(c: _Call) -> torch.Tensor:
    v = c.args[0]
    if not isinstance(v, Literal) or v.value is None:
        raise InterpreterError("'full' needs a scalar literal")
    return torch.full(c.shape, v.value, dtype=c.dtype)


@_op("arange")
def _(c: _Call) -> torch.Tensor:
    start, end, step = c.attr("start"), c.attr("end"), c.attr("step")
    if step == 0:
        raise InterpreterError("'arange' step must not be zero")
    return torch.arange(start, end, step, dtype=c.dtype)


@_op("constant")
def _(c: _Call) -> torch.Tensor:
    return torch.tensor(c.attr("value"), dtype=c.dtype).reshape(c.shape)


def _unimplemented() -> list[str]:
    return sorted(n for n, s in OPS.items() if not s.scalar and n not in _TENSOR_OPS)


assert not _unimplemented(), f"interpreter has no implementation for {_unimplemented()}"
