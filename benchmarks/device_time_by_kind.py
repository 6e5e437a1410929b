"""Where a model's GPU time goes, by kind of kernel: FIR against Inductor, inference or training.

    python benchmarks/device_time_by_kind.py infer|train MODEL... [--top 30]

Each model of ``bench_models.py`` is compiled by Inductor and by FIR, warmed up, and five steps
of each are profiled (``torch.profiler``, CUDA activity); every kernel is put in one kind
(:func:`kind_of`: GEMM, attention, generated Triton code, ATen, other) and the kinds' time and
launches a step are printed side by side, then each compiler's generated, ATen and other
kernels one by one (FIR's with the nodes they compute). A training step's forward and
backward programs may both have a ``kernel_k1``, whose times the profiler adds up under one
name: in training the forward alone is profiled too, and the backward's kernels are the step's
less the forward's (:func:`split_phases`; the loss and its gradient, eager's kernels, count in
the backward's), each phase's table with its own program's members. A training step is the
forward and backward of ``out.float().square().mean()``, as in ``bench_models.py --mode
train``. ``--sequence`` prints each compiler's kernels of one step in launch order instead
(aligned, so that a kernel stands beside the one that does the same work in the other). Needs a GPU
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


def split_phases(
    step: dict[str, tuple[float, float]], forward: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """The backward's ``(launches, us)`` by kernel name: a training step's less its forward's.
    FIR names a program's kernels ``kernel_k1``, ``kernel_k2`` … in each program, so the
    forward and the backward both have a ``kernel_k1``, which the profiler adds up under one
    name; profiling the forward alone tells them apart."""
    out = {}
    for name, (count, us) in step.items():
        fc, fus = forward.get(name, (0.0, 0.0))
        if count - fc > 1e-6:
            out[name] = (count - fc, max(0.0, us - fus))
    return out


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


def kernel_sequence(step: Callable[[], Any]) -> list[tuple[str, float]]:
    """The kernels of one step in the order they ran, each with its median time (us) over
    STEPS profiled steps, position by position (a step launches the same kernels each time)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    events = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda e: e.time_range.start,
    )
    n = len(events) // STEPS
    out = []
    for k in range(n):
        times = sorted(
            events[k + s * n].time_range.end - events[k + s * n].time_range.start
            for s in range(STEPS)
        )
        out.append((events[k].name, times[STEPS // 2]))
    return out


def _token(name: str) -> str:
    """What two kernels must share to be set side by side: the kind of a generated or ATen
    kernel, a library kernel's own name without its epilogue (``bias_``: Inductor's GEMMs
    carry the bias that FIR adds in a generated kernel)."""
    kind = kind_of(name)
    return name.replace("bias_", "") if kind in ("gemm", "attention") else kind


def aligned(
    ind: list[tuple[str, float]], fir: list[tuple[str, float]]
) -> list[tuple[tuple[str, float] | None, tuple[str, float] | None]]:
    """The two sequences of a step's kernels aligned: the library kernels (GEMMs, attention)
    first, with ``difflib`` on their names less the epilogue (:func:`_token`), then between two
    aligned library kernels the others in launch order, each beside the first of the other
    side's of its kind (BERT's attention softmax follows the same f32 GEMM in both; FIR
    launches the value projection before it, Inductor after). A kernel with no counterpart
    stands beside None."""
    import difflib

    def library(seq: list[tuple[str, float]]) -> list[int]:
        return [k for k, (n, _) in enumerate(seq) if kind_of(n) in ("gemm", "attention")]

    la, lb = library(ind), library(fir)
    matcher = difflib.SequenceMatcher(
        None, [_token(ind[k][0]) for k in la], [_token(fir[k][0]) for k in lb], autojunk=False
    )
    anchors = [
        (la[m.a + t], lb[m.b + t]) for m in matcher.get_matching_blocks() for t in range(m.size)
    ]
    out: list[tuple[tuple[str, float] | None, tuple[str, float] | None]] = []
    i0 = j0 = 0
    for i1, j1 in [*anchors, (len(ind), len(fir))]:
        left = list(range(i0, i1))
        for j in range(j0, j1):
            token = _token(fir[j][0])
            k = next((i for i in left if _token(ind[i][0]) == token), None)
            if k is None:
                out.append((None, fir[j]))
                continue
            while left[0] != k:
                out.append((ind[left.pop(0)], None))
            out.append((ind[left.pop(0)], fir[j]))
        out.extend((ind[i], None) for i in left)
        if i1 < len(ind) and j1 < len(fir):
            out.append((ind[i1], fir[j1]))
        i0, j0 = i1 + 1, j1 + 1
    return out


def sequences(name: str, mode: str) -> None:
    """Both compilers' kernels of one step in launch order, aligned (:func:`aligned`) so that
    a kernel stands beside the one doing the same work (BERT's attention softmax beside
    Inductor's: both follow the same f32 GEMM)."""
    seqs = {}
    for label, step in steppers(name, mode).items():
        if label.endswith("forward"):
            continue
        for _ in range(3):
            step()
        seqs[label] = kernel_sequence(step)
    ind, fir = seqs["Inductor"], seqs["FIR"]
    print(f"\n## {name} ({mode}): {len(ind)} kernels a step in Inductor, {len(fir)} in FIR")
    print(
        f"device us a step: Inductor {sum(t for _, t in ind):.1f}, FIR {sum(t for _, t in fir):.1f}"
    )
    print("| Inductor | us | FIR | us | FIR / Inductor |\n|---|---|---|---|---|")
    for left, right in aligned(ind, fir):
        cells = [f"`{k[0][:60]}` | {k[1]:.1f}" if k else "– | –" for k in (left, right)]
        ratio = f"{right[1] / left[1]:.2f}" if left and right and left[1] > 0 else "–"
        print(f"| {cells[0]} | {cells[1]} | {ratio} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("infer", "train"))
    ap.add_argument("models", nargs="+")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument(
        "--sequence",
        action="store_true",
        help="print each compiler's kernels of one step in launch order instead",
    )
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("device_time_by_kind.py needs a GPU")
    for name in args.models:
        if args.sequence:
            sequences(name, args.mode)
        else:
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

    def stepper(fn: Callable[[Any], Any], phase: str) -> Callable[[], Any]:
        def infer() -> None:
            with torch.no_grad():
                fn(ids)

        def forward() -> None:  # a training step's forward program alone
            fn(ids)

        def train() -> None:
            for p in params:
                p.grad = None
            fn(ids).float().square().mean().backward()

        return {"infer": infer, "forward": forward, "train": train}[phase]

    compiled = {"Inductor": torch.compile(run), "FIR": torch.compile(run, backend="fir")}
    out = {label: stepper(fn, mode) for label, fn in compiled.items()}
    if mode == "train":
        out |= {f"{label} forward": stepper(fn, "forward") for label, fn in compiled.items()}
    return out


def report(name: str, mode: str, top: int) -> None:
    import torch
    from fir.frontend import dynamo as fb

    steps = steppers(name, mode)
    for step in steps.values():
        for _ in range(4):
            step()
    torch.cuda.synchronize()
    members: dict[str, dict[str, list[str]]] = collections.defaultdict(dict)
    for c in fb.COMPILED:  # FIR's kernels' members, by program kind
        if c.program is not None and hasattr(c.program, "plan"):
            for k in c.program.plan.kernels():
                members[c.kind]["kernel_" + k.name] = list(k.members)[:6]
    times = {label: kernel_times(step) for label, step in steps.items()}
    tables = {label: t for label, t in times.items() if not label.endswith(" forward")}
    if mode == "train":
        for label in ("Inductor", "FIR"):
            tables[f"{label} forward"] = times[f"{label} forward"]
            tables[f"{label} backward"] = split_phases(times[label], times[f"{label} forward"])
    print(f"## {name} ({mode}), per step")
    for label, t in tables.items():
        total = sum(us for _, us in t.values()) / 1e3
        launches = sum(c for c, _ in t.values())
        kinds = ", ".join(f"{k} {us / 1e3:.3f} ms / {c:.0f}" for k, (c, us) in by_kind(t).items())
        print(f"{label}: {total:.3f} ms, {launches:.0f} launches; {kinds}")
    for label, t in tables.items():
        if mode == "train" and label in ("Inductor", "FIR"):
            continue  # the phases' tables name each kernel's program
        print(f"-- {label}: generated, ATen and other kernels (launches, us, us each)")
        rows = sorted(
            ((us, c, n) for n, (c, us) in t.items() if kind_of(n) not in ("gemm", "attention")),
            reverse=True,
        )
        kind = {"FIR": "inference", "FIR forward": "forward", "FIR backward": "backward"}
        of = members.get(kind.get(label, ""), {})
        for us, c, n in rows[:top]:
            what = of.get(n.split("(")[0].strip(), "")
            print(f"   {c:5.1f} {us:8.1f} {us / c:7.2f}  {n[:80]}  {what}")


if __name__ == "__main__":
    main()
