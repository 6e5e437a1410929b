"""``chunk-collectives``: split a matmul whose result only feeds an all-reduce into row chunks,
each all-reduced on its own, so that one chunk's communication runs while the next chunk's
matmul computes.

In a row-parallel layer (tensor parallelism: the output projection of attention, the down
projection of an MLP) each rank multiplies its slice and the partial products are summed over
the ranks::

    %mm = matmul %a, %w : bf16[4096, 4096]
    %y = reshape %mm : bf16[1, 4096, 4096]
    %r = extern "_c10d_functional.all_reduce.default"(%y, "sum", "0") {effect = "collective"}
    %w8 = extern "_c10d_functional.wait_tensor.default"(%r) {effect = "collective", ...}

The all-reduce cannot start before the whole matmul has finished, and whatever follows needs
its data: the communication overlaps nothing (``fir.explain`` says so). An all-reduce acts on
each element alone, so it commutes with taking rows: with ``chunks=2`` the pass writes::

    %a.c0 = slice %a {dim = 0, start = 0, end = 2048}
    %mm.c0 = matmul %a.c0, %w
    %r.c0 = extern all_reduce(%mm.c0, "sum", "0")     # starts while %mm.c1 computes
    %a.c1 = slice %a {dim = 0, start = 2048, end = 4096}
    %mm.c1 = matmul %a.c1, %w
    %r.c1 = extern all_reduce(%mm.c1, "sum", "0")
    %w8.c0 = extern wait_tensor(%r.c0)
    %w8.c1 = extern wait_tensor(%r.c1)
    %r.cat = cat %r.c0, %r.c1 {dim = 0}                # a view: read in place by its consumer
    %r.y = reshape %r.cat : bf16[1, 4096, 4096]

``dce`` then starts each chunk's all-reduce as soon as its matmul is done and puts the waits
last, so all chunks' communication but the last overlaps a matmul (PyTorch's async tensor
parallelism does the same with its own kernels; Inductor does not by default). The ``cat`` is
lowered as a loop body reading each chunk where its rows are, and is inlined into the kernel
that reads the sum: no copy. The results are the same numbers up to the matmul library's
choice of kernel for the smaller shapes.

Only matmuls big enough to pay for the extra calls are split: the all-reduced tensor must have
``min-bytes`` (each chunk is then still a large transfer) and each chunk ``min-rows`` rows
(a matmul of fewer rows runs the GPU at a fraction of its rate).
"""

from __future__ import annotations

from fir.ir.graph import ExternNode, Graph, Module, Node, TensorOp, Value, unique_name
from fir.ir.rewrite import substitute_operands
from fir.ir.types import TensorType

from ..base import Option, OptionError, Pass

ALL_REDUCE = "_c10d_functional.all_reduce.default"
WAIT = "_c10d_functional.wait_tensor.default"


class ChunkCollectivesPass(Pass):
    name = "chunk-collectives"
    summary = "split a matmul feeding an all-reduce into chunks whose communication overlaps"
    options = {
        "chunks": Option(int, 2, "row chunks per split matmul"),
        "min-bytes": Option(int, 8 << 20, "smallest all-reduced tensor split, in bytes"),
        "min-rows": Option(int, 512, "fewest rows a chunk's matmul may have"),
    }

    def apply(self, module: Module) -> Module:
        chunks: int = self.chunks  # type: ignore[attr-defined]
        if chunks < 1:
            raise OptionError("chunks", f"chunks must be at least 1, not {chunks}")
        split = 0
        for g in module.funcs:
            split += self.run_graph(g, chunks)
        self.statistics["split"] = split
        return module

    def run_graph(self, g: Graph, chunks: int) -> int:
        if chunks == 1:
            return 0
        users = g.users()
        taken = {v.name for v in g.values()}
        split = 0
        for node in list(g.nodes):
            found = self._match(g, node, users)
            if found is None:
                continue
            mm, chain, wait = found
            assert isinstance(node, ExternNode)  # _match matches only an all-reduce call
            m, n_cols = mm.result.type.shape
            assert isinstance(m, int)
            rows = min(chunks, m // max(self.min_rows, 1))  # type: ignore[attr-defined]
            nbytes = m * n_cols * mm.result.type.dtype.itemsize
            if rows < 2 or nbytes < self.min_bytes:  # type: ignore[attr-defined]
                continue
            self._split(g, mm, chain, node, wait, rows, taken)
            users = g.users()
            split += 1
        return split

    def _match(
        self, g: Graph, node: Node, users: dict[int, list[Node]]
    ) -> tuple[TensorOp, list[TensorOp], ExternNode] | None:
        """``node`` is an all-reduce of a static 2-d matmul's result (through reshapes that
        nothing else reads), with one wait: the matmul, the reshapes in order, the wait."""
        if not (isinstance(node, ExternNode) and node.callee == ALL_REDUCE and node.args):
            return None
        source = node.args[0]
        if not isinstance(source, Value) or len(users.get(id(source), [])) != 1:
            return None
        chain: list[TensorOp] = []
        v = source
        while isinstance(v.owner, TensorOp) and v.owner.op == "reshape":
            chain.append(v.owner)
            inner = v.owner.operands[0]
            if not isinstance(inner, Value) or len(users.get(id(inner), [])) != 1:
                return None
            v = inner
        mm = v.owner
        if not (isinstance(mm, TensorOp) and mm.op == "matmul" and len(mm.operands) == 2):
            return None
        a, b = mm.operands
        if not (isinstance(a, Value) and isinstance(b, Value)):
            return None
        if a.type.rank != 2 or b.type.rank != 2 or not mm.result.type.is_static:
            return None
        waits = [
            u
            for u in users.get(id(node.result), [])
            if isinstance(u, ExternNode) and u.callee == WAIT
        ]
        if len(waits) != 1 or len(node.results) != 1:
            return None
        chain.reverse()  # from the matmul's result to the all-reduce's argument
        return mm, chain, waits[0]

    def _split(
        self,
        g: Graph,
        mm: TensorOp,
        chain: list[TensorOp],
        reduce: ExternNode,
        wait: ExternNode,
        chunks: int,
        taken: set[str],
    ) -> None:
        a, b = mm.operands
        assert isinstance(a, Value) and isinstance(b, Value)
        out = mm.result.type
        m, n_cols = out.shape
        assert isinstance(m, int)
        bounds = [m * k // chunks for k in range(chunks + 1)]
        name = reduce.result.name
        starts: list[Node] = []
        waits: list[Node] = []
        parts: list[Value] = []
        for k in range(chunks):
            lo, hi = bounds[k], bounds[k + 1]
            rows = TensorType(a.type.dtype, (hi - lo, a.type.shape[1]))
            part = Value(unique_name(f"{a.name}.c{k}", taken), rows)
            sl = TensorOp([part], {"dim": 0, "start": lo, "end": hi}, mm.loc, op="slice")
            sl.operands = [a]
            part.owner = sl
            prod_t = TensorType(out.dtype, (hi - lo, n_cols))
            prod = Value(unique_name(f"{mm.result.name}.c{k}", taken), prod_t)
            chunk_mm = TensorOp([prod], dict(mm.attrs), mm.loc, op="matmul", operands=[part, b])
            prod.owner = chunk_mm
            chunk_reduce = _retarget(reduce, prod, unique_name(f"{name}.c{k}", taken))
            summed = chunk_reduce.result
            chunk_wait = _retarget(wait, summed, unique_name(f"{wait.result.name}.c{k}", taken))
            starts += [sl, chunk_mm, chunk_reduce]
            waits.append(chunk_wait)
            parts.append(summed)
        whole = Value(unique_name(f"{name}.cat", taken), TensorType(out.dtype, (m, n_cols)))
        cat = TensorOp([whole], {"dim": 0}, reduce.loc, op="cat", operands=list(parts))
        whole.owner = cat
        waits.append(cat)
        result = whole
        for r in chain:  # the reshapes between the matmul and the all-reduce, now after it
            shaped = Value(unique_name(f"{name}.{r.result.name}", taken), r.result.type)
            again = TensorOp([shaped], dict(r.attrs), r.loc, op="reshape", operands=[result])
            shaped.owner = again
            waits.append(again)
            result = shaped
        # the all-reduce's readers now read the chunks' sum; its wait's, the same (the wait
        # returns its argument)
        subst = {id(reduce.result): result, id(wait.result): result}
        dropped = {id(mm), id(reduce), id(wait), *(id(r) for r in chain)}
        nodes: list[Node] = []
        for n in g.nodes:
            if n is reduce:
                nodes += starts
            elif n is wait:
                nodes += waits
            elif id(n) not in dropped:
                substitute_operands(n, subst)
                nodes.append(n)
        g.nodes = nodes
        g.outputs = [subst.get(id(v), v) for v in g.outputs]


def _retarget(call: ExternNode, first: Value, name: str) -> ExternNode:
    """A copy of ``call`` whose first argument is ``first``, with one result ``name`` of
    ``first``'s type (an all-reduce or a wait moved onto one chunk)."""
    result = Value(name, first.type)
    copy = ExternNode(
        [result],
        dict(call.attrs),
        call.loc,
        callee=call.callee,
        args=[first, *call.args[1:]],
        kwargs=dict(call.kwargs),
    )
    result.owner = copy
    return copy
