"""aten-level ``torch.fx.GraphModule`` → tensor-level FIR graph.

Each FX node is mapped by the converter table in :mod:`fir.frontend.aten`. A converter emits
FIR ops through an :class:`~fir.frontend.emitter.Emitter`, which checks every op against its
typing rule as it goes; if the converter has no rule for the node, refuses its arguments (raises
:class:`~fir.frontend.emitter.Fallback`), or produces ops that do not type, everything it emitted
is dropped and the node becomes an extern call of the aten op itself. So an import never fails
because of one op; it fails only for what FIR cannot express at all (an output that is not a
tensor, a data-dependent size its inputs do not carry), with an
:class:`~fir.frontend.emitter.UnsupportedError` naming the op and the reason. (``torch.compile``
first cuts a graph at the ops that make data-dependent sizes, :mod:`fir.frontend.segments`: each
part takes the sizes it uses bound, as inputs' dimensions or int inputs.)

Ops with effects import as extern calls that keep their program order (an ``effect`` attribute,
see :mod:`fir.frontend.aten.collectives`): functional collectives and their waits, assertions
(``aten._assert_async``, ``aten._assert_scalar``, ``aten._functional_assert_async``; dropped
when their condition is known at import), and the ops AOTAutograd wraps in ``with_effects``
(unwrapped; AOTAutograd's effect token, None at run time, becomes an empty tensor made in the
graph, threaded through the calls, and the call drops that input).
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.fx
from fir.ir.dtypes import DType
from fir.ir.graph import ExternNode, Graph, Literal, Module, TensorOp, Value
from fir.ir.ops import OPS
from fir.ir.types import TensorType
from fir.ir.verifier import layout_overlaps
from fir.passes.lowering.view_indexing import is_writable

from .aten import CONVERTERS
from .aten.collectives import TOKEN_TYPE, effect_extern
from .emitter import (
    Emitter,
    Fallback,
    UnsupportedError,
    extern_argument,
    meta_value,
    size_value,
    tensor_type,
)


@dataclass
class ImportReport:
    """What the importer did: aten ops mapped to FIR ops, and ops that fell back to PyTorch."""

    imported: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)
    # positions of graph inputs the compiled call drops: sizes (SymInts under dynamic shapes,
    # read from the tensors' shapes), AOTAutograd's effect tokens (None at run time), and
    # objects nothing reads (a device mesh's process group under DTensor)
    dropped_inputs: list[int] = field(default_factory=list)
    # dropped inputs that are size symbols (position -> the symbol's name): the compiled call
    # passes their values to the program, which binds those sizes from them (a size that no
    # tensor input has as a dimension: a split size, a storage offset, ``s0`` where the
    # tensors have only ``s0 - 1``)
    size_inputs: dict[int, str] = field(default_factory=dict)
    # outputs that are no tensors (position among the graph's outputs -> what it is): an int
    # argument returned as it is (``("input", k)``), a constant (``("value", v)``), or a size
    # computed from the sizes (``("size", expr)``); the compiled call puts them back
    scalar_outputs: dict[int, tuple[str, Any]] = field(default_factory=dict)
    # where the value of each of PyTorch's size symbols is in a call's inputs: (position, None)
    # for an int input, (position, dim) for a dimension of a tensor input
    symbol_sources: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    # the 0-d tensor arguments that follow the constants: numbers the graph computes from its
    # int inputs and uses as values (``x * i``, ``x + round(i / 2, 1)``), each PyTorch's
    # expression of them and its dtype; the compiled call evaluates them (any sign is fine)
    scalar_inputs: list[tuple[Any, DType]] = field(default_factory=list)
    # size parameters computed from the inputs at each call (FIR name -> PyTorch's expression):
    # sizes FIR's index forms cannot write (``x[:round(i / 2 + 1)]``)
    computed_sizes: dict[str, Any] = field(default_factory=dict)
    # positions of 0-d CPU tensor inputs of a graph that runs on a GPU (PyTorch's scalars,
    # such as a float Dynamo passes as a tensor): the compiled call moves them to the program's
    # device, where eager reads them as numbers
    moved_inputs: list[int] = field(default_factory=list)

    def merge(self, other: ImportReport) -> None:
        self.imported.update(other.imported)
        self.fallbacks.update(other.fallbacks)
        for k, v in other.reasons.items():
            self.reasons.setdefault(k, v)

    def summary(self) -> str:
        lines = [f"imported ops: {sum(self.imported.values())} ({len(self.imported)} kinds)"]
        for name, count in sorted(self.imported.items()):
            lines.append(f"  {name} x{count}")
        lines.append(f"fallback ops (run by PyTorch): {sum(self.fallbacks.values())}")
        for name, count in sorted(self.fallbacks.items()):
            lines.append(f"  {name} x{count}: {self.reasons.get(name, '')}")
        return "\n".join(lines)


ASSERTIONS = frozenset(
    {
        "aten._assert_async.default",
        "aten._assert_async.msg",
        "aten._assert_scalar.default",
        "aten._functional_assert_async.msg",
    }
)


# aten ops that stay library calls by design, not for lack of a lowering: fused attention
# kernels (Inductor calls them too). Their extern calls are not fallbacks (``fallback="never"``
# accepts them); the ops that feed and follow them fuse as usual.
LIBRARY_CALLS = frozenset(
    {
        "aten._scaled_dot_product_flash_attention.default",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        "aten._scaled_dot_product_efficient_attention.default",
        "aten._scaled_dot_product_cudnn_attention.default",
        "aten._efficient_attention_forward.default",
        "aten._flash_attention_forward.default",
    }
)


CUDNN_ATTENTION = "aten._scaled_dot_product_cudnn_attention.default"


def target_name(target: Any) -> str:
    """``torch.ops.aten.add.Tensor`` → ``aten.add.Tensor``."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return f"{target}.default"
    return getattr(target, "__qualname__", None) or str(target)


# ---------------------------------------------------------------------------------------------


class Importer:
    def __init__(self, name: str = "main", any_layout: frozenset[int] = frozenset()) -> None:
        self.graph = Graph(name=_sanitize(name))
        # the positions of the graph's outputs that may keep any layout (a training forward's
        # saved activations: see :func:`fir.frontend.dynamo.saved_activations`)
        self.any_layout = any_layout
        self.values: dict[torch.fx.Node, Any] = {}
        self.names: set[str] = set()
        self.report = ImportReport()
        self.constants: list[torch.Tensor] = []
        self.placeholders: list[torch.fx.Node] = []
        # (query, output) of each cuDNN attention call: :meth:`_follow_query_layout`
        self.attention_queries: list[tuple[Any, Value]] = []
        # size symbols known when the graph runs: plain dimensions of tensor inputs, size inputs
        self.bindable: set[Any] = set()
        # the 0-d arguments of symbolic numbers, by PyTorch's expression and dtype
        self.scalar_args: dict[tuple[Any, DType], Value] = {}
        self.unbacked_origin: dict[str, str] = {}  # data-dependent symbol -> the op making it
        # data-dependent symbols the graph's inputs carry whole: sizes it binds (``_run``)
        self.bound_unbacked: frozenset[str] = frozenset()
        # inputs the backward gets in strides other than its trace's (:func:`_restrided`)
        self.restrided: dict[torch.fx.Node, torch.Tensor] = {}
        # the device the program runs on (:func:`graph_device`); a node that makes a tensor
        # elsewhere falls back (Emitter.check_device)
        self.device: torch.device | None = None

    def value_name(self, fx_name: str) -> str:
        return _sanitize(fx_name)

    def unique(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def run(self, gm: torch.fx.GraphModule, example_inputs: list[Any] | None = None) -> Graph:
        from .sizes import BOUND_UNBACKED, COMPUTED_SIZES

        token = COMPUTED_SIZES.set(self.computed_size)
        self.bound_unbacked = _bound_unbacked(gm, example_inputs)
        bound = BOUND_UNBACKED.set(self.bound_unbacked)
        try:
            return self._run(gm, example_inputs)
        finally:
            BOUND_UNBACKED.reset(bound)
            COMPUTED_SIZES.reset(token)

    def _run(self, gm: torch.fx.GraphModule, example_inputs: list[Any] | None) -> Graph:
        placeholders = self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.device = graph_device(gm, example_inputs)
        for n in gm.graph.nodes:  # the ops that make data-dependent sizes (``u0``)
            for sym in n.meta.get("unbacked_bindings") or {}:
                self.unbacked_origin.setdefault(str(sym), target_name(n.target))
        sizes: list[tuple[int, torch.fx.Node]] = []
        for k, n in enumerate(placeholders):
            val = n.meta.get("val", n.meta.get("example_value"))
            if val is None and example_inputs is not None:
                val = example_inputs[k]
            example = example_inputs[k] if example_inputs and k < len(example_inputs) else None
            if isinstance(example, torch.Tensor) and _restrided(val, example) is example:
                val = self.restrided[n] = example
            if isinstance(val, torch.SymInt):
                # under dynamic shapes Dynamo passes each size symbol (and each int argument) as
                # an input as well: the program takes tensors, so the call drops these inputs
                # and passes the values of those that are one symbol as sizes to bind
                self.values[n] = val
                self.report.dropped_inputs.append(k)
                sizes.append((k, n))
                continue
            if _is_effect_token(n):
                # AOTAutograd passes None for it and drops the returned one: an empty tensor
                # made here threads through the effectful calls (whose order is their chain's)
                self.values[n] = self.token(n)
                self.report.dropped_inputs.append(k)
                continue
            if not isinstance(val, torch.Tensor) and not n.users:
                self.report.dropped_inputs.append(k)  # nothing reads it
                continue
            if not isinstance(val, torch.Tensor):
                raise UnsupportedError(
                    f"graph input {n.name} is a {type(val).__name__}; FIR imports tensor inputs only"
                )
            if val.dim() == 0 and val.device.type == "cpu" and self.device.type != "cpu":
                self.report.moved_inputs.append(k)
            v = Value(self.unique(self.value_name(n.name)), tensor_type(val, keep_layout=True))
            self.graph.args.append(v)
            self.values[n] = v
        self._symbol_sources()
        self._check_size_inputs(sizes)
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                self.outputs(n)
            elif n.op == "get_attr":
                self.get_attr(gm, n)
            elif n.op == "call_function":
                try:
                    self.call(n, CONVERTERS)
                except UnsupportedError as e:
                    op = target_name(n.target)
                    if op in e.message:
                        raise
                    raise UnsupportedError(f"{op}: {e.message}") from None
            else:
                raise UnsupportedError(
                    f"FX node {n.name} ({n.op}) is not supported; import an aten-level graph"
                )
        # after the constants: the call passes the inputs, the constants, then these
        self.graph.args.extend(self.scalar_args.values())
        return self.graph

    def _symbol_sources(self) -> None:
        """Where each of PyTorch's plain size symbols is found in a call's inputs."""
        sources = self.report.symbol_sources
        hints: dict[str, int] = {}
        for k, n in enumerate(self.placeholders):
            val = n.meta.get("val", n.meta.get("example_value"))
            sizes: list[tuple[int | None, Any]] = (
                [(None, val)] if isinstance(val, torch.SymInt) else []
            )
            if isinstance(val, torch.Tensor):
                sizes = [(d, size) for d, size in enumerate(val.shape)]
            for d, size in sizes:
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                if getattr(expr, "is_Symbol", False):
                    sources.setdefault(expr.name, (k, d))
                    hint = getattr(size.node, "hint", None)
                    if isinstance(hint, int):
                        hints.setdefault(expr.name, hint)
        if hints:
            # the sizes this graph was traced at: what a performance decision with symbolic
            # sizes may assume is typical (``pad-matmul``); never what correctness rests on
            self.graph.attrs["size_hints"] = [[name, hints[name]] for name in sorted(hints)]

    def data_dependent(self, symbol: str, what: str = "size") -> str:
        """Why a size (or number) that depends on the data stops the import, naming the op
        that produces it."""
        origin = self.unbacked_origin.get(symbol)
        source = f" (from {origin})" if origin else ""
        return (
            f"data-dependent {what} {symbol}{source}: FIR compiles sizes known before the call "
            "(the inputs' shapes and int arguments); PyTorch runs this graph"
        )

    def computed_size(self, expr: Any) -> Any:
        """A size parameter ``dN`` whose value the compiled call computes from its inputs
        (``report.computed_sizes``); None where the inputs do not determine ``expr``."""
        from fir.ir.symbolic import size_symbol

        from .sizes import UnsupportedSize

        unknown = sorted(
            s.name for s in expr.free_symbols if s.name not in self.report.symbol_sources
        )
        if unknown:
            raise UnsupportedSize(self.data_dependent(unknown[0]))
        for name, known in self.report.computed_sizes.items():
            if known == expr:
                return size_symbol(name)
        name = f"d{len(self.report.computed_sizes)}"
        sym = size_symbol(name)
        self.report.computed_sizes[name] = expr
        self.graph.size_params.append(sym)
        self.bindable.add(sym)
        return sym

    def scalar_argument(self, x: Any) -> Value | Literal:
        """A symbolic number used as a value (an operand of a tensor op): a 0-d argument the
        compiled call computes from the inputs (``report.scalar_inputs``), or a literal."""
        expr = x.node.expr
        floating = isinstance(x, torch.SymFloat)
        if getattr(expr, "is_number", False):
            return Literal(float(expr) if floating else int(expr))
        unknown = sorted(
            s.name for s in expr.free_symbols if s.name not in self.report.symbol_sources
        )
        if unknown:
            raise Fallback(self.data_dependent(unknown[0], "number"))
        dtype = DType.F64 if floating else DType.I64
        v = self.scalar_args.get((expr, dtype))
        if v is None:
            v = Value(self.unique(f"scalar{len(self.scalar_args)}"), TensorType(dtype, ()))
            self.scalar_args[(expr, dtype)] = v
            self.report.scalar_inputs.append((expr, dtype))
        return v

    def token(self, n: torch.fx.Node) -> Value:
        """An effect token: an empty tensor made in the graph (AOTAutograd passes None)."""
        em = Emitter(self, n)
        out = em.op("full", [Literal(0.0)], TOKEN_TYPE, hint="token")
        self.graph.nodes.extend(em.nodes)
        return out

    def _check_size_inputs(self, sizes: list[tuple[int, torch.fx.Node]]) -> None:
        """Size inputs that are one symbol bind that size when the program runs (their
        position goes into ``report.size_inputs``); every other size input must be computed
        from sizes bound so or by the tensor inputs' shapes."""
        import sympy

        known: set[Any] = set()  # sizes the inputs' shapes bind
        in_types: set[Any] = set()  # sizes the argument types name
        for a in self.graph.args:
            for d in a.type.shape:
                if isinstance(d, sympy.Symbol):
                    known.add(d)
                    self.bindable.add(d)
            for d in (*a.type.shape, *a.type.strides, a.type.offset):
                in_types |= getattr(d, "free_symbols", set())
        for k, n in sizes:
            size = size_value(self.values[n])
            if not isinstance(size, sympy.Symbol) or size.name in self.report.size_inputs.values():
                continue
            low = _lower_bound(self.values[n])
            unbacked = size.name in self.bound_unbacked  # a size, though it may be 0
            if size not in known and (low is None or low < 1) and not unbacked:
                # FIR's size symbols are positive: an int argument that may be zero or negative
                # (``x * i`` with any int ``i``) is no size but a number, which the program
                # takes as a 0-d argument where it uses it (``scalar_argument``)
                continue
            self.report.size_inputs[k] = size.name
            self.bindable.add(size)
            if size not in in_types:  # a size parameter of the function (``sizes (s1)``)
                self.graph.size_params.append(size)
            known.add(size)
        for _, n in sizes:
            try:
                size = size_value(self.values[n])
            except UnsupportedError:
                continue  # an int input of any sign: no size (see above)
            if isinstance(size, sympy.Symbol) and size not in known:
                continue
            missing: set[Any] = getattr(size, "free_symbols", set()) - known
            if missing:
                raise UnsupportedError(
                    f"size input {n.name} ({size}) is not computed from the sizes of the inputs"
                )

    def get_attr(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> None:
        """A constant tensor of the graph: small ones become ``constant`` ops, larger ones
        extra arguments."""
        obj: Any = gm
        assert isinstance(n.target, str)  # a get_attr node's target is the attribute's path
        for part in n.target.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, torch.Tensor):
            raise UnsupportedError(f"attribute {n.target} is a {type(obj).__name__}, not a tensor")
        t = tensor_type(obj)
        if obj.numel() <= 64 and obj.dim() <= 2:
            v = TensorOp(results=[], attrs={"value": real_values(obj)}, op="constant", operands=[])
            v.results = [Value(self.unique(self.value_name(n.name)), t, v, 0)]
            self.graph.nodes.append(v)
            self.values[n] = v.results[0]
        else:
            # a large constant becomes an extra argument, bound when the graph runs
            arg = Value(self.unique(self.value_name(n.name)), tensor_type(obj, keep_layout=True))
            self.graph.args.append(arg)
            self.constants.append(obj)
            self.values[n] = arg

    def outputs(self, n: torch.fx.Node) -> None:
        outs = n.args[0]
        flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        tensors: list[torch.fx.Node] = []  # the outputs the function returns, in its order
        free: list[int] = []  # the positions in them of those in ``any_layout``
        for k, o in enumerate(flat):
            v = self.values.get(o) if isinstance(o, torch.fx.Node) else o
            if not isinstance(v, Value):
                self.report.scalar_outputs[k] = self.scalar_output(o, v)
                continue
            if k in self.any_layout and all(type(d) is int for d in v.type.shape):
                free.append(len(self.graph.outputs))  # static: its strides can be reported
            self.graph.outputs.append(v)
            self.graph.output_types.append(v.type)
            tensors.append(cast(torch.fx.Node, o))  # only an FX node's value is a Value
        # eager's output contract, which ``lower`` keeps: these outputs may be views of an
        # input, every other one is a tensor of its own in the layout its declared type says
        # (but ``lower`` may return those in ``any_layout`` in the layout it computes them in)
        views = self.graph.attrs["output_views"] = self._output_views(tensors)
        if free:
            self.graph.attrs["any_layout"] = free
        for k, o in enumerate(tensors):
            self._eager_layout(k, o, k in views)
        for query, out in self.attention_queries:
            self._follow_query_layout(query, out)

    def _eager_storage(self, o: torch.fx.Node) -> None:
        """Lay the value of ``o`` out in storage as eager does, where an extern view (a view op
        run by PyTorch: ``as_strided``, ``view.dtype``) sees its storage: the op that computes
        it writes it in eager's layout where that has no overlap (channels-last after a
        convolution)."""
        v = self.values.get(o)
        val = o.meta.get("val", o.meta.get("example_value"))
        if not isinstance(v, Value) or not isinstance(val, torch.Tensor):
            return
        eager = tensor_type(val, keep_layout=True)
        owner = v.owner
        if (
            eager.layout is not None
            and v.type.layout is None
            and eager.dtype == v.type.dtype
            and tuple(eager.shape) == tuple(v.type.shape)
            and isinstance(owner, TensorOp)
            and OPS[owner.op].category != "view"
            and is_writable(eager)
        ):
            v.type = eager

    def _eager_layout(self, k: int, o: torch.fx.Node, view: bool) -> None:
        """Declare output ``k`` with the layout eager gives it (its example value's strides and
        offset: a pointwise op on a permuted or channels-last input keeps that order, a view
        keeps its own). The op that computes a fresh output in a layout with no overlap writes it in
        that layout; ``lower`` copies any other output whose layout differs."""
        v = self.graph.outputs[k]
        val = o.meta.get("val", o.meta.get("example_value"))
        if not isinstance(val, torch.Tensor):
            return
        declared = tensor_type(val, keep_layout=True)
        if declared.dtype != v.type.dtype or tuple(declared.shape) != tuple(v.type.shape):
            return
        if not view and layout_overlaps(declared):
            # eager returns an overlapping view of an intermediate (``unfold``): a result of
            # its own cannot be laid out so, and keeps the dense layout FIR gives it
            return
        self.graph.output_types[k] = declared
        if not view:
            self._eager_storage(o)

    def _output_views(self, outs: list[Any]) -> list[int]:
        """The positions of the outputs that eager returns as views of an input (they share
        the storage of a placeholder's example value): only these may share an argument's
        storage; every other output is a tensor of its own (``lower`` copies it if needed)."""
        from torch.multiprocessing.reductions import StorageWeakRef

        def storage(node: Any) -> Any:
            val = node.meta.get("val", node.meta.get("example_value"))
            if not isinstance(val, torch.Tensor):
                return None
            try:
                return StorageWeakRef(val.untyped_storage())
            except (NotImplementedError, RuntimeError):  # a tensor with no storage
                return None

        inputs = {storage(p) for p in self.placeholders} - {None}
        return [
            k
            for k, o in enumerate(outs)
            if isinstance(o, torch.fx.Node) and storage(o) is not None and storage(o) in inputs
        ]

    def scalar_output(self, o: Any, v: Any) -> tuple[str, Any]:
        """What a graph output that is no tensor is when the graph runs (see
        ``ImportReport.scalar_outputs``)."""
        if v is None or isinstance(v, (bool, int, float)):
            return ("value", v)
        if isinstance(o, torch.fx.Node) and o.op == "placeholder":
            return ("input", self.placeholders.index(o))
        if isinstance(v, torch.SymInt):
            size = size_value(v)
            unbound: set[Any] = getattr(size, "free_symbols", set()) - self.bindable
            if not unbound:
                return ("value", size) if isinstance(size, int) else ("size", size)
        raise UnsupportedError(f"graph output {o!r} is not a tensor, a size or a constant")

    def arg(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            if a not in self.values:
                raise UnsupportedError(f"value {a.name} is used before it is defined")
            return self.values[a]
        if isinstance(a, (list, tuple)):
            return [self.arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.arg(v) for k, v in a.items()}
        return a

    def call(self, n: torch.fx.Node, converters: dict[str, Any]) -> None:
        if n.target is operator.getitem:
            # getitem(node, int): one result of a node with several
            src, k = self.values[cast(torch.fx.Node, n.args[0])], cast(int, n.args[1])
            if not isinstance(src, (list, tuple)):
                raise UnsupportedError(f"{n.name}: getitem on a single value")
            self.values[n] = src[k]
            return
        if _is_with_effects(n):
            self.with_effects(n)
            return
        name = target_name(n.target)
        val = n.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            # a size query (aten.sym_size.int) or arithmetic on sizes and int inputs under
            # dynamic shapes (``operator.truediv``, ``round``): keep the symbolic value;
            # converters read sizes from the result types, a number used as a value becomes a
            # 0-d argument (``scalar_argument``), and an assertion on sizes is decided here if
            # it can be
            self.values[n] = val
            return
        if name in ASSERTIONS:
            self.assertion(n, name)
            return
        # an operator of another namespace (a torch.library custom op) is an extern call like
        # any op FIR has no mapping for; a Python callable in an aten graph is not an op
        is_op = isinstance(n.target, torch._ops.OpOverload)
        if not is_op and not name.startswith(("aten.", "prims.")) and name not in converters:
            raise UnsupportedError(
                f"{n.name}: call of {name} is not an aten op; import an aten-level graph"
            )
        args = [self.arg(a) for a in n.args]
        kwargs = {k: self.arg(v) for k, v in n.kwargs.items()}
        conv = converters.get(name)
        reason = "no FIR mapping"
        if conv is not None:
            em = Emitter(self, n)
            try:
                out = conv(em, *args, **kwargs)
            except Fallback as e:
                reason = str(e)
                for node in em.nodes:
                    for r in node.results:
                        self.names.discard(r.name)
            else:
                self.graph.nodes.extend(em.nodes)
                self.values[n] = out
                self.report.imported[name] += 1
                return
        self.extern(n, name, args, kwargs)
        if name in LIBRARY_CALLS and conv is None:
            self.report.imported[name] += 1  # a library call by design, as in Inductor
            return
        self.report.fallbacks[name] += 1
        self.report.reasons.setdefault(name, reason)

    def with_effects(self, n: torch.fx.Node) -> None:
        """``with_effects(token, op, *args)``: AOTAutograd's wrapper of an op with side effects
        (``aten._print``, ``aten._linalg_check_errors``). The op becomes an ordered extern call;
        the token is threaded through the calls that return nothing (their empty result is the
        new token), though what orders them is the ``effect`` chain."""
        token, op, *op_args = n.args
        callee = target_name(op)
        if not isinstance(op, torch._ops.OpOverload):
            raise UnsupportedError(f"{n.name}: with_effects of {callee}, which is not an op")
        token_value = self.arg(token)
        val = meta_value(n)
        results = list(val[1:]) if isinstance(val, (tuple, list)) else [None]
        if not results:
            results = [None]
        em = Emitter(self, n)
        outs = effect_extern(
            em,
            callee,
            [extern_argument(self.arg(a), callee) for a in op_args],
            {k: extern_argument(self.arg(v), callee) for k, v in n.kwargs.items()},
            "ordered",
            results,
        )
        self.graph.nodes.extend(em.nodes)
        if all(r is None for r in results):  # the call's empty result is the new token
            self.values[n] = [outs[0], None]
        else:
            self.values[n] = [token_value, *outs]
        self.report.imported[f"with_effects({callee})"] += 1

    def assertion(self, n: torch.fx.Node, name: str) -> None:
        """An assertion: dropped when its condition is known to hold here, an ordered extern
        call of the real op when it depends on the data (it raises when the program runs)."""
        cond = self.arg(n.args[0])
        functional = name == "aten._functional_assert_async.msg"
        holds = _known_truth(cond)
        if holds is False:
            msg = n.args[1] if len(n.args) > 1 else ""
            raise UnsupportedError(f"{name}: the assertion always fails ({msg!r})")
        if holds is True:
            if functional:  # the dependency token passes through
                self.values[n] = self.arg(n.args[2])
            self.report.imported[f"{name} (holds at import)"] += 1
            return
        if not isinstance(cond, Value):
            raise UnsupportedError(f"{name}: condition {cond!r} cannot be checked")
        em = Emitter(self, n)
        (out,) = effect_extern(
            em,
            name,
            [extern_argument(self.arg(a), name) for a in n.args],
            {k: extern_argument(self.arg(v), name) for k, v in n.kwargs.items()},
            "assert",
            [meta_value(n)] if functional else [None],
        )
        self.graph.nodes.extend(em.nodes)
        self.values[n] = out
        self.report.imported[name] += 1

    def extern(self, n: torch.fx.Node, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        val = self._restrided_result(n)
        if val is None:
            val = meta_value(n)
        multi = isinstance(val, (tuple, list))
        vals = list(val) if multi else [val]
        # results that are not tensors (cuDNN attention's None and sizes) are no values of the
        # program: the call keeps the positions of its tensors (``results = [...]``) and a
        # reader of one of the others gets it as the trace saw it: a number, or a symbolic
        # size (attention's ``max_q`` is the sequence length ``s0``), which is what the op
        # returns at run time; a reader turns it into a FIR size expression, and one that is
        # not a function of the inputs' sizes (data-dependent) is refused there
        kept = [k for k, v in enumerate(vals) if isinstance(v, torch.Tensor)]
        for k, v in enumerate(vals):
            if not isinstance(v, (torch.Tensor, type(None), bool, int, float, torch.SymInt)):
                raise UnsupportedError(
                    f"{n.name}: {name} returns a {type(v).__name__} as result #{k}; FIR needs "
                    "tensor results (or None, constant numbers and sizes)"
                )
        if not kept:
            raise UnsupportedError(f"{n.name}: {name} returns no tensor")
        # a view op run by PyTorch returns a view of its argument, no copy: ``aliases`` below
        # says so, and plan-memory never writes such a result in place nor reuses its memory
        node = ExternNode(
            results=[],
            callee=name,
            args=[extern_argument(a, name) for a in args],
            kwargs={k: extern_argument(v, name) for k, v in kwargs.items()},
        )
        base = self.value_name(n.name)
        # an extern call's result keeps the layout PyTorch gives it (attention returns its
        # output laid out as [batch, tokens, heads, dim]): views of it can then be aliases
        node.results = [
            Value(
                self.unique(base if k == 0 else f"{base}_{k}"),
                tensor_type(vals[k], keep_layout=True),
                node,
                j,
            )
            for j, k in enumerate(kept)
        ]
        for r in node.results:
            # a result sized by an int argument that is no size (it may be zero or negative:
            # ``embedding_dense_backward``'s row count under automatic dynamic shapes) has no
            # shape FIR can bind when the program runs
            t = r.type
            dims = (*t.shape, *t.strides, t.offset)
            unbound = {s for d in dims for s in getattr(d, "free_symbols", ())} - self.bindable
            if unbound:
                raise UnsupportedError(
                    f"{n.name}: {name} returns a tensor sized by "
                    f"{', '.join(sorted(str(s) for s in unbound))}, an int argument that is no "
                    "size (it may be zero or negative); PyTorch runs this graph"
                )
        if len(kept) != len(vals):
            node.attrs["results"] = kept
        aliases = _aliased_positions(n, kept)
        if aliases is not None:
            node.attrs["aliases"] = aliases
            for k in {k for k in aliases if k is not None}:
                aliased = n.args[k]
                if isinstance(aliased, torch.fx.Node):
                    self._eager_storage(aliased)
        if name == CUDNN_ATTENTION and isinstance(n.args[0], torch.fx.Node):
            # decided once the outputs' layouts are (a query saved for the backward is one)
            self.attention_queries.append((self.values.get(n.args[0]), node.results[0]))
        self.graph.nodes.append(node)
        by_position = dict(zip(kept, node.results))
        self.values[n] = (
            [by_position.get(k, v) for k, v in enumerate(vals)] if multi else node.results[0]
        )

    def _restrided_result(self, n: torch.fx.Node) -> Any:
        """What ``n`` returns for the inputs it gets, where it reads an input restrided
        (:func:`_restrided`): the trace saw eager's strides, and the op's results may follow
        its inputs' (cuDNN's attention backward allocates the key's and value's gradients
        like the key and value). The op runs again on fake tensors laid out as the inputs
        are; None where it reads no restrided input."""
        restrided = [a for a in n.all_input_nodes if a in self.restrided]
        if not restrided:
            return None
        from torch._subclasses.fake_tensor import FakeTensor

        mode = next(
            (v.fake_mode for v in self.restrided.values() if isinstance(v, FakeTensor)), None
        )
        if mode is None:
            return None

        def fake(a: Any) -> Any:
            if not isinstance(a, torch.fx.Node):
                return a
            if a in self.restrided:
                return self.restrided[a]
            return a.meta.get("val", a.meta.get("example_value"))

        op = cast(Callable[..., Any], n.target)  # an extern call's target is an op
        try:
            with mode:
                return op(*torch.fx.map_arg(n.args, fake), **torch.fx.map_arg(n.kwargs, fake))
        except Exception:  # noqa: BLE001 - no fake kernel for these layouts: declared as traced
            return None  # (the call's result is then copied into that layout when it differs)

    @staticmethod
    def _follow_query_layout(query: Any, out: Value) -> None:
        """cuDNN's attention allocates its output with the dimension order of its query. The
        trace saw eager's query (on Llama, a rotary embedding of a transposed projection, laid
        out [batch, tokens, heads, dim]); a query FIR computes (not a view) with no declared
        layout is dense in its logical order, and so is the output. Otherwise every call's
        output is copied into the traced layout (an ATen copy and 55 us of host time a layer
        on Llama). A view keeps the traced order: its memory is laid out as eager's."""
        if not isinstance(query, Value) or query.type.layout is not None:
            return
        owner = query.owner
        if not isinstance(owner, TensorOp) or OPS[owner.op].category == "view":
            return
        out.type = TensorType(out.type.dtype, out.type.shape)


def _restrided(val: Any, example: Any) -> Any:
    """The example input where it is ``val`` with other strides: AOTAutograd compiles a
    backward with its saved activations restrided to the layout the compiled forward reported
    (:func:`fir.frontend.dynamo.saved_activations`); the graph's own metadata keeps eager's.
    Static layouts only, as the forward reports only those."""
    if not isinstance(val, torch.Tensor) or not isinstance(example, torch.Tensor):
        return val
    dims = [*val.shape, *val.stride(), *example.shape, *example.stride()]
    if not all(type(d) is int for d in dims) or example.dtype != val.dtype:
        return val
    if tuple(example.shape) != tuple(val.shape) or example.stride() == val.stride():
        return val
    return example


def graph_device(gm: torch.fx.GraphModule, example_inputs: list[Any] | None) -> torch.device:
    """Where a graph's program runs: the device of its GPU tensors if it has any (a CPU 0-d
    tensor beside them is a scalar), else CPU; a graph with no tensor input computes where its
    outputs live."""
    vals: list[Any] = []
    for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        val = n.meta.get("val", n.meta.get("example_value"))
        if val is None and example_inputs is not None and k < len(example_inputs):
            val = example_inputs[k]
        vals.append(val)
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if not tensors:
        for n in gm.graph.nodes:
            if n.op == "output":
                torch.fx.map_arg(n.args, lambda a: vals.append(a.meta.get("val")))
        tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    for t in tensors:
        if t.device.type != "cpu":
            return t.device
    return torch.device("cpu")


def _aliased_positions(n: torch.fx.Node, kept: list[int]) -> list[int | None] | None:
    """For each kept result of an extern call, the positional argument whose storage it lives
    in, from the op's schema (``Tensor(a) self -> Tensor(a)``: ``aten.view.dtype``, any view or
    in-place op run by PyTorch); None where it is memory of its own. None when no result is
    a view. A view of an argument passed by keyword is unsupported (the graph runs with
    PyTorch) rather than planned as memory of its own."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    sets = []
    for r in schema.returns:
        info = r.alias_info
        sets.append(set(info.before_set) if info is not None else set())
    if not any(sets):
        return None
    out: list[int | None] = []
    for k in kept:
        # one returned list (``Tensor(a)[]``: split, unbind) covers every result
        wanted = sets[0] if len(sets) == 1 else (sets[k] if k < len(sets) else set())
        found: int | None = None
        for i, a in enumerate(schema.arguments):
            info = a.alias_info
            if not wanted or info is None or not wanted & set(info.before_set):
                continue
            if i >= len(n.args):
                raise UnsupportedError(
                    f"{n.name}: {target_name(n.target)} returns a view of argument '{a.name}', "
                    "passed by keyword"
                )
            found = i
            break
        out.append(found)
    return out if any(k is not None for k in out) else None


def _is_with_effects(n: torch.fx.Node) -> bool:
    t = n.target
    return isinstance(t, torch._ops.HigherOrderOperator) and t.name() == "with_effects"


def _is_effect_token(n: torch.fx.Node) -> bool:
    """A graph input that only ``with_effects`` calls take, as their token."""
    return bool(n.users) and all(
        u.op == "call_function" and _is_with_effects(u) and u.args[0] is n and n not in u.args[1:]
        for u in n.users
    )


def _known_truth(cond: Any) -> bool | None:
    """The value of an assertion's condition where it is known at import: a Python scalar, a
    symbolic bool the shape environment has decided, a constant tensor. None otherwise."""
    if isinstance(cond, (bool, int, float)):
        return bool(cond)
    if isinstance(cond, torch.SymBool):
        from torch.fx.experimental.symbolic_shapes import statically_known_true

        if statically_known_true(cond):
            return True
        return False if statically_known_true(torch.sym_not(cond)) else None
    owner = getattr(cond, "owner", None)
    if isinstance(owner, TensorOp) and owner.op == "constant":
        return bool(torch.tensor(owner.attrs["value"]).bool().all())
    return None


def _lower_bound(v: torch.SymInt) -> int | None:
    """The least value the shape environment allows for the symbol ``v`` (None: no bound)."""
    expr = v.node.expr
    env = v.node.shape_env
    vr = getattr(env, "var_to_range", {}).get(expr)
    if vr is None:
        return None
    low = vr.lower
    return int(low) if getattr(low, "is_Integer", False) else None  # not -int_oo


def _bound_unbacked(gm: torch.fx.GraphModule, example_inputs: list[Any] | None) -> frozenset[str]:
    """The data-dependent symbols (``u0``) that a graph's inputs carry whole: an int input, or
    a dimension of a tensor input. Such a graph is a part of one cut at the ops that make them
    (:mod:`fir.frontend.segments`), and they are sizes it binds when it is called."""
    out: set[str] = set()
    for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        val = n.meta.get("val", n.meta.get("example_value"))
        if val is None and example_inputs is not None and k < len(example_inputs):
            val = example_inputs[k]
        dims: list[Any] = [val] if isinstance(val, torch.SymInt) else []
        if isinstance(val, torch.Tensor):
            dims = [d for d in val.shape if isinstance(d, torch.SymInt)]
        for d in dims:
            expr = d.node.expr
            if getattr(expr, "is_Symbol", False) and re.fullmatch(r"u\d+", expr.name):
                out.add(expr.name)
    return frozenset(out)


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.$]", "_", name)
    return s if s and (s[0].isalnum() or s[0] == "_") else "v" + s


def import_graph_module(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any] | None = None,
    name: str = "main",
    any_layout: frozenset[int] = frozenset(),
) -> tuple[Module, ImportReport, list[torch.Tensor]]:
    """Import an aten-level graph. Returns the module, the report, and the tensors of large
    constants that became extra trailing arguments. ``any_layout``: the positions of the
    graph's outputs that need not have eager's layout (the caller learns the layout from the
    compiled function's output types)."""
    from fir.ir.verifier import verify_module

    imp = Importer(name, any_layout)
    graph = imp.run(gm, example_inputs)
    module = Module([graph])
    verify_module(module)
    return module, imp.report, imp.constants


def real_values(t: torch.Tensor) -> Any:
    """The values of a real constant tensor as nested lists. The backend compiles under
    Dynamo's fake tensor mode, where even reading a real (CUDA) tensor would dispatch to fake
    tensors: leave that mode for the read."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return t.detach().cpu().tolist()
