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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sympy
import torch
from fir.ir.dtypes import DType
from fir.ir.errors import FirError, KernelIndexError, KernelZeroDivisionError
from fir.ir.externs import kept_results
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from .buffers import allocate
from .plan import DIVISION_BY_ZERO, Buffer, ExternStep, KernelStep, ProgramPlan


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
        self.device = device
        self.tensors = bool(getattr(kernels, "takes_tensors", False))
        self.finish = getattr(kernels, "finish", None)
        self.symbols = {
            name: sympy.Symbol(name, integer=True, positive=True) for name in plan.sizes
        }
        self.inputs = [self._input(b) for b in plan.inputs]
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
        self.step_times: list[float] | None = None  # set to a list to time each step
        self.layouts: dict[str, tuple[list[int], list[int], int]] = {}  # static programs
        self.storage_sizes: dict[int, tuple[int, torch.dtype]] = {}
        self.extern_fns: dict[int, Any] = {}
        self.in_place_fns: dict[int, Any] = {}  # steps the plan made in place on argument 0
        for k, step in enumerate(plan.steps):
            if isinstance(step, ExternStep):
                from fir.ir.interpreter import resolve_callee

                self.extern_fns[k] = resolve_callee(step.node.callee)
                if step.in_place is not None:
                    self.in_place_fns[k] = resolve_callee(step.in_place)
        self.fast = self._fast_plan()

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

        self.fast = self._fast_plan()

    def _fast_plan(self) -> dict[str, Any] | None:
        """What a call of a program with no size symbols and no extern call needs, resolved once:
        the per-call work is then a few checks, the allocations and the kernel calls (the
        general path below handles everything else, and every input this one does not take)."""
        plan = self.plan
        if not self.static or any(isinstance(s, ExternStep) for s in plan.steps):
            return None
        if any(b.type.normalized().layout is not None for b in plan.inputs):
            return None
        inputs = [(b.type.dtype.to_torch(), tuple(b.type.shape), b.storage) for b in plan.inputs]
        storages = 1 + max((b.storage for b in plan.buffers.values()), default=0)
        # a storage that holds just one returned buffer, laid out contiguously, is allocated in
        # that buffer's shape and returned as it is
        shaped: dict[int, tuple[int, ...]] = {}
        for name in plan.outputs:
            b = plan.buffers[name]
            sharing = [x for x in plan.buffers.values() if x.storage == b.storage]
            if (
                not b.argument
                and b.alias_of is None
                and len(sharing) == 1
                and b.type.normalized().layout is None
            ):
                shaped[b.storage] = tuple(int(d) for d in b.type.shape)
        steps = []
        for k, step in enumerate(plan.steps):
            if not isinstance(step, KernelStep):
                continue
            sizes = []
            for s in self.writes[k]:
                elements, dtype = self._storage_size(s)
                sizes.append((s, shaped.get(s, (elements,)), elements, dtype))
            args = [plan.buffers[a.name].storage for a in step.plan.args]
            steps.append((k, step.plan.name, sizes, args, self.drops.get(k, ())))
        outputs = []
        for name in plan.outputs:
            b = plan.buffers[name]
            if b.argument:
                outputs.append((True, [i.name for i in plan.inputs].index(name), None))
                continue
            t = b.type
            layout = None if b.storage in shaped else (list(t.shape), list(t.strides), t.offset)
            outputs.append((False, b.storage, layout))
        return {"inputs": inputs, "storages": storages, "steps": steps, "outputs": outputs}

    def _storage_size(self, number: int) -> tuple[int, torch.dtype]:
        elements = max(int(self.plan.storages[number].elements), 1)
        return elements, _dtype_of_storage(self.plan, number)

    def _call_fast(self, fast: dict[str, Any], inputs: Sequence[torch.Tensor]) -> Any:
        storages: list[Any] = [None] * fast["storages"]
        device = self.device
        # ``x.is_cpu``/``x.is_cuda`` cost a sixth of ``x.device.type`` (41 against 265 ns)
        on_cpu, on_gpu = device == "cpu", device == "cuda"
        for (dtype, shape, number), x in zip(fast["inputs"], inputs):
            if (
                x.dtype != dtype
                or x.shape != shape
                or not x.is_contiguous()
                or not (x.is_cpu if on_cpu else x.is_cuda if on_gpu else x.device.type == device)
            ):
                return None  # the general path checks it, copies it or says what is wrong
            storages[number] = x
        call = self.kernels.call
        tensors = self.tensors
        for _, name, sizes, args, drops in fast["steps"]:
            for number, shape, elements, dtype in sizes:
                if storages[number] is None:
                    storages[number] = allocate(elements, dtype, shape, device)
            if tensors:
                code, value = call(name, [storages[s] for s in args], ())
            else:
                code, value = call(name, [storages[s].data_ptr() for s in args], ())
            if code:
                self._raise(name, code, value)
            for number in drops:
                storages[number] = None
        if self.finish is not None:
            self._finish()
        out = []
        for is_input, where, layout in fast["outputs"]:
            if is_input:
                out.append(inputs[where])
            elif layout is None:
                out.append(storages[where])
            else:
                shape, strides, offset = layout
                out.append(torch.as_strided(storages[where], shape, strides, offset))
        return out

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

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        if self.fast is not None and self.step_times is None and len(inputs) == len(self.inputs):
            out = self._call_fast(self.fast, inputs)
            if out is not None:
                return out
        sizes = self._bind(inputs)
        run = _Call(self, sizes)
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

    def _bind(self, inputs: Sequence[torch.Tensor]) -> dict[str, int]:
        plan = self.plan
        if len(inputs) != len(self.inputs):
            raise RuntimeInputError(
                f"@{plan.name} takes {len(self.inputs)} input(s) "
                f"({', '.join('%' + i.buffer.name for i in self.inputs)}), got {len(inputs)}"
            )
        sizes: dict[str, int] = {}
        for i, x in zip(self.inputs, inputs):
            name = i.buffer.name
            if not isinstance(x, torch.Tensor):
                raise RuntimeInputError(f"input %{name} must be a tensor, got {type(x).__name__}")
            if x.dtype != i.dtype:
                raise RuntimeInputError(
                    f"input %{name} must have dtype {i.buffer.type.dtype} ({i.dtype}), got {x.dtype}"
                )
            if x.device.type != self.device:
                raise RuntimeInputError(
                    f"input %{name} is on {x.device}; this program runs on {self.device}"
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
        value = d.subs({self.symbols[k]: v for k, v in sizes.items() if k in self.symbols})
        return int(value)


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
            t = self.plan.buffers[name].type
            got = cache[name] = (
                [self.dim(d) for d in t.shape],
                [self.dim(s) for s in t.strides],
                self.dim(t.offset),
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
        if x.numel() == 0 or _same_layout(x, shape, strides):
            flat, base = _flat_view(x, offset)
        if flat is None or base < 0:
            elements = max(self.dim(t.storage_size()), 1)
            flat = torch.zeros(elements, dtype=x.dtype, device=x.device)
            _scatter(flat, x, shape, strides, offset)
            base = 0
        self.storages[b.storage] = flat
        self.bases[b.storage] = base

    def allocate(self, number: int) -> None:
        if number in self.storages or number < 0:
            return
        size = self.p.storage_sizes.get(number) if self.p.static else None
        if size is None:
            elements = max(self.dim(self.plan.storages[number].elements), 1)
            size = (elements, _dtype_of_storage(self.plan, number))
            if self.p.static:
                self.p.storage_sizes[number] = size
        self.storages[number] = allocate(size[0], size[1], device=self.p.device)
        self.bases[number] = 0

    def free(self, number: int) -> None:
        self.storages.pop(number, None)

    def tensor(self, name: str) -> torch.Tensor:
        """Buffer ``name`` as a tensor: its storage seen through its type."""
        b = self.plan.buffers[name]
        flat = self.storages[b.storage]
        shape, strides, offset = self.layout(name)
        return torch.as_strided(flat, shape, strides, self.bases[b.storage] + offset)

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

        def conv(v: Any) -> Any:
            if isinstance(v, Value):
                return self.tensor(v.name)
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, DType):
                return v.to_torch()
            if isinstance(v, Literal):
                return v.value
            if isinstance(v, sympy.Basic):
                return self.dim(v)
            if isinstance(v, str):
                from fir.ir.externs import decode_torch_object

                return decode_torch_object(v)
            return v

        args = [conv(a) for a in node.args]
        in_place = self.p.in_place_fns.get(k)
        if in_place is not None and args[0].is_contiguous():  # NCCL takes dense tensors
            fn = in_place
        with torch.no_grad():  # an inference program: nothing to record for autograd
            out = fn(*args, **{key: conv(v) for key, v in node.kwargs.items()})
        outs = kept_results(node, out)
        for r, t in zip(node.results, outs):
            b = self.plan.buffers.get(r.name)
            if b is None:
                continue
            if t is None:  # a call made for its effect (an assertion): its result is a token
                t = torch.empty([self.dim(d) for d in b.type.shape], dtype=b.type.dtype.to_torch())
            self._adopt_result(b, t)

    def _adopt_result(self, b: Buffer, t: torch.Tensor) -> None:
        """An extern call's result: its own memory when laid out as planned, else copied into
        the planned layout (kernels index it as its type says)."""
        want = b.type
        dtype = want.dtype.to_torch()
        if t.dtype != dtype:
            t = t.to(dtype)
        if t.device.type != self.p.device:  # a constant the lowering made (``torch.tensor``)
            t = t.to(self.p.device)
        shape = [self.dim(d) for d in want.shape]
        strides = [self.dim(s) for s in want.strides]
        offset = self.dim(want.offset)
        if tuple(t.shape) != tuple(shape):
            raise FirError(
                f"extern call result %{b.name} has shape {list(t.shape)}, its type says {want}"
            )
        existing = self.storages.get(b.storage)
        if existing is None and (t.numel() == 0 or _same_layout(t, shape, strides)):
            flat, base = _flat_view(t, offset)
            if base < 0:  # the layout starts before the tensor's memory: copy instead
                self.allocate(b.storage)
            else:
                self.storages[b.storage] = flat
                self.bases[b.storage] = base
                return
        if existing is None:
            self.allocate(b.storage)
        _scatter(self.storages[b.storage], t, shape, strides, self.bases[b.storage] + offset)

    def output(self, name: str, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        b = self.plan.buffers[name]
        if b.argument:
            k = next(j for j, i in enumerate(self.plan.inputs) if i.name == name)
            return inputs[k]
        return self.tensor(name)


def _scatter(
    flat: torch.Tensor, x: torch.Tensor, shape: list[int], strides: list[int], offset: int
) -> None:
    """Write ``x`` into ``flat`` laid out by ``strides`` and ``offset``. A layout in which
    several elements share a position (a stride 0) takes one of them, as the function expects
    them equal."""
    if any(s == 0 and n > 1 for n, s in zip(shape, strides)):
        index = torch.full(shape, offset, dtype=torch.int64, device=flat.device)
        for k, (n, s) in enumerate(zip(shape, strides)):
            view = [1] * len(shape)
            view[k] = n
            index = index + torch.arange(n, device=flat.device).view(view) * s
        flat[index.reshape(-1)] = x.reshape(-1).to(flat.dtype)
        return
    torch.as_strided(flat, shape, strides, offset).copy_(x)


def _same_layout(x: torch.Tensor, shape: list[int], strides: list[int]) -> bool:
    return all(n == 1 or s == w for n, s, w in zip(shape, x.stride(), strides))


def _flat_view(x: torch.Tensor, offset: int) -> tuple[torch.Tensor, int]:
    """``x``'s whole storage as a flat tensor, and the position in it of index 0 of the layout
    the function expects (``x``'s first element is at index ``offset``)."""
    storage_elements = x.untyped_storage().nbytes() // x.element_size()
    flat = torch.as_strided(x, (storage_elements,), (1,), 0)
    return flat, x.storage_offset() - offset


def _dtype_of_storage(plan: ProgramPlan, number: int) -> torch.dtype:
    for b in plan.buffers.values():
        if b.storage == number:
            return b.type.dtype.to_torch()
    raise FirError(f"storage {number} holds no buffer")  # pragma: no cover


def element_count(t: TensorType, sizes: dict[str, int]) -> int:
    dims = [d if isinstance(d, int) else int(d.subs(sizes)) for d in t.shape]
    return math.prod(dims)
