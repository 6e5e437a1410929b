"""The lowering of one function: the walk over its tensor-level ops and the services the per-op
rules call (``pointwise``, ``reduction``, ``extern``, ``set_view``, ``materialize``).

The rule table (:mod:`fir.passes.lowering.lowerings`) is handed in by the pass, so the table
imports this module and this module never imports the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fir.ir.externs import storage_bases
from fir.ir.graph import (
    AliasNode,
    BodyOperand,
    ExternNode,
    Graph,
    LoopNode,
    Node,
    TensorOp,
    Value,
    alias_root,
)
from fir.ir.types import Dim, Layout, TensorType, contiguous_strides

from .body_builder import LOOP_NAMES, BodyBuilder, LoopNames, pointwise_space, reduction_space
from .library_calls import extern_call
from .view_indexing import Access, Index, buffer_access, is_writable, is_zero, same_layout

BodyFn = Callable[[BodyBuilder, tuple[Index, ...]], BodyOperand]
Lowering = Callable[["GraphLowering", TensorOp], None]


class GraphLowering:
    """The lowering of one function: walks its nodes in order and rebuilds the node list."""

    def __init__(
        self,
        graph: Graph,
        lowerings: Mapping[str, Lowering],
        keep_views: bool,
        statistics: dict[str, int],
    ) -> None:
        self.g = graph
        self.lowerings = lowerings
        self.keep_views = keep_views
        self.stats = statistics
        self.nodes: list[Node] = []
        self.accesses: dict[int, Access] = {}
        self.views: set[int] = set()  # values read through an index map, with no node of their own
        self.copied: set[int] = set()  # views materialised by a copy node
        self.names = {v.name for v in graph.values()}
        self.loop_names = _loop_names(graph)

    # -- the walk

    def run(self) -> None:
        # a loop node written before lowering loads its operands' storage as their (contiguous)
        # types say: a view it reads must be a copy, whoever needs it first
        self.loaded_by_loops = {
            id(v) for n in self.g.nodes if isinstance(n, LoopNode) for v in n.operand_values()
        }
        for n in self.g.nodes:
            if isinstance(n, TensorOp):
                if any(_has_zero_dim(r.type) for r in n.results):
                    self.empty(n)
                    continue
                lower = self.lowerings.get(n.op)
                if lower is None:
                    self.extern_fallback(n)
                else:
                    lower(self, n)
            else:
                if isinstance(n, ExternNode):  # imported as a library call
                    self.dense_rows(n.callee, n.kwargs)
                for v in n.operand_values():
                    self.materialize(v)
                self.nodes.append(n)
        for v in self.g.outputs:
            self.materialize(v)
        self.fresh_outputs()
        self.g.nodes = self.nodes

    # -- what lowerings call

    def access(self, v: Value) -> Access:
        a = self.accesses.get(id(v))
        if a is None:
            a = self.accesses[id(v)] = buffer_access(v)
        return a

    def set_view(self, v: Value, access: Access) -> None:
        self.accesses[id(v)] = access
        self.views.add(id(v))
        self.stats["views-folded"] += 1
        if self.keep_views:
            self.materialize(v)
            self.accesses[id(v)] = buffer_access(v)

    def pointwise(self, n: TensorOp, result: Value, body: BodyFn) -> LoopNode:
        ranges, idx = pointwise_space(result.type.shape, self.loop_names)
        b = BodyBuilder(ranges)
        y = body(b, idx)
        return self._add(LoopNode([result], loc=n.loc, ranges=ranges, body=b.build(y)))

    def reduction(
        self,
        n: TensorOp,
        results: Sequence[Value],
        kind: str,
        shape: tuple[Dim, ...],
        dims: Sequence[int],
        body: BodyFn,
    ) -> LoopNode:
        """A reduction of a tensor of ``shape`` over ``dims``; ``body`` computes the value for
        the operand index it is given."""
        ranges, rranges, idx = reduction_space(shape, dims, self.loop_names)
        b = BodyBuilder(ranges + rranges)
        y = body(b, idx)
        node = LoopNode(
            list(results),
            loc=n.loc,
            reduction=kind,
            ranges=ranges,
            reduction_ranges=rranges,
            body=b.build(y),
        )
        return self._add(node)

    def extern(self, n: TensorOp, callee: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        mutated = n.attrs.get("mutates") or []
        matrices = callee in ("aten.mm.default", "aten.bmm.default")
        for k, a in enumerate(args):
            why = f"written in place by {callee}" if k in mutated else None
            for v in _values_in([a]):
                self.materialize(v, copy_because=why, matrix_operand=matrices)
        self.dense_rows(callee, kwargs)
        for v in _values_in(list(kwargs.values())):
            self.materialize(v)
        node = ExternNode(list(n.results), loc=n.loc, callee=callee, args=args, kwargs=kwargs)
        self._add(node)
        self.stats["externs"] += 1

    def dense_rows(self, callee: str, kwargs: Mapping[str, Any]) -> None:
        """Copy, once, each view that ``callee`` would copy at every call (its keyword
        arguments of :data:`DENSE_ROW_KWARGS` whose rows do not lie in order)."""
        for key, value in kwargs.items():
            if callee not in DENSE_ROW_KWARGS.get(key, ()):
                continue
            for v in _values_in([value]):
                if not self._rows_in_order(v):
                    why = (
                        f"{callee.removeprefix('aten.')} copies {key} unless its rows are in order"
                    )
                    self.materialize(v, copy_because=why)

    def _rows_in_order(self, v: Value) -> bool:
        """Whether view ``v``, as an alias, would have its last dimension in order (stride 1, or
        0: broadcast, or a single element); not a view: laid out as its type says, checked
        there."""
        if id(v) not in self.views or id(v) in self.copied:
            strides: Sequence[Any] | None = v.type.strides
        else:
            strides = self.accesses[id(v)].strides
        if strides is None or not v.type.shape:
            return strides is not None
        return v.type.shape[-1] == 1 or strides[-1] in (0, 1)

    def extern_fallback(self, n: TensorOp) -> None:
        callee, args, kwargs = extern_call(n)
        self.extern(n, callee, args, kwargs)

    def empty(self, n: TensorOp) -> None:
        """A result with no elements has no loops to run: allocate it."""
        for r in n.results:
            shape = list(r.type.shape)
            node = ExternNode(
                [r],
                loc=n.loc,
                callee="aten.empty.memory_format",
                attrs={"pure": True},  # an allocation: dce drops it when nothing reads it
                args=[shape],
                kwargs={"dtype": r.type.dtype},
            )
            self._add(node)
            self.stats["externs"] += 1

    def helper_value(self, of: Value, suffix: str, type: TensorType) -> Value:
        """A fresh value for an intermediate buffer of ``of``: ``%NAME.SUFFIX``."""
        name = f"{of.name}.{suffix}"
        k = 1
        while name in self.names:
            name = f"{of.name}.{suffix}{k}"
            k += 1
        self.names.add(name)
        return Value(name, type)

    def materialize(
        self, v: Value, copy_because: str | None = None, matrix_operand: bool = False
    ) -> None:
        """Give a view a node of its own where it must be a tensor (an extern call's argument,
        a graph output): an alias of its buffer's storage when strides express it (the value's
        type takes the strides and offset), else a pointwise copy that takes its name and says
        why (``copy = "…"``). A ``matrix_operand`` (of ``mm``/``bmm``) that is a transpose of
        such a view copies the view under the transpose and aliases the transpose, as eager
        lays it out: BLAS reads either, and picks its kernel by the layout it is given."""
        if id(v) not in self.views or id(v) in self.copied:
            return
        access = self.accesses[id(v)]
        if self.keep_views:
            copy_because = "keep-views"
        elif id(v) in self.loaded_by_loops:
            copy_because = "loaded by a loop node written before lowering"
        elif access.strides is None:
            if matrix_operand and copy_because is None and self._alias_transpose(v):
                return
            made_by = v.owner.op if isinstance(v.owner, TensorOp) else "view"
            copy_because = (
                f"{made_by} that no strides express (it merges non-contiguous dimensions)"
            )
        self.copied.add(id(v))
        if copy_because is None:
            layout = Layout(tuple(access.strides), access.offset)  # type: ignore[arg-type]
            v.type = TensorType(v.type.dtype, v.type.shape, layout).normalized()
            self._add(AliasNode([v], loc=_loc_of(v), base=access.buffer))
            self.stats["aliases"] += 1
            return
        if _has_zero_dim(v.type):
            node: Node = ExternNode(
                [v],
                callee="aten.empty.memory_format",
                attrs={"pure": True},  # an allocation: dce drops it when nothing reads it
                args=[list(v.type.shape)],
                kwargs={"dtype": v.type.dtype},
            )
            self._add(node)
            self.stats["externs"] += 1
            return
        ranges, idx = pointwise_space(v.type.shape, self.loop_names)
        b = BodyBuilder(ranges)
        y = b.load(access, idx)
        node = LoopNode([v], loc=_loc_of(v), ranges=ranges, body=b.build(y))
        node.attrs["copy"] = copy_because
        self._add(node)
        self.stats["copies"] += 1

    def _alias_transpose(self, v: Value) -> bool:
        """``v`` swaps the last two dimensions of a view that needs a copy: copy that view (its
        own contiguous layout) and make ``v`` an alias of it with the two strides swapped. A
        view copied already for another reader is not copied again: a linear layer's gradient
        reads the output gradient of attention (a permute then a reshape that strides cannot
        express) as it is for the input's gradient and transposed for the weight's; BERT's
        backward copied it twice, once in each layout."""
        n = v.owner
        if not isinstance(n, TensorOp) or n.op not in ("transpose", "permute"):
            return False
        u = n.operands[0] if n.operands else None
        rank = len(v.type.shape)
        if not isinstance(u, Value) or rank < 2 or id(u) not in self.views:
            return False
        if n.op == "transpose":
            pair = sorted(d % rank for d in (n.attrs["dim0"], n.attrs["dim1"]))
            swaps_last = pair == [rank - 2, rank - 1]
        else:
            dims = [d % rank for d in n.attrs["dims"]]
            swaps_last = dims == [*range(rank - 2), rank - 1, rank - 2]
        if not swaps_last or self.accesses[id(u)].strides is not None:
            return False
        self.materialize(u)  # nothing to do where another reader had it copied
        given = u.type.layout.strides if u.type.layout is not None else None
        strides = list(given or contiguous_strides(tuple(u.type.shape)))
        strides[-2], strides[-1] = strides[-1], strides[-2]
        self.copied.add(id(v))
        v.type = TensorType(v.type.dtype, v.type.shape, Layout(tuple(strides), 0)).normalized()
        self._add(AliasNode([v], loc=_loc_of(v), base=u))
        self.stats["aliases"] += 1
        return True

    def fresh_outputs(self) -> None:
        """Where the function carries eager's output contract (attribute ``output_views``, the
        positions of the outputs eager returns as views of an argument; the importer always
        writes it), copy each other output that lives in an argument's storage (the argument
        itself, a view of it, an identity folded away: ``x.clone()``, ``torch.cat([x])``):
        eager returns a tensor of its own, and a caller that writes into it must not write
        into its input. Copy too an output whose layout is not its declared type's (eager's
        strides: ``x.permute(...).contiguous()`` imports as the permute, an alias).

        The outputs listed in ``any_layout`` (a training forward's saved activations, which
        only FIR's backward reads; the caller is told their strides) keep the layout FIR gives
        them, and a view among them stays a view where that keeps no more memory alive than
        a copy would (its storage is returned anyway, or it is at least half of it) and where
        it does not view one of the caller's outputs."""
        views = self.g.attrs.get("output_views")
        if not isinstance(views, list):  # no contract with eager (a program written by hand)
            return
        any_layout = self.g.attrs.get("any_layout")
        free = set(any_layout) if isinstance(any_layout, list) else set()
        args = {id(a) for a in self.g.args}
        # the caller's own outputs: a saved activation that viewed one would see the caller's
        # writes into it (eager saves a tensor of its own)
        users = {id(alias_root(v)) for k, v in enumerate(self.g.outputs) if k not in free}
        alive = {  # the storage that outputs returned as they are keep alive
            id(alias_root(v))
            for k, v in enumerate(self.g.outputs)
            if k < len(self.g.output_types) and same_layout(v.type, self.g.output_types[k])
        }
        # and the saved views that are most of their storage, which stay views whatever else
        alive |= {
            id(alias_root(v))
            for k, v in enumerate(self.g.outputs)
            if k in free and id(alias_root(v)) not in users and self._keeps_little(v, set())
        }
        for k, v in enumerate(self.g.outputs):
            if k in views:
                continue
            declared = self.g.output_types[k] if k < len(self.g.output_types) else v.type
            if any(d == 0 for d in v.type.shape if isinstance(d, int)):
                continue  # no element: nothing a caller could write through, nothing to copy
            if any(id(b) in args for b in (v, *storage_bases(v))):
                why = f"returned: a tensor of its own, not %{alias_root(v).name}'s storage"
            elif same_layout(v.type, declared):
                continue
            elif k in free and id(alias_root(v)) not in users and self._keeps_little(v, alive):
                self.g.output_types[k] = v.type
                continue
            else:
                why = "returned in eager's layout"
            if not is_writable(declared):  # overlapping: a loop node writes a contiguous one
                declared = declared.contiguous()
            if why.endswith("layout"):
                why += f", {declared}"
            copy = self.helper_value(v, "copy", declared)
            ranges, idx = pointwise_space(v.type.shape, self.loop_names)
            b = BodyBuilder(ranges)
            node = LoopNode([copy], loc=self.g.return_loc, ranges=ranges)
            node.body = b.build(b.load(self.access(v), idx))
            node.attrs["copy"] = why
            self._add(node)
            # counted apart from the views' copies, and only where there are any
            self.stats["output-copies"] = self.stats.get("output-copies", 0) + 1
            self.g.outputs[k] = copy

    @staticmethod
    def _keeps_little(v: Value, alive: set[int]) -> bool:
        """Whether returning ``v`` as it is keeps no more memory alive than a copy of it."""
        root = alias_root(v)
        if root is v or id(root) in alive:
            return True
        size, whole = v.type.numel, root.type.numel
        return isinstance(size, int) and isinstance(whole, int) and 2 * size >= whole

    def _add(self, node: Node) -> Any:
        for k, r in enumerate(node.results):
            r.owner, r.index = node, k
        self.nodes.append(node)
        if isinstance(node, LoopNode):
            self.stats["loop-nodes"] += 1
        return node


# keyword arguments of library calls that copy them, at every call, unless their rows lie in
# order (last stride 1 or 0): the CPU flash attention's ``attn_mask`` (ATen makes it contiguous).
# T5's position bias, an embedding viewed with the heads innermost, was copied so by each of
# its six layers (0.49 ms of a 2-core CPU step); copied once here, the copy fuses with the
# embedding that computes it
DENSE_ROW_KWARGS: dict[str, tuple[str, ...]] = {
    "attn_mask": ("aten._scaled_dot_product_flash_attention_for_cpu.default",),
}


def _loop_names(g: Graph) -> LoopNames:
    """``i``/``r``, unless a size symbol is already called ``i0`` or ``r3`` (a loop variable
    may not shadow one): then ``i_``/``r_``, and so on."""
    symbols: set[str] = set()
    for a in g.args:
        t = a.type
        for d in list(t.shape) + list(t.strides) + [t.offset]:
            if not isinstance(d, int):
                symbols |= {s.name for s in d.free_symbols}
    i, r = LOOP_NAMES
    while any(re.fullmatch(f"(?:{i}|{r})[0-9]+", s) for s in symbols):
        i, r = i + "_", r + "_"
    return i, r


def _has_zero_dim(t: TensorType) -> bool:
    return any(is_zero(d) for d in t.shape)


def _values_in(args: list[Any]) -> list[Value]:
    out: list[Value] = []
    for a in args:
        if isinstance(a, Value):
            out.append(a)
        elif isinstance(a, list):
            out.extend(_values_in(a))
    return out


def _loc_of(v: Value) -> Any:
    """Where the view was written (the op that made it), for the node that realizes it."""
    return v.owner.loc if v.owner is not None else None
