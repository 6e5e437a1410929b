"""aten-level ``torch.fx.GraphModule`` → tensor-level FIR graph.

Each FX node is mapped by the converter table in :mod:`fir.frontend.aten`. A converter emits
FIR ops through an :class:`~fir.frontend.emitter.Emitter`, which checks every op against its
typing rule as it goes; if the converter has no rule for the node, refuses its arguments (raises
:class:`~fir.frontend.emitter.Fallback`), or produces ops that do not type, everything it emitted
is dropped and the node becomes an extern call of the aten op itself. So an import never fails
because of one op; it fails only for what FIR cannot express at all (an output that is not a
tensor, a data-dependent size), with an :class:`~fir.frontend.emitter.UnsupportedError` naming
the op and the reason.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from fir.ir.dtypes import DType
from fir.ir.externs import encode_torch_object
from fir.ir.graph import ExternNode, Graph, Module, TensorOp, Value

from .aten import CONVERTERS
from .emitter import Emitter, Fallback, UnsupportedError, meta_value, size_value, tensor_type


@dataclass
class ImportReport:
    """What the importer did: aten ops mapped to FIR ops, and ops that fell back to PyTorch."""

    imported: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)
    # positions of graph inputs that are sizes (SymInts under dynamic shapes), not tensors
    size_inputs: list[int] = field(default_factory=list)

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


def target_name(target: Any) -> str:
    """``torch.ops.aten.add.Tensor`` → ``aten.add.Tensor``."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return f"{target}.default"
    return getattr(target, "__qualname__", None) or str(target)


# ---------------------------------------------------------------------------------------------


class Importer:
    def __init__(self, name: str = "main") -> None:
        self.graph = Graph(name=_sanitize(name))
        self.values: dict[torch.fx.Node, Any] = {}
        self.names: set[str] = set()
        self.report = ImportReport()
        self.constants: list[torch.Tensor] = []

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
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for k, n in enumerate(placeholders):
            val = n.meta.get("val", n.meta.get("example_value"))
            if val is None and example_inputs is not None:
                val = example_inputs[k]
            if isinstance(val, torch.SymInt):
                # under dynamic shapes Dynamo passes each size symbol as an input as well: FIR
                # reads sizes from the tensors' shapes, so the call drops these inputs
                self.values[n] = val
                self.report.size_inputs.append(k)
                continue
            if not isinstance(val, torch.Tensor):
                raise UnsupportedError(
                    f"graph input {n.name} is a {type(val).__name__}; FIR imports tensor inputs only"
                )
            v = Value(self.unique(self.value_name(n.name)), tensor_type(val, keep_layout=True))
            self.graph.args.append(v)
            self.values[n] = v
        self._check_size_inputs(placeholders)
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
        return self.graph

    def _check_size_inputs(self, placeholders: list[torch.fx.Node]) -> None:
        """Every size input must be a size of some tensor input, where the runtime finds it."""
        known: set[Any] = set()
        for a in self.graph.args:
            for d in a.type.shape:
                known |= getattr(d, "free_symbols", set())
        for k in self.report.size_inputs:
            size = size_value(self.values[placeholders[k]])
            missing = getattr(size, "free_symbols", set()) - known
            if missing:
                raise UnsupportedError(
                    f"size input {placeholders[k].name} ({size}) is not a size of any tensor input"
                )

    def get_attr(self, gm: torch.fx.GraphModule, n: torch.fx.Node) -> None:
        """A constant tensor of the graph: small ones become ``constant`` ops, larger ones
        extra arguments."""
        obj: Any = gm
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
        for o in flat:
            v = self.values.get(o) if isinstance(o, torch.fx.Node) else None
            if not isinstance(v, Value):
                raise UnsupportedError(
                    f"graph output {o!r} is not a tensor; FIR returns tensors only"
                )
            self.graph.outputs.append(v)
            self.graph.output_types.append(v.type)

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
            src, k = self.values[n.args[0]], n.args[1]
            if not isinstance(src, (list, tuple)):
                raise UnsupportedError(f"{n.name}: getitem on a single value")
            self.values[n] = src[k]
            return
        name = target_name(n.target)
        val = n.meta.get("val")
        if isinstance(val, torch.SymInt):
            # a size query (aten.sym_size.int) or size arithmetic under dynamic shapes: keep
            # the symbolic value; converters read sizes from the result types anyway
            self.values[n] = val
            return
        if not name.startswith("aten.") and not name.startswith("prims."):
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
        self.report.fallbacks[name] += 1
        self.report.reasons.setdefault(name, reason)

    def extern(self, n: torch.fx.Node, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        val = meta_value(n)
        multi = isinstance(val, (tuple, list))
        vals = list(val) if multi else [val]
        for k, v in enumerate(vals):
            if not isinstance(v, torch.Tensor):
                raise UnsupportedError(
                    f"{n.name}: {name} returns a {type(v).__name__} as result #{k}; FIR needs tensor results"
                )
        node = ExternNode(
            results=[],
            callee=name,
            args=[_extern_arg(a, name) for a in args],
            kwargs={k: _extern_arg(v, name) for k, v in kwargs.items()},
        )
        base = self.value_name(n.name)
        # an extern call's result keeps the layout PyTorch gives it (attention returns its
        # output laid out as [batch, tokens, heads, dim]): views of it can then be aliases
        node.results = [
            Value(
                self.unique(base if k == 0 else f"{base}_{k}"),
                tensor_type(v, keep_layout=True),
                node,
                k,
            )
            for k, v in enumerate(vals)
        ]
        self.graph.nodes.append(node)
        self.values[n] = node.results if multi else node.results[0]


def _extern_arg(a: Any, op: str) -> Any:
    if a is None or isinstance(a, (bool, int, float, str, Value)):
        return a
    if isinstance(a, (list, tuple)):
        return [_extern_arg(x, op) for x in a]
    if isinstance(a, torch.dtype):
        return DType.from_torch(a)
    if isinstance(a, torch.SymInt):
        return size_value(a)
    enc = encode_torch_object(a)
    if enc is not None:
        return enc
    raise UnsupportedError(
        f"{op}: argument {a!r} of type {type(a).__name__} cannot be passed to an extern call"
    )


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.$]", "_", name)
    return s if s and (s[0].isalnum() or s[0] == "_") else "v" + s


def import_graph_module(
    gm: torch.fx.GraphModule, example_inputs: list[Any] | None = None, name: str = "main"
) -> tuple[Module, ImportReport, list[torch.Tensor]]:
    """Import an aten-level graph. Returns the module, the report, and the tensors of large
    constants that became extra trailing arguments."""
    from fir.ir.verifier import verify_module

    imp = Importer(name)
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
