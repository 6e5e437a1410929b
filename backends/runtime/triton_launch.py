"""Launch compiled Triton kernels (cubins) through the CUDA driver: the Triton back end's runtime.

Triton's own path (``kernel[grid](...)``) binds and specialises the arguments in Python at
every launch, and on some versions (3.6) builds a C launcher per kernel signature with the host
compiler at the first launch (about 0.3 s, and Triton's driver module another 0.3 s). FIR knows
every argument's kind from the plan, so the back end compiles each kernel once, ahead of the
first call (:func:`fir.backends.triton.build.compile_kernel`, thread-safe: the program's kernels
compile on a pool); :class:`CubinKernel` loads the cubin with ``cuModuleLoadData`` and launches
it with ``cuLaunchKernel`` through ``ctypes``, the arguments written into preallocated
parameter slots, or hands PyTorch's C++ launcher (:func:`c_launcher`) what it needs.

A call whose pointers are not 16-byte aligned (the kernels are compiled for aligned ones) goes
through Triton's launcher instead, as does everything on a machine where this path cannot be
set up (no ``libcuda``, a Triton whose kernels take parameters the back end does not know).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import torch
from fir.ir.errors import FirError

from ..plan import DIVISION_BY_ZERO
from .call_source import DirectLaunch

_FUNC_SHARED_SIZE_BYTES = 1
_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
_DEFAULT_SHARED_LIMIT = 49152  # bytes a kernel may use without opting in
_CUDA_ERROR_INVALID_CONTEXT = 201
_CUDA_ERROR_INVALID_HANDLE = 400
_POINTER_ATTRIBUTE_DEVICE_POINTER = 3


class LaunchError(FirError):
    """The CUDA driver refused to load or launch a kernel."""


class _Driver:
    """The few CUDA driver entry points this module calls, from the ``libcuda`` that torch has
    already loaded."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        self.lib = lib
        self.primary: dict[int, int] = {}  # device ordinal -> its primary context (retained)
        self.primary_lock = threading.Lock()
        self.launch = lib.cuLaunchKernel
        self.launch.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
        self.launch.restype = i
        for name, args in (
            ("cuModuleLoadData", [ctypes.POINTER(p), ctypes.c_char_p]),
            ("cuModuleGetFunction", [ctypes.POINTER(p), p, ctypes.c_char_p]),
            ("cuFuncGetAttribute", [ctypes.POINTER(i), i, p]),
            ("cuFuncSetAttribute", [p, i, i]),
            ("cuDeviceGet", [ctypes.POINTER(i), i]),
            ("cuDeviceGetAttribute", [ctypes.POINTER(i), i, i]),
            ("cuCtxGetCurrent", [ctypes.POINTER(p)]),
            ("cuCtxSetCurrent", [p]),
            ("cuDevicePrimaryCtxRetain", [ctypes.POINTER(p), i]),
            ("cuGetErrorName", [i, ctypes.POINTER(ctypes.c_char_p)]),
            ("cuPointerGetAttribute", [p, i, ctypes.c_uint64]),
        ):
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = i

    def check(self, code: int, what: str) -> None:
        if code != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(code, ctypes.byref(name))
            text = name.value.decode() if name.value else f"error {code}"
            raise LaunchError(f"{what}: {text}")

    def make_current(self, ordinal: int) -> None:
        """The device's primary context (torch's) current on this thread, so that a module
        loads into the context the program launches in. A compile thread of the pool has no
        context yet, or device 0's (a call into the CUDA runtime on a new thread makes that
        one): a program for device 1 (rank 1 of a tensor-parallel job) loaded there failed
        its first launch with CUDA_ERROR_INVALID_HANDLE."""
        with self.primary_lock:
            want = self.primary.get(ordinal)
            if want is None:
                device = ctypes.c_int()
                self.check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
                ctx = ctypes.c_void_p()
                self.check(
                    self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device.value),
                    "cuDevicePrimaryCtxRetain",
                )
                want = self.primary[ordinal] = int(ctx.value or 0)
        current = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value != want:
            self.check(self.lib.cuCtxSetCurrent(ctypes.c_void_p(want)), "cuCtxSetCurrent")

    def device_pointer(self, address: int, ordinal: int) -> int | None:
        """The address by which device ``ordinal``'s kernels reach host memory at ``address``
        (page-locked and mapped), or None where they cannot."""
        before = self.current()
        self.make_current(ordinal)
        try:
            out = ctypes.c_uint64()
            code = self.lib.cuPointerGetAttribute(
                ctypes.byref(out), _POINTER_ATTRIBUTE_DEVICE_POINTER, address
            )
        finally:
            self.restore(before)
        return out.value if code == 0 else None

    def current(self) -> int:
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        return int(ctx.value or 0)

    def restore(self, ctx: int) -> None:
        self.check(self.lib.cuCtxSetCurrent(ctypes.c_void_p(ctx)), "cuCtxSetCurrent")


_driver: _Driver | None = None
_driver_lock = threading.Lock()


def driver() -> _Driver:
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = _Driver()
        return _driver


def c_launcher() -> Any | None:
    """PyTorch's C++ launcher of a loaded kernel (what Inductor's generated code launches
    through; torch 2.8 and later, CUDA builds), or None: ``launch(function, grid_x, grid_y,
    grid_z, num_warps, shared_bytes, types, arguments, stream)``, one C call that parses the
    arguments by their type letters and calls ``cuLaunchKernel``, raising on an error. The
    generated call (:mod:`fir.backends.runtime.call_source`) calls it with each pointer as an int,
    which it reads without a Python call or a pointer query.

    It is a private API: the first use calls it once with an empty grid, which parses the
    arguments and launches nothing, so that a torch whose launcher takes other arguments is
    found out here (the back end then keeps its own ``ctypes`` launch) and not at a call."""
    global _c_launcher, _c_launcher_checked
    with _c_launcher_lock:
        if not _c_launcher_checked:
            _c_launcher_checked = True
            holder = getattr(torch._C, "_StaticCudaLauncher", None)
            launch = getattr(holder, "_launch_kernel", None) if torch.version.cuda else None
            if launch is not None:
                try:
                    launch(0, 0, 1, 1, 1, 0, "l", (0,), 0)
                    _c_launcher = launch
                except Exception:  # noqa: BLE001 - another signature: not this launcher
                    _c_launcher = None
        return _c_launcher


_c_launcher: Any = None
_c_launcher_checked = False
_c_launcher_lock = threading.Lock()


def launch_kinds(name: str, compiled: Any, kinds: list[str]) -> list[str]:
    """The type letters of every parameter of kernel ``name`` as :class:`CubinKernel` passes
    them: ``kinds`` (FIR's arguments) and a ``K`` for each parameter Triton appends (scratch
    pointers, NULL when their size is 0); a :class:`LaunchError` where the compiled kernel needs
    what this launch does not do (scratch memory, a cluster or a cooperative launch)."""
    meta = compiled.metadata
    for field in ("global_scratch_size", "profile_scratch_size"):
        if getattr(meta, field, 0):
            raise LaunchError(f"kernel {name} needs {field} (Triton's launcher)")
    if getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_pdl", False):
        raise LaunchError(f"kernel {name} needs a cluster launch (Triton's launcher)")
    if getattr(meta, "launch_cooperative_grid", False):
        raise LaunchError(f"kernel {name} needs a cooperative launch")
    extra = _entry_params(compiled.asm["ptx"], meta.name) - len(kinds)
    if not 0 <= extra <= 2:
        raise LaunchError(f"kernel {name}: {extra} parameters beyond FIR's arguments")
    return kinds + ["K"] * extra


def _entry_params(ptx: str, name: str) -> int:
    """How many parameters the PTX entry ``name`` takes."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise LaunchError(f"no entry {name} in the PTX")
    return len(re.findall(r"\.param\b", m.group(1)))


class CubinKernel:
    """One compiled kernel, loaded into the device's context: ``launch(pointers, sizes, grid,
    stream)``."""

    def __init__(
        self, name: str, compiled: Any, kinds: list[str], pointers: int, ordinal: int
    ) -> None:
        """``compiled``: what ``triton.compile`` gave for the kernel; ``kinds``: the type of
        each of its parameters as the C launcher's letter (``K`` pointer, ``l`` int64, ``i``
        int32), of which the first ``pointers`` are the buffers'."""
        meta = compiled.metadata
        self.name = name
        self.entry = meta.name  # the binary's function: another kernel's where they share one
        self.kinds = kinds
        self.pointers = pointers
        self.block = 32 * meta.num_warps
        self.shared = int(meta.shared)
        slot = {"K": ctypes.c_uint64, "l": ctypes.c_int64, "i": ctypes.c_int32}
        self.slots = [slot[k](0) for k in kinds]
        self.params = (ctypes.c_void_p * len(kinds))(*[ctypes.addressof(s) for s in self.slots])
        self.lock = threading.Lock()
        self.ordinal = ordinal
        d = driver()
        d.make_current(ordinal)
        self.cubin = compiled.asm["cubin"]
        module = ctypes.c_void_p()
        d.check(d.lib.cuModuleLoadData(ctypes.byref(module), self.cubin), "cuModuleLoadData")
        function = ctypes.c_void_p()
        d.check(
            d.lib.cuModuleGetFunction(ctypes.byref(function), module, meta.name.encode()),
            "cuModuleGetFunction",
        )
        if self.shared > _DEFAULT_SHARED_LIMIT:
            optin, static = ctypes.c_int(), ctypes.c_int()
            d.check(
                d.lib.cuDeviceGetAttribute(
                    ctypes.byref(optin), _DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ordinal
                ),
                "cuDeviceGetAttribute",
            )
            d.check(
                d.lib.cuFuncGetAttribute(ctypes.byref(static), _FUNC_SHARED_SIZE_BYTES, function),
                "cuFuncGetAttribute",
            )
            d.check(
                d.lib.cuFuncSetAttribute(
                    function, _FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin.value - static.value
                ),
                "cuFuncSetAttribute",
            )
        self.module = module
        self.function = function
        self.driver = d
        self.fixed_arguments()
        # for PyTorch's C++ launcher (:func:`c_launcher`): the handle as an int, a type
        # letter per parameter
        self.handle = int(function.value or 0)
        self.arg_types = "".join(kinds)

    def fixed_arguments(self) -> None:
        """cuLaunchKernel's arguments as ctypes objects made once (block, shared memory; grids
        and streams as they come): converting a Python int at each call costs about as much
        as the rest of the call (11 arguments: 3.1 against 1.8 us a call on a 2-core Xeon, 7
        of them made ahead)."""
        self.c_block = ctypes.c_uint(self.block)
        self.c_one = ctypes.c_uint(1)
        self.c_shared = ctypes.c_uint(self.shared)
        self.c_dims: dict[tuple[int, int, int], tuple[ctypes.c_uint, ...]] = {}
        self.c_streams: dict[int, ctypes.c_void_p] = {}

    def launch(
        self, pointers: Sequence[Any], sizes: Sequence[int], grid: tuple[int, int, int], stream: int
    ) -> bool:
        """Launch on ``grid``; False, launching nothing, where a pointer is not 16-byte aligned
        (the kernel was compiled for aligned ones: the caller takes Triton's launcher)."""
        with self.lock:  # the slots are shared: one launch of this kernel at a time
            slots = self.slots
            k = 0
            for t in pointers:
                address = t.data_ptr()
                if address & 15:
                    return False
                slots[k].value = address
                k += 1
            for s in sizes:
                slots[k].value = s
                k += 1
            code = self._launch(grid, stream)
            if code in (_CUDA_ERROR_INVALID_HANDLE, _CUDA_ERROR_INVALID_CONTEXT):
                # called from a thread whose current device is another one: launch in the
                # kernel's own context and give the thread its context back (a device
                # guard paid only on this path, never on the usual one)
                d = self.driver
                before = d.current()
                d.make_current(self.ordinal)
                try:
                    code = self._launch(grid, stream)
                finally:
                    d.restore(before)
        if code != 0:
            self.driver.check(code, f"cuLaunchKernel({self.name})")
        return True

    def _launch(self, grid: tuple[int, int, int], stream: int) -> int:
        dims = self.c_dims.get(grid)
        if dims is None:
            dims = tuple(ctypes.c_uint(g) for g in grid)
            if len(self.c_dims) < 64:  # symbolic sizes: a grid per size, kept for a few
                self.c_dims[grid] = dims
        s = self.c_streams.get(stream)
        if s is None:
            s = self.c_streams[stream] = ctypes.c_void_p(stream)
        one = self.c_one
        return self.driver.launch(
            self.function,
            dims[0],
            dims[1],
            dims[2],
            self.c_block,
            one,
            one,
            self.c_shared,
            s,
            self.params,
            None,
        )


def device_of(device: str) -> tuple[int, tuple[int, int]]:
    """The CUDA ordinal of ``device`` and its compute capability."""
    index = torch.device(device).index
    ordinal = torch.cuda.current_device() if index is None else index
    return ordinal, tuple(torch.cuda.get_device_capability(ordinal))  # type: ignore[return-value]


def stream_getter(ordinal: int) -> Any:
    """A function giving the handle of device ``ordinal``'s current CUDA stream: torch's raw
    getter where it has one (a fraction of a microsecond), else the public API."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda: raw(ordinal)
    return lambda: torch.cuda.current_stream(ordinal).cuda_stream


class KernelVariant(Protocol):
    """Another schedule of one kernel, taken by the launches whose sizes choose it: Triton's
    launcher and grid for it, and its loaded kernel for the driver launch (None: Triton's
    launcher runs it)."""

    launcher: Callable[..., Any]
    grid: Callable[[tuple[int, ...]], tuple[int, int, int]]

    def cubin(self, index64: bool) -> CubinKernel | None: ...


class KernelLaunches:
    """The launches of a program's Triton kernels, by name: tensors in, nothing out (errors go
    to the error buffer, read by :meth:`finish`). The back end
    (:class:`fir.backends.triton.build.TritonKernels`) fills in, by kernel, ``grids`` (the
    grid at the sizes), ``launchers`` (Triton's launcher: the interpreter, and the fallback)
    and ``cubins`` (the kernels it loaded for the driver launch).

    Errors: a kernel that can fail (a checked indirect index, an integer division) takes the
    program's error buffer, two int64: the failing code and the index. It is read after a call
    (:meth:`finish`) when any kernel of the program can fail, and the runtime raises; the
    buffer is cleared, so the process and the device stay usable (a device assert, by
    contrast, would end the CUDA context). On a GPU the read is deferred to the next call (or
    ``CompiledProgram.synchronize()``), as CUDA's own errors are, so that no call waits for
    the GPU; ``FIR_TRITON_CHECKS=sync`` reads it after every call.

    On a GPU the buffer is page-locked host memory mapped into the device's address space
    (CUDA's unified addressing): a failing kernel writes it over the bus, and the host reads
    it once an event says the call is done. A call thus costs no copy of the buffer: an
    earlier version kept it in device memory and copied it to the host after each call, one
    ``Memcpy DtoH`` more per step than Inductor's launches in a training step. Where the
    driver does not map the memory, the buffer is in device memory and copied as before."""

    takes_tensors = True

    def __init__(self, device: str, order: list[str], kernel_fails: dict[str, bool]) -> None:
        self.device = device
        self.order = order  # the kernels in the program's order (division errors name one)
        self.kernel_fails = kernel_fails
        self.fails = any(kernel_fails.values())
        self.grids: dict[str, Any] = {}
        self.launchers: dict[str, Any] = {}
        self.cubins: dict[str, CubinKernel] = {}
        # kernels whose index width depends on their sizes: whether a launch's sizes need
        # int64 indices; ``cubins`` holds their int32 variant, ``wide_cubins`` the int64 one
        self.index64_at: dict[str, Callable[[Sequence[int]], bool]] = {}
        self.wide_cubins: dict[str, CubinKernel] = {}
        # kernels with other schedules chosen by a launch's sizes (a looped reduction's
        # persistent variants): the variant a launch at the sizes takes, or None
        self.variants_at: dict[str, Callable[[Sequence[int]], KernelVariant | None]] = {}
        self.compile_lock = threading.Lock()
        self.static_grids: dict[str, tuple[int, int, int]] = {}  # kernels without size symbols
        self.untuned: set[str] = set()  # kernels whose first launch picks their configuration
        # made at the first call: torch.compile compiles under fake tensors
        self.err: torch.Tensor | None = None
        self.mapped = False  # ``err`` is host memory the kernels write through the bus
        self.err_code: Any = None  # ctypes view of its first word, where mapped
        self.err_host: torch.Tensor | None = None  # pinned, for deferred checks of ``err``
        self.pending: Any = None  # the event after the last call's copy of the buffer
        # the device is resolved here, on the compiling thread, where the caller's
        # ``torch.cuda.set_device`` holds: the compile pool's threads start on device 0
        # (rank 1 of a tensor-parallel job loaded its kernels into device 0's context)
        self.ordinal, self.capability = device_of(device) if device != "cpu" else (0, (0, 0))
        self.stream = stream_getter(self.ordinal)
        self.stream_getter = self.stream
        current = getattr(torch._C, "_cuda_getDevice", None)
        if current is not None:
            self.device_getter = current  # type: ignore[method-assign]  # torch's, unwrapped

    def names(self) -> list[str]:
        return list(self.launchers)

    def wide_cubin(self, name: str) -> CubinKernel | None:
        """The int64 variant of kernel ``name`` for the driver launch (the back end compiles
        it at need), or None: Triton's launcher then runs it."""
        return self.wide_cubins.get(name)

    def variant(self, name: str, sizes: Sequence[int]) -> KernelVariant | None:
        """The variant of kernel ``name`` a launch at ``sizes`` takes, None for the kernel."""
        rule = self.variants_at.get(name)
        return None if rule is None else rule(sizes)

    def cubin(self, name: str, sizes: Sequence[int]) -> CubinKernel | None:
        """The loaded kernel that a launch of ``name`` at ``sizes`` takes, if any."""
        wide = self.index64_at.get(name)
        index64 = wide is not None and wide(sizes)
        variant = self.variant(name, sizes) if self.variants_at else None
        if variant is not None:
            return variant.cubin(index64)
        if index64:
            return self.wide_cubin(name)
        return self.cubins.get(name)

    def grid(self, name: str, sizes: Sequence[int]) -> tuple[int, int, int]:
        """The grid of a launch of ``name`` at ``sizes`` (its variant's, where it takes one)."""
        variant = self.variant(name, sizes) if self.variants_at else None
        return (self.grids[name] if variant is None else variant.grid)(tuple(sizes))

    def launch_python(self, name: str, args: Sequence[Any], sizes: Sequence[int]) -> None:
        """Launch through Triton's own launcher (the interpreter's on the CPU)."""
        variant = self.variant(name, sizes) if self.variants_at else None
        launcher = self.launchers[name] if variant is None else variant.launcher
        wide = self.index64_at.get(name)
        if wide is None:
            launcher(args, sizes, self.err)
        else:
            launcher(args, sizes, self.err, index64=wide(sizes))

    def use(self, name: str, cfg: Any, direct: bool = True) -> None:
        """Launch kernel ``name`` with the block schedule ``cfg`` from now on (the back end
        renders it)."""
        raise NotImplementedError

    def direct_launch(self, name: str, sizes: Sequence[int]) -> DirectLaunch | None:
        """How the generated call launches kernel ``name`` at ``sizes`` without this
        object's :meth:`call`: through PyTorch's C++ launcher, with the handle, grid and block
        worked out here once. Measured on an H200's host, a call of a program of one
        kernel took 15.5 us through :meth:`call` (its lookups, the lock and ``ctypes``'s
        argument conversion) and 8.9 through this path; GPT-2's training step (578 launches)
        went from 19.4 to 19.0 ms on a host-bound loan. None where the kernel
        is not loaded through the driver, still has to be tuned, or the launcher is missing
        (torch before 2.8, a ROCm build) or turned off (``FIR_TRITON_LAUNCH``)."""
        if os.environ.get("FIR_TRITON_LAUNCH") in ("triton", "driver") or name in self.untuned:
            return None
        kernel = self.cubin(name, sizes)
        launch = c_launcher() if kernel is not None else None
        if kernel is None or launch is None or not kernel.handle:
            return None
        grid = self.grid(name, sizes)
        return DirectLaunch(
            launch=launch,
            handle=kernel.handle,
            grid=tuple(int(g) for g in grid),  # type: ignore[arg-type]
            warps=kernel.block // 32,
            shared=kernel.shared,
            types=kernel.arg_types,
            fails=self.kernel_fails[name],
            trailing=len(kernel.kinds) - kernel.pointers - len(sizes),
        )

    def device_getter(self) -> int:
        return torch.cuda.current_device()

    def error_pointer(self) -> int:
        """The address of the error buffer, made at the first call that needs it."""
        return self.error_buffer().data_ptr()

    def error_buffer(self) -> torch.Tensor:
        """The error buffer (made at the first call: torch.compile compiles under fake
        tensors): mapped host memory where the driver maps it at the address the host sees
        (as it does under unified addressing), else device memory."""
        if self.err is not None:
            return self.err
        if self.device != "cpu":
            try:  # page-locked memory can be refused (a container's locked-memory limit)
                host = torch.zeros(2, dtype=torch.int64, pin_memory=True)
                mapped = driver().device_pointer(host.data_ptr(), self.ordinal)
            except (RuntimeError, LaunchError, OSError):
                host, mapped = torch.zeros(0), None
            if mapped is not None and mapped == host.data_ptr():
                self.err, self.mapped = host, True
                # the failing code, read from memory at each look (no tensor op: ~100 ns)
                self.err_code = (ctypes.c_int64 * 1).from_address(host.data_ptr())
                return host
        self.err = torch.zeros(2, dtype=torch.int64, device=self.device)
        return self.err

    def scratch_error_buffer(self) -> torch.Tensor | None:
        """A buffer of the error buffer's kind on the device, for trial launches (tuning)."""
        if self.err is None:
            return None
        return torch.zeros(2, dtype=torch.int64, device=self.device)

    def call(self, name: str, args: Sequence[Any], sizes: Sequence[int] = ()) -> tuple[int, int]:
        if self.err is None and self.fails:
            self.error_buffer()
        if name in self.untuned:  # its first launch picks its configuration
            from .triton_tune import tune

            self.untuned.discard(name)
            self.use(name, tune(self, name, args, sizes))
        direct = self.cubin(name, sizes)
        if direct is not None:
            grid = None if sizes else self.static_grids.get(name)
            if grid is None:
                grid = self.grid(name, sizes)
                if not sizes:  # the same at every call
                    self.static_grids[name] = grid
            if not grid[0] * grid[1] * grid[2]:
                return 0, 0
            pointers = [*args, self.err] if self.kernel_fails[name] else args
            if direct.launch(pointers, sizes, grid, self.stream()):
                return 0, 0
            # a pointer that is not 16-byte aligned: Triton's launcher below
        if self.device == "cpu":  # the interpreter
            self.launch_python(name, args, sizes)
        else:  # Triton's launcher loads and launches on the current device: make it this one
            with torch.cuda.device(self.ordinal):
                self.launch_python(name, args, sizes)
        return 0, 0

    def finish(self, wait: bool = False) -> tuple[str, int, int] | None:
        """After a call: a failure its kernels reported, as (kernel, code, value), or None.
        Only programs whose kernels can fail pay anything. On a GPU the check is deferred by
        default (``FIR_TRITON_CHECKS=sync`` makes it immediate), so that a call never waits for
        the GPU: a mapped buffer is looked at after each call (a failure shows at the first
        look after the failing kernel ran, and only then does the host wait, to read it
        whole); a device buffer is copied to the host asynchronously after the call and read
        at the next one. ``wait`` (``CompiledProgram.synchronize``) waits and reads at once."""
        if self.err is None:
            return None
        if self.device == "cpu" or wait or os.environ.get("FIR_TRITON_CHECKS") == "sync":
            self.pending = None
            if self.mapped:  # the host reads it: the kernels must be done
                torch.cuda.synchronize(self.ordinal)
            return self._read(self.err)
        if self.mapped:
            # a kernel writes the code when it fails: seen here at this call or a later one.
            # Only then does the host wait for the device, to read the rest whole.
            if self.err_code is not None and self.err_code[0] == 0:
                return None
            torch.cuda.synchronize(self.ordinal)
            return self._read(self.err)
        failed = None
        if self.pending is not None and self.pending.query():
            failed = self._read(cast(torch.Tensor, self.err_host))  # pending: copied to it
        if self.err_host is None:
            self.err_host = torch.zeros(2, dtype=torch.int64, pin_memory=True)
        self.err_host.copy_(self.err, non_blocking=True)
        self.pending = torch.cuda.Event()
        self.pending.record(torch.cuda.current_stream(self.ordinal))
        return failed

    def _read(self, buffer: torch.Tensor) -> tuple[str, int, int] | None:
        code, value = (int(v) for v in buffer.tolist())
        if code == 0:
            return None
        assert self.err is not None
        self.err.zero_()
        if self.err_host is not None:
            self.err_host.zero_()
        if code <= DIVISION_BY_ZERO:  # -1 - the kernel's position in the program
            return self.order[DIVISION_BY_ZERO - code], DIVISION_BY_ZERO, value
        return "", code, value
