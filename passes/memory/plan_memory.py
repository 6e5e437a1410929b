"""``plan-memory``: when each buffer dies, which dead storage a new buffer takes over, and which
pointwise nodes write their result over an input, printed as node annotations.

For every node, in program order (Inductor's ``compute_last_usage`` and buffer reuse):

1. **In place** (option ``inplace``): a pointwise node that is the last reader of an input of the
   same dtype, byte size and contiguous layout, and loads that input only at the element it writes
   (unmasked, no indirect index), writes into the input's storage: ``inplace = %a``. The input is
   never an output, nor an argument unless ``inplace-args`` is set (arguments belong to the caller).
2. **Reuse** (option ``reuse``): otherwise a loop node's result takes over the storage of a buffer
   freed at an earlier node with the same device, dtype and byte size, the most recently freed
   first: ``reuses = %d`` (a list with one entry per result for a multi-result node).
3. **Frees**: the inputs whose last reader this node is, except arguments, outputs and the input
   taken over in place, are released after the node: ``frees = [%a, %b]``. A result nothing reads
   is released right after its own node without an annotation (no attribute can name the node's
   own result); ``dce`` normally removes it first.

Three kinds of storage are released but never handed to another buffer nor written in place:
what a collective call (``effect = "collective"``) reads, which the communication may still read
until its wait; the results of an extern call that writes an argument in place, which may be
that argument's own memory (a wait returns the tensor it waited for); and the results of an
extern call that are views of an argument (``aliases``, a view op run by PyTorch such as
``aten.view.dtype``): their memory is the argument's, the caller's when it is an input. A read
of such a view is a read of its argument too, which stays alive as long as the view.

Earlier plan annotations are dropped and planned again, so the pass can run twice. The analysis
behind it (sizes, lifetimes, peak memory) is :mod:`fir.ir.memory_plan`.
"""

from __future__ import annotations

from typing import Any

from fir.ir.externs import aliased_argument, effect_of
from fir.ir.graph import AliasNode, Graph, LoopNode, Module, Node, Value, alias_root
from fir.ir.kernels import Step, steps
from fir.ir.memory_plan import (
    PLAN_KEYS,
    footprint,
    inplace_blocker,
    kernel_inplace_blocker,
    last_reader_steps,
    node_reads,
    output_storages,
    reuse_key,
    step_reads,
)

from ..analysis.deps import mutated_values
from ..base import Option, Pass


class PlanMemoryPass(Pass):
    name = "plan-memory"
    plans_memory = True
    summary = "annotate last uses (frees), storage reuse and in-place writes"
    options = {
        "inplace": Option(
            bool, True, "let a pointwise node write over an input it is the last reader of"
        ),
        "reuse": Option(
            bool, True, "let a buffer take over dead storage of the same device, dtype and size"
        ),
        "inplace-args": Option(
            bool, False, "allow in-place writes over function arguments (the caller's storage)"
        ),
    }

    def apply(self, module: Module) -> Module:
        stats = {"freed": 0, "reused": 0, "inplace": 0}
        before: Any = 0
        after: Any = 0
        for g in module.funcs:
            reads = node_reads(g)  # the plan changes no operand: one scan serves all three walks
            counts = plan_graph(
                g,
                inplace=self.inplace,  # type: ignore[attr-defined]
                reuse=self.reuse,  # type: ignore[attr-defined]
                inplace_args=self.inplace_args,  # type: ignore[attr-defined]
                reads=reads,
            )
            for key, count in counts.items():
                stats[key] += count
            before += footprint(g, "last-use", reads).peak
            # also proves the plan safe: MemoryPlanError if it would clobber a value
            after += footprint(g, "planned", reads).peak
        for key, count in stats.items():
            self.statistics[key] = self.statistics.get(key, 0) + count
        # symbolic peaks have no single number; --stats prints them per function
        if isinstance(before, int) and isinstance(after, int):
            self.statistics["peak-bytes-before"] = (
                self.statistics.get("peak-bytes-before", 0) + before
            )
            self.statistics["peak-bytes-after"] = self.statistics.get("peak-bytes-after", 0) + after
        return module


def plan_graph(
    g: Graph,
    inplace: bool = True,
    reuse: bool = True,
    inplace_args: bool = False,
    reads: list[list[Value]] | None = None,
) -> dict[str, int]:
    """Write the plan annotations of ``g``; return how many buffers were freed, reused, in place.
    ``reads``: :func:`~fir.ir.memory_plan.node_reads` of ``g`` when the caller has it already.

    A kernel is planned as one step: its local buffers get no storage, what it is the last
    reader of is freed after its last node (``frees`` goes there), and a node of it writes in
    place only over an input no other node of the kernel reads."""
    for n in g.nodes:
        for key in PLAN_KEYS:
            n.attrs.pop(key, None)
    if reads is None:
        reads = node_reads(g)
    all_steps = steps(g)
    sreads = step_reads(g, all_steps, reads)
    readers = last_reader_steps(sreads)
    outputs = output_storages(g)
    args = {id(a) for a in g.args}
    # storages that belong to the caller: arguments, and results written in place over them
    caller_storage = set(args)
    kept = _never_recycled(g)
    pool: dict[Any, list[Value]] = {}  # reuse key -> values whose storage is free, oldest first
    counts = {"freed": 0, "reused": 0, "inplace": 0}

    for k, st in enumerate(all_steps):
        inputs = sreads[k]
        local = st.local_ids()
        dying = [v for v in inputs if readers.get(id(v)) == k and id(v) not in outputs]
        taken: Value | None = None
        writer: Node | None = None
        if inplace:
            for n in st.nodes:
                if id(n.results[0]) in local:
                    continue
                candidates = [v for v in dying if id(v) not in kept]
                taken = _pick_inplace(g, st, n, candidates, args, inplace_args)
                if taken is not None:
                    writer = n
                    break
        for n in st.nodes:
            reuses: list[Value | None] = []
            if reuse and isinstance(n, LoopNode):
                for j, r in enumerate(n.results):
                    if id(r) in local or (j == 0 and n is writer):
                        reuses.append(None)
                        continue
                    free = pool.get(reuse_key(g, n, r.type))
                    reuses.append(free.pop() if free else None)
            if n is writer:
                n.attrs["inplace"] = taken
                counts["inplace"] += 1
                if id(taken) in caller_storage:
                    caller_storage.add(id(n.result))
            if any(d is not None for d in reuses):
                n.attrs["reuses"] = reuses[0] if len(reuses) == 1 else reuses
                counts["reused"] += sum(d is not None for d in reuses)
        frees = [v for v in dying if id(v) not in args and v is not taken]
        if frees:
            st.nodes[-1].attrs["frees"] = frees
            counts["freed"] += len(frees)

        # released after this step, so offered from the next step on; a result nothing reads too
        dead = [
            r
            for n in st.nodes
            if not isinstance(n, AliasNode)  # an alias has no storage to give back
            for r in n.results
            if id(r) not in readers and id(r) not in outputs and id(r) not in local
        ]
        for v in frees + dead:
            if id(v) not in caller_storage and id(v) not in kept:
                owner = v.owner
                pool.setdefault(reuse_key(g, owner, v.type), []).append(v)
    return counts


def _never_recycled(g: Graph) -> set[int]:
    """``id`` of the values whose storage no other buffer may take over (module docstring)."""
    out: set[int] = set()
    for n in g.nodes:
        if effect_of(n) == "collective" and not mutated_values(n):
            out.update(id(alias_root(v)) for v in n.operand_values())
        if mutated_values(n):
            out.update(id(r) for r in n.results)
        # an extern view (``aliases``) lives in its argument's storage, which may be the caller's
        out.update(id(r) for r in n.results if aliased_argument(r) is not None)
    return out


def _pick_inplace(
    g: Graph, st: Step, n: Node, dying: list[Value], args: set[int], inplace_args: bool
) -> Value | None:
    if not isinstance(n, LoopNode) or n.is_reduction:
        return None
    for v in dying:
        if id(v) in args and not inplace_args:
            continue
        if inplace_blocker(g, n, v) is None and kernel_inplace_blocker(st, n, v) is None:
            return v
    return None
