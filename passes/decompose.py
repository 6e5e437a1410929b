"""``decompose``: composite tensor-level ops → primitive tensor-level ops.

Each composite op (softmax, layer_norm, gelu, cross_entropy, …) has one rule in
:mod:`fir.passes.decompositions` that writes it as primitive ops: elementwise ops, ``cast``,
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
from fir.ir.graph import Graph, Literal, Module, Node, Operand, TensorOp, Value
from fir.ir.ops import BINARY_LOGICAL, COMPARE, OPS, UNARY_TO_BOOL_FLOAT
from fir.ir.rewrite import substitute_operands, substitute_outputs
from fir.ir.types import TensorType

from .base import Option, OptionError, Pass
from .decompositions import RULES, Keep, Rule

HALF_TYPES = (DType.F16, DType.BF16)


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
        subst: dict[int, Value] = {}
        kept: list[Node] = []
        for n in g.nodes:
            substitute_operands(n, subst)
            rule = self.rules.get(n.op) if isinstance(n, TensorOp) else None
            if rule is None:
                kept.append(n)
                continue
            assert isinstance(n, TensorOp)
            b = Builder(names, n, self.compute_dtype(rule, n))
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
        if rule.upcast and self.upcast and dtype in HALF_TYPES:  # type: ignore[attr-defined]
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


_BOOL_RESULT = frozenset(COMPARE + UNARY_TO_BOOL_FLOAT + BINARY_LOGICAL + ["logical_not"])


def _same_shape_elementwise(op: str, operands: list[Operand]) -> TensorType | None:
    """The result type of an elementwise op whose tensor operands share shape and dtype.

    The common case of the rules, typed without the general rule (broadcasting, literal
    checks), which the tests run on every rule's output through the verifier."""
    if op == "cast" or not OPS[op].scalar:
        return None
    data = operands[1:] if op == "where" else operands
    first: TensorType | None = None
    for o in operands:
        if isinstance(o, Value):
            t = o.type
            if first is None:
                first = t
            elif t.shape != first.shape:
                return None
    ref = next((o.type for o in data if isinstance(o, Value)), None)
    if ref is None or first is None:
        return None
    if any(isinstance(o, Value) and o.type.dtype != ref.dtype for o in data):
        return None
    return TensorType(DType.BOOL if op in _BOOL_RESULT else ref.dtype, ref.shape)


class NamePool:
    """Fresh value names ``base.suffix`` (then ``base.suffix.1``, …), unique in one function.

    The taken names are collected once per function, so naming stays O(1) per new value."""

    def __init__(self, g: Graph) -> None:
        self.taken: set[str] = {v.name for v in g.values()}
        self.next: dict[str, int] = {}

    def fresh(self, stem: str) -> str:
        if stem not in self.taken:
            self.taken.add(stem)
            return stem
        k = self.next.get(stem, 1)
        while f"{stem}.{k}" in self.taken:
            k += 1
        self.next[stem] = k + 1
        name = f"{stem}.{k}"
        self.taken.add(name)
        return name


class Builder:
    """Emits the primitive ops that replace one composite op ``node``.

    ``compute`` is the dtype the rule computes in: the op's own dtype, or f32 for f16/bf16
    when the rule upcasts. :meth:`input` hands out float operands converted to it.
    """

    def __init__(self, names: NamePool, node: TensorOp, compute: DType) -> None:
        self.names = names
        self.node = node
        self.base = node.results[0].name
        self.compute = compute
        self.nodes: list[TensorOp] = []
        self._converted: dict[int, Value] = {}

    # -- operands and attributes

    def attr(self, name: str) -> Any:
        return OPS[self.node.op].attr(self.node.attrs, name)

    def operand(self, i: int) -> Operand | None:
        """Operand ``i`` as written; None when it is absent or the literal ``none``."""
        ops = self.node.operands
        if i >= len(ops):
            return None
        o = ops[i]
        if isinstance(o, Literal) and o.value is None:
            return None
        return o

    def input(self, i: int) -> Value | None:
        """Tensor operand ``i`` in the compute dtype (float operands are cast when needed)."""
        o = self.operand(i)
        if o is None:
            return None
        assert isinstance(o, Value), f"operand #{i} of '{self.node.op}' must be a tensor"
        if not o.type.dtype.is_float or o.type.dtype == self.compute:
            return o
        done = self._converted.get(id(o))
        if done is None:
            done = self.cast(o, self.compute, f"{o.name}_{self.compute}")
            self._converted[id(o)] = done
        return done

    def tensor(self, i: int) -> Value:
        v = self.input(i)
        assert v is not None, f"'{self.node.op}' needs operand #{i}"
        return v

    # -- emitting

    def emit(
        self,
        op: str,
        operands: list[Operand],
        name: str,
        attrs: dict[str, Any] | None = None,
        decl: TensorType | None = None,
    ) -> Value:
        return self.emit_multi(op, operands, [name], attrs, decl)[0]

    def emit_multi(
        self,
        op: str,
        operands: list[Operand],
        names: list[str],
        attrs: dict[str, Any] | None = None,
        decl: TensorType | None = None,
    ) -> list[Value]:
        """Append ``op`` with result types from the op table's typing rule."""
        attrs = attrs or {}
        same = _same_shape_elementwise(op, operands)
        if same is not None:
            inferred = [same]
        else:
            types = [o.type if isinstance(o, Value) else o for o in operands]
            inferred = OPS[op].infer(types, attrs, [decl] if decl is not None else [])
        results = [
            Value(self.names.fresh(f"{self.base}.{nm}"), t)
            for nm, t in zip(names, inferred[: len(names)])
        ]
        node = TensorOp(results=results, attrs=attrs, loc=self.node.loc, op=op, operands=operands)
        for k, r in enumerate(results):
            r.owner, r.index = node, k
        self.nodes.append(node)
        return results

    def cast(self, v: Value, dtype: DType, name: str) -> Value:
        return self.emit("cast", [v], name, decl=TensorType(dtype, v.type.shape))

    # -- finishing

    def bind_results(self, results: list[Operand], subst: dict[int, Value]) -> None:
        """Make the original result values the results of the new ops.

        A new value in the op's dtype takes the original's place (so it keeps the original
        name); one in the compute dtype gets a final ``cast`` that produces the original; an
        existing value (an operand) replaces the original through ``subst``."""
        mine = {id(n) for n in self.nodes}
        for orig, v in zip(self.node.results, results, strict=True):
            assert isinstance(v, Value), f"rule for '{self.node.op}' returned a literal"
            if v.type.dtype != orig.type.dtype:
                v = self.cast(v, orig.type.dtype, "cast")
                mine.add(id(v.owner))
            if id(v.owner) in mine:
                self._rebind(v, orig)
            else:
                subst[id(orig)] = v

    def _rebind(self, new: Value, orig: Value) -> None:
        owner = new.owner
        assert isinstance(owner, TensorOp)
        owner.results[new.index] = orig
        orig.owner, orig.index = owner, new.index
        self.names.taken.discard(new.name)
        swap = {id(new): orig}
        for n in self.nodes:
            if n is not owner and any(o is new for o in n.operands):
                substitute_operands(n, swap)
