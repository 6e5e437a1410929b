"""Build and load: the Triton of a program -> a Python module in the cache -> launchers.

Triton needs a kernel's source in a file (it reads it back for its own cache key and error
messages), so the module goes into the shared cache (``$FIR_CACHE_DIR/triton``), named by a
hash of the source and the Triton version, written atomically, and imported from there.
Triton compiles each kernel at its first launch (for the argument types and alignments it
sees); :meth:`TritonKernels.warm_up` compiles every kernel of a program at once, in parallel,
before the first call.

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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from fir.backends.cache import Cache, cache_key
from fir.backends.plan import ProgramPlan
from fir.ir.errors import FirError

from .render import Config, render_program

# error codes of integer division by zero: -1 - (the kernel's position in the program)
DIVISION_BASE = -1


class TritonBuildError(FirError):
    """The generated Triton module could not be written or imported."""


def triton_version() -> str:
    import triton

    return str(triton.__version__)


def module_path(source: str, cache: Cache | None = None) -> Path:
    cache = cache or Cache("triton")
    key = cache_key(source, triton_version())
    name = f"fir_{key[:32]}.py"
    hit = cache.lookup(name)
    return hit if hit is not None else cache.write_text(name, source)


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


class TritonKernels:
    """The launchers of a program's kernels, by name; tensors in, nothing out (errors go to
    the error buffer, read by :meth:`finish`)."""

    takes_tensors = True

    def __init__(
        self,
        plan: ProgramPlan,
        device: str,
        cache: Cache | None = None,
        configs: dict[str, Config] | None = None,
    ) -> None:
        source, configs = render_program(plan, configs)
        self.source = source
        self.configs: dict[str, Config] = {name: c for name, (c, _) in configs.items()}
        self.path = module_path(source, cache)
        self.module = load_module(self.path)
        self.launchers = {name: getattr(self.module, f"launch_{name}") for name in configs}
        self.order = list(configs)
        self.fails = any(f for _, f in configs.values())
        self.device = device
        # made at the first call: torch.compile compiles under fake tensors
        self.err: torch.Tensor | None = None
        self.err_host: torch.Tensor | None = None  # pinned, for deferred checks
        self.pending: Any = None  # the event after the last call's copy of the buffer

    def names(self) -> list[str]:
        return list(self.launchers)

    def call(self, name: str, args: Sequence[Any], sizes: Sequence[int] = ()) -> tuple[int, int]:
        if self.err is None and self.fails:
            self.err = torch.zeros(2, dtype=torch.int64, device=self.device)
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
            failed = self._read(self.err_host)
        if self.err_host is None:
            self.err_host = torch.zeros(2, dtype=torch.int64, pin_memory=True)
        self.err_host.copy_(self.err, non_blocking=True)
        self.pending = torch.cuda.Event()
        self.pending.record()
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
    configs: dict[str, Config] | None = None,
) -> TritonKernels:
    return TritonKernels(plan, device, cache, configs)
