"""The tensor-level builder that ``decompose``'s rules write with.

A rule (:mod:`fir.passes.lowering.decompositions`) gets a :class:`Builder` for one composite op,
emits primitive ops through it and returns the values that replace the op's results. The builder
lives in a module of its own so that the rule table and the pass that applies it both import it
and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Graph, Literal, Node, Operand, TensorOp, Value
from fir.ir.ops import BINARY_LOGICAL, COMPARE, OPS, UNARY_TO_BOOL_FLOAT
from fir.ir.rewrite import substitute_operands
from fir.ir.types import TensorType

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

    def __init__(
        self,
        names: NamePool,
        node: TensorOp,
        compute: DType,
        readers: Callable[[Value], list[Node]] | None = None,
        returned: Callable[[Value], bool] | None = None,
    ) -> None:
        self.names = names
        self.node = node
        self.base = node.results[0].name
        self.compute = compute
        self.nodes: list[TensorOp] = []
        self._converted: dict[int, Value] = {}
        self._readers = readers
        self._returned = returned

    # -- the op's surroundings

    def readers(self, v: Value) -> list[Node]:
        """The nodes that read ``v`` in the program as it was before this pass."""
        return self._readers(v) if self._readers is not None else []

    def returned(self, v: Value) -> bool:
        return self._returned(v) if self._returned is not None else False

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
