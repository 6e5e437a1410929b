"""The call of a program with no size symbols, resolved once.

:class:`~fir.backends.runtime.CompiledProgram`'s general call walks the plan and works out,
at every call, each buffer's layout, each extern argument's kind and each result's fate. For a
program without size symbols all of that is the same at every call, so it is worked out here
once: each step becomes a tuple of what it needs (storage numbers, shapes, the PyTorch op to
call), and a call does only the checks that depend on the inputs, the allocations, the kernel
and extern calls, and the adoption of extern results. Measured on the two-GPU transformer block
of ``benchmarks/bench_tp.py`` (16 steps, 7 of them extern calls), the general path made the
host, not the GPU, set the step time.

A storage here is a flat tensor whose element 0 is the storage's element 0 (an extern result
that starts inside its memory is kept as a slice), so a kernel's pointer is the tensor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.externs import decode_torch_object
from fir.ir.graph import Literal, Value

from .buffers import allocate
from .layouts import flat_view, same_layout, scatter, storage_dtype, view
from .plan import AliasStep, ExternStep, KernelStep

# the program (:class:`~fir.backends.runtime.CompiledProgram`, which calls this module)
CompiledProgram = Any

KERNEL, EXTERN, NOTHING = 0, 1, 2


@dataclass(frozen=True)
class _Ref:
    """A buffer passed to an extern call: a view of storage ``storage``."""

    storage: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class _Result:
    """Where an extern call's result ``position`` (among the results the node keeps) goes."""

    position: int
    name: str
    storage: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    elements: int  # of the storage, for a result that has to be copied into it


@dataclass
class FastPlan:
    inputs: list[tuple[torch.dtype, tuple[int, ...], int]]
    steps: list[tuple[Any, ...]]
    outputs: list[tuple[bool, int, tuple[Any, ...] | None]]
    externs: bool  # whether any step calls PyTorch


class _Dynamic(Exception):
    """Something only the general path handles."""


def _static(d: Any) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, sympy.Basic) and not d.free_symbols:
        return int(d)
    raise _Dynamic


def build_fast_plan(p: CompiledProgram) -> FastPlan | None:
    """``p``'s call resolved, or None where the general path must run (size symbols, an input
    in a layout of its own)."""
    plan = p.plan
    if not p.static:
        return None
    if any(b.type.normalized().layout is not None for b in plan.inputs):
        return None
    try:
        return _build(p)
    except _Dynamic:
        return None


def _layout(p: CompiledProgram, name: str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    t = p.plan.buffers[name].type
    return (
        tuple(_static(d) for d in t.shape),
        tuple(_static(s) for s in t.strides),
        _static(t.offset),
    )


def _argument(p: CompiledProgram, a: Any) -> Any:
    """An extern argument as the call takes it, with a :class:`_Ref` for each buffer."""
    if isinstance(a, Value):
        shape, strides, offset = _layout(p, a.name)
        return _Ref(p.plan.buffers[a.name].storage, shape, strides, offset)
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


def _build(p: CompiledProgram) -> FastPlan:
    plan = p.plan
    inputs = [(b.type.dtype.to_torch(), tuple(b.type.shape), b.storage) for b in plan.inputs]
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
            shaped[b.storage] = tuple(int(d) for d in b.type.shape)
    steps: list[tuple[Any, ...]] = []
    for k, step in enumerate(plan.steps):
        drops = tuple(p.drops.get(k, ()))
        if isinstance(step, KernelStep):
            sizes = []
            for s in p.writes[k]:
                elements, dtype = p._storage_size(s)
                sizes.append((s, shaped.get(s, (elements,)), elements, dtype))
            args = tuple(plan.buffers[a.name].storage for a in step.plan.args)
            steps.append((KERNEL, step.plan.name, tuple(sizes), args, drops))
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
                    _Result(j, r.name, b.storage, shape, strides, offset, dtype, max(elements, 1))
                )
            template = [_argument(p, a) for a in node.args]
            refs = tuple((i, a) for i, a in enumerate(template) if type(a) is _Ref)
            nested = tuple((i, a) for i, a in enumerate(template) if type(a) is list)
            positions = node.attrs.get("results")
            steps.append(
                (
                    EXTERN,
                    _direct(p.extern_fns[k]),
                    _direct(p.in_place_fns.get(k)),
                    template,
                    refs,
                    nested,
                    {key: _argument(p, v) for key, v in node.kwargs.items()},
                    None if positions is None else tuple(positions),
                    tuple(results),
                    drops,
                )
            )
        elif drops:  # a view runs nothing; a storage may still be released after it
            assert isinstance(step, AliasStep)
            steps.append((NOTHING, drops))
    outputs: list[tuple[bool, int, tuple[Any, ...] | None]] = []
    for name in plan.outputs:
        b = plan.buffers[name]
        if b.argument:
            outputs.append((True, [i.name for i in plan.inputs].index(name), None))
        elif b.storage in shaped:
            outputs.append((False, b.storage, None))
        else:
            outputs.append((False, b.storage, _layout(p, name)))
    return FastPlan(inputs, steps, outputs, any(s[0] == EXTERN for s in steps))


def _direct(fn: Any) -> Any:
    """An ATen op's C++ callable, without ``OpOverload.__call__``'s Python frame (which only
    forwards to it)."""
    return getattr(fn, "_op", fn)


def _materialize(a: Any, storages: dict[int, torch.Tensor]) -> Any:
    if type(a) is _Ref:
        return view(storages[a.storage], a.shape, a.strides, a.offset)
    if type(a) is list:
        return [_materialize(x, storages) for x in a]
    return a


def _adopt(r: _Result, t: Any, storages: dict[int, torch.Tensor], device: str) -> None:
    """Extern result ``t`` into storage ``r.storage``: its own memory where it is laid out as
    planned and the storage is not taken yet, else copied into the planned layout."""
    if t is None:  # a call made for its effect (an assertion): its result is a token
        t = torch.empty(r.shape, dtype=r.dtype, device=device)
    if t.dtype != r.dtype:
        t = t.to(r.dtype)
    if t.device.type != device:  # a constant the lowering made (``torch.tensor``)
        t = t.to(device)
    if t.shape != r.shape:
        raise FirError(
            f"extern call result %{r.name} has shape {list(t.shape)}, its type says {list(r.shape)}"
        )
    existing = storages.get(r.storage)
    if existing is None:
        if r.offset == 0 and t.stride() == r.strides:
            storages[r.storage] = t  # the storage starts where the result does
            return
        if t.numel() == 0 or same_layout(t, r.shape, r.strides):
            flat, base = flat_view(t, r.offset)
            if base >= 0:
                storages[r.storage] = flat[base:] if base else flat
                return
        existing = storages[r.storage] = allocate(r.elements, r.dtype, None, device)
    scatter(existing, t, list(r.shape), list(r.strides), r.offset)


def call_fast(p: CompiledProgram, fast: FastPlan, inputs: Sequence[torch.Tensor]) -> Any:
    """One call through ``fast``; None where an input is not as the plan expects (the general
    path then checks it, copies it or says what is wrong)."""
    storages: dict[int, torch.Tensor] = {}
    device = p.device
    # ``x.is_cpu``/``x.is_cuda`` cost a sixth of ``x.device.type`` (41 against 265 ns)
    on_cpu, on_gpu = device == "cpu", device == "cuda"
    for (dtype, shape, number), x in zip(fast.inputs, inputs):
        if (
            x.dtype != dtype
            or x.shape != shape
            or not x.is_contiguous()
            or not (x.is_cpu if on_cpu else x.is_cuda if on_gpu else x.device.type == device)
        ):
            return None
        storages[number] = x
    if fast.externs and torch.is_grad_enabled():
        with torch.no_grad():  # an inference program: nothing for autograd to record
            return _run(p, fast, inputs, storages)
    return _run(p, fast, inputs, storages)


def _run(
    p: CompiledProgram,
    fast: FastPlan,
    inputs: Sequence[torch.Tensor],
    storages: dict[int, torch.Tensor],
) -> list[torch.Tensor]:
    device = p.device
    on_cpu, on_gpu = device == "cpu", device == "cuda"
    call = p.kernels.call
    tensors = p.tensors
    for step in fast.steps:
        kind = step[0]
        if kind == KERNEL:
            _, name, sizes, args, drops = step
            for number, shape, elements, dtype in sizes:
                if number not in storages:
                    storages[number] = allocate(elements, dtype, shape, device)
            if tensors:
                code, value = call(name, [storages[s] for s in args], ())
            else:
                code, value = call(name, [storages[s].data_ptr() for s in args], ())
            if code:
                p._raise(name, code, value)
        elif kind == EXTERN:
            _, fn, in_place, template, refs, nested, kwarg_specs, positions, results, drops = step
            args = list(template)
            for i, a in refs:
                t = storages[a.storage]
                # the storage's own tensor where it is the buffer (an input, an extern result):
                # comparing costs less than making a view
                if a.offset == 0 and t.shape == a.shape and t.stride() == a.strides:
                    args[i] = t
                else:
                    args[i] = view(t, a.shape, a.strides, a.offset)
            for i, a in nested:
                args[i] = _materialize(a, storages)
            kwargs = {key: _materialize(v, storages) for key, v in kwarg_specs.items()}
            if in_place is not None and args[0].is_contiguous():  # NCCL takes dense tensors
                fn = in_place
            out = fn(*args, **kwargs)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if positions is not None:
                outs = [outs[j] for j in positions]
            for r in results:
                t = outs[r.position]
                if (  # the usual case: a fresh tensor laid out as planned, on the device
                    r.offset == 0
                    and t is not None
                    and t.dtype == r.dtype
                    and t.shape == r.shape
                    and t.stride() == r.strides
                    and (t.is_cuda if on_gpu else t.is_cpu if on_cpu else False)
                    and r.storage not in storages
                ):
                    storages[r.storage] = t
                else:
                    _adopt(r, t, storages, device)
        else:
            drops = step[1]
        for number in drops:
            storages.pop(number, None)
    if p.finish is not None:
        p._finish()
    out = []
    for is_input, where, layout in fast.outputs:
        if is_input:
            out.append(inputs[where])
        elif layout is None:
            out.append(storages[where])
        else:
            out.append(view(storages[where], *layout))
    return out
