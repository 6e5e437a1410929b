"""What a memory plan means, and the memory analysis of one function: what each buffer costs,
when it dies, how much is live at once.

Part of the IR because the plan is part of the program text: the ``plan-memory`` pass decides
it, ``fir-opt --stats`` reports it, and the back ends' program plans allocate by it
(:func:`storage_assignment`), all reading the same semantics. It reads the plan from the program itself, the node annotations ``frees``, ``reuses`` and
``inplace``, so a planned program that is printed, edited and parsed back is analysed the same way.

The model (docs/passes/plan-memory.md has the long form):

* A *buffer* is a node result; its *storage* is ``storage_size × itemsize`` bytes (the layout may
  reach past the element count). Arguments live in storage the caller owns; they are never freed.
* A storage is live from the node that allocates it until it is released: after its last reader
  (``frees``), right after its own node when nothing reads it and it is not returned (a node cannot
  name its own result in its attributes, so that release is implicit), or never for an output.
* ``reuses = %d``: the node's result takes over the storage ``%d`` left when it was freed at an
  earlier node. ``inplace = %a``: a pointwise node writes its result into ``%a``'s storage, element
  for element; ``%a``'s storage passes to the result (``%a`` is not listed in ``frees``).
* Peak memory is the most bytes live at once in storage the function allocates, counted while a
  node runs (its results allocated, its inputs not yet released). Arguments are not counted;
  outputs are, from the node that computes them on. Three figures: *no freeing* (every storage lives
  to the end), *last use* (freed after the last reader, no reuse or in-place: the program before
  planning) and *planned* (the annotations as written).

Sizes may be symbolic: byte counts are then sympy expressions, reuse needs equal expressions, and a
peak that depends on the sizes is reported as ``max(...)`` of the candidates no other one is known
to dominate. Sympy is only needed for loop-level nodes and symbolic sizes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .errors import FirError, Location
from .externs import aliased_argument, storage_bases
from .graph import AliasNode, ExternNode, Graph, LoopNode, Node, Value, alias_root
from .kernels import Step, steps
from .types import Dim, TensorType

DEFAULT_DEVICE = "cpu"
PLAN_KEYS = ("frees", "reuses", "inplace")


class MemoryPlanError(FirError):
    """A memory plan in the program's annotations that would clobber or lose a value."""


# ---------------------------------------------------------------------------------------------
# Buffers


@lru_cache(maxsize=4096)
def buffer_bytes(t: TensorType) -> Dim:
    """Bytes of storage a buffer of type ``t`` needs (its layout's reach, not its element count)."""
    size = t.storage_size()
    if isinstance(size, int):
        return size * t.dtype.itemsize
    from .symbolic import to_dim

    return to_dim(size * t.dtype.itemsize)


def device_of(g: Graph, n: Node | None) -> str:
    """A node's ``device`` attribute, else its function's, else ``cpu``."""
    for attrs in ((n.attrs if n is not None else {}), g.attrs):
        dev = attrs.get("device")
        if isinstance(dev, str):
            return dev
    return DEFAULT_DEVICE


@lru_cache(maxsize=4096)
def is_contiguous(t: TensorType) -> bool:
    return t.normalized().layout is None


def reuse_key(g: Graph, n: Node | None, t: TensorType) -> tuple[str, str, Dim]:
    """Two storages are interchangeable when device, dtype and byte size agree."""
    return (device_of(g, n), t.dtype.value, buffer_bytes(t))


def node_reads(g: Graph) -> list[list[Value]]:
    """For each node, the values it reads (loads, extern and op operands), each once, in the
    order it first reads them. A read of an alias (a view node's result) is a read of the
    buffer whose storage it lives in: an alias keeps its base alive and has no storage of its
    own to free."""
    out = []
    for n in g.nodes:
        values = n.operand_values()
        if any(isinstance(v.owner, AliasNode) for v in values) or isinstance(n, AliasNode):
            values = [alias_root(v) for v in values]
        if any(isinstance(v.owner, ExternNode) and "aliases" in v.owner.attrs for v in values):
            # a result of an extern view (``aliases``) has storage of its own only in name: a
            # read of it is a read of the buffers it lives in too, which it keeps alive
            # (a view node among those bases lives in its root's storage, which is listed too)
            values = values + [b for v in values for b in storage_bases(v) if not is_alias(b)]
        out.append(unique_values(values))
    return out


def output_storages(g: Graph) -> set[int]:
    """``id`` of the values whose storage the function returns: its outputs, and the buffers
    that outputs which are views (alias nodes, extern views) live in."""
    return {id(v) for v in g.outputs} | {id(b) for v in g.outputs for b in storage_bases(v)}


def is_extern_view(v: Value) -> bool:
    """A result of an extern call that lives in an argument's storage (``aliases``): never
    written over, never handed to another buffer."""
    return aliased_argument(v) is not None


def is_alias(v: Value) -> bool:
    return isinstance(v.owner, AliasNode)


def last_readers(g: Graph, reads: list[list[Value]] | None = None) -> dict[int, int]:
    """``id(value)`` → position of the last node that reads it."""
    last: dict[int, int] = {}
    for k, values in enumerate(node_reads(g) if reads is None else reads):
        for v in values:
            last[id(v)] = k
    return last


def step_reads(g: Graph, all_steps: list[Step], reads: list[list[Value]]) -> list[list[Value]]:
    """For each step, the values its nodes read that the step does not compute itself, each
    once, in the order first read (a node in no kernel: its own reads)."""
    out: list[list[Value]] = []
    for st in all_steps:
        if st.kernel is None:
            out.append(reads[st.first])
            continue
        inside = {id(r) for n in st.nodes for r in n.results}
        seen: set[int] = set()
        vals: list[Value] = []
        for pos in range(st.first, st.last + 1):
            for v in reads[pos]:
                if id(v) not in inside and id(v) not in seen:
                    seen.add(id(v))
                    vals.append(v)
        out.append(vals)
    return out


def last_reader_steps(sreads: list[list[Value]]) -> dict[int, int]:
    """``id(value)`` → index of the last step that reads it."""
    last: dict[int, int] = {}
    for k, values in enumerate(sreads):
        for v in values:
            last[id(v)] = k
    return last


KIND_LABELS = {
    "tensor op": "tensor ops",
    "pointwise": "pointwise",
    "reduction": "reduction",
    "extern": "extern",
    "view": "views (aliases)",
}


def node_kind(n: Node) -> str:
    if isinstance(n, LoopNode):
        return "reduction" if n.is_reduction else "pointwise"
    if isinstance(n, ExternNode):
        return "extern"
    if isinstance(n, AliasNode):
        return "view"
    return "tensor op"


# ---------------------------------------------------------------------------------------------
# In-place legality


def write_index(n: LoopNode) -> Any:
    """The storage position element ``p`` of a contiguous result lands at: ``linear(p)``.

    Loop variables of size 1 are always 0 and left out, so that a load written without them
    still matches.
    """
    return _linear_index(tuple(n.ranges))


@lru_cache(maxsize=4096)
def _linear_index(ranges: tuple[tuple[Any, Dim], ...]) -> Any:
    import sympy

    expr: Any = sympy.Integer(0)
    for var, size in ranges:
        expr = expr * size + (0 if size == 1 else var)
    return sympy.expand(expr)


def inplace_blocker(g: Graph, n: Node, v: Value) -> str | None:
    """Why ``n`` may not write its result into ``v``'s storage element for element (None: it may).

    This is the local rule only; that ``n`` is ``v``'s last reader, and who owns ``v``, is the
    caller's business.
    """
    if not isinstance(n, LoopNode) or n.is_reduction or n.body is None:
        return "only a pointwise loop node computes in place"
    if len(n.results) != 1:
        return "the node has several results"
    r = n.result.type
    here, there = device_of(g, n), device_of(g, v.owner)
    if here != there:
        return f"device differs ({there} and {here})"
    if v.type.dtype != r.dtype:
        return f"dtype differs ({v.type.dtype} and {r.dtype})"
    if not (is_contiguous(v.type) and is_contiguous(r)):
        return "a layout is not contiguous"
    if not _same_size(buffer_bytes(v.type), buffer_bytes(r)):
        return "byte size differs"
    loads = [op for op in n.body.loads() if op.buffer is v]
    if not loads:
        return f"the body does not load %{v.name}"
    target = write_index(n)
    for op in loads:
        if op.mask is not None:
            return f"a masked load reads %{v.name}"
        if not _index_matches(op.index, target, n):
            return f"a load of %{v.name} reads another element than the one written"
    return None


def _index_matches(index: Any, target: Any, n: LoopNode) -> bool:
    import sympy

    from .symbolic import is_indirect, simplify_index

    if isinstance(index, int):
        index = sympy.Integer(index)
    if index == target:
        return True
    if any(is_indirect(s) for s in index.free_symbols):
        return False
    ones = {var: 0 for var, size in n.ranges if size == 1}
    if ones:
        index = index.subs(ones)
    if index == target:
        return True
    diff = sympy.expand(index - target)
    if diff == 0:
        return True
    ranges = dict(n.ranges)
    return sympy.expand(simplify_index(index, ranges) - target) == 0


def _same_size(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy

    return sympy.expand(a - b) == 0


# ---------------------------------------------------------------------------------------------
# Reading the plan from the annotations


@dataclass
class NodePlan:
    frees: list[Value] = field(default_factory=list)
    reuses: list[Value | None] = field(default_factory=list)  # one entry per result
    inplace: Value | None = None


def node_plan(n: Node) -> NodePlan:
    """The plan annotations of ``n``; ``reuses`` is one value, or a list with one entry (a value
    or ``none``) per result of a multi-result node. Entries that are not values are kept as
    written for the plan check to report."""
    frees = n.attrs.get("frees", [])
    reuses = n.attrs.get("reuses")
    if reuses is None:
        reuse_list: list[Any] = [None] * len(n.results)
    else:
        reuse_list = list(reuses) if isinstance(reuses, list) else [reuses]
    return NodePlan(
        list(frees) if isinstance(frees, list) else [frees], reuse_list, n.attrs.get("inplace")
    )


def is_planned(g: Graph) -> bool:
    return any(k in n.attrs for n in g.nodes for k in PLAN_KEYS)


# ---------------------------------------------------------------------------------------------
# Simulation


@dataclass
class Footprint:
    """Memory a run of the function takes under one policy."""

    peak: Dim  # most bytes live at once in storage the function allocates
    allocations: int  # storages the function allocates (reuse and in-place allocate none)
    allocated: Dim  # bytes of those allocations


@dataclass
class _Storage:
    nbytes: Dim
    key: tuple[str, str, Dim]
    caller_owned: bool  # an argument's: never counted, never offered for reuse
    occupant: Value | None


class _Walk:
    """One pass over the steps (a kernel, or a node in no kernel) in program order under a
    policy: ``keep`` (never free), ``last-use`` (free after the last reader, no reuse, no
    in-place) or ``planned``. A kernel's local buffers take no storage; what its nodes free is
    released when the whole kernel is done."""

    def __init__(self, g: Graph, policy: str, reads: list[list[Value]] | None = None) -> None:
        self.g = g
        self.policy = policy
        self.steps = steps(g)
        self.sreads = step_reads(g, self.steps, node_reads(g) if reads is None else reads)
        self.problems: list[tuple[str, Location | None]] = []
        self.storage_of: dict[int, _Storage] = {}
        self.outputs = output_storages(g)
        self.args = {id(a) for a in g.args}
        self.readers = last_reader_steps(self.sreads)
        self.live: Dim = 0
        self.peaks: list[Dim] = [0]
        self.allocations = 0
        self.allocated: Dim = 0
        for a in g.args:
            self.storage_of[id(a)] = _Storage(
                buffer_bytes(a.type), reuse_key(g, None, a.type), True, a
            )

    def problem(self, n: Node, message: str) -> None:
        self.problems.append((f"{_names(n)}: {message}", n.loc))

    def run(self) -> Footprint:
        for k, st in enumerate(self.steps):
            plans = [node_plan(n) if self.policy == "planned" else NodePlan() for n in st.nodes]
            for n, plan in zip(st.nodes, plans):
                if len(plan.reuses) > len(n.results):
                    self.problem(
                        n, f"'reuses' has {len(plan.reuses)} entries for {len(n.results)} results"
                    )
            inputs = self.sreads[k]
            for v in inputs:
                self.check_intact(_reader(st, v), v, "reads")
            local = st.local_ids()
            for n, plan in zip(st.nodes, plans):
                for j, r in enumerate(n.results):
                    if id(r) not in local:
                        self.allocate(st, n, j, r, plan)
            self.peaks.append(self.live)
            for n, v in self.released_after(k, st, inputs, plans):
                self.release(k, n, v)
        for v in self.g.outputs:
            storage = self.storage_of.get(id(v))
            if storage is not None and storage.occupant is not alias_root(v):
                self.problems.append(
                    (f"output %{v.name} was overwritten or freed", self.g.return_loc)
                )
        return Footprint(_max_of(self.peaks), self.allocations, self.allocated)

    def check_intact(self, n: Node, v: Value, verb: str) -> bool:
        st = self.storage_of.get(id(v))
        if st is None:
            return True  # defined later or elsewhere: the verifier's business
        if st.occupant is v:
            return True
        if st.occupant is None:
            self.problem(n, f"{verb} %{v.name} after its storage was freed")
        else:
            self.problem(n, f"{verb} %{v.name}, whose storage now holds %{st.occupant.name}")
        return False

    def allocate(self, step: Step, n: Node, j: int, r: Value, plan: NodePlan) -> None:
        if isinstance(n, AliasNode):  # no storage of its own: its root's
            st = self.storage_of.get(id(alias_root(r)))
            if st is not None:
                self.storage_of[id(r)] = st
            return
        g = self.g
        key = reuse_key(g, n, r.type)
        if j == 0 and plan.inplace is not None and self.take_inplace(step, n, r, plan.inplace):
            return
        donor = plan.reuses[j] if j < len(plan.reuses) else None
        if donor is not None and self.take_reused(n, r, donor, key):
            return
        st = _Storage(key[2], key, False, r)
        self.storage_of[id(r)] = st
        self.allocations += 1
        self.allocated = _add(self.allocated, st.nbytes)
        self.live = _add(self.live, st.nbytes)

    def take_inplace(self, step: Step, n: Node, r: Value, v: Any) -> bool:
        if not isinstance(v, Value) or id(v) not in self.storage_of:
            self.problem(n, "'inplace' must name an earlier value")
            return False
        why = inplace_blocker(self.g, n, v)
        if why is None:
            why = kernel_inplace_blocker(step, n, v)
        if why is not None:
            self.problem(n, f"cannot compute in place of %{v.name}: {why}")
            return False
        if id(v) in self.outputs:
            self.problem(n, f"computes in place of %{v.name}, which the function returns")
            return False
        if is_extern_view(v):
            self.problem(n, f"computes in place of %{v.name}, a view of another buffer's storage")
            return False
        if not self.check_intact(n, v, "computes in place of"):
            return False
        st = self.storage_of[id(v)]
        st.occupant = r
        self.storage_of[id(r)] = st
        return True

    def take_reused(self, n: Node, r: Value, d: Any, key: tuple[str, str, Dim]) -> bool:
        if not isinstance(d, Value) or id(d) not in self.storage_of:
            self.problem(n, "'reuses' must name an earlier value")
            return False
        if not isinstance(n, LoopNode):
            self.problem(n, "only a loop node can write into reused storage")
            return False
        if is_extern_view(d):
            self.problem(n, f"reuses %{d.name}, a view of another buffer's storage")
            return False
        st = self.storage_of[id(d)]
        if st.caller_owned:
            self.problem(n, f"reuses %{d.name}, whose storage belongs to the caller")
            return False
        if st.occupant is not None:
            held = "is still live" if st.occupant is d else f"now holds %{st.occupant.name}"
            self.problem(n, f"reuses the storage of %{d.name}, which {held}")
            return False
        if st.key[:2] != key[:2] or not _same_size(st.key[2], key[2]):
            self.problem(
                n,
                f"reuses %{d.name} ({st.key[1]}, {st.key[2]} bytes, {st.key[0]}) for a result of "
                f"{key[1]}, {key[2]} bytes, {key[0]}",
            )
            return False
        st.occupant = r
        self.storage_of[id(r)] = st
        self.live = _add(self.live, st.nbytes)
        return True

    def released_after(
        self, k: int, step: Step, inputs: list[Value], plans: list[NodePlan]
    ) -> list[tuple[Node, Any]]:
        if self.policy == "keep":
            return []
        out: list[tuple[Node, Any]] = []
        last = step.nodes[-1]
        if self.policy == "planned":
            out += [(n, v) for n, plan in zip(step.nodes, plans) for v in plan.frees]
        else:
            out += [
                (last, v)
                for v in inputs
                if self.readers.get(id(v)) == k
                and id(v) not in self.outputs
                and id(v) not in self.args
            ]
        # results no later step reads die with their step (no attribute can name them)
        local = step.local_ids()
        out += [
            (n, r)
            for n in step.nodes
            if not isinstance(n, AliasNode)
            for r in n.results
            if id(r) not in self.readers and id(r) not in self.outputs and id(r) not in local
        ]
        return out

    def release(self, k: int, n: Node, v: Any) -> None:
        if not isinstance(v, Value) or id(v) not in self.storage_of:
            self.problem(n, "'frees' must name earlier values")
            return
        if id(v) in self.outputs:
            self.problem(n, f"frees %{v.name}, which the function returns")
            return
        if id(v) in self.args:
            self.problem(n, f"frees argument %{v.name}, which belongs to the caller")
            return
        if not self.check_intact(n, v, "frees"):
            return
        st = self.storage_of[id(v)]
        st.occupant = None
        if not st.caller_owned:
            self.live = _sub(self.live, st.nbytes)


def _reader(step: Step, v: Value) -> Node:
    """The first node of ``step`` that reads ``v`` (for messages)."""
    for n in step.nodes:
        if any(u is v for u in n.operand_values()):
            return n
    return step.nodes[0]


def kernel_inplace_blocker(step: Step, n: Node, v: Value) -> str | None:
    """Inside a kernel, ``n`` may write over ``v`` only when no other member reads ``v``: the
    members run interleaved, element by element, so another reader could see ``n``'s result in
    place of ``v``'s element. A local result has no storage to write into."""
    if step.kernel is None:
        return None
    if any(r is n.results[0] for r in step.kernel.local):
        return f"%{n.results[0].name} is local to kernel @{step.kernel.name}"
    for m in step.nodes:
        if m is not n and any(u is v for u in m.operand_values()):
            return f"%{m.results[0].name}, in the same kernel, reads %{v.name} too"
    # A kernel with reductions makes several passes over a row; a later pass that reads n's
    # result computes n again from its operands (backends/plan/kernel.py, _load) instead of
    # loading it, and would read v after n has written over it.
    if any(isinstance(m, LoopNode) and m.reduction is not None for m in step.nodes):
        for m in step.nodes:
            if m is not n and any(u is n.results[0] for u in m.operand_values()):
                return (
                    f"%{m.results[0].name}, in the same kernel, reads %{n.results[0].name}, "
                    f"which the kernel may compute again from %{v.name}"
                )
    return None


def footprint(g: Graph, policy: str, reads: list[list[Value]] | None = None) -> Footprint:
    """Peak and allocations of ``g`` under ``keep``, ``last-use`` or ``planned``.

    ``planned`` raises :class:`MemoryPlanError` when the annotations would clobber or lose a value.
    ``reads``: :func:`node_reads` of ``g`` when the caller has it already.
    """
    if policy not in ("keep", "last-use", "planned"):
        raise ValueError(f"unknown memory policy {policy!r}")
    walk = _Walk(g, policy, reads)
    result = walk.run()
    if walk.problems:
        message, loc = walk.problems[0]
        raise MemoryPlanError(f"memory plan of @{g.name}: {message}", loc)
    return result


def plan_problems(g: Graph) -> list[str]:
    """Every way the plan annotations of ``g`` would clobber or lose a value (empty: safe).

    Simulates storage: a value read after its storage was freed or taken over by another buffer,
    a reuse of storage still live or of another device, dtype or size, an in-place write that
    breaks the element-for-element rule, an output freed or overwritten.
    """
    walk = _Walk(g, "planned")
    walk.run()
    return [m for m, _ in walk.problems]


def storage_assignment(g: Graph) -> dict[int, int]:
    """``id(value)`` → storage number under the plan annotations (arguments included); values
    with the same number share storage. Raises :class:`MemoryPlanError` on an unsafe plan."""
    walk = _Walk(g, "planned")
    walk.run()
    if walk.problems:
        message, loc = walk.problems[0]
        raise MemoryPlanError(f"memory plan of @{g.name}: {message}", loc)
    numbers: dict[int, int] = {}
    out: dict[int, int] = {}
    for vid, st in walk.storage_of.items():
        out[vid] = numbers.setdefault(id(st), len(numbers))
    return out


# ---------------------------------------------------------------------------------------------
# The figures fir-opt --stats prints


@dataclass
class MemoryReport:
    nodes: dict[str, int]  # kind -> count: tensor op, pointwise, reduction, extern
    argument_bytes: Dim
    output_bytes: Dim  # outputs computed by the function (an argument returned is not counted)
    keep: Footprint  # no freeing
    last_use: Footprint  # freed at last use: before planning
    planned: Footprint | None  # the annotations; None when the program carries none


def memory_report(g: Graph, planned: bool | None = None) -> MemoryReport:
    """All the figures for ``g``. ``planned``: whether to simulate the annotations (default:
    when there are any)."""
    counts = {"tensor op": 0, "pointwise": 0, "reduction": 0, "extern": 0, "view": 0}
    for n in g.nodes:
        counts[node_kind(n)] += 1
    if not counts["view"]:
        del counts["view"]  # listed only in programs that have views
    args = {id(a) for a in g.args}
    seen: set[int] = set()
    out_bytes: Dim = 0
    for v in g.outputs:
        v = alias_root(v)  # a view returned is its root's storage, counted once
        if id(v) not in args and id(v) not in seen:
            seen.add(id(v))
            out_bytes = _add(out_bytes, buffer_bytes(v.type))
    arg_bytes: Dim = 0
    for a in g.args:
        arg_bytes = _add(arg_bytes, buffer_bytes(a.type))
    if planned is None:
        planned = is_planned(g)
    reads = node_reads(g)
    return MemoryReport(
        counts,
        arg_bytes,
        out_bytes,
        footprint(g, "keep", reads),
        footprint(g, "last-use", reads),
        footprint(g, "planned", reads) if planned else None,
    )


# ---------------------------------------------------------------------------------------------
# Byte arithmetic on ints or sympy expressions


def _add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    from .symbolic import to_dim

    return to_dim(a + b)


def _sub(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    from .symbolic import to_dim

    return to_dim(a - b)


def _max_of(values: Iterable[Dim]) -> Dim:
    """The maximum; for expressions, ``Max`` of those no other one is known to be at least."""
    vals = list(values)
    if all(isinstance(v, int) for v in vals):
        return max(vals)
    import sympy

    from .symbolic import to_dim

    kept: list[Any] = []
    for v in vals:
        e = sympy.Integer(v) if isinstance(v, int) else v
        if any(_at_least(f, e) for f in kept):
            continue
        kept = [f for f in kept if not _at_least(e, f)] + [e]
    return to_dim(kept[0] if len(kept) == 1 else sympy.Max(*kept))


def _at_least(a: Any, b: Any) -> bool:
    """``a >= b`` for every positive value of the size symbols, as far as we can tell: sympy
    says so, or ``a - b`` is a polynomial in positive symbols with no negative coefficient."""
    import sympy

    diff = sympy.expand(a - b)
    if diff.is_nonnegative:
        return True
    syms = sorted(diff.free_symbols, key=str)
    if not syms or not all(s.is_positive for s in syms) or not diff.is_polynomial(*syms):
        return False
    return all(c >= 0 for c in sympy.Poly(diff, *syms).coeffs())


def unique_values(values: Iterable[Value]) -> list[Value]:
    seen: set[int] = set()
    out: list[Value] = []
    for v in values:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def _names(n: Node) -> str:
    return ", ".join("%" + r.name for r in n.results) or "node"


def format_bytes(b: Dim) -> str:
    if isinstance(b, int):
        return str(b)
    from .symbolic import print_expr

    return print_expr(b)


__all__ = [
    "DEFAULT_DEVICE",
    "Footprint",
    "MemoryReport",
    "NodePlan",
    "MemoryPlanError",
    "buffer_bytes",
    "device_of",
    "footprint",
    "format_bytes",
    "unique_values",
    "inplace_blocker",
    "is_planned",
    "last_readers",
    "node_reads",
    "memory_report",
    "node_plan",
    "plan_problems",
    "reuse_key",
    "stats_report",
    "storage_assignment",
    "write_index",
]


def stats_report(module: Any, passes: Iterable[Any] = (), planned: bool = False) -> str:
    """The text of ``fir-opt --stats``: per function its nodes by kind and its memory figures,
    then the statistics of every pass that kept some. ``planned``: the pipeline ran
    ``plan-memory``, so peaks before and after planning are both printed (they are also printed
    when the program carries plan annotations of its own)."""
    lines = [
        "===-------------------------------------===",
        "  FIR statistics report",
        "===-------------------------------------===",
    ]
    for g in module.funcs:
        with_plan = planned or is_planned(g)
        rep = memory_report(g, with_plan)
        kinds = ", ".join(f"{KIND_LABELS[kind]} {n}" for kind, n in rep.nodes.items())
        lines.append(f"func @{g.name}")
        lines.append(f"  nodes: {sum(rep.nodes.values())} ({kinds})")
        if g.kernels:
            from fir.ir.kernels import kernel_count

            lines.append(f"  kernels: {kernel_count(g)} ({len(g.kernels)} fused)")
        lines.append(f"  argument bytes: {format_bytes(rep.argument_bytes)}")
        lines.append(f"  output bytes: {format_bytes(rep.output_bytes)}")
        lines.append(f"  peak bytes without freeing: {format_bytes(rep.keep.peak)}")
        if rep.planned is None:
            lines.append(f"  peak bytes freed at last use: {format_bytes(rep.last_use.peak)}")
            lines.append(f"  allocations: {_allocs(rep.last_use)}")
        else:
            lines.append(f"  peak bytes before planning: {format_bytes(rep.last_use.peak)}")
            lines.append(f"  peak bytes after planning: {format_bytes(rep.planned.peak)}")
            lines.append(f"  allocations before planning: {_allocs(rep.last_use)}")
            lines.append(f"  allocations after planning: {_allocs(rep.planned)}")
    for p in passes:
        if p.statistics:
            lines.append(f"pass {p.name}")
            lines += [f"  {key}: {value}" for key, value in p.statistics.items()]
    return "\n".join(lines) + "\n"


def _allocs(f: Footprint) -> str:
    return f"{f.allocations} ({format_bytes(f.allocated)} bytes)"
