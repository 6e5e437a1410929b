"""Graphs with data-dependent sizes: FIR programs chained across the ops that make them.

A FIR program binds every size before it starts: from its inputs' shapes and the ints it is
passed (``sizes (s1)``). A size that depends on the data (PyTorch's *unbacked* symbols ``u0``,
``u1`` …: ``x.item()`` used as a size, ``nonzero``, ``repeat_interleave`` of a tensor, a custom
op whose fake implementation makes a dynamic size) is known only once the op making it has
run. Such a graph is cut at those ops:

* the *host* steps: each op that makes a data-dependent size (its node has
  ``unbacked_bindings``), called as an extern call is, on the tensors FIR computed; the
  arithmetic and assertions on the numbers it makes (``u0 >= 0``, ``Eq(u0 + u1, 7)``:
  ``torch._check``), evaluated on ints, so a violated one raises eager's ``RuntimeError``;
* the *segments*: the rest of the graph, cut into as few parts as the host steps' order
  allows; each is an FX graph of its own that FIR imports, transforms and compiles (a
  :class:`~fir.frontend.dynamo.CompiledGraph`). A data-dependent size a segment uses is a
  size of it like any other: bound from the shape of a tensor it takes (``i64[u0, 1]``, the
  result of ``nonzero``), or a size parameter (``sizes (u0)``) passed the int that the host
  step computed.

FIR's sizes are positive; a data-dependent size is 0 as often as not (``nonzero`` of a mask with
no true element). A call where a segment's data-dependent size is 0 runs that segment with
PyTorch (its FX graph), as a call whose computed size is 0 does (``CompiledGraph``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.fx

from .emitter import UnsupportedError
from .fx_import import ASSERTIONS, target_name

# a data-dependent symbol of PyTorch's shape environment: u0, u1 …
UNBACKED_PREFIX = "u"


def is_unbacked(name: str) -> bool:
    return name.startswith(UNBACKED_PREFIX) and name[1:].isdigit()


def _symbols(val: Any) -> set[Any]:
    """The free symbols of an example value's sizes (a tensor's shape, strides and offset, or
    a symbolic number)."""
    out: set[Any] = set()
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = val.node.expr
        return set(getattr(expr, "free_symbols", ()))
    if isinstance(val, torch.Tensor):
        for d in (*val.shape, *val.stride(), val.storage_offset()):
            out |= _symbols(d)
    elif isinstance(val, (list, tuple)):
        for v in val:
            out |= _symbols(v)
    return out


def _val(n: Any) -> Any:
    return n.meta.get("val", n.meta.get("example_value")) if isinstance(n, torch.fx.Node) else n


def has_data_dependent_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether an op of the graph makes a data-dependent size (the graph is then cut)."""
    return any(n.meta.get("unbacked_bindings") for n in gm.graph.nodes)


def _is_scalar(val: Any) -> bool:
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def _plain_symbols(val: Any) -> dict[str, Any]:
    """The symbols an example value has as a whole number or a whole dimension, with the
    position they are read from: ``None`` for the number, the dimension's index otherwise."""
    out: dict[str, Any] = {}
    if isinstance(val, torch.SymInt):
        expr: Any = val.node.expr
        if getattr(expr, "is_Symbol", False):
            out[expr.name] = None
    elif isinstance(val, torch.Tensor):
        for d, size in enumerate(val.shape):
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if getattr(expr, "is_Symbol", False):
                out.setdefault(expr.name, d)
    return out


def _bind(val: Any, actual: Any, values: dict[str, int]) -> None:
    """Record the values of the symbols that ``val`` (an example value) has whole, read from
    ``actual`` (the value of one call)."""
    for name, where in _plain_symbols(val).items():
        if where is None:
            values[name] = int(actual)
        elif isinstance(actual, torch.Tensor):
            values[name] = int(actual.shape[where])


@dataclass
class Segment:
    """A part of the graph FIR compiles: ``gm`` takes the values of ``inputs`` (nodes of the
    whole graph, or a data-dependent symbol's name for a size it needs no input to carry) and
    returns those of ``outputs``."""

    gm: torch.fx.GraphModule
    inputs: list[torch.fx.Node | str]
    outputs: list[torch.fx.Node]
    unbacked: list[str]  # the data-dependent sizes it uses: a call where one is < 1 runs eagerly
    compiled: Any = None  # its CompiledGraph


@dataclass
class SegmentedGraph:
    """A graph cut at its data-dependent ops: segments compiled by FIR, and host steps."""

    gm: torch.fx.GraphModule
    steps: list[Segment | torch.fx.Node] = field(default_factory=list)
    calls: int = 0

    @property
    def segments(self) -> list[Segment]:
        return [s for s in self.steps if isinstance(s, Segment)]

    def __call__(self, *args: Any) -> list[Any]:
        self.calls += 1
        env: dict[torch.fx.Node, Any] = {}
        values: dict[str, int] = {}
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for p, a in zip(placeholders, args):
            env[p] = a
            _bind(_val(p), a, values)

        def value(n: torch.fx.Node | str) -> Any:
            if isinstance(n, str):
                return values[n]
            if n in env:
                return env[n]
            return _scalar_value(n, values)

        for step in self.steps:
            if isinstance(step, Segment):
                ins = [value(n) for n in step.inputs]
                if any(values.get(u, 1) < 1 for u in step.unbacked):
                    with torch.no_grad():
                        out = list(step.gm(*ins))  # a size of 0: FIR's sizes are positive
                else:
                    out = step.compiled(*ins)
                env.update(zip(step.outputs, out))
                continue
            env[step] = result = _run_host(step, value)
            _bind(_val(step), result, values)
        output = next(n for n in self.gm.graph.nodes if n.op == "output")
        outs = output.args[0]
        flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        return [value(o) if isinstance(o, torch.fx.Node) else o for o in flat]


def _run_host(n: torch.fx.Node, value: Callable[[Any], Any]) -> Any:
    """One host step on this call's values. A failed assertion is eager's ``RuntimeError``,
    saying what it is (Dynamo's own message may read "expression True")."""
    args = torch.fx.node.map_arg(n.args, value)
    kwargs = torch.fx.node.map_arg(n.kwargs, value)
    try:
        with torch.no_grad():
            return cast(Callable[..., Any], n.target)(*args, **kwargs)  # a call_function
    except RuntimeError as e:
        if target_name(n.target) not in ASSERTIONS:
            raise
        raise RuntimeError(
            f"{n.name}: a runtime check of the traced graph failed (a torch._check, or a size "
            f"the trace assumed, does not hold for this call's data): {e}"
        ) from None


def _scalar_value(n: torch.fx.Node, values: dict[str, int]) -> Any:
    """A number a segment computes from sizes (``sym_size``, size arithmetic): its value for
    this call, from its expression and the sizes' values."""
    from .sizes import evaluate_torch_expr

    val = _val(n)
    if isinstance(val, (int, float, bool)):
        return val
    if isinstance(val, (torch.SymInt, torch.SymFloat)):
        return evaluate_torch_expr(val.node.expr, values)
    raise UnsupportedError(f"{n.name}: value {val!r} is needed outside the part that computes it")


def _host_nodes(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes that run between FIR's programs: the ops making data-dependent sizes, and the
    numbers and assertions computed from what they make."""
    host: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        val = _val(n)
        inputs = n.all_input_nodes
        if n.meta.get("unbacked_bindings"):
            if not isinstance(n.target, torch._ops.OpOverload):
                raise UnsupportedError(
                    f"{n.name}: {target_name(n.target)} makes a data-dependent size and is no "
                    "operator"
                )
            host.add(n)
        elif _follows_host(n, val, any(i in host for i in inputs)):
            host.add(n)
    return host


def _follows_host(n: torch.fx.Node, val: Any, reads_host: bool) -> bool:
    """Whether ``n`` is computed from what a host step made (``reads_host``: it reads one):
    a number, an assertion on one, a result of a data-dependent op with several."""
    if _is_scalar(val):
        return reads_host or any(is_unbacked(s.name) for s in _symbols(val))
    return reads_host and (target_name(n.target) in ASSERTIONS or n.target is operator.getitem)


def _levels(gm: torch.fx.GraphModule, host: set[torch.fx.Node]) -> dict[torch.fx.Node, int]:
    """Where each node runs: a segment's index for a node FIR compiles, and for a host node the
    index of the segment it follows (-1: before the first). Each node goes as early as its
    inputs allow, so the graph has as few cuts as its host steps need."""
    level: dict[torch.fx.Node, int] = {}
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            level[n] = -1 if n.op == "placeholder" else 0
            continue
        if n.op == "output":
            continue
        ins = n.all_input_nodes
        if n in host:
            level[n] = max([-1, *(level[i] for i in ins if i.op != "placeholder")])
        else:
            level[n] = max(
                [
                    0,
                    *(level[i] + (1 if i in host else 0) for i in ins if i.op != "placeholder"),
                ]
            )
    return level


def split_graph(gm: torch.fx.GraphModule) -> SegmentedGraph:
    """Cut ``gm`` into segments and host steps (see the module's text)."""
    host = _host_nodes(gm)
    level = _levels(gm, host)
    compute = [n for n in gm.graph.nodes if n.op in ("call_function", "get_attr") and n not in host]
    count = max([-1, *(level[n] for n in compute)]) + 1
    users_outside: dict[torch.fx.Node, bool] = {}
    for n in gm.graph.nodes:
        for u in n.users:
            if u.op == "output" or u in host or level.get(u) != level.get(n):
                users_outside[n] = True
    sym_ints = _symbol_values(gm)
    out = SegmentedGraph(gm)
    for k in range(-1, count):
        if k >= 0:
            members = [n for n in compute if level[n] == k]
            segment = _segment(gm, members, users_outside, sym_ints)
            if segment is not None:
                out.steps.append(segment)
        out.steps.extend(n for n in gm.graph.nodes if n in host and level[n] == k)
    return out


def _symbol_values(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """An example SymInt for each data-dependent symbol some node has as a whole number or
    dimension (a size input of a segment that uses the symbol and takes nothing carrying it)."""
    out: dict[str, Any] = {}
    for n in gm.graph.nodes:
        val = _val(n)
        for name, where in _plain_symbols(val).items():
            if is_unbacked(name):
                out.setdefault(name, val if where is None else val.shape[where])
    return out


def _segment(
    gm: torch.fx.GraphModule,
    members: list[torch.fx.Node],
    users_outside: dict[torch.fx.Node, bool],
    sym_ints: dict[str, Any],
) -> Segment | None:
    """The FX graph of one segment: its inputs are the values it reads from outside."""
    outputs = [n for n in members if users_outside.get(n) and isinstance(_val(n), torch.Tensor)]
    if not outputs:
        return None  # nothing of it is read: dead code
    graph = torch.fx.Graph()
    inside = set(members)
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[torch.fx.Node | str] = []

    def placeholder(n: torch.fx.Node) -> torch.fx.Node:
        if n not in mapping:
            p = graph.placeholder(f"in_{n.name}")
            p.meta["val"] = _val(n)
            mapping[n] = p
            inputs.append(n)
        return mapping[n]

    for n in members:
        for i in n.all_input_nodes:
            if i not in inside:
                placeholder(i)
    # a data-dependent symbol the segment's values use, which no input carries whole
    used: set[str] = set()
    for n in members:
        used |= {s.name for s in _symbols(_val(n)) if is_unbacked(s.name)}
    carried: set[str] = set()
    for inp in inputs:
        carried |= set(_plain_symbols(_val(inp)))
    for name in sorted(used - carried):
        if name not in sym_ints:
            raise UnsupportedError(
                f"data-dependent size {name} is used where no value carries it whole"
            )
        p = graph.placeholder(f"size_{name}")
        p.meta["val"] = sym_ints[name]
        inputs.append(name)
    # placeholders first, in the order made; then the members
    for n in members:
        mapping[n] = graph.node_copy(n, lambda a: mapping[a])
    graph.output(tuple(mapping[n] for n in outputs))
    sub = torch.fx.GraphModule(gm, graph)
    unbacked = sorted(used | {s for n in inputs for s in _plain_symbols(_val(n)) if is_unbacked(s)})
    return Segment(sub, inputs, outputs, unbacked)


def compile_segments(
    gm: torch.fx.GraphModule,
    compile_one: Callable[[torch.fx.GraphModule, Sequence[Any], str], Any],
) -> SegmentedGraph:
    """Split ``gm`` and compile each segment with ``compile_one(sub_gm, example_inputs,
    suffix)``, which returns a callable of the segment's inputs (a ``CompiledGraph``)."""
    split = split_graph(gm)
    for k, seg in enumerate(split.segments):
        examples = [_val(p) for p in seg.gm.graph.nodes if p.op == "placeholder"]
        seg.compiled = compile_one(seg.gm, examples, f"part{k}")
    return split


def host_ops(split: SegmentedGraph) -> list[str]:
    """The ops the host steps call on tensors (for the report)."""
    return [
        target_name(n.target)
        for n in split.steps
        if isinstance(n, torch.fx.Node) and isinstance(n.target, torch._ops.OpOverload)
    ]
