"""``pad-matmul``: give a large matmul whose inner or output dimension is unaligned padded
operands, so that the GPU's matmul library can take its fast kernels.

cuBLAS runs its Hopper kernels (TMA loads and stores) only where every matrix's leading
dimension is a multiple of 16 bytes. GPT-2's LM head multiplies ``[4096, 768]`` by the
transposed ``[50257, 768]`` embedding into ``[4096, 50257]`` bf16 rows of 100,514 bytes: cuBLAS
falls back to an sm75 kernel that takes 3.3 ms on an H200, where the same product with 50,264
columns takes 0.44 ms. The pass writes the padding out, where it can be read and tested::

    %mm = matmul %x, %wt : bf16[4096, 50257]

becomes::

    %wt.pad = pad %wt {pad = [0, 7]} : bf16[768, 50264]      # zero columns: a copy of the weight
    %mm.pad = matmul %x, %wt.pad : bf16[4096, 50264]         # the aligned product
    %mm = slice %mm.pad {dim = 1, start = 0, end = 50257}    # a view: no copy

The slice is a view that its readers index with the padded row stride: a fused reader (the
loss, a softmax) reads the padded product in place, and only a result PyTorch must see dense
is copied once. An unaligned inner dimension ``K`` is padded with zeros on both operands, which
adds zeros to each dot product. The extra work is a copy of the padded operands and, at most,
one copy of the product. ``benchmarks/gemm_padding.py`` measured where that pays on an H200
(docs/benchmarks/gemm-padding.md): 3.4x for the LM head, 1.1x at 3e8 multiply-adds, a loss
(0.92x) at 7e7; ``min-macs`` is 2^28 (2.7e8).

A product that is only returned to the user (through views), with unaligned output rows but
aligned operands (GPT-2's LM head at inference), is not padded: the copy into dense rows would
undo much of the gain (on an H200: 0.56 ms for the padded product with its padded weight, then
0.22 ms for FIR's copy kernel, 0.42 for ATen's). It calls FIR's own matmul, which writes dense
rows of any length (0.59 ms; :mod:`fir.ir.fir_ops`; GPT-2's inference step 2.64 -> 2.48 ms of
device time). So does a product of at most :data:`MM_T_ROWS` rows that kernels read, where
``fir.mm_t`` is as fast as padding or faster (a decoding step's LM head: 8 rows, 0.039 ms
against 0.095)::

    %x.rows = reshape %x : bf16[4096, 768]
    %mm.rows = extern "fir.mm_t.default"(%x.rows, %w) : bf16[4096, 50257]   # a @ w.T
    %mm = reshape %mm.rows : bf16[8, 512, 50257]

``mm-t=false`` pads such a product too.

Only the ``cuda`` pipeline runs this pass: CPU BLAS libraries have no such cliff.
"""

from __future__ import annotations

from typing import Any

import sympy
from fir.ir.dtypes import DType
from fir.ir.graph import ExternNode, Graph, Module, Node, Operand, TensorOp, Value, unique_name
from fir.ir.ops import OPS
from fir.ir.rewrite import substitute_operands
from fir.ir.symbolic import evaluate, free_symbols, size_symbol
from fir.ir.types import TensorType

from ..base import Option, OptionError, Pass

ALIGN_BYTES = 16  # what cuBLAS's TMA kernels need of every leading dimension
_PADDED_DTYPES = frozenset({DType.F16, DType.BF16, DType.F32})
# what FIR's own dense-row matmul takes (its Triton kernel multiplies f16/bf16 on tensor cores;
# an f32 product stays cuBLAS's, in full f32 as eager computes it)
_MM_T_DTYPES = frozenset({DType.F16, DType.BF16})
MM_T = "fir.mm_t.default"
# the most rows (at the traced sizes) for which fir.mm_t also takes a product that kernels read:
# up to 2,048 rows it was as fast as the padded product with its padded weight or faster on an
# H200 (8 x 768 x 50257: 0.039 ms against 0.095; 2048 x 2048 x 32001: 0.434 against 0.470), at
# 4,096 rows 5% slower (docs/benchmarks/gemm-padding.md)
MM_T_ROWS = 2048


def padded(size: int, itemsize: int) -> int:
    """``size`` rounded up so that ``size * itemsize`` is a multiple of 16 bytes."""
    step = max(ALIGN_BYTES // itemsize, 1)
    return -(-size // step) * step


class PadMatmulPass(Pass):
    name = "pad-matmul"
    summary = "pad a large matmul's unaligned inner or output dimension (GPU matmul libraries)"
    options = {
        "min-macs": Option(int, 1 << 28, "smallest product padded, in multiply-adds (M*N*K)"),
        "mm-t": Option(
            bool, True, "write a returned product with unaligned rows by fir.mm_t, not padded"
        ),
    }

    def apply(self, module: Module) -> Module:
        min_macs: int = self.min_macs  # type: ignore[attr-defined]
        if min_macs < 0:
            raise OptionError("min-macs", f"min-macs must be at least 0, not {min_macs}")
        count = dense = 0
        for g in module.funcs:
            padded_here, dense_here = self.run_graph(g, min_macs, bool(self.mm_t))  # type: ignore[attr-defined]
            count += padded_here
            dense += dense_here
        self.statistics["padded"] = count
        self.statistics["dense-rows"] = dense
        return module

    def run_graph(self, g: Graph, min_macs: int, mm_t: bool = True) -> tuple[int, int]:
        taken = {v.name for v in g.values()}
        nodes: list[Node] = []
        subst: dict[int, Value] = {}
        count = dense = 0
        returned = _returned_only(g) if mm_t else set()
        # one padded copy of a value however many products read it (an output gradient feeds
        # both the input's and the weight's gradient)
        pads: dict[tuple[int, tuple[int, ...]], Value] = {}
        hints = size_hints(g)
        for n in g.nodes:
            substitute_operands(n, subst)
            plan = _plan(n, min_macs, hints)
            if plan is None:
                nodes.append(n)
                continue
            assert isinstance(n, TensorOp)
            few_rows = mm_t and _rows(n, hints) <= MM_T_ROWS
            if (id(n.results[0]) in returned or few_rows) and _dense_rows_fit(n, plan):
                new, result = _dense_rows(n, taken)
                dense += 1
            else:
                new, result = _rewrite(n, plan, taken, pads)
                count += 1
            nodes += new
            subst[id(n.results[0])] = result
        g.nodes = nodes
        g.outputs = [subst.get(id(v), v) for v in g.outputs]
        return count, dense


def _returned_only(g: Graph) -> set[int]:
    """The values (by id) that only reach the graph's outputs, through views: nothing computes
    with them, so the user is their one reader and gets them in eager's dense strides."""
    readers: dict[int, list[Node]] = {}
    for n in g.nodes:
        for v in n.operand_values():
            readers.setdefault(id(v), []).append(n)
    outputs = {id(v) for v in g.outputs}
    memo: dict[int, bool] = {}

    def only_returned(v: Value) -> bool:
        if id(v) not in memo:
            users = readers.get(id(v), [])
            views = all(isinstance(u, TensorOp) and OPS[u.op].category == "view" for u in users)
            memo[id(v)] = views and (
                id(v) in outputs or bool(users) and all(only_returned(u.results[0]) for u in users)
            )
        return memo[id(v)]

    return {id(v) for n in g.nodes for v in n.results if only_returned(v)}


def _rows(mm: TensorOp, hints: dict[sympy.Symbol, int]) -> int:
    """The rows of ``mm``'s product (its left operand's leading dimensions) at the traced
    sizes; a very large number where they are unknown."""
    a = mm.operands[0]
    assert isinstance(a, Value)
    m: Any = 1
    for r in a.type.shape[:-1]:
        m *= r
    if isinstance(m, int):
        return m
    if not free_symbols(m) <= set(hints):
        return 1 << 62
    return int(evaluate(m, hints))


def _dense_rows_fit(mm: TensorOp, plan: tuple[Any, int, int]) -> bool:
    """Whether ``fir.mm_t`` takes the product: f16/bf16, only the output's rows unaligned,
    ``b`` a weight read transposed (``linear``), so that both operands lie with aligned rows."""
    a, b = mm.operands
    assert isinstance(a, Value) and isinstance(b, Value)
    m2, k2, n2 = plan
    *rows, k = a.type.shape
    m: Any = 1
    for r in rows:
        m *= r
    if mm.results[0].type.dtype not in _MM_T_DTYPES or (m2, k2) != (m, k):
        return False
    return n2 != b.type.shape[1] and _transposed_matrix(b) is not None


def _dense_rows(mm: TensorOp, taken: set[str]) -> tuple[list[Node], Value]:
    """``a @ w.T`` by ``fir.mm_t``, ``a``'s leading dimensions flattened into rows."""
    a, b = mm.operands
    assert isinstance(a, Value) and isinstance(b, Value)
    w = _transposed_matrix(b)
    assert w is not None
    result = mm.results[0]
    dtype = result.type.dtype
    *rows, k = a.type.shape
    m: Any = 1
    for r in rows:
        m *= r
    nodes: list[Node] = []

    def reshape(x: Value, shape: tuple, name: str) -> Value:
        v = Value(unique_name(name, taken), TensorType(dtype, shape))
        v.owner = TensorOp([v], {}, mm.loc, op="reshape", operands=[x])
        nodes.append(v.owner)
        return v

    if len(rows) != 1:
        a = reshape(a, (m, k), a.name + ".rows")
    cols = result.type.shape[-1]
    out = Value(
        unique_name(result.name + (".rows" if len(rows) != 1 else ".t"), taken),
        TensorType(dtype, (m, cols)),
    )
    call = ExternNode([out], loc=mm.loc, callee=MM_T, args=[a, w], kwargs={})
    out.owner = call
    nodes.append(call)
    if len(rows) != 1:
        out = reshape(out, result.type.shape, result.name + ".dense")
    return nodes, out


def size_hints(g: Graph) -> dict[sympy.Symbol, int]:
    """:meth:`~fir.ir.graph.Graph.size_hints` by symbol."""
    return {size_symbol(name): value for name, value in g.size_hints().items()}


def _plan(
    n: Node, min_macs: int, hints: dict[sympy.Symbol, int] | None = None
) -> tuple[Any, int, int] | None:
    """(padded M, padded K, padded N) for a matmul of a matrix or a batch of rows (``a`` of
    rank 2 or more) by a static matrix, worth padding; None otherwise. M may be symbolic (a
    dynamic sequence length): the product counts at the size the graph was traced at (its
    ``hints``), and is padded only in K and N; with no hint it is not padded."""
    if not (isinstance(n, TensorOp) and n.op == "matmul" and len(n.operands) == 2):
        return None
    a, b = n.operands
    if not (isinstance(a, Value) and isinstance(b, Value)):
        return None
    if a.type.rank < 2 or b.type.rank != 2 or not b.type.is_static:
        return None
    dtype = n.results[0].type.dtype
    if dtype not in _PADDED_DTYPES or a.type.dtype != dtype or b.type.dtype != dtype:
        return None
    *rows, k = a.type.shape
    cols = b.type.shape[1]
    if not isinstance(k, int):
        return None
    assert isinstance(cols, int)
    m: Any = 1
    for r in rows:
        m *= r
    typical = m
    if not isinstance(m, int):
        env = hints or {}
        if not free_symbols(m) <= set(env):
            return None
        typical = int(evaluate(m, env))
    if typical * k * cols < min_macs:
        return None
    k2, n2 = padded(k, dtype.itemsize), padded(cols, dtype.itemsize)
    # a transposed ``a`` (a weight gradient's ``g.t() @ x``) lies with M as its row stride
    m2 = m
    if isinstance(m, int) and len(rows) == 1 and _transposed_matrix(a):
        m2 = padded(m, dtype.itemsize)
    if (m2, k2, n2) == (m, k, cols):
        return None
    return m2, k2, n2


def _rewrite(
    mm: TensorOp,
    plan: tuple[int, int, int],
    taken: set[str],
    pads: dict[tuple[int, tuple[int, ...]], Value],
) -> tuple[list[Node], Value]:
    a, b = mm.operands
    assert isinstance(a, Value) and isinstance(b, Value)
    m2, k2, n2 = plan
    *rows, k = a.type.shape
    cols = b.type.shape[1]
    dtype = mm.results[0].type.dtype
    nodes: list[Node] = []
    name = mm.results[0].name

    def op(kind: str, operands: list[Operand], attrs: dict, shape: tuple, hint: str) -> Value:
        v = Value(unique_name(hint, taken), TensorType(dtype, shape))
        node = TensorOp([v], attrs, mm.loc, op=kind, operands=operands)
        v.owner = node
        nodes.append(node)
        return v

    def pad(x: Value, widths: list[int], shape: tuple) -> Value:
        key = (id(x), tuple(widths))
        if key not in pads:
            pads[key] = op("pad", [x], {"pad": widths, "value": 0.0}, shape, f"{x.name}.pad")
        return pads[key]

    pad_rows = len(rows) == 1 and m2 != rows[0]
    if pad_rows:  # ``a`` is ``g`` transposed: pad ``g`` as it lies (M its columns)
        g = _transposed_matrix(a)
        assert g is not None
        gp = pad(g, [0, m2 - rows[0], 0, k2 - k], (k2, m2))
        a = op("transpose", [gp], {"dim0": 0, "dim1": 1}, (m2, k2), f"{a.name}.pad")
    elif k2 != k:
        a = pad(a, [0, k2 - k] if len(rows) > 1 else [0, k2 - k, 0, 0], (*rows, k2))
    if k2 != k or n2 != cols:
        w = _transposed_matrix(b)
        if w is not None:
            # ``b`` is a weight ``w`` read transposed (``linear``): pad ``w`` as it lies, a
            # plain copy, and read the padded copy transposed as the library reads ``w``
            wp = pad(w, [0, k2 - k, 0, n2 - cols], (n2, k2))
            b = op("transpose", [wp], {"dim0": 0, "dim1": 1}, (k2, n2), f"{b.name}.pad")
        else:
            # pad lists (low, high) per dimension from the last: columns first, then rows
            b = pad(b, [0, n2 - cols, 0, k2 - k], (k2, n2))
    lead = [m2] if pad_rows else rows
    out = op("matmul", [a, b], dict(mm.attrs), (*lead, n2), f"{name}.pad")
    if n2 != cols:  # the product's padded columns are not the result's
        cut = {"dim": len(rows), "start": 0, "end": cols}
        out = op("slice", [out], cut, (*lead, cols), name + ".cols")
    if pad_rows:  # nor its padded rows
        out = op(
            "slice", [out], {"dim": 0, "start": 0, "end": rows[0]}, (*rows, cols), name + ".rows"
        )
    return nodes, out


def _transposed_matrix(b: Value) -> Value | None:
    """The matrix ``b`` transposes (``transpose`` or ``permute [1, 0]`` of a 2-d value)."""
    t = b.owner
    if not (isinstance(t, TensorOp) and t.op in ("transpose", "permute") and t.operands):
        return None
    w = t.operands[0]
    if not isinstance(w, Value) or w.type.rank != 2:
        return None
    if t.op == "permute" and list(t.attrs.get("dims", [])) != [1, 0]:
        return None
    return w
