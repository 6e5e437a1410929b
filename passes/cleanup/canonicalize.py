"""``canonicalize``: local simplifications on tensor-level ops, then dead-node removal.

Each rule replaces an op by an existing value of the same type, or by a simpler op:

* ``add/sub x, 0``, ``mul/div x, 1``, ``pow x, 1`` → ``x`` (only when no broadcast happens);
* ``neg(neg x)``, ``logical_not(logical_not x)`` → ``x``;
* ``cast`` to the operand's own dtype → operand;
* views that change nothing (reshape/expand to the same shape, identity permute, transpose of a
  dimension with itself, full slice, squeeze of nothing) → operand;
* ``reshape(reshape x)`` → ``reshape x``; ``permute(permute x)`` and ``transpose(transpose x)``
  fold into one permute (or vanish when they cancel).
"""

from __future__ import annotations

from fir.ir.graph import Graph, Literal, Module, Node, TensorOp, Value
from fir.ir.rewrite import remove_dead_nodes, substitute_operands, substitute_outputs

from ..base import Option, Pass


def _is_lit(o: object, value: float) -> bool:
    return isinstance(o, Literal) and not isinstance(o.value, bool) and o.value == value


class CanonicalizePass(Pass):
    name = "canonicalize"
    summary = "fold identity ops and redundant views, remove dead nodes"
    options = {"dce": Option(bool, True, "remove nodes whose results are never read")}

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            self.statistics["folded"] = self.statistics.get("folded", 0) + self.run_graph(g)
            if self.dce:  # type: ignore[attr-defined]
                self.statistics["removed"] = self.statistics.get("removed", 0) + remove_dead_nodes(
                    g
                )
        return module

    def run_graph(self, g: Graph) -> int:
        # One walk in program order: a fold only looks at its operands' producers, which were
        # already rewritten, so a single substitution map replaces repeated use-list updates.
        folded = 0
        subst: dict[int, Value] = {}
        kept: list[Node] = []
        for n in g.nodes:
            substitute_operands(n, subst)
            replaced = False
            while isinstance(n, TensorOp):
                repl = self.fold(n)
                if repl is None:
                    break
                folded += 1
                if isinstance(repl, Value):
                    subst[id(n.result)] = repl
                    replaced = True
                    break
                n.op, n.operands, n.attrs = repl
            if not replaced:
                kept.append(n)
        g.nodes = kept
        substitute_outputs(g, subst)
        return folded

    def fold(self, n: TensorOp) -> Value | tuple[str, list, dict] | None:
        ops, out = n.operands, n.result.type
        x = ops[0] if ops and isinstance(ops[0], Value) else None

        def same(v: Value | None) -> Value | None:
            return (
                v
                if v is not None and v.type.dtype == out.dtype and v.type.shape == out.shape
                else None
            )

        op = n.op
        if op in ("add", "sub") and len(ops) == 2 and _is_lit(ops[1], 0):
            return same(x)
        if op == "add" and len(ops) == 2 and _is_lit(ops[0], 0) and isinstance(ops[1], Value):
            return same(ops[1])
        if op in ("mul", "div", "pow") and len(ops) == 2 and _is_lit(ops[1], 1):
            return same(x)
        if op == "mul" and len(ops) == 2 and _is_lit(ops[0], 1) and isinstance(ops[1], Value):
            return same(ops[1])
        if op in ("neg", "logical_not") and x is not None and isinstance(x.owner, TensorOp):
            inner = x.owner
            if inner.op == op and isinstance(inner.operands[0], Value):
                return same(inner.operands[0])
        if op == "cast" and x is not None and x.type.dtype == out.dtype:
            return same(x)
        if (
            op in ("reshape", "expand", "squeeze", "unsqueeze", "slice")
            and x is not None
            and x.type.shape == out.shape
            and (op != "slice" or n.attrs.get("step", 1) == 1)
        ):
            return same(x)
        if op == "permute" and x is not None and list(n.attrs["dims"]) == list(range(x.type.rank)):
            return same(x)
        if (
            op == "transpose"
            and x is not None
            and x.type.rank
            and n.attrs["dim0"] % x.type.rank == n.attrs["dim1"] % x.type.rank
        ):
            return same(x)
        if (
            op == "reshape"
            and x is not None
            and isinstance(x.owner, TensorOp)
            and x.owner.op == "reshape"
        ):
            return ("reshape", [x.owner.operands[0]], {})
        if op in ("permute", "transpose") and x is not None and isinstance(x.owner, TensorOp):
            inner = x.owner
            if inner.op in ("permute", "transpose") and isinstance(inner.operands[0], Value):
                src = inner.operands[0]
                rank = src.type.rank
                composed = [_perm(inner, rank)[d] for d in _perm(n, rank)]
                if composed == list(range(rank)):
                    return same(src)
                return ("permute", [src], {"dims": composed})
        return None


def _perm(n: TensorOp, rank: int) -> list[int]:
    if n.op == "permute":
        return [d % rank for d in n.attrs["dims"]]
    p = list(range(rank))
    a, b = n.attrs["dim0"] % rank, n.attrs["dim1"] % rank
    p[a], p[b] = p[b], p[a]
    return p
