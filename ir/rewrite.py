"""Small graph-editing helpers shared by passes."""

from __future__ import annotations

from typing import Any

from .graph import ExternNode, Graph, LoopNode, Node, TensorOp, Value


def replace_all_uses(g: Graph, old: Value, new: Value) -> None:
    """Make every reader of ``old`` (ops, loads, extern args, returns) read ``new`` instead."""

    def swap(v: Any) -> Any:
        if v is old:
            return new
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    for n in g.nodes:
        if n.attrs:
            n.attrs = {k: swap(v) for k, v in n.attrs.items()}
        if isinstance(n, TensorOp):
            n.operands = [new if o is old else o for o in n.operands]
        elif isinstance(n, ExternNode):
            n.args = [swap(a) for a in n.args]
            n.kwargs = {k: swap(v) for k, v in n.kwargs.items()}
        elif isinstance(n, LoopNode) and n.body is not None:
            for op in n.body.ops:
                if op.buffer is old:
                    op.buffer = new
    g.outputs = [new if v is old else v for v in g.outputs]


def substitute_operands(n: Node, subst: dict[int, Value]) -> None:
    """Rewrite the operands of ``n`` through ``subst`` (``id(old value)`` → new value)."""
    if not subst:
        return

    def swap(v: Any) -> Any:
        if isinstance(v, Value):
            return subst.get(id(v), v)
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    if n.attrs:
        n.attrs = {k: swap(v) for k, v in n.attrs.items()}
    if isinstance(n, TensorOp):
        n.operands = [subst.get(id(o), o) if isinstance(o, Value) else o for o in n.operands]
    elif isinstance(n, ExternNode):
        n.args = [swap(a) for a in n.args]
        n.kwargs = {k: swap(v) for k, v in n.kwargs.items()}
    elif isinstance(n, LoopNode) and n.body is not None:
        for op in n.body.ops:
            if op.buffer is not None:
                op.buffer = subst.get(id(op.buffer), op.buffer)


def substitute_outputs(g: Graph, subst: dict[int, Value]) -> None:
    g.outputs = [subst.get(id(v), v) for v in g.outputs]


def is_pure(n: Node) -> bool:
    """Extern calls may have effects unless marked ``pure = true``; dropout in training draws
    random numbers; everything else is pure."""
    if isinstance(n, ExternNode):
        return bool(n.attrs.get("pure", False))
    # random ops: two draws are not the same value
    return not (isinstance(n, TensorOp) and n.op == "dropout" and n.attrs.get("train", False))


def remove_dead_nodes(g: Graph) -> int:
    """Drop pure nodes whose results nothing reads; returns how many were dropped."""
    live: set[int] = {id(v) for v in g.outputs}
    kept: list[Node] = []
    removed = 0
    for n in reversed(g.nodes):
        if is_pure(n) and not any(id(r) in live for r in n.results):
            removed += 1
            continue
        kept.append(n)
        for v in n.operand_values():
            live.add(id(v))
    g.nodes = list(reversed(kept))
    if removed:
        drop_stale_analyses(g)
    return removed


# annotations that describe the whole graph as it was: a removed or merged node makes them wrong
_PLAN_KEYS = ("reuses", "inplace", "frees")


def drop_stale_analyses(g: Graph) -> None:
    """Forget dependencies and the memory plan after an edit that removes or merges nodes; they
    name nodes that may be gone (run ``deps`` and ``plan-memory`` again). ``realized`` stays:
    it describes each node alone. Kernels lose the members that are gone
    (:func:`prune_kernels`)."""
    for n in g.nodes:
        n.deps = None
        if any(k in n.attrs for k in _PLAN_KEYS):
            n.attrs = {k: v for k, v in n.attrs.items() if k not in _PLAN_KEYS}
    prune_kernels(g)


def prune_kernels(g: Graph) -> None:
    """Bring the kernels up to date after nodes were removed or merged: members that are gone
    leave, an empty kernel goes, and a local buffer that is gone, returned or now read outside
    its kernel is local no more. Removing nodes keeps the rest of a kernel together and legal."""
    if not g.kernels:
        return
    present = {id(n) for n in g.nodes}
    outputs = {id(v) for v in g.outputs}
    readers = g.users()
    kept = []
    for k in g.kernels:
        k.nodes = [n for n in k.nodes if id(n) in present]
        if not k.nodes:
            continue
        members = {id(n) for n in k.nodes}
        results = {id(r) for n in k.nodes for r in n.results}
        local = [
            v
            for v in k.local
            if id(v) in results
            and id(v) not in outputs
            and all(id(u) in members for u in readers.get(id(v), []))
        ]
        if len(local) != len(k.local):
            k.local, k.local_locs = local, []
        kept.append(k)
    g.kernels = kept
