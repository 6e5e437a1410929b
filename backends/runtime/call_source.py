"""A program's call as Python source: what Inductor's generated ``call`` is to its kernels.

The fast path's plan (:class:`~fir.backends.runtime.fast_call.FastPlan`) says, per step, which storages
to allocate, which kernel or PyTorch op to call on which buffers, and where each result goes. A
loop over those tuples pays, at every call, for unpacking them, for a dictionary of storages
and for the tests of what is already known (whether a storage is allocated yet, whether a
buffer is its storage's whole tensor). Here the plan is written out once as a function of
straight-line code, each storage a local variable, and compiled with ``compile``: the call then
does only what depends on the inputs. The source is kept (``FastPlan.source``) for reading.

Objects the code needs (dtypes, shapes, ops, argument constants) are passed as globals named
``c0``, ``c1``, …, never written as literals, so any object an extern call takes works.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from fir.ir.externs import IN_PLACE_VARIANTS, call_failed, kept_results, wrong_result

from .buffers import allocate
from .layouts import flat_view, same_layout, scatter, view


@dataclass(frozen=True)
class Ref:
    """A buffer passed to an extern call: a view of storage ``storage``."""

    storage: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class ResultSpec:
    """Where an extern call's result ``position`` (among the results the node keeps) goes."""

    position: int
    name: str
    storage: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    elements: int  # of the storage, for a result that has to be copied into it


@dataclass(frozen=True)
class KernelCall:
    name: str
    allocations: tuple[tuple[int, tuple[int, ...], int, torch.dtype], ...]  # storage, shape, …
    args: tuple[int, ...]  # the storage of each argument
    drops: tuple[int, ...]  # storages released after the call
    comment: str
    index: int  # the plan's step
    sizes: tuple[int, ...] = ()  # the kernel's size arguments (a specialization's values)


@dataclass(frozen=True)
class ExternCall:
    fn: Any
    in_place: Any  # the variant writing argument 0, or None
    callee: str  # the op's name (``fn`` is its C++ callable)
    args: list[Any]  # constants, with a :class:`Ref` for each buffer
    kwargs: dict[str, Any]
    positions: tuple[int, ...] | None  # the call's outputs the node keeps (None: all)
    single: bool  # the op returns one tensor, not a tuple (its schema says so)
    results: tuple[ResultSpec, ...]
    drops: tuple[int, ...]
    comment: str
    index: int
    node: Any  # the extern node (an ExternNode), which errors name


@dataclass(frozen=True)
class Release:
    """A step that runs nothing (a view) but after which storages are released."""

    drops: tuple[int, ...]
    comment: str
    index: int


Step = KernelCall | ExternCall | Release


@dataclass(frozen=True)
class DirectLaunch:
    """A kernel the generated call launches itself, through a C launcher, instead of through
    the kernels' ``call`` (the Triton back end's kernels loaded through the CUDA driver:
    :meth:`~fir.backends.triton.build.TritonKernels.direct_launch`). The call passes each
    buffer's address as an int, then the error buffer's where the kernel can fail, the
    sizes, and ``trailing`` null pointers (parameters Triton appends)."""

    launch: Any  # launch(handle, grid_x, grid_y, grid_z, warps, shared, types, args, stream)
    handle: int
    grid: tuple[int, int, int]
    warps: int
    shared: int
    types: str  # a letter per argument
    fails: bool
    trailing: int


def _adopt(
    r: ResultSpec, t: Any, existing: torch.Tensor | None, device: str, kind: str, node: Any
) -> torch.Tensor:
    """The storage of extern result ``t``: its own memory where it is laid out as planned and
    the storage is not taken yet (``existing`` None), else ``existing`` (or a new storage) with
    ``t`` copied into the planned layout. ``device``: where the program's memory is (``cpu``,
    ``cuda:1``), ``kind`` its type. A result of another dtype or shape than its type says is
    an error naming ``node``: never cast quietly."""
    if t is None:  # a call made for its effect (an assertion): its result is a token
        t = torch.empty(r.shape, dtype=r.dtype, device=device)
    if not isinstance(t, torch.Tensor) or t.dtype != r.dtype or t.shape != r.shape:
        raise wrong_result(node, r.name, t, r.dtype, r.shape)
    if t.device.type != kind:  # a constant the lowering made (``torch.tensor``)
        t = t.to(device)
    if existing is None:
        if r.offset == 0 and t.stride() == r.strides:
            return t  # the storage starts where the result does
        if t.numel() == 0 or same_layout(t, r.shape, r.strides):
            flat, base = flat_view(t, r.offset)
            if base >= 0:
                return flat[base:] if base else flat
        existing = allocate(r.elements, r.dtype, None, device)
    scatter(existing, t, list(r.shape), list(r.strides), r.offset)
    return existing


def _empty_on(place: torch.device) -> Callable[..., torch.Tensor]:
    def empty(shape: Any, strides: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(shape, strides, dtype=dtype, device=place)

    empty.device = place  # type: ignore[attr-defined]  # where it allocates, for readers
    return empty


# PyTorch's allocation without argument parsing (what Inductor's wrapper calls): a GPU buffer
# on the current device in 2-3 us instead of ``torch.empty``'s 8-9 (measured under cProfile on
# an H200 host: a Llama training step allocates about 120 buffers)
_FAST_EMPTY = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_FAST_EMPTY = getattr(_FAST_EMPTY, "_empty_strided_cuda", None)


def _choose_empty(w: _Writer, place: torch.device) -> str:
    """The expression, evaluated once per call, of the allocator of the call's GPU buffers:
    the fast one where the current device is the program's (it allocates there), else one
    that names the device."""
    slow = w.const(_empty_on(place), f"torch.empty_strided on {place}")
    if _FAST_EMPTY is None:
        return slow
    fast = w.const(_FAST_EMPTY, "torch's empty_strided on the current GPU")
    if place.index is None:
        return fast
    current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
    current = w.const(current_device, "the current GPU's index")
    return f"{fast} if {current}() == {place.index} else {slow}"


class _Writer:
    """The lines of the function, and the globals they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"allocate": allocate, "empty": torch.empty, "view": view}
        self.ids: dict[int, str] = {}
        self.labels: dict[str, str] = {}  # what a constant is, where its repr does not say

    def const(self, obj: Any, label: str | None = None) -> str:
        """A global holding ``obj`` (one per object)."""
        name = self.ids.get(id(obj))
        if name is None:
            name = self.ids[id(obj)] = f"c{len(self.ids)}"
            self.names[name] = obj
        if label is not None:
            self.labels[name] = label
        return name

    def line(self, text: str, depth: int = 1) -> None:
        self.lines.append("    " * depth + text)


def call_source(
    fast: Any,
    device: str,
    tensors: bool,
    kernel_call: Any,
    raise_: Any,
    finish: Any,
    timed: bool = False,
    direct: Any = None,
) -> tuple[str, Callable[..., Any]]:
    """The source of ``call(inputs)`` for ``fast`` and the function it defines. ``call``
    returns the outputs, or None where an input is not as the plan expects (the general path
    then checks it, copies it or says what is wrong). ``timed``: ``call(inputs, times)``, which
    adds each step's host time to ``times[k]`` (``k`` the plan's step), for ``fir-run --bench``
    and the benchmarks. ``direct``: the kernels' launches the call may make itself
    (an object with ``direct_launch(name, sizes)``, ``ordinal``, ``device_getter``,
    ``stream_getter`` and ``error_pointer``; see :class:`DirectLaunch`), or None."""
    w = _Writer()
    kcall = w.const(kernel_call, "the kernels' call(name, arguments, sizes)")
    kraise = w.const(raise_, "raises the error a kernel reported")
    adopt = w.const(_adopt_fn(device), "an extern result into its storage (copied if need be)")
    w.lines.append("def call(inputs, times):" if timed else "def call(inputs):")
    if timed:
        w.names["tick"] = time.perf_counter
    names = [f"x{k}" for k in range(len(fast.inputs))]
    if names:
        w.line(f"{', '.join(names)}{',' if len(names) == 1 else ''} = inputs")
    place = torch.device(device)
    # the test that a tensor is on the program's device: ``get_device()`` gives a GPU's index
    # (-1 on the CPU), as cheap as ``is_cuda`` (55 ns), which ``device.type`` is not (265 ns)
    if place.type == "cuda" and place.index is not None:
        on_device = f"get_device() == {place.index}"
    else:
        on_device = {"cpu": "is_cpu", "cuda": "is_cuda"}.get(place.type, "")
    # what each live storage's tensor is known to be: (shape, strides), or None if unknown
    known: dict[int, tuple[tuple[int, ...], tuple[int, ...]] | None] = {}
    for (dtype, shape, number, strides), x in zip(fast.inputs, names):
        where = f"not {x}.{on_device}" if on_device else f"{x}.device.type != {place.type!r}"
        # a contiguous input, or one in the strides the program was compiled for (kernels
        # index it from its first element: the tensor itself is the storage)
        layout = (
            f"not {x}.is_contiguous()" if strides is None else f"{x}.stride() != {w.const(strides)}"
        )
        w.line(
            f"if {x}.dtype is not {w.const(dtype)} or {x}.shape != {w.const(shape)} "
            f"or {layout} or {where}:"
        )
        w.line("return None", 2)
        w.line(f"s{number} = {x}")
        known[number] = (tuple(shape), strides if strides is not None else _contiguous(shape))

    launches: dict[int, DirectLaunch] = {}
    if direct is not None:
        for k, step in enumerate(fast.steps):
            if isinstance(step, KernelCall):
                d = direct.direct_launch(step.name, step.sizes)
                if d is not None:
                    launches[k] = d
    if launches:
        # the device and stream, read once: a call made with another device current (a
        # thread that never set it) takes the general path, whose launches switch context
        w.line(f"if {w.const(direct.device_getter, 'the current GPU')}() != {direct.ordinal}:")
        w.line("return None", 2)
        w.line(f"stream = {w.const(direct.stream_getter, 'the current stream')}()")
        if any(d.fails for d in launches.values()):
            w.line(f"err = {w.const(direct.error_pointer, 'the error buffer, made at need')}()")
    aligned: set[int] = set()  # storages allocated here (16-byte aligned: the allocator's)

    def ref(a: Ref) -> str:
        s = f"s{a.storage}"
        layout = (a.shape, a.strides)
        k = known.get(a.storage)
        if a.offset == 0 and k == layout:
            return s
        made = f"view({s}, {w.const(a.shape)}, {w.const(a.strides)}, {a.offset})"
        if a.offset == 0 and k is None:  # an extern result: its own tensor where it fits
            shape, strides = w.const(a.shape), w.const(a.strides)
            return f"({s} if {s}.shape == {shape} and {s}.stride() == {strides} else {made})"
        return made

    def arg(a: Any) -> str:
        if type(a) is Ref:
            return ref(a)
        if type(a) is list and any(_has_ref(x) for x in a):
            return "[" + ", ".join(arg(x) for x in a) + "]"
        return w.const(a)

    chosen: list[bool] = []  # whether the GPU allocator is chosen yet (at the first one)
    for position, step in enumerate(fast.steps):
        w.line(f"# {step.comment}")
        if timed:
            w.line("t_start = tick()")
        if isinstance(step, KernelCall):
            for number, shape, elements, dtype in step.allocations:
                if number in known:
                    continue
                if place.type == "cpu":  # buffers.allocate: large ones from a pool of mappings
                    w.line(
                        f"s{number} = allocate({elements}, {w.const(dtype)}, "
                        f"{w.const(shape)}, 'cpu')"
                    )
                else:  # the caching allocator already recycles memory: no call in between
                    if not chosen:
                        w.line(f"empty_here = {_choose_empty(w, place)}")
                        chosen.append(True)
                    strides = _contiguous(shape)
                    w.line(
                        f"s{number} = empty_here({w.const(shape)}, {w.const(strides)}, "
                        f"{w.const(dtype)})"
                    )
                known[number] = (tuple(shape), _contiguous(shape))
                if place.type == "cuda":
                    aligned.add(number)
            items = [f"s{s}" if tensors else f"s{s}.data_ptr()" for s in step.args]
            name = step.name
            sizes = w.const(step.sizes) if step.sizes else "()"
            general = [
                f"code, value = {kcall}({name!r}, [{', '.join(items)}], {sizes})",
                "if code:",
                f"    {kraise}({name!r}, code, value)",
            ]
            d = launches.get(position)
            if d is None:
                for text in general:
                    w.line(text)
            else:
                launch = w.const(d.launch, "PyTorch's C++ launcher of a loaded kernel")
                for text in _direct_lines(d, launch, step, aligned, general):
                    w.line(text)
        elif isinstance(step, ExternCall):
            values = [arg(a) for a in step.args]
            values += [f"{key}={arg(v)}" for key, v in step.kwargs.items()]
            fn = w.const(step.fn, step.callee)
            if step.in_place is not None and step.args and type(step.args[0]) is Ref:
                w.line(f"a0 = {values[0]}")
                values[0] = "a0"
                in_place = w.const(step.in_place, IN_PLACE_VARIANTS[step.callee])
                callee = f"({in_place} if a0.is_contiguous() else {fn})"
            else:
                callee = fn
            # an op that raises: an error naming the node, the op's exception its cause (a
            # try costs nothing until something raises)
            node = step.node
            failed = w.const(partial(call_failed, node, step.callee), "the error of a failed call")
            w.line("try:")
            w.line(f"out = {callee}({', '.join(values)})", 2)
            w.line("except Exception as e:")
            w.line(f"raise {failed}(e) from e", 2)
            single = step.single and len(node.results) == 1 and step.positions in (None, (0,))
            if not single:  # one test of the count, then each result as the node keeps it
                w.line("outs = out if isinstance(out, (tuple, list)) else (out,)")
                wrong_count = (
                    f"len(outs) != {len(node.results)}"
                    if step.positions is None
                    else f"len(outs) <= {max(step.positions, default=-1)}"
                )
                w.line(f"if {wrong_count}:")
                w.line(f"{w.const(partial(kept_results, node))}(outs)  # raises", 2)
            node_c = w.const(node, f"extern node of step {step.index}")
            for r in step.results:
                j = r.position if step.positions is None else step.positions[r.position]
                got = "out" if single else f"outs[{j}]"  # a single tensor: position 0
                s, spec = f"s{r.storage}", w.const(r)
                if r.storage in known:  # written over an existing storage
                    w.line(f"{s} = {adopt}({spec}, {got}, {s}, {node_c})")
                    continue
                if r.offset == 0 and on_device:
                    w.line(f"t = {got}")
                    w.line(
                        f"if t is not None and t.dtype is {w.const(r.dtype)} and t.shape == "
                        f"{w.const(r.shape)} and t.stride() == {w.const(r.strides)} "
                        f"and t.{on_device}:"
                    )
                    w.line(f"{s} = t", 2)
                    w.line("else:")
                    w.line(f"{s} = {adopt}({spec}, t, None, {node_c})", 2)
                else:
                    w.line(f"{s} = {adopt}({spec}, {got}, None, {node_c})")
                known[r.storage] = None
                aligned.discard(r.storage)
        if timed:
            w.line(f"times[{step.index}] += tick() - t_start")
        for number in step.drops:
            w.line(f"s{number} = None")
            known.pop(number, None)
            aligned.discard(number)
    if finish is not None:
        w.line(f"{w.const(finish)}()")
    outs = []
    for is_input, where, layout in fast.outputs:
        if is_input:
            outs.append(names[where])
        elif layout is None:
            outs.append(f"s{where}")
        else:
            shape, strides, offset = layout
            outs.append(ref(Ref(where, tuple(shape), tuple(strides), offset)))
    w.line(f"return [{', '.join(outs)}]")
    source = "\n".join(w.lines) + "\n"
    scope = dict(w.names)
    exec(compile(source, "<fir call>", "exec"), scope)  # noqa: S102 - source written above
    if not timed:
        fast.constants = {k: v for k, v in w.names.items() if k[0] == "c" and k[1:].isdigit()}
        fast.labels = dict(w.labels)
    return source, scope["call"]


def describe_constants(constants: dict[str, Any], labels: dict[str, str]) -> str:
    """The generated call's constants as comment lines, for reading its source."""
    lines = []
    for name, value in sorted(constants.items(), key=lambda kv: int(kv[0][1:])):
        if name in labels:
            text = labels[name]
        elif isinstance(value, ResultSpec):
            text = f"result %{value.name}: storage {value.storage}, {list(value.shape)}"
        else:
            text = repr(value)
        lines.append(f"# {name} = {text[:100]}")
    return "\n".join(lines) + "\n"


def _direct_lines(
    d: DirectLaunch, launch: str, step: KernelCall, aligned: set[int], general: list[str]
) -> list[str]:
    """The lines launching ``step`` through ``d``: the kernel was compiled for 16-byte
    aligned pointers, so a buffer not allocated by the call (an input, an extern's result) is
    checked, and a misaligned one takes the ``general`` lines (Triton's launcher)."""
    if not d.grid[0] * d.grid[1] * d.grid[2]:
        return ["pass  # an empty grid: nothing to launch"]
    pointers = [f"s{s}.data_ptr()" for s in step.args]
    unknown = [f"p{k}" for k, s in enumerate(step.args) if s not in aligned]
    lines = []
    if unknown:
        names = [f"p{k}" for k in range(len(pointers))]
        lines.append(f"{', '.join(names)} = {', '.join(pointers)}")
        pointers = names
    args = [*pointers, *(["err"] if d.fails else [])]
    args += [str(int(v)) for v in step.sizes] + ["0"] * d.trailing
    text = (
        f"{launch}({d.handle}, {d.grid[0]}, {d.grid[1]}, {d.grid[2]}, {d.warps}, "
        f"{d.shared}, {d.types!r}, ({', '.join(args)},), stream)"
    )
    if not unknown:
        return [*lines, text]
    return [
        *lines,
        f"if ({' | '.join(unknown)}) & 15:",
        *("    " + g for g in general),
        "else:",
        "    " + text,
    ]


def _has_ref(a: Any) -> bool:
    return type(a) is Ref or (type(a) is list and any(_has_ref(x) for x in a))


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _adopt_fn(device: str) -> Callable[..., Any]:
    kind = torch.device(device).type

    def adopt_on_device(r: Any, t: Any, existing: Any, node: Any) -> Any:
        return _adopt(r, t, existing, device, kind, node)

    return adopt_on_device
