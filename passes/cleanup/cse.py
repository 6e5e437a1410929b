"""``cse``: common-subexpression elimination. Two pure nodes with the same op, operands,
attributes and result types compute the same values; later ones are replaced by the first.
Loop nodes compare by their printed body. Extern calls are kept unless marked ``pure = true``."""

from __future__ import annotations

import dataclasses
from typing import Any

from fir.ir.graph import (
    ANNOTATION_KEYS,
    AliasNode,
    ExternNode,
    Graph,
    Literal,
    LoopNode,
    Module,
    Node,
    TensorOp,
    Value,
)
from fir.ir.printer import attr_value_str, print_node
from fir.ir.rewrite import drop_stale_analyses, is_pure, substitute_operands, substitute_outputs

from ..base import Pass


class CSEPass(Pass):
    name = "cse"
    summary = "merge pure nodes that compute the same values"

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            self.statistics["merged"] = self.statistics.get("merged", 0) + self.run_graph(g)
        return module

    def run_graph(self, g: Graph) -> int:
        seen: dict[Any, Node] = {}
        subst: dict[int, Value] = {}
        kept: list[Node] = []
        merged = 0
        for n in g.nodes:
            substitute_operands(n, subst)
            key = _key(n) if is_pure(n) else None
            first = seen.get(key) if key is not None else None
            if first is None:
                if key is not None:
                    seen[key] = n
                kept.append(n)
                continue
            for old, new in zip(n.results, first.results):
                subst[id(old)] = new
            merged += 1
        g.nodes = kept
        substitute_outputs(g, subst)
        if merged:
            drop_stale_analyses(g)
        return merged


def _operand_key(o: Value | Literal) -> Any:
    if isinstance(o, Value):
        return ("v", id(o))
    return ("l", type(o.value).__name__, repr(o.value))


def _key(n: Node) -> Any:
    types = tuple(str(r.type) for r in n.results)
    attrs = tuple((k, attr_value_str(v)) for k, v in n.attrs.items())
    if isinstance(n, TensorOp):
        return ("op", n.op, tuple(_operand_key(o) for o in n.operands), attrs, types)
    if isinstance(n, ExternNode):
        args = tuple(_value_key(a) for a in n.args)
        kwargs = tuple((k, _value_key(v)) for k, v in n.kwargs.items())
        return ("extern", n.callee, args, kwargs, attrs, types)
    if isinstance(n, AliasNode):
        assert n.base is not None
        return ("view", id(n.base), types)
    if isinstance(n, LoopNode):
        # compare what the node computes, not what passes noted about it (deps, memory plan)
        plain = dataclasses.replace(
            n, deps=None, attrs={k: v for k, v in n.attrs.items() if k not in ANNOTATION_KEYS}
        )
        lines: list[str] = []
        print_node(plain, lines, "")
        # the header names the results; the body names buffers by name, which are unique
        body = "\n".join(lines[1:])
        header = lines[0].split(" = ", 1)[1]
        buffers = tuple(id(v) for v in n.operand_values())
        return ("loop", header, body, buffers)
    return None


def _value_key(v: Any) -> Any:
    if isinstance(v, Value):
        return ("v", id(v))
    if isinstance(v, list):
        return tuple(_value_key(x) for x in v)
    return ("a", attr_value_str(v))
