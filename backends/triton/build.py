"""Build and load: the Triton of a program -> a Python module in the cache -> launchers.

Triton needs a kernel's source in a file (it reads it back for its own cache key and error
messages), so the module goes into the shared cache (``$FIR_CACHE_DIR/triton``), named by a
hash of the source and the Triton version, written atomically, and imported from there; an
entry found there is imported only if the cache trusts it and it holds exactly the source
(:func:`module_path`).
Triton compiles each kernel at its first launch (for the argument types and alignments it
sees); on a GPU :meth:`TritonKernels.warm_up` compiles every kernel whose sizes are static when
the program is built, on a pool of threads (Triton's compile spends much of its time in LLVM
and ``ptxas``, outside the GIL; its Python front end holds the GIL, so many compiles at once
still queue), each kernel that is the same as another up to its names once (the runtime's
:mod:`~fir.backends.runtime.triton_kernel_memo`). Kernels with symbolic sizes compile at their
first launch (their specialisation depends on the sizes' values).

With ``autotune`` (:mod:`fir.backends.runtime.triton_tune`) each kernel's first launch times a few configurations around
the chosen one on the call's own tensors and keeps the fastest, cached on disk by the kernel.

Launches, and the error buffer kernels report failures in, are the runtime's
(:class:`fir.backends.runtime.triton_launch.KernelLaunches`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from fir.backends.cache import Cache, cache_key
from fir.backends.plan import KernelPlan, ProgramPlan
from fir.backends.plan.block_schedule import (
    BlockSchedule,
    index_width,
    needs_index64,
    persistent_at_launch,
)
from fir.backends.plan.program import shared_storage
from fir.ir.dtypes import DType
from fir.ir.errors import FirError

from ..runtime.triton_kernel_memo import CompileMemo, canonical_source
from ..runtime.triton_launch import CubinKernel, KernelLaunches, launch_kinds
from .helpers import FIR_LAUNCH
from .render import HEADER, jit_name, launcher, render_kernel, render_program

# a size that is a multiple of this at a launch is declared so to the compiler (Triton's
# ``tt.divisibility``; its own launcher specialises integers the same way)
ALIGNED = 16


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


def pointer_type(dtype: DType) -> str:
    """The signature type of a pointer to ``dtype`` elements (``*fp32``, ``*i64``, ``*u8``)."""
    if dtype.is_bool or dtype is DType.BF16:
        return "*i1" if dtype.is_bool else "*bf16"
    kind = "fp" if dtype.is_float else ("i" if dtype.is_signed else "u")
    return f"*{kind}{8 * dtype.itemsize}"


def compile_kernel(
    plan: KernelPlan,
    cfg: BlockSchedule,
    fails: bool,
    fn: Any,
    arch: int,
    backend: str = "cuda",
    index64: bool = True,
    memo: CompileMemo | None = None,
    aligned: frozenset[int] = frozenset(),
) -> tuple[Any, list[str]]:
    """``triton.compile`` of one kernel for ``backend``/``arch`` (no GPU needed), with the
    signature the plan implies: a pointer per buffer (16-byte aligned), the error buffer where
    the kernel can fail, an integer per size symbol, the blocks of ``cfg`` as constants.
    ``index64``: for a kernel whose index width depends on its sizes (``index_width``), the
    int64 variant (sizes as ``i64``), else the int32 one
    (sizes as ``i32``: the caller has checked that they allow it). Returns the compiled kernel
    and the kind of each of its parameters as the C launcher's type letter (``K`` pointer,
    ``l`` int64, ``i`` int32), Triton's own trailing parameters included. ``memo``: where a
    kernel the same up to its names (:mod:`~fir.backends.runtime.triton_kernel_memo`) was
    compiled already, its result.
    ``aligned``: the positions (in ``plan.sizes``) of sizes that are multiples of
    :data:`ALIGNED` at every launch of this binary: Triton then knows that a row starting at a
    multiple of such a size is aligned, and loads and stores it in 16-byte vectors. (A launch
    through Triton's own launcher specialises on its integer arguments' values itself.)"""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    sized = index_width(plan) == "sizes"
    size_type = "i32" if sized and not index64 else "i64"
    pointers = [pointer_type(a.dtype) for a in plan.args] + (["*i64"] if fails else [])
    signature = dict(zip(names, pointers + [size_type] * len(plan.sizes)))
    attrs = {(k,): [["tt.divisibility", 16]] for k in range(len(pointers))}
    for k in aligned:
        attrs[(len(pointers) + k,)] = [["tt.divisibility", ALIGNED]]
    kinds = ["K"] * len(pointers) + [{"i32": "i", "i64": "l"}[size_type]] * len(plan.sizes)
    constants = {n: getattr(cfg, n) for n in names[len(signature) :] if n != "INDEX64"}
    if sized:
        constants["INDEX64"] = index64
    for n in constants:
        signature[n] = "constexpr"
    options = {"num_warps": cfg.num_warps, **FIR_LAUNCH}

    def build() -> Any:
        return triton.compile(
            ASTSource(fn, signature, constexprs=constants, attrs=attrs),
            target=GPUTarget(backend, arch, 32),
            options=options,
        )

    source = getattr(fn, "src", None)  # a JITFunction's source text
    if memo is None or not isinstance(source, str):
        compiled = build()
    else:
        key = (
            canonical_source(source),
            tuple(signature[n] for n in names if n in signature),
            tuple(constants.get(n) for n in names),
            tuple(sorted(options.items())),
            tuple(sorted(aligned)),
            backend,
            arch,
        )
        compiled = memo.get(key, build)
    if backend != "cuda":
        return compiled, kinds
    return compiled, launch_kinds(plan.name, compiled, kinds)


def compile_for_target(
    plan: ProgramPlan, arch: int = 90, backend: str = "cuda", warp_size: int = 32
) -> dict[str, tuple[float, list[str]]]:
    """Compile every kernel of ``plan`` for ``backend``/``arch`` without a GPU: ``triton.compile``
    down to the target's binary with the signature the driver launch uses
    (:func:`compile_kernel`), so that a kernel that would not compile, or that takes parameters
    the launch does not expect, fails on a machine with no GPU (CI: ``fir.tools.triton_target``).
    Returns, by kernel, the seconds it took and the stages produced (``ttir``, ``ttgir``,
    ``llir``, ``ptx``, ``cubin``). A kernel that does not compile raises Triton's error."""
    if warp_size != 32:
        raise ValueError("FIR's kernels assume warps of 32 threads")
    source, configs = render_program(plan)
    module = load_module(module_path(source))
    out: dict[str, tuple[float, list[str]]] = {}
    for k in plan.kernels():
        cfg, fails = configs[k.name]
        # a kernel whose index width depends on its sizes: both variants (int32 first)
        variants = [False, True] if index_width(k) == "sizes" else [True]
        for index64 in variants:
            start = time.perf_counter()
            compiled, _ = compile_kernel(
                k, cfg, fails, getattr(module, jit_name(k.name)), arch, backend, index64
            )
            name = f"{k.name} (int64)" if index64 and len(variants) == 2 else k.name
            out[name] = (time.perf_counter() - start, list(compiled.asm))
    return out


class TritonKernels(KernelLaunches):
    """A program's kernels, rendered, loaded and compiled: what :class:`KernelLaunches` launches
    by name, and the configuration of each (which tuning may change, :meth:`use`)."""

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
        super().__init__(device, list(rendered), {name: f for name, (_, f) in rendered.items()})
        self.launchers = {name: getattr(self.module, f"launch_{name}") for name in rendered}
        self.grids = {name: getattr(self.module, f"grid_{name}") for name in rendered}
        for k in plan.kernels():
            if index_width(k) == "sizes":
                self.index64_at[k.name] = needs_index64(k)
        self.not_direct: dict[str, str] = {}  # why a kernel is not launched through the driver
        self.memo = CompileMemo()  # kernels the same up to their names compile once
        # kernels whose first launch still has to pick a configuration
        self.untuned: set[str] = set(self.order) if autotune else set()
        self.variant_errors: dict[str, str] = {}  # variants that did not render, and why
        self.variants_made: dict[str, list[Variant]] = {}  # by kernel, in the order made
        if not autotune:
            for k in plan.kernels():
                rule = persistent_at_launch(k, self.configs[k.name])
                if rule is not None and k.name not in (configs or {}):
                    self.variants_at[k.name] = self._variants(k, rule)
        if device != "cpu" and not autotune:
            self.warm_up()

    def warm_up(self) -> None:
        """Compile every kernel, in parallel, before the first call: for the driver launch
        (:class:`~fir.backends.runtime.triton_launch.CubinKernel`) where it applies, else
        through Triton's launcher (where only a kernel with static sizes can be compiled ahead:
        its specialisation is then known)."""
        kernels = self.plan.kernels()
        if len(kernels) <= 1:
            for k in kernels:
                self._compile(k)
            return
        with ThreadPoolExecutor(max_workers=min(len(kernels), os.cpu_count() or 1)) as pool:
            list(pool.map(self._compile, kernels))

    def _compile(self, k: KernelPlan, index64: bool = False) -> None:
        """Load kernel ``k`` for the driver launch (else make sure Triton's launcher can run
        it). A kernel whose index width depends on its sizes is compiled here with int32
        indices (``index64`` False: what every launch below 2**31 elements takes) or int64
        (True: :meth:`wide_cubin`, at the first launch that needs it)."""
        name = k.name
        cfg = self.configs[name]
        fn = getattr(self.launchers[name], "__globals__", vars(self.module))[jit_name(name)]
        if os.environ.get("FIR_TRITON_LAUNCH") == "triton":
            self.not_direct[name] = "FIR_TRITON_LAUNCH=triton"
        else:
            try:
                kernel = self.cubin_kernel(k, cfg, self.kernel_fails[name], fn, index64)
                (self.wide_cubins if index64 else self.cubins)[name] = kernel
                return
            except Exception as e:  # noqa: BLE001 - Triton's launcher still works; say why
                self.not_direct[name] = f"{type(e).__name__}: {e}"
        if k.sizes:  # specialised on the sizes' values at the first launch
            return
        args = [a.dtype.to_torch() for a in k.args] + [torch.int64] * self.kernel_fails[name]
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

    def cubin_kernel(
        self,
        plan: KernelPlan,
        cfg: BlockSchedule,
        fails: bool,
        fn: Any,
        index64: bool,
        aligned: frozenset[int] = frozenset(),
    ) -> CubinKernel:
        """Kernel ``plan`` (``fn``, rendered with ``cfg``) compiled for this program's GPU
        (:func:`compile_kernel`, through the memo) and loaded for the driver launch."""
        arch = self.capability[0] * 10 + self.capability[1]
        compiled, kinds = compile_kernel(
            plan, cfg, fails, fn, arch, index64=index64, memo=self.memo, aligned=aligned
        )
        return CubinKernel(plan.name, compiled, kinds, len(plan.args) + fails, self.ordinal)

    def kernel_module(self, plan: KernelPlan, source: str, cfg: BlockSchedule, fails: bool) -> Any:
        """The module of one kernel rendered with a configuration of its own (``source``) and
        its launcher."""
        text = f"{HEADER}\n{source}\n{launcher(plan, cfg, fails)}"
        return load_module(module_path(text, self.cache))

    def _variants(
        self, k: KernelPlan, rule: Callable[[Sequence[int]], BlockSchedule | None]
    ) -> Callable[[Sequence[int]], Variant | None]:
        """The variant of kernel ``k`` a launch at the sizes takes (``rule`` names its
        schedule), rendered and loaded at the first launch that takes it."""
        made: dict[tuple[BlockSchedule, frozenset[int]], Variant | None] = {}

        def at(sizes: Sequence[int]) -> Variant | None:
            cfg = rule(sizes)
            if cfg is None:
                return None
            # compiled for the sizes' alignment too: a row of a length that is a multiple of
            # ALIGNED is read in vectors (BERT's and T5's softmax at 64-256 tokens)
            key = (cfg, frozenset(i for i, v in enumerate(sizes) if v % ALIGNED == 0))
            if key not in made:
                with self.compile_lock:
                    if key not in made:
                        try:
                            variant = made[key] = Variant(self, k, cfg, key[1])
                            self.variants_made.setdefault(k.name, []).append(variant)
                        except Exception as e:  # noqa: BLE001 - the kernel itself still runs
                            self.variant_errors[f"{k.name}: {cfg.text()}"] = repr(e)
                            made[key] = None
            return made[key]

        return at

    def wide_cubin(self, name: str) -> CubinKernel | None:
        """The int64 variant of kernel ``name`` (one whose index width depends on its sizes),
        compiled at the first launch whose sizes need it; None where it does not compile for
        the driver launch (tried once: ``not_direct`` says why, Triton's launcher runs it)."""
        if name not in self.wide_cubins and name in self.cubins and name not in self.not_direct:
            with self.compile_lock:
                if name not in self.wide_cubins and name not in self.not_direct:
                    self._compile(self.plan.kernels()[self.order.index(name)], index64=True)
        return self.wide_cubins.get(name)

    def render(
        self, name: str, cfg: BlockSchedule | None = None, plan: KernelPlan | None = None
    ) -> tuple[str, BlockSchedule, bool]:
        """Kernel ``name`` rendered with ``cfg`` (None: the block schedule's), as
        :func:`~.render.render_kernel`; ``plan``: another plan of that kernel (the one its
        persistent launches render, ``KernelPlan.at_launch``)."""
        position = self.order.index(name)
        k = self.plan.kernels()[position]
        return render_kernel(plan or k, cfg, position, shared_storage(self.plan, k))

    def use(self, name: str, cfg: BlockSchedule, direct: bool = True) -> None:
        """Launch kernel ``name`` with ``cfg`` from now on (a module of its own); ``direct``:
        compile it for the driver launch now (tuning trials go through Triton's launcher)."""
        if cfg != self.configs[name]:
            source, cfg, fails = self.render(name, cfg)
            module = self.kernel_module(
                self.plan.kernels()[self.order.index(name)], source, cfg, fails
            )
            self.launchers[name] = getattr(module, f"launch_{name}")
            self.grids[name] = getattr(module, f"grid_{name}")
            self.configs[name] = cfg
            self.cubins.pop(name, None)
            self.wide_cubins.pop(name, None)
            self.static_grids.pop(name, None)
        if direct and self.device != "cpu" and name not in self.cubins:
            self._compile(self.plan.kernels()[self.order.index(name)])


class Variant:
    """Kernel ``k`` rendered with another schedule (``cfg``) in a module of its own: Triton's
    launcher and grid for it, and its loaded kernels for the driver launch, compiled at need
    (int32 and int64 indices, as the kernel's)."""

    def __init__(
        self,
        kernels: TritonKernels,
        k: KernelPlan,
        cfg: BlockSchedule,
        aligned: frozenset[int] = frozenset(),
    ) -> None:
        # the plan made for a persistent launch (its costly repeated values kept in registers
        # from one pass over the row to the next) where there is one, else the kernel's own
        plan = k.at_launch or k
        source, cfg, fails = kernels.render(k.name, cfg, plan)
        module = kernels.kernel_module(plan, source, cfg, fails)
        self.kernels, self.plan, self.cfg, self.fails = kernels, plan, cfg, fails
        self.aligned = aligned
        self.launcher = getattr(module, f"launch_{k.name}")
        self.grid = getattr(module, f"grid_{k.name}")
        self.fn = getattr(self.launcher, "__globals__", vars(module))[jit_name(k.name)]
        self.cubins: dict[bool, CubinKernel | None] = {}

    def text(self) -> str:
        """The variant's schedule, and the sizes it declares aligned to the compiler."""
        sizes = [self.plan.sizes[k] for k in sorted(self.aligned)]
        return self.cfg.text() + (f"; {', '.join(sizes)} aligned" if sizes else "")

    def cubin(self, index64: bool) -> CubinKernel | None:
        kernels = self.kernels
        if kernels.device == "cpu" or os.environ.get("FIR_TRITON_LAUNCH") == "triton":
            return None
        if index64 in self.cubins:  # the launch's path: no lock
            return self.cubins[index64]
        with kernels.compile_lock:
            if index64 not in self.cubins:
                try:
                    self.cubins[index64] = kernels.cubin_kernel(
                        self.plan, self.cfg, self.fails, self.fn, index64, self.aligned
                    )
                except Exception:  # noqa: BLE001 - Triton's launcher runs the variant instead
                    self.cubins[index64] = None
        return self.cubins[index64]


build_program = TritonKernels  # the back end's build step (:mod:`fir.backends.registry`)
