"""``decompose``: composite tensor-level ops → primitive tensor-level ops.

Each composite op (softmax, layer_norm, gelu, cross_entropy, …) has one rule in
:mod:`fir.passes.lowering.decompositions` that writes it as primitive ops: elementwise ops, ``cast``,
the reductions ``sum``/``max``/``welford``…, views, ``gather``/``index_select``, ``full`` and
``matmul`` (which ``lower`` turns into an extern call). Everything stays at tensor level.

The rewrite is one walk in program order. A rule's new values are named after the op's first
result (``%y`` gives ``%y.max``, ``%y.exp``, …) and its last op keeps the original result value,
so ``%y`` still names the op's result and later stages stay traceable. A rule that turns an op
into one of its operands (``dropout`` in eval mode, ``pow x, 1``) substitutes that operand.

Options: ``ops`` (rules to apply; empty = all), ``exclude`` (rules not to apply), ``upcast``
(compute f16/bf16 composites in f32 and cast the results back, as PyTorch does). Statistics:
how often each rule was applied, and ``<op> (kept: <reason>)`` for ops a rule left alone.
"""

from __future__ import annotations

import difflib
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Graph, Module, Node, TensorOp, Value
from fir.ir.ops import OPS
from fir.ir.rewrite import substitute_operands, substitute_outputs

from ..base import Option, OptionError, Pass
from .decompose_builder import Builder, NamePool
from .decompositions import RULES, Keep, Rule


class DecomposePass(Pass):
    name = "decompose"
    summary = "rewrite composite ops (softmax, layer_norm, gelu, losses, ...) into primitive ops"
    options = {
        "ops": Option(list, [], "rules to apply, by op name (empty: every rule)"),
        "exclude": Option(list, [], "rules not to apply, by op name"),
        "upcast": Option(bool, True, "compute f16/bf16 composites in f32, cast the results back"),
    }

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        wanted: list[str] = list(self.ops) or sorted(RULES)  # type: ignore[attr-defined]
        excluded: list[str] = list(self.exclude)  # type: ignore[attr-defined]
        for option, names in (("ops", wanted), ("exclude", excluded)):
            for n in names:
                if n not in RULES:
                    raise OptionError(option, _unknown_rule_message(n, option))
        self.rules: dict[str, Rule] = {n: RULES[n] for n in wanted if n not in excluded}

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            self.run_graph(g)
        return module

    def count(self, key: str) -> None:
        self.statistics[key] = self.statistics.get(key, 0) + 1

    def run_graph(self, g: Graph) -> None:
        names = NamePool(g)
        # who reads what, before the rewrite: rules that decide by their op's readers (keep an
        # addmm whole when its bias add would fuse with none of them) look later in the program,
        # which the walk has not rewritten yet
        users = g.users()
        outputs = {id(v) for v in g.outputs}

        def readers(v: Value) -> list[Node]:
            return users.get(id(v), [])

        def returned(v: Value) -> bool:
            return id(v) in outputs

        subst: dict[int, Value] = {}
        kept: list[Node] = []
        for n in g.nodes:
            substitute_operands(n, subst)
            rule = self.rules.get(n.op) if isinstance(n, TensorOp) else None
            if rule is None:
                kept.append(n)
                continue
            assert isinstance(n, TensorOp)
            b = Builder(names, n, self.compute_dtype(rule, n), readers, returned)
            try:
                results = rule.fn(b)
            except Keep as k:
                self.count(f"{n.op} (kept: {k.reason})")
                kept.append(n)
                continue
            if results is None:  # the rule does not apply to this form of the op
                kept.append(n)
                continue
            b.bind_results(results, subst)
            kept.extend(b.nodes)
            self.count(rule.name)
        g.nodes = kept
        substitute_outputs(g, subst)

    def compute_dtype(self, rule: Rule, n: TensorOp) -> DType:
        dtype = n.results[0].type.dtype
        if rule.upcast and self.upcast and dtype.is_narrow_float:  # type: ignore[attr-defined]
            return DType.F32
        return dtype


def _unknown_rule_message(name: str, option: str) -> str:
    known = ", ".join(sorted(RULES))
    if name in OPS:
        why = f"'{name}' is a primitive op; decompose has no rule for it"
    else:
        hint = difflib.get_close_matches(name, list(RULES), n=1)
        why = f"unknown rule '{name}'" + (f"; did you mean '{hint[0]}'?" if hint else "")
    return f"pass 'decompose', option '{option}': {why} (rules: {known})"
