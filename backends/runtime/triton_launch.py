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
import threading
from collections.abc import Sequence
from typing import Any

import torch
from fir.ir.errors import FirError

_FUNC_SHARED_SIZE_BYTES = 1
_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_DEVICE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
_DEFAULT_SHARED_LIMIT = 49152  # bytes a kernel may use without opting in
_CUDA_ERROR_INVALID_CONTEXT = 201
_CUDA_ERROR_INVALID_HANDLE = 400


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


class CubinKernel:
    """One compiled kernel, loaded into the device's context: ``launch(pointers, sizes, grid,
    stream)``."""

    def __init__(
        self, name: str, compiled: Any, kinds: list[str], pointers: int, ordinal: int
    ) -> None:
        """``compiled``: what ``triton.compile`` gave for the kernel; ``kinds``: the kind of each
        of its parameters (``p`` pointer, ``i`` int64), of which the first ``pointers`` are the
        buffers'."""
        meta = compiled.metadata
        self.name = name
        self.kinds = kinds
        self.pointers = pointers
        self.block = 32 * meta.num_warps
        self.shared = int(meta.shared)
        self.slots = [ctypes.c_uint64(0) if k == "p" else ctypes.c_int64(0) for k in kinds]
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
        # letter per parameter (``K`` a pointer as uint64, ``l`` an int64)
        self.handle = int(function.value or 0)
        self.arg_types = "".join("K" if k == "p" else "l" for k in kinds)

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
