"""``split-reductions``: a reduction with few outputs and many reduced elements becomes two, so
that a GPU runs it on many programs instead of one.

A Triton kernel runs one program per block of outputs; a whole-tensor ``sum`` (a loss, a mean, a
norm) has one output, so one program on one of the GPU's 132 multiprocessors walks all of its
input. The pass cuts the outermost reduction loop into ``parts`` chunks:

```
%s = reduction sum : f32[] over (; r0 < 16384) { … r0 … }
```

becomes a first node that reduces each chunk (its chunk number a new pointwise loop, outermost)
and a second that reduces the chunks' partial results:

```
%s.part = reduction sum : f32[64] over (i0 < 64; r0 < 256) { … 256*i0 + r0 … }
%s = reduction sum : f32[] over (; r0 < 64) { %0 = load %s.part[r0]; yield %0 }
```

The second keeps the original result value (its readers are unchanged) and its attributes; the
first's ``realized`` attribute names the node it was split from. Measured on an H100 (the loss
of cross_entropy over 16,384 rows, one gathered logit each): 28 us in one program, 9.5 us in 64
programs and a second kernel.

Which reductions split:

- ``sum``, ``prod``, ``max``, ``min`` and ``any``, whose partial results combine with the same
  reduction (``argmax``/``argmin`` and ``welford`` would need pairs and triples);
- at most ``max-outputs`` programs and at least ``min-size`` reduced elements a program, all
  sizes static: a row reduction runs one output a program, a column reduction (its outputs
  contiguous) 32 (2,048 columns of 2,048 rows, Llama's RMS-norm weight gradient, ran on 64
  programs: 58 us on an H200, Inductor's split kernels 12);
- a float ``prod`` only in f32 or f64: the partials have the result's dtype, and f16/bf16
  partials would round once per chunk where the unsplit reduction rounds once. An f16/bf16
  ``sum`` (which accumulates in f32 and rounds once) splits into f32 partials, an f32 sum of them
  and a cast to the result's dtype: one rounding, as before (Llama's bf16 RMS-norm weight
  gradients, 2,048 columns of 2,048 rows, one per layer in the backward);
- the outermost reduction loop must have a divisor ``d`` (the number of chunks) with at least
  ``min-chunk`` elements per chunk; the largest such ``d`` up to ``parts`` is taken, and at
  most 8,192 partial blocks (programs x chunks) are made.

The pass runs before ``deps`` (it is in the ``cuda`` pipeline, not in ``fusion``: the C++ and
llvm back ends parallelize over pointwise loops and run these reductions on one core either way).
"""

from __future__ import annotations

import math

import sympy
from fir.ir.dtypes import DType
from fir.ir.graph import Body, BodyOp, BodyValue, Graph, LoopNode, Module, Value, unique_name
from fir.ir.symbolic import index_var, walks_columns
from fir.ir.types import TensorType

from ..base import Option, Pass

# partial results combine with the reduction that made them
SPLITTABLE = ("sum", "prod", "max", "min", "any")
# the most partial blocks (programs x chunks) a split makes
PARTIALS = 8192
# outputs a Triton program of a column reduction computes (its block of contiguous columns)
COLUMN_BLOCK = 32
# float sums whose partials are f32 (the unsplit sum accumulates in f32 and rounds once)


class SplitReductionsPass(Pass):
    name = "split-reductions"
    summary = "split reductions with few outputs into per-chunk partials and their reduction"
    input_level = "loop"
    options = {
        "max-outputs": Option(
            int, 512, "split only reductions of at most this many programs (32 columns each)"
        ),
        "min-size": Option(int, 4096, "split only reductions of at least this many elements"),
        "parts": Option(int, 64, "the most chunks a reduction is split into"),
        "min-chunk": Option(int, 256, "the fewest reduced elements in one chunk"),
    }

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            done = split_graph(g, self.max_outputs, self.min_size, self.parts, self.min_chunk)  # type: ignore[attr-defined]
            self.statistics["split"] = self.statistics.get("split", 0) + done
        return module


def split_graph(g: Graph, max_outputs: int, min_size: int, parts: int, min_chunk: int) -> int:
    """Split every reduction of ``g`` the rules allow (nodes of a kernel are left alone: their
    fusion was decided); returns how many were split."""
    in_kernel = {id(n) for k in g.kernels for n in k.nodes}
    taken = {v.name for v in g.values()}
    users = g.users()
    outputs = {id(v) for v in g.outputs}
    out: list = []
    done = 0
    for n in g.nodes:
        chunks = (
            0
            if id(n) in in_kernel or not isinstance(n, LoopNode)
            else chunk_count(n, max_outputs, min_size, parts, min_chunk)
        )
        if chunks < 2:
            out.append(n)
            continue
        assert isinstance(n, LoopNode)  # only a loop node has chunks
        name = n.results[0].name
        # before split_node, which rewrites the body's indices in place
        stored = stored_producers(n, users, outputs) if _is_column(n) else []
        nodes = split_node(
            n, chunks, unique_name(f"{name}.part", taken), unique_name(f"{name}.f32", taken)
        )
        if stored:
            nodes[0].attrs["nofuse"] = stored
        out += nodes
        done += 1
    g.nodes = out
    return done


def chunk_count(n: LoopNode, max_outputs: int, min_size: int, parts: int, min_chunk: int) -> int:
    """How many chunks ``n``'s reduction is split into; 0 where it is not split."""
    if n.reduction not in SPLITTABLE or len(n.results) != 1 or n.body is None:
        return 0
    dtype = n.results[0].type.dtype
    if n.reduction == "prod" and dtype.is_float and dtype not in (DType.F32, DType.F64):
        return 0
    if (
        n.reduction == "sum"
        and dtype.is_float
        and dtype.compute_dtype not in (DType.F32, DType.F64)
    ):
        return 0
    sizes = [s for _, s in n.ranges + n.reduction_ranges]
    if not all(isinstance(s, int) for s in sizes):
        return 0
    outputs = math.prod(s for _, s in n.ranges)
    total = math.prod(s for _, s in n.reduction_ranges)
    # a column reduction (its outputs contiguous, its reduced elements strided) runs
    # COLUMN_BLOCK outputs per program: Llama's RMS-norm weight gradients, 2,048 columns of
    # 2,048 rows, ran on 64 programs (58 us each on an H200, Inductor's split ones 12)
    per_program = COLUMN_BLOCK if _is_column(n) else 1
    programs = -(-outputs // per_program)
    if programs > max_outputs or per_program * total < min_size:
        return 0
    outer = n.reduction_ranges[0][1]
    assert isinstance(outer, int)
    best = 0
    # programs x chunks partial blocks at most: enough programs to fill a GPU, few enough
    # that the second reduction stays small
    for d in range(2, min(parts, outer, max(2, PARTIALS // programs)) + 1):
        if outer % d == 0 and total // d >= min_chunk:
            best = d
    return best


def stored_producers(n: LoopNode, users: dict[int, list], outputs: set[int]) -> list[Value]:
    """The pointwise buffers ``n`` loads that are written to memory whatever fuses: read by
    another node too, or returned. A column reduction's partial does not take them in
    (``nofuse``): its blocks are shaped for the sum (32 columns of 8 rows, 2 elements a thread:
    narrow loads and stores), while the producer's own kernel writes in full-width vectors and
    the partial reads the result back from the L2 cache. BERT's GELU backward, stored for the
    two GEMMs of its layer's backward, and its bias gradient: 25.6 us a layer as one kernel,
    about 18 apart (14.6 the GELU, the rest the partial; in the training step on an H200)."""
    assert n.body is not None
    out: dict[int, Value] = {}
    for op in n.body.loads():
        v = op.buffer
        p = v.owner if v is not None else None
        if v is None or not isinstance(p, LoopNode) or p.reduction is not None:
            continue
        if len(users.get(id(v), [])) > 1 or id(v) in outputs:
            out.setdefault(id(v), v)
    return list(out.values())


def _is_column(n: LoopNode) -> bool:
    """Whether ``n`` reduces across its outputs' contiguous dimension (the block schedule's
    rule, :func:`fir.ir.symbolic.walks_columns`)."""
    if not n.ranges or not n.reduction_ranges or n.body is None:
        return False
    loads = [
        sympy.sympify(op.index) for op in n.body.ops if op.opcode == "load" and op.index is not None
    ]
    return walks_columns(loads, [v for v, _ in n.ranges], [v for v, _ in n.reduction_ranges])


def split_node(n: LoopNode, chunks: int, part_name: str, wide_name: str = "") -> list[LoopNode]:
    """The node reducing each of ``chunks`` chunks of ``n``'s outermost reduction loop, and the
    node reducing their partial results into ``n``'s result. An f16/bf16 sum has f32 partials,
    reduced into an f32 buffer (``wide_name``) that a third, pointwise node casts to ``n``'s
    result."""
    assert n.body is not None
    result = n.results[0]
    narrow = result.type.dtype.is_narrow_float
    acc = DType.F32 if narrow else result.type.dtype
    outer_var, outer_size = n.reduction_ranges[0]
    assert isinstance(outer_size, int)
    chunk = outer_size // chunks
    # the first node's loops: the chunk number (i0), the old pointwise loops (i1, …), the
    # reduction loops as they were, the outermost now one chunk long
    renamed = {v: index_var(f"i{k + 1}") for k, (v, _) in enumerate(n.ranges)}
    chunk_var = index_var("i0")
    ranges = [(chunk_var, chunks)] + [(renamed[v], s) for v, s in n.ranges]
    red = [(outer_var, chunk)] + list(n.reduction_ranges[1:])
    subst: dict[sympy.Basic, sympy.Expr] = dict(renamed)
    subst[outer_var] = chunk * chunk_var + outer_var
    ops = [_with_index(op, subst) for op in n.body.ops]
    yielded = n.body.result
    if narrow:  # each element widened: the sum of f32 values the unsplit node accumulates
        names = {op.result.name for op in ops}
        widened = BodyValue(unique_name(str(len(ops)), names), DType.F32)
        cast = BodyOp("cast", widened, operands=[yielded], dtype=DType.F32, loc=n.loc)
        widened.owner = cast
        ops.append(cast)
        yielded = widened
    part = Value(part_name, TensorType(acc, (chunks,) + tuple(result.type.shape)))
    first = LoopNode(
        results=[part],
        attrs={"realized": f"split reduction: {chunks} chunks of %{result.name}"},
        loc=n.loc,
        reduction=n.reduction,
        ranges=ranges,
        reduction_ranges=red,
        body=Body(ops, yielded, n.body.yield_loc),
    )
    part.owner = first
    # the second node: the old pointwise loops, one reduction loop over the chunks
    outputs = math.prod(s for _, s in n.ranges)
    linear: sympy.Expr = sympy.Integer(0)
    stride = 1
    for v, s in reversed(n.ranges):
        linear += stride * v
        stride *= s
    r0 = index_var("r0")
    total = result
    if narrow:
        total = Value(wide_name, TensorType(acc, tuple(result.type.shape)))
    loaded = BodyValue("0", acc)
    load = BodyOp("load", loaded, buffer=part, index=outputs * r0 + linear, loc=n.loc)
    loaded.owner = load
    second = LoopNode(
        results=[total],
        attrs={"realized": f"split reduction: the f32 sum of %{result.name}"}
        if narrow
        else dict(n.attrs),
        loc=n.loc,
        reduction=n.reduction,
        ranges=list(n.ranges),
        reduction_ranges=[(r0, chunks)],
        body=Body([load], loaded),
    )
    total.owner = second
    if not narrow:
        return [first, second]
    wide = BodyValue("0", acc)
    read = BodyOp("load", wide, buffer=total, index=linear, loc=n.loc)
    wide.owner = read
    rounded = BodyValue("1", result.type.dtype)
    cast = BodyOp("cast", rounded, operands=[wide], dtype=result.type.dtype, loc=n.loc)
    rounded.owner = cast
    attrs = dict(n.attrs)
    if attrs.get("realized") == "reduction":
        attrs["realized"] = f"split reduction: %{wide_name} rounded"
    third = LoopNode(
        results=[result],
        attrs=attrs,
        loc=n.loc,
        ranges=list(n.ranges),
        body=Body([read, cast], rounded),
    )
    result.owner = third
    return [first, second, third]


def _with_index(op: BodyOp, subst: dict[sympy.Basic, sympy.Expr]) -> BodyOp:
    """``op`` with its index (a load's or an ``index`` op's) rewritten by ``subst``; other ops
    are shared, unchanged (the old node is dropped)."""
    if isinstance(op.index, sympy.Basic):
        op.index = op.index.xreplace(subst)
    return op
