"""One kernel plan per step of a fused program: a kernel, or a loop node in no kernel.

The plan is everything a renderer needs, computed once:

* the loop nest as it runs: the primary member's scheduled loops (``x*`` pointwise, ``r*``
  reduction), the outermost pointwise loop the parallel one;
* *phases* inside the pointwise loops, in dependency order: a phase over the reduction loops
  (``r``: reductions accumulate, members over the whole reduction domain compute) or a phase
  once per output element (``x``: members over the reduction's output, before or after it). A
  member joins the last phase when what it reads is ready there; a reduction's result is ready
  after its loop, so softmax is three loops over each row (max, sum, normalise) and rms_norm two,
  and no reduced intermediate is ever written to memory;
* every load and store with its index in the kernel's loop variables; a read of a buffer that
  a member of the kernel computes at the same element becomes that member's value, not a load;
* a value of one pass over the reduction loops that a later pass reads again is computed again
  there (a pointwise body: cheaper than a round trip through memory), unless computing it is
  costly (``exp``, ``tanh``, a division …) and the row is short enough to keep: then the first
  pass stores it into a *scratch* row, private to the thread and never in memory the program
  sees, and the later passes load it from there (softmax computes each ``exp`` once);
* accumulators, checked indirect indices (with error codes), and the kernel's arguments: the
  buffers it reads and writes and the size symbols its indices use.

Renderers never look at the graph again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.graph import BodyOp, BodyValue, Literal, LoopNode, Value
from fir.ir.kernels import Step, kernel_space
from fir.ir.ops import COSTLY, COSTLY_OPS, FAILS_ON_ZERO_DIVISOR
from fir.ir.symbolic import indirect_symbol, is_indirect, print_expr
from fir.ir.types import Dim, dim_str, dims_mul

from .indexing import KLoop, kernel_loops, linear_index, map_member
from .instructions import (
    AccInit,
    AccResult,
    Accumulate,
    CheckIndex,
    Compute,
    Constant,
    IndexValue,
    Instr,
    Load,
    LoopBegin,
    LoopEnd,
    Operand,
    Store,
    instr_str,
)
from .masked_index import refine as refine_masked

_Key = tuple[Any, ...]  # what a value computes: its op and the keys of its operands, its dtype


class PlanError(FirError):
    """A fused program the planner cannot turn into a kernel (a bug upstream, never silent)."""


@dataclass(frozen=True)
class Arg:
    """A buffer the kernel reads or writes: its storage has ``elements`` elements of ``dtype``."""

    name: str
    dtype: DType
    elements: Dim
    read: bool
    written: bool


@dataclass(frozen=True)
class Scratch:
    """A row of values kept from one pass over the reduction loops to the next: ``elements``
    (the reduction's size) of ``dtype``, private to the thread that runs the row. Loads and
    stores name it like a buffer; renderers keep it on the stack (or in registers)."""

    name: str
    dtype: DType
    elements: int


# Scratch rows: at most this many bytes per kernel (they stay in the core's L1/L2 cache), and
# only for a value whose body costs at least STASH_COST (a transcendental op counts COSTLY).
SCRATCH_BYTES = 64 << 10
STASH_COST = 8


@dataclass
class Phase:
    kind: str  # "x": once per output element; "r": over the reduction loops
    members: list[int] = field(default_factory=list)


@dataclass
class KernelPlan:
    name: str
    members: list[str]  # first result of each member, in order
    numel: Dim
    rnumel: Dim
    reduction: bool
    loops: list[KLoop]
    instrs: list[Instr]
    args: list[Arg]
    sizes: list[str]  # size symbols the kernel takes as int64 arguments, sorted
    local: list[str]  # member results that never reach memory
    tile: tuple[str, str] | None = None  # two pointwise loops a renderer may tile together
    errors: dict[int, str] = field(default_factory=dict)  # error code -> what went wrong
    scratch: list[Scratch] = field(default_factory=list)  # rows kept between reduction passes
    # the traced size of each of ``sizes`` that has one (Graph.size_hints): what a schedule
    # guesses a symbolic size to be, for a choice that only costs time
    hints: dict[str, int] = field(default_factory=dict)
    # for rows of symbolic length, the plan a persistent variant chosen at launch renders: the
    # same kernel with its costly repeated values kept in scratch rows (``plan_kernel``)
    at_launch: KernelPlan | None = None

    def text(self) -> str:
        """The readable form (``fir-translate --target plan``)."""
        space = (
            f"({dim_str(self.numel)}; {dim_str(self.rnumel)})"
            if self.reduction
            else (f"({dim_str(self.numel)})")
        )
        lines = [f"kernel {self.name} over {space}  // {', '.join('%' + m for m in self.members)}"]
        for a in self.args:
            mode = "inout" if a.read and a.written else ("out" if a.written else "in")
            lines.append(f"  arg {mode} %{a.name}: {a.dtype}[{dim_str(a.elements)}]")
        for s in self.sizes:
            hint = f"  // traced at {self.hints[s]}" if s in self.hints else ""
            lines.append(f"  arg size {s}: i64{hint}")
        if self.local:
            lines.append("  local " + ", ".join("%" + n for n in self.local))
        if self.tile is not None:
            lines.append(f"  tile {self.tile[0]}, {self.tile[1]}")
        for sc in self.scratch:
            lines.append(f"  scratch %{sc.name}: {sc.dtype}[{sc.elements}]  // per row, per thread")
        for sc in self.at_launch.scratch if self.at_launch is not None else []:
            lines.append(
                f"  scratch %{sc.name}: {sc.dtype}[<= {sc.elements}]  // a persistent launch's"
            )
        depth = 1
        for i in self.instrs:
            if isinstance(i, LoopEnd):
                depth -= 1
            lines.append("  " * depth + instr_str(i))
            if isinstance(i, LoopBegin):
                depth += 1
        for code, what in sorted(self.errors.items()):
            lines.append(f"  error {code}: {what}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def plan_kernel(
    step: Step,
    name: str,
    first_error: int = 1,
    scratch_rows: Callable[[KernelPlan], bool] | None = None,
    launch_rows: int | None = None,
) -> KernelPlan:
    """The plan of ``step`` (a kernel, or one loop node), named ``name``; its error codes start
    at ``first_error`` (codes are unique in a program). ``scratch_rows``: whether a renderer can
    keep scratch rows for this kernel, asked with its plan without them (a renderer that holds
    a row in registers only in some layouts; None: any row within :data:`SCRATCH_BYTES`).
    ``launch_rows``: the longest row that a persistent variant chosen at launch holds, for a
    back end that makes one where a row's length is symbolic (Triton): such a kernel also gets
    the plan of that variant (``at_launch``), which keeps what a later pass over the row would
    compute again (the exponentials of a softmax, T5's position buckets), as the static
    persistent kernel does, sized for rows of that length."""
    builder = _Builder(step, name, first_error)
    plan = builder.build()
    keep = builder.worth_keeping()
    if keep and scratch_rows is not None and not scratch_rows(plan):
        keep = []
    if not keep:
        if launch_rows is not None and plan.reduction and not isinstance(plan.rnumel, int):
            held = builder.worth_keeping(launch_rows)
            if held:
                variant = _Builder(step, name, first_error, frozenset(held), launch_rows)
                plan.at_launch = variant.build()
        return plan
    # again, with the costly values that later passes read kept in scratch rows
    return _Builder(step, name, first_error, frozenset(keep)).build()


class _Builder:
    def __init__(
        self,
        step: Step,
        name: str,
        first_error: int,
        stash: frozenset[_Key] = frozenset(),
        row_bound: int | None = None,
    ) -> None:
        self.members: list[LoopNode] = []
        for n in step.nodes:
            if not isinstance(n, LoopNode) or n.body is None:
                raise PlanError(f"{n.describe()} is not a loop node: it runs no kernel", n.loc)
            self.members.append(n)
        self.kernel = step.kernel
        self.name = name
        self.next_error = first_error
        self.instrs: list[Instr] = []
        self.errors: dict[int, str] = {}
        self.reads: dict[str, Value] = {}
        self.writes: dict[str, Value] = {}
        self.local = {v.name for v in step.kernel.local} if step.kernel is not None else set()
        # values by what they compute (_Key), so that a value is computed once per pass, and
        # one that a later pass over the reduction loops computes again can be kept instead
        self.stash = stash  # keys whose values go to scratch rows
        self.row_bound = row_bound  # the longest row of a symbolic length (a launch's variant)
        self.key_of: dict[str, _Key] = {}  # value name -> key
        self.cost: dict[_Key, int] = {}
        self.avail: dict[_Key, tuple[str, int]] = {}  # key -> (value, phase it is in scope of)
        # indirect indices: checked symbol by name; the first symbol of each check (source,
        # bound, guard); later symbols of the same check -> the first, for keys
        self.checked: dict[str, sympy.Symbol] = {}
        self.canonical: dict[_Key, sympy.Symbol] = {}
        self.canon_syms: dict[sympy.Symbol, sympy.Symbol] = {}
        self.first: dict[_Key, tuple[str, int]] = {}  # key -> first computed, in a reduction pass
        self.repeats: set[_Key] = set()  # computed again in a later reduction pass
        self.later_users: dict[_Key, set[_Key | None]] = {}  # None: used other than by an op
        self.scratch: dict[_Key, Scratch] = {}
        self.phase_kinds: list[str] = []

    # -- the whole kernel

    def build(self) -> KernelPlan:
        if self.kernel is not None:
            info, bad, why = kernel_space(self.kernel)
            if info is None:
                where = bad.loc if bad is not None else self.kernel.loc
                raise PlanError(f"kernel @{self.kernel.name}: {why}", where)
            space = info.space
        else:
            from fir.ir.kernels import node_space

            space = node_space(self.members[0])
        self.space = space
        reductions = [m for m in self.members if m.is_reduction]
        primary = reductions[0] if reductions else self.members[0]
        self.loops = kernel_loops(primary)
        numel = dims_mul(lp.size for lp in self.loops if not lp.reduction)
        self.kinds = [self._kind(m, numel) for m in self.members]
        self.maps = [
            map_member(m, self.loops, full_domain=(kind == "full"))
            for m, kind in zip(self.members, self.kinds)
        ]
        # what members compute, by buffer name: (member, value name, phase it was computed in)
        self.values: dict[str, tuple[int, str, int]] = {}
        self.phase = 0
        phases = self._phases()
        self.phase_kinds = [ph.kind for ph in phases]
        xloops = [lp for lp in self.loops if not lp.reduction]
        rloops = [lp for lp in self.loops if lp.reduction]
        for k, lp in enumerate(xloops):
            self.instrs.append(LoopBegin(lp.var.name, lp.size, False, parallel=k == 0))
        for number, phase in enumerate(phases):
            self.phase = number
            if phase.kind == "x":
                for j in phase.members:
                    self._pointwise(j)
            else:
                self._reduction_phase(phase, rloops)
        for lp in reversed(xloops):
            self.instrs.append(LoopEnd(lp.var.name))
        self.instrs = _without_dead_values(self.instrs)
        return KernelPlan(
            name=self.name,
            members=[m.results[0].name for m in self.members],
            numel=space.numel,
            rnumel=space.rnumel,
            reduction=space.reduction,
            loops=self.loops,
            instrs=self.instrs,
            args=self._args(),
            sizes=self._sizes(),
            local=sorted(self.local),
            tile=self._tile(),
            errors=self.errors,
            scratch=list(self.scratch.values()),
        )

    # -- scratch rows

    def worth_keeping(self, row_bound: int | None = None) -> list[_Key]:
        """Of the values a later pass over the reduction loops computes again, those to keep
        in scratch rows instead: costly ones (:data:`STASH_COST`) that the later pass uses
        other than to compute another kept value, in a kernel with pointwise loops (a thread
        runs whole rows) and a reduction of known size (or rows of at most ``row_bound``), up
        to :data:`SCRATCH_BYTES`."""
        rnumel = self.space.rnumel if isinstance(self.space.rnumel, int) else row_bound
        if not self.repeats or rnumel is None:
            return []
        if not any(not lp.reduction for lp in self.loops):
            return []
        costly = {k for k in self.repeats if self.cost.get(k, 0) >= STASH_COST}
        out: list[_Key] = []
        used = 0
        for k in sorted(costly, key=lambda k: -self.cost[k]):
            if self.later_users.get(k, set()) <= costly:
                continue  # every later use computes another kept value from it
            size = rnumel * max(_compute_dtype(k[-1]).itemsize, 1)
            if used + size > SCRATCH_BYTES:
                continue
            used += size
            out.append(k)
        return out

    def _row_index(self) -> Any:
        """The position of the current element in its row: row-major over the reduction
        loops."""
        e: Any = 0
        for lp in self.loops:
            if lp.reduction:
                e = e * lp.size + lp.var
        return e

    def _key(self, o: Operand) -> Any:
        if isinstance(o, Literal):
            return ("literal", o.kind, repr(o.value))
        return self.key_of.get(o, ("value", o))

    def _reuse(self, key: _Key, dst: str) -> str | None:
        """The value that computes ``key`` where the current pass can see it: computed in this
        pass or once per output element before it, or kept in a scratch row by an earlier pass
        (a load from the row, named ``dst``). None: compute it."""
        hit = self.avail.get(key)
        if hit is not None and (hit[1] == self.phase or self.phase_kinds[hit[1]] == "x"):
            return hit[0]
        first = self.first.get(key)
        if first is None or self.phase_kinds[self.phase] != "r" or first[1] == self.phase:
            return None
        self.repeats.add(key)
        sc = self.scratch.get(key)
        if sc is None:
            return None
        self.instrs.append(Load(dst, sc.name, self._row_index(), sc.dtype))
        self.key_of[dst] = key
        self.avail[key] = (dst, self.phase)
        return dst

    def _computed(self, key: _Key, name: str, cost: int) -> None:
        """``name`` computes ``key``: it is in scope for the rest of this pass; the first
        computation in a reduction pass of a kept key goes to its scratch row."""
        self.key_of[name] = key
        self.cost[key] = cost
        self.avail[key] = (name, self.phase)
        if self.phase_kinds[self.phase] != "r" or key in self.first:
            return
        self.first[key] = (name, self.phase)
        if key in self.stash:
            rnumel = self.space.rnumel if isinstance(self.space.rnumel, int) else self.row_bound
            assert rnumel is not None
            dtype = _compute_dtype(key[-1])
            sc = Scratch(f"row{len(self.scratch)}", dtype, rnumel)
            self.scratch[key] = sc
            self.instrs.append(Store(sc.name, self._row_index(), name, dtype))

    def _used_outside_ops(self, o: Operand) -> None:
        """A later pass uses ``o`` other than as an operand of an op (a store, an accumulator,
        a mask, an index): keeping ``o`` is worth it on its own."""
        if isinstance(o, str) and self.phase_kinds[self.phase] == "r":
            key = self.key_of.get(o)
            if key is not None and key in self.repeats:
                self.later_users.setdefault(key, set()).add(None)

    def _kind(self, m: LoopNode, numel: Dim) -> str:
        if m.is_reduction:
            return "reduction"
        if self.space.reduction and not _same(dims_mul(s for _, s in m.ranges), numel):
            return "full"  # a pointwise member over the whole reduction domain
        return "point"  # once per output element

    def _phases(self) -> list[Phase]:
        """Members into phases, in order: a member joins the last phase if everything it reads
        from other members is ready there, else opens a new one."""
        producer: dict[str, int] = {
            r.name: j for j, m in enumerate(self.members) for r in m.results
        }
        phases: list[Phase] = []
        at: dict[int, int] = {}
        for j, m in enumerate(self.members):
            kind = "r" if self.kinds[j] in ("reduction", "full") else "x"
            earliest = 0
            for v in m.operand_values():
                i = producer.get(v.name)
                if i is None or i == j:
                    continue
                p = at[i]
                same_pass = (
                    phases[p].kind == kind and self.kinds[i] != "reduction"
                )  # an element computed in the same pass is ready
                earliest = max(earliest, p if same_pass else p + 1)
            if phases and len(phases) - 1 >= earliest and phases[-1].kind == kind:
                phases[-1].members.append(j)
            else:
                phases.append(Phase(kind, [j]))
            at[j] = len(phases) - 1
        return phases

    # -- members

    def _pointwise(self, j: int) -> None:
        m = self.members[j]
        y = self._body(j)
        self._result(j, m.results[0], y)

    def _reduction_phase(self, phase: Phase, rloops: list[KLoop]) -> None:
        accs: list[tuple[int, str]] = []
        for j in phase.members:
            m = self.members[j]
            if m.is_reduction:
                acc = f"acc{j}"
                dtype = _reduced_dtype(m)
                self.instrs.append(AccInit(acc, m.reduction or "", dtype))
                accs.append((j, acc))
        for lp in rloops:
            self.instrs.append(LoopBegin(lp.var.name, lp.size, True))
        for j in phase.members:
            m = self.members[j]
            y = self._body(j)
            if not m.is_reduction:
                self._result(j, m.results[0], y)
                continue
            acc = f"acc{j}"
            rindex = None
            if m.reduction in ("argmax", "argmin"):
                rindex = self.maps[j].apply(linear_index(m.reduction_ranges))
            self.instrs.append(Accumulate(acc, m.reduction or "", y, _reduced_dtype(m), rindex))
        for lp in reversed(rloops):
            self.instrs.append(LoopEnd(lp.var.name))
        for j, acc in accs:
            m = self.members[j]
            names = tuple(f"n{j}_{r.name}" for r in m.results)
            self.instrs.append(
                AccResult(names, acc, m.reduction or "", tuple(r.type.dtype for r in m.results))
            )
            for r, name in zip(m.results, names):
                self._result(j, r, name)

    def _result(self, j: int, r: Value, value: Operand) -> None:
        """Make member ``j``'s result ``r`` available to later members; store it unless the
        kernel keeps it local."""
        name = value if isinstance(value, str) else self._materialize(j, r, value)
        self.values[r.name] = (j, name, self.phase)
        if r.name in self.local:
            return
        index = self.maps[j].apply(_store_index(self.members[j], r))
        self.instrs.append(Store(r.name, index, name, r.type.dtype))
        self.writes.setdefault(r.name, r)

    def _materialize(self, j: int, r: Value, lit: Literal) -> str:
        name = f"n{j}_{r.name}_c"
        self.instrs.append(Constant(name, lit, r.type.dtype))
        return name

    def _body(self, j: int, tag: str = "") -> Operand:
        """Emit member ``j``'s body; return what it yields. ``tag`` tells a second copy's names
        apart (a value computed again in a later pass over the reduction loops)."""
        m = self.members[j]
        assert m.body is not None
        vmap = self.maps[j]
        prefix = f"n{j}{tag}_"
        names: dict[int, str] = {}
        symbols: dict[sympy.Symbol, sympy.Symbol] = {}  # the member's indirect symbols, renamed

        def operand(o: Any) -> Operand:
            if isinstance(o, BodyValue):
                return names[id(o)]
            return o

        def index(e: Any) -> Any:
            e = vmap.apply(e)
            if symbols and not isinstance(e, int):
                e = e.xreplace(symbols)
            return e

        guards = _indirect_guards(m.body)
        for op in m.body.ops:
            dst = f"{prefix}{op.result.name}"
            names[id(op.result)] = dst
            if op.opcode == "load":
                mask = names[id(op.mask)] if op.mask is not None else None
                names[id(op.result)] = self._load(j, op, dst, index, mask)
            elif op.opcode == "indirect":
                src = operand(op.operands[0])
                assert isinstance(src, str)  # the verifier: an indirect index is a body value
                guard = guards.get(id(op.result))
                mask = names.get(id(guard)) if guard is not None else None
                ckey: _Key = (
                    "check",
                    self._key(src),
                    op.bound,
                    self._key(mask) if mask is not None else None,
                )
                hit = self.avail.get(ckey)
                if hit is not None and (hit[1] == self.phase or self.phase_kinds[hit[1]] == "x"):
                    # the same index checked already where this member can see it (another
                    # member of the pass gathers by it too): read by the checked symbol
                    symbols[indirect_symbol("%" + op.result.name)] = self.checked[hit[0]]
                    names[id(op.result)] = hit[0]
                    continue
                sym = indirect_symbol(f"%{prefix}{op.result.name}")
                symbols[indirect_symbol("%" + op.result.name)] = sym
                self.checked[sym.name] = sym
                # a later pass checks it again (its own symbol); the values gathered by either
                # are the same values, so keys name the first symbol (a costly value computed
                # from a gather is then found repeated, and kept in a scratch row)
                self.canonical.setdefault(ckey, sym)
                if self.canonical[ckey] is not sym:
                    self.canon_syms[sym] = self.canonical[ckey]
                self.avail[ckey] = (sym.name, self.phase)
                read = _buffers_through(m, op.result.name)
                self._used_outside_ops(src)
                if _proven_in_bounds(m, op):
                    self.instrs.append(CheckIndex(sym.name, src, op.bound, read, -1, mask, True))
                    names[id(op.result)] = sym.name
                    continue
                code = self.next_error
                self.next_error += 1
                self.errors[code] = (
                    f"kernel {self.name}: indirect index %{op.result.name} of %{m.result.name} "
                    f"out of bounds [0, {dim_str(op.bound)}) for "
                    + ", ".join("%" + b for b in read)
                )
                self.instrs.append(CheckIndex(sym.name, src, op.bound, read, code, mask))
                names[id(op.result)] = sym.name
            elif op.opcode == "index":
                assert op.dtype is not None
                e = index(op.index)
                key: _Key = ("index", e, op.dtype)
                names[id(op.result)] = self._reuse(key, dst) or self._emit(
                    IndexValue(dst, e, op.dtype), key, 0
                )
            elif op.opcode == "constant":
                assert op.dtype is not None
                lit = op.operands[0]
                assert isinstance(lit, Literal)
                key = ("constant", self._key(lit), op.dtype)
                names[id(op.result)] = self._reuse(key, dst) or self._emit(
                    Constant(dst, lit, op.dtype), key, 0
                )
            else:
                dtype = op.result.dtype
                if dtype is None:
                    raise PlanError(
                        f"%{op.result.name} of %{m.result.name} has no dtype (verify first)", m.loc
                    )
                args = tuple(operand(o) for o in op.operands)
                parts = tuple(self._key(a) for a in args)
                key = ("op", op.opcode, parts, dtype)
                cost = (COSTLY if op.opcode in COSTLY_OPS else 1) + sum(
                    self.cost.get(k, 0) for k in parts
                )
                names[id(op.result)] = self._reuse(key, dst) or self._emit(
                    Compute(dst, op.opcode, args, dtype), key, cost
                )
                if self.phase_kinds[self.phase] == "r":
                    for k in parts:
                        if k in self.repeats:
                            self.later_users.setdefault(k, set()).add(key)
        result = operand(m.body.result)
        self._used_outside_ops(result)
        return result

    def _emit(self, i: Load | Compute | Constant | IndexValue, key: _Key, cost: int) -> str:
        self.instrs.append(i)
        self._computed(key, i.dst, cost)
        return i.dst

    def _load(self, j: int, op: BodyOp, dst: str, index: Any, mask: str | None) -> str:
        assert op.buffer is not None
        buf = op.buffer
        made = self.values.get(buf.name)
        if made is not None and made[2] != self.phase and self.kinds[made[0]] == "full":
            # an element of an earlier pass over the reduction loops is gone by now: compute
            # it again here (a pointwise body: cheaper than a round trip through memory; what
            # is costly comes from a scratch row, see _reuse)
            i = made[0]
            again = self._body(i, tag=f"p{self.phase}")
            name = again if isinstance(again, str) else self._materialize(i, buf, again)
            made = (i, name, self.phase)
            self.values[buf.name] = made
        if made is not None and op.mask is None:
            i, name, _ = made
            want = self.maps[i].apply(_store_index(self.members[i], buf))
            got = index(op.index)
            if _same_index(want, got, self.loops):
                return name  # computed by a member at this very element: no memory access
            raise PlanError(
                f"%{self.members[j].result.name} reads %{buf.name}[{print_expr(got)}], but the "
                f"kernel computes element {print_expr(want)} of it here (an illegal fusion)",
                self.members[j].loc,
            )
        if made is not None:
            raise PlanError(
                f"%{self.members[j].result.name} reads %{buf.name}, which the kernel computes, "
                "under a mask",
                self.members[j].loc,
            )
        if buf.name in self.local:  # pragma: no cover - the verifier forbids it
            raise PlanError(f"local %{buf.name} read before it is computed", self.members[j].loc)
        e = index(op.index)
        self.reads.setdefault(buf.name, buf)
        if mask is not None:
            self._used_outside_ops(mask)
            defs = {d: i for i in self.instrs if isinstance(d := getattr(i, "dst", None), str)}
            e = refine_masked(e, mask, defs, self.loops)
        key: _Key = (
            "load",
            buf.name,
            e.xreplace(self.canon_syms) if self.canon_syms and not isinstance(e, int) else e,
            self._key(mask) if mask is not None else None,
            repr(op.other),
            buf.type.dtype,
        )
        return self._reuse(key, dst) or self._emit(
            Load(dst, buf.name, e, buf.type.dtype, mask, op.other), key, 1
        )

    # -- what the renderers get besides the instructions

    def _args(self) -> list[Arg]:
        out: list[Arg] = []
        seen: set[str] = set()
        for name, v in list(self.reads.items()) + list(self.writes.items()):
            if name in seen:
                continue
            seen.add(name)
            out.append(
                Arg(
                    name,
                    v.type.dtype,
                    v.type.storage_size(),
                    name in self.reads,
                    name in self.writes,
                )
            )
        return out

    def _sizes(self) -> list[str]:
        found: set[str] = set()
        loop_vars = {lp.var for lp in self.loops}

        def scan(e: Any) -> None:
            if isinstance(e, int) or not hasattr(e, "free_symbols"):
                return
            for s in e.free_symbols:
                if s not in loop_vars and not is_indirect(s):
                    found.add(s.name)

        for lp in self.loops:
            scan(lp.size)
        for i in self.instrs:
            for attr in ("index", "rindex", "size", "bound"):
                scan(getattr(i, attr, None))
        for a in self._args():
            scan(a.elements)
        return sorted(found)

    def _tile(self) -> tuple[str, str] | None:
        """A member's tiling hint, as kernel loops (when its loops are the kernel's). A hinted
        loop that reorder merged with its neighbours (contiguous for every access, so the hinted
        loop is the merged loop's fast end) is tiled as that merged loop: BERT's key, written
        transposed as [8, 12, 64, 256] from [8, 256, 768] rows, tiles (256, 12 x 64)."""
        for j, m in enumerate(self.members):
            hint = m.attrs.get("tile")
            if not isinstance(hint, list) or len(hint) != 2:
                continue
            by_name = {v.name: v for v, _ in m.ranges}
            pair = []
            for name in hint:
                v = by_name.get(name)
                k = self.maps[j].kernel_loop_of(v) if v is not None else None
                if k is not None:
                    pair.append(k.name)
            if len(pair) == 2 and pair[0] != pair[1]:
                return (pair[0], pair[1])
        return None


# ---------------------------------------------------------------------------------------------


def _store_index(m: LoopNode, r: Value) -> Any:
    """The storage position of element ``p`` of ``m``'s pointwise space in result ``r``:
    row-major over the node's loops as the IR writes them, through the result's layout."""
    linear = linear_index(m.ranges)
    t = r.type
    if t.layout is None:
        return linear
    shape = list(t.shape)
    sizes = [s for _, s in m.ranges]
    if len(shape) == len(sizes) and all(_same(a, b) for a, b in zip(shape, sizes)):
        parts = [v for v, _ in m.ranges]
    else:
        from fir.ir.symbolic import FloorDiv, Modulo

        parts = []
        stride: Any = 1
        for k in range(len(shape) - 1, -1, -1):
            q = FloorDiv(linear, stride) if stride != 1 else linear
            parts.append(Modulo(q, shape[k]) if k > 0 else q)
            stride = stride * shape[k]
        parts.reverse()
    e: Any = t.layout.offset
    for p, s in zip(parts, t.layout.strides):
        e = e + p * s
    return e


def _same_index(a: Any, b: Any, loops: list[KLoop]) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    from fir.ir.symbolic import simplify_index

    diff = sympy.expand(sympy.sympify(a) - sympy.sympify(b))
    if diff == 0:
        return True
    return simplify_index(diff, {lp.var: lp.size for lp in loops}) == 0


def _same(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _uses(i: Instr) -> set[str]:
    """The value names (and indirect symbols) instruction ``i`` reads."""
    out: set[str] = set()
    for attr in ("index", "rindex"):
        e = getattr(i, attr, None)
        if e is not None and not isinstance(e, int):
            out |= {s.name for s in e.free_symbols}
    if isinstance(i, Load) and i.mask is not None:
        out.add(i.mask)
    if isinstance(i, Compute):
        out |= {a for a in i.args if isinstance(a, str)}
    if isinstance(i, CheckIndex):
        out.add(i.src)
        if i.mask is not None:
            out.add(i.mask)
    if isinstance(i, (Accumulate, Store)) and isinstance(i.value, str):
        out.add(i.value)
    return out


def _proven_in_bounds(m: LoopNode, op: BodyOp) -> bool:
    """Whether indirect index ``op`` of ``m`` lies in ``[0, bound)`` by what the program computes
    (T5's relative-position buckets: ``[0, 31]`` into a 32-row table)."""
    from fir.ir.ranges import value_range

    if not isinstance(op.bound, int):
        return False
    r = value_range(op.operands[0], m)
    return r is not None and r[0] >= 0 and r[1] < op.bound


def _without_dead_values(instrs: list[Instr]) -> list[Instr]:
    """``instrs`` less the values nothing reads: the operands of a value that a later pass
    took from a scratch row instead of computing it."""
    used: set[str] = set()
    keep: list[Instr] = []
    for i in reversed(instrs):
        dead = isinstance(i, (Load, Compute, Constant, IndexValue)) and i.dst not in used
        if dead and not (isinstance(i, Compute) and i.op in FAILS_ON_ZERO_DIVISOR):
            continue
        used |= _uses(i)
        keep.append(i)
    keep.reverse()
    return keep


def _compute_dtype(dtype: DType) -> DType:
    """What renderers compute a value of ``dtype`` in: f16 and bf16 in f32."""
    return dtype.compute_dtype


def _reduced_dtype(m: LoopNode) -> DType:
    assert m.body is not None
    y = m.body.result
    if isinstance(y, BodyValue) and y.dtype is not None:
        return y.dtype
    return m.results[0].type.dtype


def _indirect_guards(body: Any) -> dict[int, Any]:
    """For each ``indirect`` result of ``body`` read only by loads masked by one same mask
    defined before it, that mask (by ``id`` of the result): its index needs checking only where
    the mask holds, as the interpreter checks a masked load. Outside the mask the index is
    whatever the computation gives (a ``cat`` input's index evaluated for the other input's
    points) and nothing is read through it."""
    defined: set[int] = set()
    masks: dict[str, Any] = {}  # indirect symbol name -> its one mask, None once any use is not
    order: dict[str, int] = {}  # indirect symbol name -> id of its result
    seen_before: dict[str, set[int]] = {}
    for op in body.ops:
        if op.opcode == "indirect":
            name = "%" + op.result.name
            order[name] = id(op.result)
            seen_before[name] = set(defined)
        elif op.index is not None and not isinstance(op.index, int):
            for s in op.index.free_symbols:
                if not is_indirect(s) or s.name not in order:
                    continue
                mask = op.mask if op.opcode == "load" else None
                if mask is None or (s.name in masks and masks[s.name] is not mask):
                    masks[s.name] = None
                else:
                    masks.setdefault(s.name, mask)
        defined.add(id(op.result))
    return {
        order[name]: mask
        for name, mask in masks.items()
        if mask is not None and id(mask) in seen_before[name]
    }


def _buffers_through(m: LoopNode, name: str) -> tuple[str, ...]:
    """The buffers ``m`` loads through indirect index ``%name``."""
    sym = indirect_symbol("%" + name)
    assert m.body is not None
    out: list[str] = []
    for op in m.body.ops:
        if (
            op.opcode == "load"
            and op.buffer is not None
            and op.index is not None
            and not isinstance(op.index, int)
            and sym in op.index.free_symbols
            and op.buffer.name not in out
        ):
            out.append(op.buffer.name)
    return tuple(out)
