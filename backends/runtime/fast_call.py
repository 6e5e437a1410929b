"""The call of a program with no size symbols, resolved once.

:class:`~fir.backends.runtime.CompiledProgram`'s general call walks the plan and works out,
at every call, each buffer's layout, each extern argument's kind and each result's fate. For a
program without size symbols all of that is the same at every call, so it is worked out here
once: each step becomes a record of what it needs (storage numbers, shapes, the PyTorch op to
call: :mod:`.call_source`'s ``KernelCall``, ``ExternCall``, ``Release``), and those records are
written out as a Python function (:func:`~.call_source.call_source`) that does only the checks
that depend on the inputs, the allocations, the kernel and extern calls, and the adoption of
extern results. Measured on the two-GPU transformer block of ``benchmarks/bench_tp.py`` (16
steps, 7 of them extern calls), the general path made the host, not the GPU, set the step
time.

A storage here is a flat tensor whose element 0 is the storage's element 0 (an extern result
that starts inside its memory is kept as a slice), so a kernel's pointer is the tensor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from fir.ir.dtypes import DType
from fir.ir.externs import decode_torch_object
from fir.ir.graph import Literal, Value

from ..plan import AliasStep, ExternStep, KernelStep
from .call_source import ExternCall, KernelCall, Ref, Release, ResultSpec, Step, call_source
from .layouts import storage_dtype

# the program (:class:`~fir.backends.runtime.CompiledProgram`, which calls this module)
CompiledProgram = Any


@dataclass
class FastPlan:
    # each input's dtype, shape, storage, and strides where it is not contiguous
    inputs: list[tuple[torch.dtype, tuple[int, ...], int, tuple[int, ...] | None]]
    steps: list[Step]
    outputs: list[tuple[bool, int, tuple[Any, ...] | None]]
    externs: bool  # whether any step calls PyTorch
    source: str = ""  # the generated call (:mod:`.call_source`)
    call: Any = None
    constants: dict[str, Any] = field(default_factory=dict)  # the globals it reads
    labels: dict[str, str] = field(default_factory=dict)  # what some of them are
    timed: Any = None  # ``call(inputs, times)``, made at the first timed call


class _Dynamic(Exception):
    """Something only the general path handles."""


# how the specialization being built evaluates a size expression (None: a static program);
# a context variable, so that threads building specializations at once never see each other's
_SIZES: ContextVar[Any] = ContextVar("fir_specialization_sizes", default=None)


def _static(d: Any) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, sympy.Basic) and not d.free_symbols:
        return int(d)
    evaluate = _SIZES.get()
    if evaluate is not None and isinstance(d, sympy.Basic):
        return int(evaluate(d))
    raise _Dynamic


def build_fast_plan(p: CompiledProgram) -> FastPlan | None:
    """``p``'s call resolved, or None where the general path must run (size symbols, an input
    that does not start its storage)."""
    if not p.static:
        return None
    try:
        return _build(p)
    except _Dynamic:
        return None


def build_specialization(p: CompiledProgram, sizes: dict[str, int]) -> FastPlan | None:
    """``p``'s call resolved for one binding of its size symbols: a program with symbolic
    sizes (``dynamic=True``) runs each binding it has seen as a static program does, with
    the checks of the generated call (inputs of exactly these shapes) choosing it. The caller
    has checked the binding (every access in bounds) with the general path's first call."""
    token = _SIZES.set(lambda d: p.dim(d, sizes))
    try:
        return _build(p, sizes)
    except _Dynamic:
        return None
    finally:
        _SIZES.reset(token)


def _input_strides(b: Any) -> tuple[int, ...] | None:
    """The strides an input arrives in (a backward graph's saved transposed activation), None
    for a contiguous one. The caller's tensor is then its storage as it is, which asks that
    the layout start at the storage's first element."""
    t = b.type.normalized()
    if t.layout is None:
        return None
    if _static(t.offset) != 0:
        raise _Dynamic
    return tuple(_static(s) for s in t.strides)


def _layout(p: CompiledProgram, name: str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    t = p.plan.buffers[name].type
    return (
        tuple(_static(d) for d in t.shape),
        tuple(_static(s) for s in t.strides),
        _static(t.offset),
    )


def _argument(p: CompiledProgram, a: Any) -> Any:
    """An extern argument as the call takes it, with a :class:`Ref` for each buffer."""
    if isinstance(a, Value):
        shape, strides, offset = _layout(p, a.name)
        return Ref(p.plan.buffers[a.name].storage, shape, strides, offset)
    if isinstance(a, list):
        return [_argument(p, x) for x in a]
    if isinstance(a, DType):
        return a.to_torch()
    if isinstance(a, Literal):
        return a.value
    if isinstance(a, sympy.Basic):
        return _static(a)
    if isinstance(a, str):
        return decode_torch_object(a)
    return a


def _build(p: CompiledProgram, bound: dict[str, int] | None = None) -> FastPlan:
    plan = p.plan
    inputs = [
        (
            b.type.dtype.to_torch(),
            tuple(_static(d) for d in b.type.shape),
            b.storage,
            _input_strides(b),
        )
        for b in plan.inputs
    ]
    adopted = {  # storages that take an extern call's result as it comes
        plan.buffers[r.name].storage
        for s in plan.steps
        if isinstance(s, ExternStep)
        for r in s.node.results
        if r.name in plan.buffers
    }
    # a storage that holds just one returned buffer, laid out contiguously and written by a
    # kernel, is allocated in that buffer's shape and returned as it is
    shaped: dict[int, tuple[int, ...]] = {}
    for name in plan.outputs:
        b = plan.buffers[name]
        sharing = [x for x in plan.buffers.values() if x.storage == b.storage]
        if (
            not b.argument
            and b.alias_of is None
            and len(sharing) == 1
            and b.storage not in adopted
            and b.type.normalized().layout is None
        ):
            shaped[b.storage] = tuple(_static(d) for d in b.type.shape)
    steps: list[Step] = []
    for k, step in enumerate(plan.steps):
        drops = tuple(p.drops.get(k, ()))
        if isinstance(step, KernelStep):
            sizes = []
            for s in p.writes[k]:
                elements = max(_static(plan.storages[s].elements), 1)
                dtype = storage_dtype(plan, s)
                sizes.append((s, shaped.get(s, (elements,)), elements, dtype))
            args = tuple(plan.buffers[a.name].storage for a in step.plan.args)
            steps.append(
                KernelCall(
                    step.plan.name,
                    tuple(sizes),
                    args,
                    drops,
                    f"step {k}: kernel {step.plan.name}",
                    k,
                    tuple(bound[s] for s in step.plan.sizes) if bound else (),
                )
            )
        elif isinstance(step, ExternStep):
            node = step.node
            results = []
            for j, r in enumerate(node.results):
                b = plan.buffers.get(r.name)
                if b is None:
                    continue
                shape, strides, offset = _layout(p, r.name)
                elements = _static(plan.storages[b.storage].elements)
                dtype = storage_dtype(plan, b.storage)
                results.append(
                    ResultSpec(
                        j, r.name, b.storage, shape, strides, offset, dtype, max(elements, 1)
                    )
                )
            template = [_argument(p, a) for a in node.args]
            positions = node.attrs.get("results")
            steps.append(
                ExternCall(
                    _direct(p.extern_fns[k]),
                    _direct(p.in_place_fns.get(k)),
                    node.callee,
                    template,
                    {key: _argument(p, v) for key, v in node.kwargs.items()},
                    None if positions is None else tuple(positions),
                    _returns_one_tensor(p.extern_fns[k]),
                    tuple(results),
                    drops,
                    f"step {k}: {', '.join('%' + r.name for r in node.results)} = "
                    f"{node.callee}" + (f" (in place: {step.in_place})" if step.in_place else ""),
                    k,
                    node,
                )
            )
        elif drops:  # a view runs nothing; a storage may still be released after it
            assert isinstance(step, AliasStep)
            steps.append(Release(drops, f"step {k}: %{step.result}, a view", k))
    outputs: list[tuple[bool, int, tuple[Any, ...] | None]] = []
    for name in plan.outputs:
        b = plan.buffers[name]
        if b.argument:
            outputs.append((True, [i.name for i in plan.inputs].index(name), None))
        elif b.storage in shaped:
            outputs.append((False, b.storage, None))
        else:
            outputs.append((False, b.storage, _layout(p, name)))
    fast = FastPlan(inputs, steps, outputs, any(isinstance(s, ExternCall) for s in steps))
    finish = p._finish if p.finish is not None else None
    fast.source, fast.call = call_source(
        fast, p.alloc_device, p.tensors, p.kernels.call, p._raise, finish, direct=_direct_of(p)
    )
    return fast


def _direct_of(p: CompiledProgram) -> Any:
    """The program's kernels where the generated call may launch them itself (on a GPU)."""
    kernels = p.kernels
    if p.device != "cuda" or not hasattr(kernels, "direct_launch"):
        return None
    return kernels


def _returns_one_tensor(fn: Any) -> bool:
    schema = getattr(fn, "_schema", None)
    if schema is None:
        return False
    returns = schema.returns
    return len(returns) == 1 and str(returns[0].type) == "Tensor"


def _direct(fn: Any) -> Any:
    """An ATen op's C++ callable, without ``OpOverload.__call__``'s Python frame (which only
    forwards to it)."""
    return getattr(fn, "_op", fn)


def call_fast(
    p: CompiledProgram,
    fast: FastPlan,
    inputs: Sequence[torch.Tensor],
    times: list[float] | None = None,
) -> Any:
    """One call through ``fast``'s generated function; None where an input is not as the plan
    expects (the general path then checks it, copies it or says what is wrong). With
    ``times``, the timed function, which adds each step's host time to ``times[k]``."""
    if times is None:
        call = fast.call
    else:
        if fast.timed is None:
            finish = p._finish if p.finish is not None else None
            fast.timed = call_source(
                fast,
                p.alloc_device,
                p.tensors,
                p.kernels.call,
                p._raise,
                finish,
                timed=True,
                direct=_direct_of(p),
            )[1]
        timed = fast.timed

        def call(inputs: Sequence[torch.Tensor]) -> Any:
            return timed(inputs, times)

    if fast.externs and torch.is_grad_enabled():
        with torch.no_grad():  # an inference program: nothing for autograd to record
            return call(inputs)
    return call(inputs)
