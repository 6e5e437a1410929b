"""Build and load: the Triton of a program -> a Python module in the cache -> launchers.

Triton needs a kernel's source in a file (it reads it back for its own cache key and error
messages), so the module goes into the shared cache (``$FIR_CACHE_DIR/triton``), named by a
hash of the source and the Triton version, written atomically, and imported from there; an
entry found there is imported only if the cache trusts it and it holds exactly the source
(:func:`module_path`).
Triton compiles each kernel at its first launch (for the argument types and alignments it
sees); on a GPU :meth:`TritonKernels.warm_up` compiles every kernel whose sizes are static when
the program is built, on a pool of threads (Triton's compile spends much of its time in LLVM
and ``ptxas``, outside the GIL), so a graph of many kernels compiles in about the time of its
slowest. Kernels with symbolic sizes compile at their first launch (their specialisation
depends on the sizes' values).

With ``autotune`` (:mod:`.tune`) each kernel's first launch times a few configurations around
the chosen one on the call's own tensors and keeps the fastest, cached on disk by the kernel.

Errors: a kernel that can fail (a checked indirect index, an integer division) takes the
program's error buffer, two int64 on the device: the failing code and the index. The runtime
reads it after a call (:meth:`TritonKernels.finish`) when any kernel of the program can fail,
and raises; the buffer is cleared, so the process and the device stay usable (a device assert,
by contrast, would end the CUDA context). On a GPU the read is deferred to the next call (or
``CompiledProgram.synchronize()``), as CUDA's own errors are, so that no call waits for the
GPU; ``FIR_TRITON_CHECKS=sync`` reads it after every call.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import torch
from fir.backends.cache import Cache, cache_key
from fir.backends.plan import KernelPlan, ProgramPlan
from fir.backends.plan.block_schedule import BlockSchedule
from fir.backends.plan.program import shared_storage
from fir.ir.dtypes import DType
from fir.ir.errors import FirError

from ..runtime.call_source import DirectLaunch
from ..runtime.triton_launch import CubinKernel, LaunchError, c_launcher, device_of, stream_getter
from .helpers import FIR_LAUNCH
from .render import HEADER, jit_name, launcher, render_kernel, render_program

# error codes of integer division by zero: -1 - (the kernel's position in the program)
DIVISION_BASE = -1


class TritonBuildError(FirError):
    """The generated Triton module could not be written or imported."""


def triton_version() -> str:
    import triton

    return str(triton.__version__)


def module_path(source: str, cache: Cache | None = None) -> Path:
    """The cache entry holding module ``source``, written if it is not there.

    An entry is used only if the cache trusts it (a regular file of this user in private
    folders, not a link: :mod:`fir.backends.cache`) and it holds exactly ``source``, read
    through the checked descriptor; anything else is written again. It is then imported (and
    read again by Triton) by its path, which nobody else can change: its folders are private."""
    cache = cache or Cache("triton")
    key = cache_key(source, triton_version())
    name = f"fir_{key[:32]}.py"
    if cache.read(name) == source.encode():
        return cache.path(name)
    return cache.store(name, lambda tmp: tmp.write_bytes(source.encode()))


def load_module(path: Path) -> Any:
    name = f"fir_triton_{path.stem}"
    known = sys.modules.get(name)
    if known is not None and getattr(known, "__file__", None) == str(path):
        return known
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has one
        raise TritonBuildError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # a bug of the renderer: show where the source is
        del sys.modules[name]
        raise TritonBuildError(f"generated Triton module {path} does not load: {e}") from e
    return module


POINTER: dict[DType, str] = {
    DType.BOOL: "*i1",
    DType.I8: "*i8",
    DType.I16: "*i16",
    DType.I32: "*i32",
    DType.I64: "*i64",
    DType.U8: "*u8",
    DType.F16: "*fp16",
    DType.BF16: "*bf16",
    DType.F32: "*fp32",
    DType.F64: "*fp64",
}


def _entry_params(ptx: str, name: str) -> int:
    """How many parameters the PTX entry ``name`` takes."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise LaunchError(f"no entry {name} in the PTX")
    return len(re.findall(r"\.param\b", m.group(1)))


def compile_kernel(
    plan: KernelPlan, cfg: BlockSchedule, fails: bool, fn: Any, arch: int, backend: str = "cuda"
) -> tuple[Any, list[str]]:
    """``triton.compile`` of one kernel for ``backend``/``arch`` (no GPU needed), with the
    signature the plan implies: a pointer per buffer (16-byte aligned), the error buffer where
    the kernel can fail, an ``i64`` per size symbol, the blocks of ``cfg`` as constants.
    Returns the compiled kernel and the kind of each of its parameters (``p`` pointer, ``i``
    int64), Triton's own trailing parameters included."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    pointers = [POINTER[a.dtype] for a in plan.args] + (["*i64"] if fails else [])
    signature = dict(zip(names, pointers + ["i64"] * len(plan.sizes)))
    attrs = {(k,): [["tt.divisibility", 16]] for k in range(len(pointers))}
    kinds = ["p"] * len(pointers) + ["i"] * len(plan.sizes)
    constants = {n: getattr(cfg, n) for n in names[len(signature) :]}
    for n in constants:
        signature[n] = "constexpr"
    compiled = triton.compile(
        ASTSource(fn, signature, constexprs=constants, attrs=attrs),
        target=GPUTarget(backend, arch, 32),
        options={"num_warps": cfg.num_warps, **FIR_LAUNCH},
    )
    if backend != "cuda":
        return compiled, kinds
    meta = compiled.metadata
    for field in ("global_scratch_size", "profile_scratch_size"):
        if getattr(meta, field, 0):
            raise LaunchError(f"kernel {plan.name} needs {field} (Triton's launcher)")
    if getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_pdl", False):
        raise LaunchError(f"kernel {plan.name} needs a cluster launch (Triton's launcher)")
    if getattr(meta, "launch_cooperative_grid", False):
        raise LaunchError(f"kernel {plan.name} needs a cooperative launch")
    # parameters Triton appends (scratch pointers, NULL when their size is 0)
    extra = _entry_params(compiled.asm["ptx"], meta.name) - len(kinds)
    if not 0 <= extra <= 2:
        raise LaunchError(f"kernel {plan.name}: {extra} parameters beyond FIR's arguments")
    return compiled, kinds + ["p"] * extra


class TritonKernels:
    """The launchers of a program's kernels, by name; tensors in, nothing out (errors go to
    the error buffer, read by :meth:`finish`)."""

    takes_tensors = True

    def __init__(
        self,
        plan: ProgramPlan,
        device: str,
        cache: Cache | None = None,
        configs: dict[str, BlockSchedule] | None = None,
        autotune: bool = False,
    ) -> None:
        source, rendered = render_program(plan, configs)
        self.plan = plan
        self.cache = cache
        self.source = source
        self.configs: dict[str, BlockSchedule] = {name: c for name, (c, _) in rendered.items()}
        self.path = module_path(source, cache)
        self.module = load_module(self.path)
        self.launchers = {name: getattr(self.module, f"launch_{name}") for name in rendered}
        self.grids = {name: getattr(self.module, f"grid_{name}") for name in rendered}
        self.order = list(rendered)
        self.kernel_fails = {name: f for name, (_, f) in rendered.items()}
        self.fails = any(self.kernel_fails.values())
        self.device = device
        # made at the first call: torch.compile compiles under fake tensors
        self.err: torch.Tensor | None = None
        self.err_host: torch.Tensor | None = None  # pinned, for deferred checks
        self.pending: Any = None  # the event after the last call's copy of the buffer
        # kernels launched through the CUDA driver (:mod:`.launch`), and why the others are not
        self.cubins: dict[str, CubinKernel] = {}
        self.not_direct: dict[str, str] = {}
        self.static_grids: dict[str, tuple[int, int, int]] = {}  # kernels without size symbols
        # the device is resolved here, on the compiling thread, where the caller's
        # ``torch.cuda.set_device`` holds: the compile pool's threads start on device 0
        # (rank 1 of a tensor-parallel job loaded its kernels into device 0's context)
        self.ordinal, self.capability = device_of(device) if device != "cpu" else (0, (0, 0))
        self.stream = stream_getter(self.ordinal)
        self.stream_getter = self.stream
        current = getattr(torch._C, "_cuda_getDevice", None)
        if current is not None:
            self.device_getter = current  # type: ignore[method-assign]  # torch's, unwrapped
        # kernels whose first launch still has to pick a configuration
        self.untuned: set[str] = set(self.order) if autotune else set()
        if device != "cpu" and not autotune:
            self.warm_up()

    def warm_up(self) -> None:
        """Compile every kernel, in parallel, before the first call: for the driver launch
        (:mod:`.launch`) where it applies, else through Triton's launcher (where only a
        kernel with static sizes can be compiled ahead: its specialisation is then known)."""
        kernels = self.plan.kernels()
        if len(kernels) <= 1:
            for k in kernels:
                self._compile(k)
            return
        with ThreadPoolExecutor(max_workers=min(len(kernels), os.cpu_count() or 1)) as pool:
            list(pool.map(self._compile, kernels))

    def _compile(self, k: KernelPlan) -> None:
        name = k.name
        cfg = self.configs[name]
        fn = getattr(self.launchers[name], "__globals__", vars(self.module))[jit_name(name)]
        if os.environ.get("FIR_TRITON_LAUNCH") == "triton":
            self.not_direct[name] = "FIR_TRITON_LAUNCH=triton"
        else:
            try:
                arch = self.capability[0] * 10 + self.capability[1]
                compiled, kinds = compile_kernel(k, cfg, self.kernel_fails[name], fn, arch)
                pointers = len(k.args) + self.kernel_fails[name]
                self.cubins[name] = CubinKernel(name, compiled, kinds, pointers, self.ordinal)
                return
            except Exception as e:  # noqa: BLE001 - Triton's launcher still works; say why
                self.not_direct[name] = f"{type(e).__name__}: {e}"
        if k.sizes:  # specialised on the sizes' values at the first launch
            return
        args: list[Any] = [a.dtype.to_torch() for a in k.args]
        if self.kernel_fails[name]:
            args.append(torch.int64)
        blocks = {n: getattr(cfg, n) for n in fn.arg_names[len(args) :]}
        try:
            compiled = fn.warmup(*args, grid=(1,), num_warps=cfg.num_warps, **blocks, **FIR_LAUNCH)
            # loading the binary and building its launcher (a C stub some Triton versions
            # compile with the host compiler) is otherwise left to the first launch
            load = getattr(compiled, "_init_handles", None)
            if load is not None:
                load()
        except Exception as e:  # a kernel Triton cannot compile: a bug of the renderer
            raise TritonBuildError(
                f"kernel {name} of {self.path} does not compile: {type(e).__name__}: {e}"
            ) from e

    def use(self, name: str, cfg: BlockSchedule, direct: bool = True) -> None:
        """Launch kernel ``name`` with ``cfg`` from now on (a module of its own); ``direct``:
        compile it for the driver launch now (tuning trials go through Triton's launcher)."""
        if cfg != self.configs[name]:
            position = self.order.index(name)
            k = self.plan.kernels()[position]
            source, cfg, fails = render_kernel(k, cfg, position, shared_storage(self.plan, k))
            text = f"{HEADER}\n{source}\n{launcher(k, cfg, fails)}"
            module = load_module(module_path(text, self.cache))
            self.launchers[name] = getattr(module, f"launch_{name}")
            self.grids[name] = getattr(module, f"grid_{name}")
            self.configs[name] = cfg
            self.cubins.pop(name, None)
            self.static_grids.pop(name, None)
        if direct and self.device != "cpu" and name not in self.cubins:
            self._compile(self.plan.kernels()[self.order.index(name)])

    def names(self) -> list[str]:
        return list(self.launchers)

    # -- launches the generated call makes itself (:mod:`fir.backends.runtime.call_source`)

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
        kernel = self.cubins.get(name)
        launch = c_launcher() if kernel is not None else None
        if kernel is None or launch is None or not kernel.handle:
            return None
        grid = self.grids[name](tuple(sizes))
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
        if self.err is None:
            self.err = torch.zeros(2, dtype=torch.int64, device=self.device)
        return self.err.data_ptr()

    def call(self, name: str, args: Sequence[Any], sizes: Sequence[int] = ()) -> tuple[int, int]:
        if self.err is None and self.fails:
            self.err = torch.zeros(2, dtype=torch.int64, device=self.device)
        if name in self.untuned:
            from .tune import tune

            self.untuned.discard(name)
            self.use(name, tune(self, name, args, sizes))
        direct = self.cubins.get(name)
        if direct is not None:
            grid = None if sizes else self.static_grids.get(name)
            if grid is None:
                grid = self.grids[name](sizes)
                if not sizes:  # the same at every call
                    self.static_grids[name] = grid
            if not grid[0] * grid[1] * grid[2]:
                return 0, 0
            pointers = [*args, self.err] if self.kernel_fails[name] else args
            if direct.launch(pointers, sizes, grid, self.stream()):
                return 0, 0
            # a pointer that is not 16-byte aligned: Triton's launcher below
        if self.device == "cpu":  # the interpreter
            self.launchers[name](args, sizes, self.err)
        else:  # Triton's launcher loads and launches on the current device: make it this one
            with torch.cuda.device(self.ordinal):
                self.launchers[name](args, sizes, self.err)
        return 0, 0

    def finish(self, wait: bool = False) -> tuple[str, int, int] | None:
        """After a call: a failure its kernels reported, as (kernel, code, value), or None.
        Only programs whose kernels can fail pay anything. On a GPU the check is deferred by
        default (``FIR_TRITON_CHECKS=sync`` makes it immediate): the error buffer is copied to
        the host asynchronously after the call, and read at the next call, or at once with
        ``wait`` (``CompiledProgram.synchronize``), so that a call never waits for the GPU."""
        if self.err is None:
            return None
        if self.device == "cpu" or wait or os.environ.get("FIR_TRITON_CHECKS") == "sync":
            self.pending = None
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
        if code <= DIVISION_BASE:
            return self.order[DIVISION_BASE - code], -1, value
        return "", code, value


def build_program(
    plan: ProgramPlan,
    device: str,
    cache: Cache | None = None,
    configs: dict[str, BlockSchedule] | None = None,
    autotune: bool = False,
) -> TritonKernels:
    return TritonKernels(plan, device, cache, configs, autotune)
