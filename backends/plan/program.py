"""The plan of a whole function: its steps in order, and where every buffer lives.

Steps are kernels (a :class:`~.kernel.KernelPlan` each, a fused group or a loop node in none),
extern calls (made as written, through PyTorch) and views (an alias of a buffer's storage).
Buffers come with the storage they live in, from the ``plan-memory`` annotations: results that
reuse a dead buffer's storage or write in place of an input share its storage number, a view
shares its root's, arguments have storages of their own (the caller's), and ``frees`` says after
which step a storage is no longer needed. Kernel-local buffers have no storage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fir.ir.errors import FirError
from fir.ir.externs import IN_PLACE_VARIANTS
from fir.ir.graph import (
    AliasNode,
    ExternNode,
    Graph,
    LoopNode,
    Module,
    TensorOp,
    Value,
    unique_name,
)
from fir.ir.kernels import steps
from fir.ir.types import Dim, TensorType

from .bounds import BoundsCheck, program_checks
from .kernel import KernelPlan, PlanError, plan_kernel


@dataclass
class KernelStep:
    plan: KernelPlan


@dataclass
class ExternStep:
    node: ExternNode
    # the op called instead, in place on argument 0, whose storage is released after this
    # step (:data:`~fir.ir.externs.IN_PLACE_VARIANTS`); None: the node's own callee
    in_place: str | None = None


@dataclass
class AliasStep:
    result: str
    base: str
    type: TensorType  # shape, and strides and offset over the root's storage


Step = KernelStep | ExternStep | AliasStep


@dataclass
class Buffer:
    name: str
    type: TensorType
    storage: int  # buffers with the same number share memory
    argument: bool = False
    alias_of: str | None = None  # the root buffer of a view


@dataclass
class Storage:
    """Memory the function allocates (or an argument's): ``elements`` of ``dtype``, the most
    any buffer that lives in it needs."""

    number: int
    elements: Dim
    itemsize: int
    argument: bool


@dataclass
class ProgramPlan:
    name: str
    inputs: list[Buffer]
    outputs: list[str]
    steps: list[Step]
    buffers: dict[str, Buffer]
    storages: dict[int, Storage]
    frees: dict[int, list[int]] = field(default_factory=dict)  # step -> storages released after
    sizes: list[str] = field(default_factory=list)  # the function's size symbols
    errors: dict[int, str] = field(default_factory=dict)  # kernel error code -> message
    # what each call checks first, from the size values (:mod:`.bounds`); None: nothing left
    # to check at a call (a program without size symbols was checked when it was planned)
    bounds: BoundsCheck | None = None

    def kernels(self) -> list[KernelPlan]:
        return [s.plan for s in self.steps if isinstance(s, KernelStep)]

    def text(self, kernel: Callable[[KernelPlan], KernelPlan] | None = None) -> str:
        """The program's steps, then each kernel plan (``kernel`` of it where given: a back
        end's lowering)."""
        out = [f"program @{self.name}"]
        for b in self.inputs:
            out.append(f"  input %{b.name}: {b.type}")
        for k, s in enumerate(self.steps):
            if isinstance(s, KernelStep):
                out.append(f"  step {k}: kernel {s.plan.name}")
            elif isinstance(s, ExternStep):
                out.append(
                    f"  step {k}: extern {s.node.callee} -> "
                    + ", ".join("%" + r.name for r in s.node.results)
                    + (f" (in place: {s.in_place})" if s.in_place else "")
                )
            else:
                out.append(f"  step {k}: view %{s.result} of %{s.base}: {s.type}")
            if self.frees.get(k):
                out.append(f"    free storage {', '.join(map(str, self.frees[k]))}")
        out.append("  return " + ", ".join("%" + n for n in self.outputs))
        text = "\n".join(out) + "\n"
        return text + "".join("\n" + (kernel(p) if kernel else p).text() for p in self.kernels())


def _reinplace(steps: list[Step], buffers: dict[str, Buffer], frees: dict[int, list[int]]) -> None:
    """Extern calls that can write their result over their first argument: where that
    argument's storage is released right after the call (nothing reads it later) and is not
    the caller's (an input)."""
    for k, st in enumerate(steps):
        if not isinstance(st, ExternStep):
            continue
        variant = IN_PLACE_VARIANTS.get(st.node.callee)
        first = st.node.args[0] if st.node.args else None
        if variant is None or not isinstance(first, Value) or first.name not in buffers:
            continue
        b = buffers[first.name]
        if _is_extern_view(first):  # its memory is another buffer's, maybe the caller's
            continue
        if not b.argument and b.storage in frees.get(k, ()):
            st.in_place = variant


def plan_module(
    m: Module, scratch_rows: Callable[[KernelPlan], bool] | None = None
) -> list[ProgramPlan]:
    return [plan_program(g, scratch_rows) for g in m.funcs]


def plan_program(
    g: Graph,
    scratch_rows: Callable[[KernelPlan], bool] | None = None,
    launch_rows: int | None = None,
) -> ProgramPlan:
    """The plan of ``g``, a function after the ``fusion`` pipeline (or any loop-level program:
    without memory-plan annotations every buffer gets its own storage). ``scratch_rows`` and
    ``launch_rows``: see :func:`~.kernel.plan_kernel`."""
    for n in g.nodes:
        if isinstance(n, TensorOp):
            raise PlanError(
                f"@{g.name} is at tensor level (%{n.result.name} = {n.op}): run the 'fusion' "
                "pipeline before generating code",
                n.loc,
            )
    storage_of = _storages(g)
    buffers: dict[str, Buffer] = {}
    inputs: list[Buffer] = []
    for a in g.args:
        b = Buffer(a.name, a.type, storage_of[id(a)], argument=True)
        buffers[a.name] = b
        inputs.append(b)
    local = {v.name for k in g.kernels for v in k.local}
    out_steps: list[Step] = []
    frees: dict[int, list[int]] = {}
    errors: dict[int, str] = {}
    next_error = 1
    kernel_names: set[str] = set()
    hints = g.size_hints()
    readers = g.users()
    returned = {id(v) for v in g.outputs}
    for st in steps(g):
        for n in st.nodes:
            for r in n.results:
                if r.name in local:
                    continue
                if isinstance(n, ExternNode) and id(r) not in readers and id(r) not in returned:
                    # a result of an extern call that nothing reads (attention's RNG state
                    # and statistics in inference) is dropped where the call returns: adopting
                    # it could even copy it to the device (a CPU seed), which waits for the GPU
                    continue
                root = _root(r)
                buffers[r.name] = Buffer(
                    r.name,
                    r.type,
                    storage_of.get(id(r), storage_of.get(id(root), -1)),
                    alias_of=root.name if root is not r else None,
                )
        first = st.nodes[0]
        if isinstance(first, LoopNode):
            name = st.kernel.name if st.kernel is not None else first.result.name
            name = unique_name(_c_name(name), kernel_names, "_")
            plan = plan_kernel(st, name, next_error, scratch_rows, launch_rows)
            plan.hints = {s: hints[s] for s in plan.sizes if s in hints}
            next_error += len(plan.errors)
            errors.update(plan.errors)
            out_steps.append(KernelStep(plan))
        elif isinstance(first, ExternNode):
            out_steps.append(ExternStep(first))
        elif isinstance(first, AliasNode):
            assert first.base is not None
            out_steps.append(AliasStep(first.result.name, first.base.name, first.result.type))
        else:  # pragma: no cover - the verifier allows no other node
            raise PlanError(f"cannot plan {first.describe()}", first.loc)
        released = []
        for n in st.nodes:
            for v in n.attrs.get("frees") or []:
                if isinstance(v, Value) and id(v) in storage_of:
                    released.append(storage_of[id(v)])
        if released:
            frees[len(out_steps) - 1] = sorted(set(released))
    _reinplace(out_steps, buffers, frees)
    storages: dict[int, Storage] = {}
    for b in buffers.values():
        if b.storage < 0:
            continue
        elements = b.type.storage_size() if b.alias_of is None else 0
        s = storages.get(b.storage)
        if s is None:
            storages[b.storage] = Storage(b.storage, elements, b.type.dtype.itemsize, b.argument)
        elif b.alias_of is None:
            s.elements = _max(s.elements, elements)
    sizes: set[str] = set()
    for a in g.args:
        for d in list(a.type.shape) + list(a.type.strides) + [a.type.offset]:
            if not isinstance(d, int):
                sizes |= {s.name for s in d.free_symbols}
    sizes |= {s.name for s in g.size_params}  # passed by the caller (``sizes (s1)``)
    bounds: BoundsCheck | None = program_checks(g, buffers, sorted(sizes))
    if not sizes:  # every size is known: check once, now
        assert bounds is not None
        failure = bounds({})
        if failure is not None:
            raise PlanError(failure.message, failure.loc)
        bounds = None
    return ProgramPlan(
        name=g.name,
        inputs=inputs,
        outputs=[v.name for v in g.outputs],
        steps=out_steps,
        buffers=buffers,
        storages=storages,
        frees=frees,
        sizes=sorted(sizes),
        errors=errors,
        bounds=bounds,
    )


def shared_storage(program: ProgramPlan, k: KernelPlan) -> frozenset[str]:
    """The arguments of kernel ``k`` that share storage with another of its arguments (an
    in-place result): renderers must not assume they do not alias."""
    storage: dict[int, list[str]] = {}
    for a in k.args:
        b = program.buffers.get(a.name)
        if b is not None and b.storage >= 0:
            storage.setdefault(b.storage, []).append(a.name)
    return frozenset(n for names in storage.values() if len(names) > 1 for n in names)


def _storages(g: Graph) -> dict[int, int]:
    from fir.ir.memory_plan import storage_assignment

    try:
        return storage_assignment(g)
    except FirError as e:
        raise PlanError(f"memory plan of @{g.name}: {e.message}", e.loc) from None


def _root(v: Value) -> Value:
    from fir.ir.graph import alias_root

    return alias_root(v)


def _is_extern_view(v: Value) -> bool:
    from fir.ir.externs import aliased_argument

    return aliased_argument(v) is not None


def _max(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    import sympy

    return sympy.Max(a, b)


def _c_name(name: str) -> str:
    """A kernel name every target accepts: letters, digits and underscores."""
    out = "".join(c if c.isalnum() else "_" for c in name)
    return out if out and not out[0].isdigit() else f"k_{out}"


__all__: list[Any] = [
    "AliasStep",
    "Buffer",
    "ExternStep",
    "KernelStep",
    "ProgramPlan",
    "Storage",
    "plan_module",
    "plan_program",
    "shared_storage",
]
