"""Runs a compiled program on torch tensors: the part every back end shares.

A :class:`CompiledProgram` holds a :class:`~fir.backends.plan.ProgramPlan` and the compiled
kernels of one back end (anything with ``call(name, pointers, sizes) -> (code, value)``). A call:

1. checks the inputs against the function's signature (count, dtype, device, rank, shape; the
   size symbols are bound from the shapes) and gives each the layout the function was compiled
   for: an input laid out otherwise is copied, once, into that layout;
2. walks the steps: a kernel is called with the data pointers of its buffers and the values of
   its size symbols; an extern call goes to PyTorch with views of its argument buffers; a view
   is an alias of its root's storage;
3. allocates storages as ``plan-memory`` planned them (a result that reuses a dead buffer, or
   writes in place of an input, gets that storage; nothing is allocated for a kernel-local
   buffer or a view) when the first step that writes one runs, and drops them after the step
   that frees them;
4. returns the outputs as tensors (a view where the function returns a view).

A kernel that reports a failed index check raises :class:`~fir.ir.errors.KernelIndexError` (an
``IndexError``) naming the kernel, the buffers and the index value.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import sympy
import torch
from fir.ir import fir_ops
from fir.ir.errors import FirError, KernelIndexError, KernelZeroDivisionError
from fir.ir.externs import (
    ExternCallError,
    call_arguments,
    call_failed,
    kept_results,
    resolve_callee,
    wrong_result,
)
from fir.ir.symbolic import evaluate
from fir.ir.types import TensorType

from ..plan import DIVISION_BY_ZERO, Buffer, ExternStep, KernelStep, ProgramPlan
from ..plan.index_text import IndexSyntax, print_index
from . import fir_ops_cuda
from .buffers import allocate
from .fast_call import build_fast_plan, build_specialization, call_fast
from .layouts import flat_view, same_layout, scatter, storage_dtype, view


class RuntimeInputError(FirError, TypeError):
    """The inputs do not fit the compiled function (count, dtype, shape, device)."""


class Kernels(Protocol):
    """A back end's compiled kernels. ``call`` takes data pointers (or, where the kernels set
    ``takes_tensors``, the storages' tensors) and the size values, and returns an error code and
    value (0: none). Kernels that report errors later (a GPU's, asynchronously) return 0 and
    give them from ``finish()`` after the call: ``(kernel, code, value)`` or None."""

    def call(self, name: str, pointers: list[Any], sizes: list[int]) -> tuple[int, int]: ...


@dataclass
class _Input:
    buffer: Buffer
    dtype: torch.dtype
    shape: tuple[Any, ...]  # ints or sympy expressions over the size symbols
    strides: tuple[Any, ...]
    offset: Any
    plain: list[tuple[int, sympy.Symbol]]  # dimensions that bind a size symbol directly


class CompiledProgram:
    """A function compiled by one back end, callable on torch tensors."""

    def __init__(self, plan: ProgramPlan, kernels: Kernels, device: str = "cpu") -> None:
        self.plan = plan
        self.kernels = kernels
        # ``device`` may name a GPU (``cuda:1``): the program's memory is allocated there and its
        # inputs must be there, whatever device is current when it is called
        where = torch.device(device)
        self.device = where.type
        self.device_index: int | None = where.index
        self.alloc_device = device
        self.tensors = bool(getattr(kernels, "takes_tensors", False))
        self.finish = getattr(kernels, "finish", None)
        self.symbols = {
            name: sympy.Symbol(name, integer=True, positive=True) for name in plan.sizes
        }
        self.inputs = [self._input(b) for b in plan.inputs]
        # for each size symbol, the first input dimension that binds it: what the binding key
        # of a call reads (a dynamic BERT has 202 inputs and one symbol)
        binders: dict[str, tuple[int, int]] = {}
        for k, i in enumerate(self.inputs):
            for dim, sym in i.plain:
                binders.setdefault(sym.name, (k, dim))
        self.binders = tuple(binders.values())
        self.static = not plan.sizes
        # storages written by each step (allocated just before it), kernel arguments resolved
        self.writes: list[list[int]] = []
        last_write: dict[int, int] = {}
        for k, step in enumerate(plan.steps):
            written = sorted(self._written_storages(step))
            self.writes.append(written)
            for s in written:
                last_write[s] = k
        # after a free, a storage that a later step writes again (plan-memory's "reuses") is
        # kept for it; any other is dropped, so its memory goes back
        self.drops: dict[int, list[int]] = {
            k: [s for s in freed if last_write.get(s, -1) <= k] for k, freed in plan.frees.items()
        }
        # set to a list to time each step: a call appends one host time per plan step
        self.step_times: list[float] | None = None
        self.layouts: dict[str, tuple[list[int], list[int], int]] = {}  # static programs
        self.storage_sizes: dict[int, tuple[int, torch.dtype]] = {}
        self.extern_fns: dict[int, Any] = {}
        self.in_place_fns: dict[int, Any] = {}  # steps the plan made in place on argument 0
        for k, step in enumerate(plan.steps):
            if isinstance(step, ExternStep):
                self.extern_fns[k] = _resolve(step.node, step.node.callee)
                if step.in_place is not None:
                    self.in_place_fns[k] = _resolve(step.node, step.in_place)
        # each size expression's value as a function of the sizes, made at its first use:
        # sympy's ``subs`` took most of a dynamic-shape call's host time
        self.size_fns: dict[Any, Any] = {}
        self.layout_exprs: dict[str, tuple[list[Any], list[Any], Any]] = {}
        # symbolic programs: a generated call per binding of the sizes seen (the inputs'
        # shapes and the given sizes), None where the binding has none
        self.specials: dict[Any, Any] = {}
        self.specials_lock = threading.Lock()
        self.fast = build_fast_plan(self)

    # -- set-up

    def _input(self, b: Buffer) -> _Input:
        t = b.type
        plain = [(k, d) for k, d in enumerate(t.shape) if isinstance(d, sympy.Symbol)]
        return _Input(b, t.dtype.to_torch(), tuple(t.shape), tuple(t.strides), t.offset, plain)

    def _written_storages(self, step: Any) -> set[int]:
        names: list[str] = []
        if isinstance(step, KernelStep):
            names = [a.name for a in step.plan.args if a.written]
        return {self.plan.buffers[n].storage for n in names if n in self.plan.buffers}

        self.fast = build_fast_plan(self)

    def writes_inputs(self) -> bool:
        """Whether a step writes the memory of an input (a CUDA graph that reads its inputs
        where they lie must not)."""
        given = {b.storage for b in self.plan.inputs}
        return any(given.intersection(w) for w in self.writes)

    def _storage_size(self, number: int) -> tuple[int, torch.dtype]:
        elements = max(int(self.plan.storages[number].elements), 1)
        return elements, storage_dtype(self.plan, number)

    def synchronize(self) -> None:
        """Wait for the device and raise a kernel error that a call left unreported (a GPU
        back end reports errors at the next call, or here)."""
        if self.finish is not None:
            failed = self.finish(wait=True)
            if failed is not None:
                self._raise(*failed)

    def _finish(self) -> None:
        failed = self.finish() if self.finish is not None else None
        if failed is not None:
            kernel, code, value = failed
            self._raise(kernel, code, value)

    def _raise(self, kernel: str, code: int, value: int) -> None:
        if code == DIVISION_BY_ZERO:
            k = next(
                s.plan
                for s in self.plan.steps
                if isinstance(s, KernelStep) and s.plan.name == kernel
            )
            raise KernelZeroDivisionError(
                f"kernel {kernel}: integer division by zero ({', '.join(k.members)})"
            )
        what = self.plan.errors.get(code, f"kernel {kernel}")
        raise KernelIndexError(f"{what}: the index is {value}")

    # -- a call

    def __call__(
        self, *inputs: torch.Tensor, sizes: Mapping[str, int] | None = None
    ) -> list[torch.Tensor]:
        """Run the program. ``sizes`` binds size symbols by name (a size no input has as a
        dimension: PyTorch passes it as an int argument); the inputs' shapes must agree."""
        if self.fast is not None and len(inputs) == len(self.inputs):
            if self.step_times is None:
                out = call_fast(self, self.fast, inputs)
            else:  # each step's time, of the code that runs (the generated call's)
                fast_times = [0.0] * len(self.plan.steps)
                out = call_fast(self, self.fast, inputs, fast_times)
                if out is not None:
                    self.step_times.extend(fast_times)
            if out is not None:
                return out
        key = None
        if not self.static and self.step_times is None:
            key = _binding_key(inputs, sizes, self.binders, len(self.inputs))
            special = self.specials.get(key) if key is not None else None
            if special is not None:
                out = call_fast(self, special, inputs)
                if out is not None:
                    return out
        bound = self._bind(inputs, sizes or {})
        if self.plan.bounds is not None:  # every access inside its buffer at these sizes
            failure = self.plan.bounds(bound)
            if failure is not None:
                cls = RuntimeInputError if failure.kind in ("input", "size") else KernelIndexError
                raise cls(failure.message, failure.loc)
        if key is not None and key not in self.specials:
            self._specialize(key, bound)
        run = _Call(self, bound)
        for b, x in zip(self.plan.inputs, inputs):
            run.adopt_input(b, x)
        times = self.step_times
        for k, step in enumerate(self.plan.steps):
            start = time.perf_counter() if times is not None else 0.0
            for s in self.writes[k]:
                run.allocate(s)
            if isinstance(step, KernelStep):
                run.kernel(step)
            elif isinstance(step, ExternStep):
                run.extern(k, step)
            if times is not None:
                times.append(time.perf_counter() - start)
            # a view (AliasStep) needs nothing at run time: its tensor is made when read
            for s in self.drops.get(k, ()):
                run.free(s)
        self._finish()
        return [run.output(name, inputs) for name in self.plan.outputs]

    def _specialize(self, key: Any, bound: dict[str, int]) -> None:
        """Resolve the call for this binding of the sizes (checked by the caller), so that the
        next call with inputs of these shapes takes a generated call as a static program does.
        The most recent :data:`SPECIALIZATIONS` bindings are kept."""
        special = build_specialization(self, dict(bound))
        with self.specials_lock:  # calls from several threads may add at once
            while len(self.specials) >= SPECIALIZATIONS:
                self.specials.pop(next(iter(self.specials)))
            self.specials[key] = special

    def _bind(self, inputs: Sequence[torch.Tensor], given: Mapping[str, int]) -> dict[str, int]:
        plan = self.plan
        if len(inputs) != len(self.inputs):
            raise RuntimeInputError(
                f"@{plan.name} takes {len(self.inputs)} input(s) "
                f"({', '.join('%' + i.buffer.name for i in self.inputs)}), got {len(inputs)}"
            )
        sizes: dict[str, int] = {}
        for sym, value in given.items():
            if sym not in self.symbols:
                continue  # a size the program does not use
            if value < 1:
                raise RuntimeInputError(f"size {sym} of @{plan.name} must be positive, got {value}")
            sizes[sym] = int(value)
        for i, x in zip(self.inputs, inputs):
            name = i.buffer.name
            if not isinstance(x, torch.Tensor):
                raise RuntimeInputError(f"input %{name} must be a tensor, got {type(x).__name__}")
            if x.dtype != i.dtype:
                raise RuntimeInputError(
                    f"input %{name} must have dtype {i.buffer.type.dtype} ({i.dtype}), got {x.dtype}"
                )
            if x.device.type != self.device or (
                self.device_index is not None and x.get_device() != self.device_index
            ):
                raise RuntimeInputError(
                    f"input %{name} is on {x.device}; this program runs on {self.alloc_device}"
                )
            if x.dim() != len(i.shape):
                raise RuntimeInputError(
                    f"input %{name} must have rank {len(i.shape)} ({i.buffer.type}), got shape "
                    f"{list(x.shape)}"
                )
            for k, sym in i.plain:
                actual = int(x.shape[k])
                have = sizes.setdefault(sym.name, actual)
                if have != actual:
                    raise RuntimeInputError(
                        f"input %{name} has size {actual} in dimension {k}, but {sym.name} = {have}"
                    )
        if not self.static:
            missing = [s for s in self.plan.sizes if s not in sizes]
            if missing:
                raise RuntimeInputError(
                    f"size {missing[0]} of @{plan.name} is not the size of an input dimension"
                )
        for i, x in zip(self.inputs, inputs):
            want = tuple(self.dim(d, sizes) for d in i.shape)
            if tuple(x.shape) != want:
                raise RuntimeInputError(
                    f"input %{i.buffer.name} must have shape {list(want)} ({i.buffer.type}), "
                    f"got {list(x.shape)}"
                )
        return sizes

    def dim(self, d: Any, sizes: dict[str, int]) -> int:
        if isinstance(d, int):
            return d
        fn = self.size_fns.get(d)
        if fn is None:
            fn = self.size_fns[d] = size_function(d)
        return fn(sizes)


class _Call:
    """The state of one call: storages, and tensors for the buffers that live in them."""

    def __init__(self, program: CompiledProgram, sizes: dict[str, int]) -> None:
        self.p = program
        self.plan = program.plan
        self.sizes = sizes
        self.size_args: dict[str, list[int]] = {}
        self.layouts: dict[str, tuple[list[int], list[int], int]] = {}
        self.storages: dict[int, torch.Tensor] = {}  # number -> flat tensor of its dtype
        self.bases: dict[int, int] = {}  # number -> element of the flat tensor that is index 0

    def dim(self, d: Any) -> int:
        return d if isinstance(d, int) else self.p.dim(d, self.sizes)

    def layout(self, name: str) -> tuple[list[int], list[int], int]:
        """Shape, strides and offset of buffer ``name`` (cached across calls when the program
        has no size symbols: they are the same every time)."""
        cache = self.p.layouts if self.p.static else self.layouts
        got = cache.get(name)
        if got is None:
            exprs = self.p.layout_exprs.get(name)
            if exprs is None:  # the type's strides are computed: once per program
                t = self.plan.buffers[name].type
                exprs = self.p.layout_exprs[name] = (list(t.shape), list(t.strides), t.offset)
            shape, strides, offset = exprs
            got = cache[name] = (
                [self.dim(d) for d in shape],
                [self.dim(s) for s in strides],
                self.dim(offset),
            )
        return got

    # storages

    def adopt_input(self, b: Buffer, x: torch.Tensor) -> None:
        """Use the caller's tensor as the storage of input ``b`` when it is laid out as the
        function expects, else a copy laid out so."""
        t = b.type
        if t.layout is None and x.is_contiguous():  # the common case, without a view
            self.storages[b.storage] = x.view(-1) if x.dim() != 1 else x
            self.bases[b.storage] = 0
            return
        shape, strides, offset = self.layout(b.name)
        flat, base = None, -1
        if x.numel() == 0 or same_layout(x, shape, strides):
            flat, base = flat_view(x, offset)
        if flat is None or base < 0:
            elements = max(self.dim(t.storage_size()), 1)
            flat = torch.zeros(elements, dtype=x.dtype, device=x.device)
            scatter(flat, x, shape, strides, offset)
            base = 0
        self.storages[b.storage] = flat
        self.bases[b.storage] = base

    def allocate(self, number: int) -> None:
        if number in self.storages or number < 0:
            return
        size = self.p.storage_sizes.get(number) if self.p.static else None
        if size is None:
            elements = max(self.dim(self.plan.storages[number].elements), 1)
            size = (elements, storage_dtype(self.plan, number))
            if self.p.static:
                self.p.storage_sizes[number] = size
        self.storages[number] = allocate(size[0], size[1], device=self.p.alloc_device)
        self.bases[number] = 0

    def free(self, number: int) -> None:
        self.storages.pop(number, None)

    def tensor(self, name: str) -> torch.Tensor:
        """Buffer ``name`` as a tensor: its storage seen through its type."""
        b = self.plan.buffers[name]
        shape, strides, offset = self.layout(name)
        return view(self.storages[b.storage], shape, strides, self.bases[b.storage] + offset)

    def pointer(self, name: str) -> int:
        b = self.plan.buffers[name]
        flat = self.storages[b.storage]
        return flat.data_ptr() + self.bases[b.storage] * flat.element_size()

    # steps

    def flat(self, name: str) -> torch.Tensor:
        """Buffer ``name``'s storage as a flat tensor that starts at its element 0."""
        b = self.plan.buffers[name]
        flat = self.storages[b.storage]
        base = self.bases[b.storage]
        return flat if base == 0 else flat[base:]

    def kernel(self, step: KernelStep) -> None:
        plan = step.plan
        if self.p.tensors:
            pointers: list[Any] = [self.flat(a.name) for a in plan.args]
        else:
            pointers = [self.pointer(a.name) for a in plan.args]
        sizes = self.size_args.get(plan.name)
        if sizes is None:
            sizes = self.size_args[plan.name] = [self.sizes[s] for s in plan.sizes]
        code, value = self.p.kernels.call(plan.name, pointers, sizes)
        if code:
            self.p._raise(plan.name, code, value)

    def extern(self, k: int, step: ExternStep) -> None:
        node = step.node
        fn = self.p.extern_fns[k]
        args, kwargs = call_arguments(node, lambda v: self.tensor(v.name), self.dim)
        in_place = self.p.in_place_fns.get(k)
        callee = node.callee
        if in_place is not None and args[0].is_contiguous():  # NCCL takes dense tensors
            # in_place_fns holds only the steps that have a variant
            fn, callee = in_place, cast(str, step.in_place)
        try:
            with torch.no_grad():  # an inference program: nothing to record for autograd
                out = fn(*args, **kwargs)
        except Exception as e:  # the op's own error, named (torch.compile hands ``e`` on)
            raise call_failed(node, callee, e) from e
        outs = kept_results(node, out)
        for r, t in zip(node.results, outs):
            b = self.plan.buffers.get(r.name)
            if b is None:
                continue
            if t is None:  # a call made for its effect (an assertion): its result is a token
                t = torch.empty([self.dim(d) for d in b.type.shape], dtype=b.type.dtype.to_torch())
            self._adopt_result(node, b, t)

    def _adopt_result(self, node: Any, b: Buffer, t: torch.Tensor) -> None:
        """An extern call's result: its own memory when laid out as planned, else copied into
        the planned layout (kernels index it as its type says). One of another dtype or shape
        than its type says is an error: never cast or reshaped quietly."""
        want = b.type
        dtype = want.dtype.to_torch()
        shape = [self.dim(d) for d in want.shape]
        if not isinstance(t, torch.Tensor) or t.dtype != dtype or tuple(t.shape) != tuple(shape):
            raise wrong_result(node, b.name, t, dtype, shape)
        if t.device.type != self.p.device:  # a constant the lowering made (``torch.tensor``)
            t = t.to(self.p.alloc_device)
        strides = [self.dim(s) for s in want.strides]
        offset = self.dim(want.offset)
        existing = self.storages.get(b.storage)
        if existing is None and (t.numel() == 0 or same_layout(t, shape, strides)):
            flat, base = flat_view(t, offset)
            if base < 0:  # the layout starts before the tensor's memory: copy instead
                self.allocate(b.storage)
            else:
                self.storages[b.storage] = flat
                self.bases[b.storage] = base
                return
        if existing is None:
            self.allocate(b.storage)
        scatter(self.storages[b.storage], t, shape, strides, self.bases[b.storage] + offset)

    def output(self, name: str, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        b = self.plan.buffers[name]
        if b.argument:
            k = next(j for j, i in enumerate(self.plan.inputs) if i.name == name)
            return inputs[k]
        return self.tensor(name)


def _resolve(node: Any, callee: str) -> Any:
    """The op ``node`` calls (``callee``: its own, or the plan's in-place variant), looked up
    as the interpreter does; an error names the node."""
    if callee.startswith(fir_ops.NAMESPACE + "."):
        fir_ops_cuda.register()  # FIR's own operators, with their GPU kernels
    try:
        return resolve_callee(callee, ExternCallError)
    except ExternCallError as e:
        names = ", ".join("%" + r.name for r in node.results)
        raise ExternCallError(f"{names}: {e.message}", node.loc) from None


# how many bindings of its sizes a symbolic program keeps a generated call for
SPECIALIZATIONS = 32


def _binding_key(
    inputs: Sequence[Any],
    sizes: Mapping[str, int] | None,
    binders: tuple[tuple[int, int], ...],
    count: int,
) -> Any:
    """What picks a specialization: the size symbols' values as the inputs' dimensions in
    ``binders`` give them, and the given sizes. Every input's shape is a function of these, and
    the specialization's generated call checks each input's shape against it, so reading one
    dimension per symbol is enough (the shapes of all the inputs took 80 us a call). None
    where the inputs are not tensors of enough dimensions (the general path says what is
    wrong)."""
    if len(inputs) != count:
        return None
    try:
        dims = tuple([inputs[k].shape[d] for k, d in binders])
    except (AttributeError, IndexError):
        return None
    return (dims, tuple(sorted(sizes.items()))) if sizes else dims


_PYTHON_SIZES = IndexSyntax(
    language="Python",
    integer=str,
    div="//",  # Python's floor division and modulo are FIR's, whatever the signs
    mod="%",
    floor_div="_floordiv",
    floor_mod="_floormod",
    minimum="min",
    maximum="max",
)
_SIZE_HELPERS = {
    "_floordiv": lambda a, b: a // b,
    "_floormod": lambda a, b: a % b,
    "min": min,
    "max": max,
}


def size_function(expr: Any) -> Any:
    """``expr`` (a size expression over the program's size symbols) as a Python function of
    the dict of their values, compiled once."""
    try:
        text = print_index(expr, lambda n: f"S[{n!r}]", _PYTHON_SIZES)
        fn = eval(f"lambda S: int({text})", dict(_SIZE_HELPERS))  # noqa: S307 - FIR's own text
    except Exception:  # noqa: BLE001 - a form the printer lacks: evaluate it as a tree
        symbols = {s.name: s for s in sympy.sympify(expr).free_symbols}

        def fn(sizes: Mapping[str, int]) -> int:
            return int(evaluate(expr, {symbols[k]: sizes[k] for k in symbols}))

    return fn


def element_count(t: TensorType, sizes: dict[str, int]) -> int:
    dims = [d if isinstance(d, int) else int(d.subs(sizes)) for d in t.shape]
    return math.prod(dims)
