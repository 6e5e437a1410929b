"""The ``autotune`` option of the Triton back end, a part of its runtime (as Inductor's
autotuner is of Inductor's): at a kernel's first launch, time a few configurations around the
chosen one (:func:`fir.backends.plan.block_schedule.candidates`: block sizes and warps of the
same schedule) on the call's own tensors and keep the fastest.

* The tensors a kernel writes are cloned for the trials, so an in-place kernel timed many times
  does not change the call's inputs; the kernel then runs once, for real, with the winner.
* The choice is cached on disk (``$FIR_CACHE_DIR/triton/tune_<key>.json``), keyed by the
  kernel's source with its default configuration, the sizes of the call, the GPU's name and the
  Triton version: a later process (or graph) with the same kernel does not tune again.
* A configuration that fails (too many registers, shared memory) is skipped; the default
  configuration is always among the trials, so tuning never picks something slower than it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from fir.backends.cache import Cache, cache_key
from fir.backends.plan.block_schedule import BlockSchedule, candidates

TRIALS = 12  # configurations timed per kernel at most


def _device_name(device: str) -> str:
    import torch

    if device == "cpu":
        return "cpu (Triton interpreter)"
    return str(torch.cuda.get_device_name(device))


def tuning_key(kernels: Any, name: str, sizes: Sequence[int]) -> str:
    import triton

    source, _, _ = kernels.render(name)
    return cache_key(
        source, repr(list(sizes)), _device_name(kernels.device), str(triton.__version__)
    )


def _load(cache: Cache, entry: str, default: BlockSchedule) -> BlockSchedule | None:
    """The cached choice: its block sizes and warps on ``default``'s schedule (an entry
    written before the schedule named the loops' order takes the default's)."""
    path = cache.lookup(entry)
    if path is None:
        return None
    try:
        fields = json.loads(path.read_text())
        if fields.get("tile") is not None:
            fields["tile"] = tuple(fields["tile"])
        if "order" in fields:
            fields["order"] = tuple(fields["order"])
        return replace(default, **fields)
    except (OSError, ValueError, TypeError):  # a damaged entry: tune again
        return None


def _time(run: Any, device: str) -> float:
    """Seconds per call of ``run``: ``do_bench``'s median on a GPU, one call in the
    interpreter (where the kernels run on the CPU and only a gross ranking matters)."""
    if device == "cpu":
        start = time.perf_counter()
        run()
        return time.perf_counter() - start
    import triton.testing

    return float(triton.testing.do_bench(run, warmup=5, rep=25)) * 1e-3


def tune(kernels: Any, name: str, args: Sequence[Any], sizes: Sequence[int]) -> BlockSchedule:
    """The fastest of ``name``'s candidate configurations on ``args`` (see the module
    docstring). ``kernels``: the program's
    :class:`~fir.backends.triton.build.TritonKernels`, which launches with its current
    configuration until told (:meth:`~fir.backends.triton.build.TritonKernels.use`)."""
    cache = kernels.cache or Cache("triton")
    entry = f"tune_{tuning_key(kernels, name, sizes)}.json"
    default = kernels.configs[name]
    known = _load(cache, entry, default)
    if known is not None:
        return known
    k = kernels.plan.kernels()[kernels.order.index(name)]
    written = [a.written for a in k.args]
    trial_args = [a.clone() if w else a for a, w in zip(args, written)]
    err = kernels.scratch_error_buffer()
    wide = kernels.index64_at.get(name)  # the index width these sizes take, where it varies
    width = {} if wide is None else {"index64": wide(sizes)}
    best: tuple[float, BlockSchedule] | None = None
    for cfg in candidates(k)[:TRIALS]:
        try:
            kernels.use(name, cfg, direct=False)
            launch = kernels.launchers[name]
            seconds = _time(
                lambda launch=launch: launch(trial_args, sizes, err, **width), kernels.device
            )
        except Exception:  # noqa: BLE001 - a configuration the device cannot run
            if cfg == default:
                raise
            continue
        if best is None or seconds < best[0]:
            best = (seconds, cfg)
    kernels.use(name, default, direct=False)
    chosen = best[1] if best is not None else default
    cache.store(entry, lambda tmp: tmp.write_text(json.dumps(asdict(chosen))))
    return chosen
