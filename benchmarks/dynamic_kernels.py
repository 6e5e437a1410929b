"""Where a symbolic graph's device time goes: one model of ``bench_models.py`` compiled by FIR
with ``dynamic=False`` and with ``dynamic=True`` (float attributes specialised), run at one
length, and each kernel's CUDA time (torch.profiler, mean of 5 steps) side by side with the
kernel at the same position of the static program, with both block schedules.

    python benchmarks/dynamic_kernels.py bert 256 [--traced 96] [--top 12]

``--traced``: the length the dynamic graph is first compiled at (its size hints: a reduction
over a row of symbolic length is shaped at it). Needs a GPU and ``transformers``. Prints a table
(nothing is written to the docs: ``models.md`` quotes it where a section relies on it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def kernel_times(fn: Any, ids: Any, steps: int = 5) -> dict[str, float]:
    """CUDA time a step (us) by kernel name."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn(ids)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn(ids)
        torch.cuda.synchronize()
    return {
        e.key: e.self_device_time_total / steps
        for e in prof.key_averages()
        if e.device_type.name == "CUDA"
    }


def _per_kernel(kernels: Any, times: dict[str, float]) -> dict[str, float]:
    """Each kernel's time (us a step) from the profiler's times by binary name. Kernels the same
    up to their names share one binary (``backends/runtime/triton_kernel_memo.py``), which the
    profiler lists under the first one's name: its time is split evenly among them. (A launch
    that takes a persistent variant runs that variant's binary, also under a kernel's name.)"""
    entry = {}
    for name in kernels.order:
        cubin = kernels.cubins.get(name)
        entry[name] = getattr(cubin, "entry", None) or f"kernel_{name}"
    sharing: dict[str, int] = {}
    for e in entry.values():
        sharing[e] = sharing.get(e, 0) + 1
    return {n: times.get(e, 0.0) / sharing[e] for n, e in entry.items()}


def main() -> int:
    import bench_models as bm
    import torch
    from fir.frontend import dynamo

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(bm.GPU_SHAPES))
    ap.add_argument("length", type=int)
    ap.add_argument("--traced", type=int, default=96)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument(
        "--int64",
        action="store_true",
        help="the dynamic program's kernels in their int64 variant at every launch (what the "
        "index width is worth)",
    )
    args = ap.parse_args()
    torch._dynamo.config.specialize_float = True
    torch._dynamo.config.recompile_limit = 64
    model, vocab = bm._model(args.model, "cuda", torch.bfloat16, False)
    run = bm._forward(model)
    batch = bm.GPU_SHAPES[args.model][0]
    ids = bm._ids(vocab, (batch, args.length), "cuda", seed=args.length)
    programs = {}
    times = {}
    with torch.no_grad():
        for kind, dynamic in (("static", False), ("dynamic", True)):
            start = len(dynamo.COMPILED)
            fn = torch.compile(run, backend="fir", dynamic=dynamic)
            if dynamic:
                fn(bm._ids(vocab, (batch, args.traced), "cuda", seed=args.traced))
                if args.int64:  # before the first call at the measured length picks variants
                    for c in dynamo.COMPILED[start:]:
                        kernels = getattr(c.program, "kernels", None)
                        if kernels is not None:
                            kernels.index64_at = {n: lambda _: True for n in kernels.index64_at}
            fn(ids)
            compiled = [c for c in dynamo.COMPILED[start:] if c.program is not None]
            programs[kind] = [c.program.kernels for c in compiled[-1:]]
            times[kind] = kernel_times(fn, ids)
    (static,), (dynamic,) = programs["static"], programs["dynamic"]
    total = {k: sum(v.values()) for k, v in times.items()}
    width = ", every kernel of it in int64" if args.int64 else ""
    print(f"{args.model} at {args.length} tokens (dynamic traced at {args.traced}{width}):")
    print(f"device time a step: static {total['static']:.0f} us, dynamic {total['dynamic']:.0f} us")
    rows = []
    ta_of, tb_of = _per_kernel(static, times["static"]), _per_kernel(dynamic, times["dynamic"])
    for a, b in zip(static.order, dynamic.order):
        ta, tb = ta_of[a], tb_of[b]
        rows.append((tb - ta, a, ta, b, tb))
    rows.sort(reverse=True)
    print("| static kernel | us | dynamic kernel | us | static schedule | dynamic schedule |")
    print("|---|---|---|---|---|---|")
    for _, a, ta, b, tb in rows[: args.top]:
        sa, sb = static.configs[a].text(), dynamic.configs[b].text()
        made = getattr(dynamic, "variants_made", {}).get(b)
        if made:  # the launches at this length took a persistent variant
            sb += " (launched: " + "; ".join(v.text() for v in made) + ")"
        print(f"| {a} | {ta:.1f} | {b} | {tb:.1f} | {sa} | {sb} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
