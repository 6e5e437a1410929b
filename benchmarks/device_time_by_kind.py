"""Where a model's GPU time goes, by kind of kernel: FIR against Inductor, inference or training.

    python benchmarks/device_time_by_kind.py infer|train MODEL... [--top 30]

Each model of ``bench_models.py`` is compiled by Inductor and by FIR, warmed up, and five steps
of each are profiled (``torch.profiler``, CUDA activity); every kernel is put in one kind
(:func:`kind_of`: GEMM, attention, generated Triton code, ATen, other) and the kinds' time and
launches a step are printed side by side, then each compiler's generated, ATen and other
kernels one by one (FIR's with the nodes they compute; a training step's forward and
backward programs may both have a ``kernel_k1``, whose times the profiler adds up under one
name and whose members are the last program's). A training step is the forward and
backward of ``out.float().square().mean()``, as in ``bench_models.py --mode train``. Needs a GPU
and ``transformers``; prints tables (``docs/benchmarks/models.md`` quotes them where a note
relies on them: the tenth session's training figures).
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

GEMM_PREFIXES = ("nvjet", "sm80_xmma", "sm90_xmma", "cutlass", "void cutlass", "_mm_t_kernel")
ATTENTION_MARKS = ("sdpa", "flash", "fmha")
STEPS = 5


def kind_of(name: str) -> str:
    """The kind of a CUDA kernel, by its name: ``gemm`` (cuBLAS, CUTLASS, FIR's ``fir.mm_t``),
    ``attention`` (cuDNN's and the flash kernels), ``generated`` (FIR's ``kernel_*`` and
    Inductor's ``triton_*``), ``aten`` (PyTorch's own kernels) or ``other`` (copies, memsets)."""
    if name.startswith(GEMM_PREFIXES) or "gemm" in name.lower():
        return "gemm"
    if any(m in name for m in ATTENTION_MARKS):
        return "attention"
    if name.startswith(("triton", "kernel")):
        return "generated"
    if "at::native" in name:
        return "aten"
    return "other"


def by_kind(times: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """``(launches, us)`` a step by kernel name summed by :func:`kind_of`."""
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for name, (count, us) in times.items():
        k = out[kind_of(name)]
        k[0] += count
        k[1] += us
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def kernel_times(step: Callable[[], Any]) -> dict[str, tuple[float, float]]:
    """``(launches, us)`` a step by kernel name, from STEPS profiled steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            d = out[e.name[:90]]
            d[0] += 1
            d[1] += e.time_range.end - e.time_range.start
    return {n: (c / STEPS, us / STEPS) for n, (c, us) in out.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("infer", "train"))
    ap.add_argument("models", nargs="+")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("device_time_by_kind.py needs a GPU")
    for name in args.models:
        report(name, args.mode, args.top)


def steppers(name: str, mode: str) -> dict[str, Callable[[], Any]]:
    """A step of ``name`` compiled by Inductor and by FIR."""
    import bench_models as bm
    import torch

    torch._dynamo.reset()
    model, vocab = bm._model(name, "cuda", torch.bfloat16, False)
    run = bm._forward(model)
    ids = bm._ids(vocab, bm.GPU_SHAPES[name], "cuda")
    params = [p for p in model.parameters() if p.requires_grad]

    def stepper(fn: Callable[[Any], Any]) -> Callable[[], Any]:
        def infer() -> None:
            with torch.no_grad():
                fn(ids)

        def train() -> None:
            for p in params:
                p.grad = None
            fn(ids).float().square().mean().backward()

        return infer if mode == "infer" else train

    return {
        "Inductor": stepper(torch.compile(run)),
        "FIR": stepper(torch.compile(run, backend="fir")),
    }


def report(name: str, mode: str, top: int) -> None:
    import torch
    from fir.frontend import dynamo as fb

    steps = steppers(name, mode)
    for step in steps.values():
        for _ in range(4):
            step()
    torch.cuda.synchronize()
    members = {
        "kernel_" + k.name: list(k.members)[:6]
        for c in fb.COMPILED
        if c.program is not None and hasattr(c.program, "plan")
        for k in c.program.plan.kernels()
    }
    times = {label: kernel_times(step) for label, step in steps.items()}
    print(f"## {name} ({mode}), per step")
    for label, t in times.items():
        total = sum(us for _, us in t.values()) / 1e3
        launches = sum(c for c, _ in t.values())
        kinds = ", ".join(f"{k} {us / 1e3:.3f} ms / {c:.0f}" for k, (c, us) in by_kind(t).items())
        print(f"{label}: {total:.3f} ms, {launches:.0f} launches; {kinds}")
    for label, t in times.items():
        print(f"-- {label}: generated, ATen and other kernels (launches, us, us each)")
        rows = sorted(
            ((us, c, n) for n, (c, us) in t.items() if kind_of(n) not in ("gemm", "attention")),
            reverse=True,
        )
        for us, c, n in rows[:top]:
            what = members.get(n.split("(")[0].strip(), "") if label == "FIR" else ""
            print(f"   {c:5.1f} {us:8.1f} {us / c:7.2f}  {n[:80]}  {what}")


if __name__ == "__main__":
    main()
