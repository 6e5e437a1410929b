"""``unroll-reductions``: a reduction over a few elements becomes a pointwise node that reads each
of them and combines them in its body, so that ``inline`` can copy it into its readers.

```
%s = reduction sum : bf16[4, 512, 128] over (i0 < 4, i1 < 512, i2 < 128; r0 < 4) {
  %0 = load %dk[262144*i0 + 128*i1 + i2 + 65536*r0]
  yield %0
}
```

becomes

```
%s = pointwise {unrolled = "sum over 4 elements"} : bf16[4, 512, 128] over (i0 < 4, …) {
  %0 = load %dk[262144*i0 + 128*i1 + i2]
  %1 = cast %0 : f32
  %2 = load %dk[262144*i0 + 128*i1 + i2 + 65536]
  …
  %9 = cast %8 : bf16
  yield %9
}
```

A reduction is always realized (its own kernel); its readers then load its result from memory.
Llama's backward sums the gradients of the 4 query heads that share a key/value head (grouped
attention), then the rotary embedding's backward reads the key gradient at two positions and the
value gradient is copied into the layout of the projection's GEMM: two reductions and two
pointwise kernels a layer, where Inductor (its ``unroll_reductions_threshold``, 8) launches two.

Which reductions unroll: ``sum``, ``prod``, ``max``, ``min`` and ``any`` over at most
``max-size`` elements (all reduced sizes static), one result, no ``indirect`` op in the body
(a gather's row is read once per element anyway), and only where every reader is a loop node
(a graph output, a view or an extern's input stays realized; as a reduction it can still fuse
with the pointwise node it reads) that visits no more elements than the reduction has results.
A row's statistics read by every element of the row (a softmax's max and sum) stay
reductions: inlined, each element would compute the whole row again, and the recompute rule
of ``inline`` would then realize them as kernels of their own, where the reductions fuse with
their readers into one kernel that keeps the row. The body combines the elements in the order
the reduction loop meets them, in the reduction's state dtype (f32 for f16/bf16 sums and
products: :func:`fir.ir.accumulators.state`) with its merge op (NaN-propagating
``maximum``/``minimum``), and rounds once to the result's dtype, as the reduction does.
Nodes of a kernel are left alone. The pass runs after ``lower`` and before ``inline`` in the
``fusion`` and ``cuda`` pipelines.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import sympy
from fir.ir.accumulators import merge, state
from fir.ir.graph import Body, BodyValue, Graph, LoopNode, Module
from fir.ir.types import dims_mul

from ..base import Option, Pass
from .body_inliner import BodyInliner, VarMap

UNROLLABLE = ("sum", "prod", "max", "min", "any")


class UnrollReductionsPass(Pass):
    name = "unroll-reductions"
    summary = "reductions over a few elements -> pointwise nodes that combine them (inlinable)"
    input_level = "loop"
    options = {
        "max-size": Option(int, 8, "unroll reductions of at most this many reduced elements"),
    }

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            done = unroll_graph(g, self.max_size)  # type: ignore[attr-defined]
            self.statistics["unrolled"] = self.statistics.get("unrolled", 0) + done
        return module


def unroll_graph(g: Graph, max_size: int) -> int:
    """Unroll every reduction of ``g`` the rules allow, in place; returns how many."""
    in_kernel = {id(n) for k in g.kernels for n in k.nodes}
    outputs = {id(v) for v in g.outputs}
    users = g.users()
    done = 0
    for n in g.nodes:
        if not isinstance(n, LoopNode) or id(n) in in_kernel or not unrollable(n, max_size):
            continue
        readers = users.get(id(n.result), [])
        # only where inlining may take it into its readers: a graph output, a view or an
        # extern's input stays realized, and as a reduction it can still fuse with the
        # pointwise node it reads (a row sum of a relu the caller also gets: one kernel);
        # a reader that visits more elements reads it broadcast (a softmax's row max)
        if id(n.result) in outputs or not readers:
            continue
        if not all(isinstance(u, LoopNode) and _visits(u) <= _visits(n, False) for u in readers):
            continue
        unroll_node(n)
        done += 1
    return done


def _visits(n: LoopNode, reduced: bool = True) -> Any:
    """How many elements ``n``'s loops visit (``reduced``: its reduction loops too); a symbolic
    size counts as 2, the smallest a dynamic size is."""
    loops = n.ranges + n.reduction_ranges if reduced else n.ranges
    total = sympy.sympify(dims_mul([s for _, s in loops]))
    return total.subs({sym: 2 for sym in total.free_symbols}) if total.free_symbols else total


def unrollable(n: LoopNode, max_size: int) -> bool:
    if n.reduction not in UNROLLABLE or len(n.results) != 1 or n.body is None:
        return False
    if n.schedule is not None or not n.reduction_ranges:
        return False
    sizes = [s for _, s in n.reduction_ranges]
    if not all(isinstance(s, int) for s in sizes) or not 1 <= math.prod(sizes) <= max_size:
        return False
    y = n.body.result
    if not isinstance(y, BodyValue) or y.dtype is None:
        return False  # a literal yield, or a body not verified yet: its dtypes unknown
    return not any(op.opcode == "indirect" for op in n.body.ops)


def unroll_node(n: LoopNode) -> None:
    """Make reduction ``n`` pointwise: its body copied once per reduced element (the reduction
    variables replaced by their values, row-major), the copies combined by the reduction's
    merge in its state dtype and the total cast to the result's dtype."""
    assert n.body is not None and n.reduction is not None
    y = n.body.result
    assert isinstance(y, BodyValue) and y.dtype is not None
    kind = n.reduction
    acc_dtype = state(kind, y.dtype)[0].dtype
    step = merge(kind, y.dtype).steps[0]  # the one step of a sum/prod/max/min/any merge
    builder = BodyInliner({})
    builder.ranges = tuple(n.ranges)
    builder.ops, builder.table, builder.memo = [], {}, {}
    rvars = [v for v, _ in n.reduction_ranges]
    total = None
    for values in itertools.product(*(range(int(s)) for _, s in n.reduction_ranges)):
        items = tuple((v, sympy.Integer(k)) for v, k in zip(rvars, values))
        vmap = VarMap(items, renaming=False, identity=False, affine=False)
        term = builder.expand_leaf(n, vmap, None)
        if y.dtype != acc_dtype:
            term = builder.op("cast", acc_dtype, [term], acc_dtype, n.loc)
        total = (
            term if total is None else builder.op(step.op, acc_dtype, [total, term], None, n.loc)
        )
    assert total is not None
    result_dtype = n.results[0].type.dtype
    if result_dtype != acc_dtype:
        total = builder.op("cast", result_dtype, [total], result_dtype, n.loc)
    elements = math.prod(int(s) for _, s in n.reduction_ranges)
    n.attrs["unrolled"] = f"{kind} over {elements} elements"
    n.body = Body(builder.ops, total, n.body.yield_loc)
    n.reduction = None
    n.reduction_ranges = []
