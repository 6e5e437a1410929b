"""Tensor parallelism on two devices: one transformer block, sharded with PyTorch's own
tensor-parallel API, compiled by FIR and by Inductor, against eager (issue 18).

    torchrun --nproc-per-node 2 benchmarks/bench_tp.py          # two GPUs, NCCL, bf16
    python benchmarks/bench_tp.py --cpu-smoke                    # two CPU processes, gloo

The block: rms_norm, attention (q, k, v projections column-parallel, the output projection
row-parallel, ``scaled_dot_product_attention`` over the local heads), residual, rms_norm, an
MLP (up column-parallel, gelu, down row-parallel), residual. ``parallelize_module`` shards the
linear layers; each row-parallel layer ends in an all-reduce, which Dynamo traces as a
functional collective (``_c10d_functional.all_reduce`` and ``wait_tensor``). Each rank's graph
is compiled with ``backend="fir"`` and with Inductor; the report gives, per compiler, the
graph count and graph breaks per rank, the step time (median of rounds in which the compilers
take turns going first, eager timed apart, all ranks
synchronised) and the largest difference from the same block run unsharded on one device.
On CUDA (not ``--cpu-smoke``) the table goes to docs/benchmarks/multi-gpu.md.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "multi-gpu.md"


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:  # the local heads: -1, not a fixed count
            return y.view(b, t, -1, self.head_dim).transpose(1, 2)

        a = F.scaled_dot_product_attention(
            heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), is_causal=True
        )
        return self.o(a.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(hidden, eps=1e-6)
        self.attn = Attention(hidden, heads)
        self.norm2 = nn.RMSNorm(hidden, eps=1e-6)
        self.mlp = MLP(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attn(self.norm1(x))
        return h + self.mlp(self.norm2(h))


PLAN = {
    "attn.q": "col",
    "attn.k": "col",
    "attn.v": "col",
    "attn.o": "row",
    "mlp.up": "col",
    "mlp.down": "row",
}


def shard(block: Block, device: str) -> Block:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh(device, (dist.get_world_size(),))
    styles = {k: ColwiseParallel() if v == "col" else RowwiseParallel() for k, v in PLAN.items()}
    return parallelize_module(block, mesh, styles)  # type: ignore[return-value]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    dist.barrier()


def step_time(fn: Any, x: torch.Tensor, device: str, steps: int) -> float:
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        fn(x)
    _sync(device)
    return (time.perf_counter() - start) / steps


def profile(runners: dict[str, Any], x: torch.Tensor, device: str, steps: int) -> str:
    """Where each compiler's step spends its device time: the ops with the most self time on
    the device (CUDA kernels, NCCL's included), per step, from ``torch.profiler``. Every rank
    runs the same steps (their collectives pair up); the caller prints rank 0's."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    out: list[str] = []
    for name, f in runners.items():
        _sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            f(x)
        host = (time.perf_counter() - start) / steps  # until the last call returns
        _sync(device)
        with torch_profile(activities=activities) as prof:
            for _ in range(steps):
                f(x)
            _sync(device)
        kernels, calls = [], []
        for e in prof.key_averages():
            on_device = "cuda" in str(getattr(e, "device_type", "")).lower()
            if e.key.startswith("nccl:"):  # NCCL's range around its kernel: counted twice
                continue
            if device == "cuda" and on_device:  # kernels and copies, not the ops that launch them
                us = getattr(e, "self_device_time_total", None)
                kernels.append((us if us is not None else e.self_cuda_time_total, e))
            elif not on_device:
                calls.append((e.self_cpu_time_total, e))
        if device == "cuda":
            out.append(device_timeline(prof, name, steps))
        out.append(
            f"{name}: host {host * 1e3:.3f} ms per step (until the calls return), "
            f"device {sum(u for u, _ in kernels) / steps / 1e3:.3f} ms of kernels per step"
        )
        for title, rows in (("kernels", kernels), ("host, self time", calls)):
            rows.sort(key=lambda r: -r[0])
            out.append(f"  {title}:")
            for us, e in rows[:12]:
                out.append(f"  {us / steps:9.1f} us  x{e.count / steps:g}  {e.key[:100]}")
    return "\n".join(out)


def device_timeline(prof: Any, name: str, steps: int) -> str:
    """Where the device idles: the profiled steps' span from the first kernel's start to the
    last one's end, the time some kernel (or copy) runs in it, and the largest idle gaps
    between one kernel's end and the next start, summed over the pairs of kernels around
    them. A step slower than its kernels is slower in these gaps."""
    spans = []
    for e in prof.events():
        if "cuda" not in str(getattr(e, "device_type", "")).lower() or e.name.startswith("nccl:"):
            continue
        spans.append((e.time_range.start, e.time_range.end, e.name[:48]))
    if not spans:
        return f"{name}: no device events"
    spans.sort()
    busy, gaps = 0.0, {}
    single: list[tuple[float, float]] = []
    cur_start, cur_end, cur_name = spans[0]
    for start, end, kernel in spans[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            pair = f"{cur_name} -> {kernel}"
            gaps[pair] = gaps.get(pair, 0.0) + start - cur_end
            single.append((start - cur_end, cur_end - spans[0][0]))
            cur_start = start
        if end >= cur_end:
            cur_end, cur_name = end, kernel
    busy += cur_end - cur_start
    whole = cur_end - spans[0][0]
    lines = [
        f"{name}: device span {whole / steps:.0f} us per step, busy {busy / steps:.0f} us, "
        f"idle {(whole - busy) / steps:.0f} us; largest idle gaps per step:"
    ]
    for pair, us in sorted(gaps.items(), key=lambda g: -g[1])[:6]:
        lines.append(f"  {us / steps:9.1f} us  {pair}")
    # when: a start-up gap (the host's first launches) against one in every step
    largest = sorted(single, key=lambda g: -g[0])[:8]
    lines.append(
        "  largest single gaps (us at us from the first kernel): "
        + ", ".join(f"{us:.0f} at {at:.0f}" for us, at in largest)
    )
    return "\n".join(lines)


def fir_host_split(f: Any, graph: Any, x: torch.Tensor, device: str, steps: int) -> str:
    """Where FIR's host time per step goes: inside its compiled program (the runtime, timed
    by wrapping the program) against the whole call (Dynamo's guards, AOTAutograd's and
    DTensor's wrappers around it); then the program's own steps, one by one (its generated
    call, timed step by step). ``graph``: FIR's compiled graph that ``f`` runs."""
    program = graph.program
    spent = [0.0]

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return program(*args)
        finally:
            spent[0] += time.perf_counter() - start

    graph.program = timed
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        f(x)
    whole = (time.perf_counter() - start) / steps
    _sync(device)
    graph.program = program
    lines = [
        f"fir host per step: {whole * 1e6:.0f} us in all, {spent[0] / steps * 1e6:.0f} us in "
        "FIR's program (the fast path)"
    ]
    program.step_times = []
    _sync(device)
    for _ in range(steps):
        f(x)
    _sync(device)
    times, program.step_times = program.step_times, None
    n = len(program.plan.steps)
    per_step = [sum(times[k::n]) / steps for k in range(n)]
    lines.append(f"  timed step by step: {sum(per_step) * 1e6:.0f} us per call; by step:")
    for k in sorted(range(n), key=lambda k: -per_step[k])[:8]:
        lines.append(f"  {per_step[k] * 1e6:8.1f} us  step {k}: {_describe(program.plan.steps[k])}")
    fast = getattr(program, "fast", None)
    if fast is not None:  # what those microseconds run: the program's generated call
        lines += ["FIR's generated call:", fast.source]
    return "\n".join(lines)


def _describe(step: Any) -> str:
    node = getattr(step, "node", None)
    if node is not None:
        return f"extern {node.callee}"
    plan = getattr(step, "plan", None)
    return f"kernel {plan.name}" if plan is not None else "view"


def _counts(per_rank: list[tuple[int, int]]) -> str:
    """Graphs / breaks on each rank, rank 0 first."""
    return ", ".join(f"{graphs} / {breaks}" for graphs, breaks in per_rank)


def _steps(module: Any) -> list[str]:
    """What the compiled program runs, in order: fused kernels, loop nodes, extern calls (views
    are aliases: they run nothing)."""
    from fir.ir.graph import AliasNode, ExternNode

    out: list[str] = []
    for f in module.funcs:
        kernel_of = f.kernel_of()
        seen: set[int] = set()
        for n in f.nodes:
            if isinstance(n, AliasNode):  # a view of a buffer: nothing runs
                continue
            k = kernel_of.get(id(n))
            if k is not None:
                if id(k) not in seen:
                    seen.add(id(k))
                    out.append(f"kernel @{k.name} ({len(k.nodes)} nodes)")
            elif isinstance(n, ExternNode):
                out.append(n.callee)
            else:
                out.append(f"loop %{n.results[0].name}")
    return out


def compile_counted(
    block: Block, backend: str, pipeline: str | None = None
) -> tuple[Any, dict[str, int]]:
    """``block`` compiled by ``backend`` (FIR's with ``pipeline`` where given), and a record of
    the graphs its backend received."""
    seen = {"graphs": 0}
    if backend == "fir":
        from fir.frontend.dynamo import fir_backend

        options = {"pipeline": pipeline} if pipeline else None

        def target(gm: Any, example_inputs: Any) -> Any:
            return fir_backend(gm, example_inputs, options=options)
    else:
        from torch._inductor.compile_fx import compile_fx as target

    def counting(gm: Any, example_inputs: Any) -> Any:
        seen["graphs"] += 1
        return target(gm, example_inputs)

    return torch.compile(block, backend=counting), seen


def run(args: argparse.Namespace) -> None:
    smoke = args.cpu_smoke
    device = "cpu" if smoke else "cuda"
    rank = dist.get_rank()
    if device == "cuda":
        torch.cuda.set_device(rank)
    dtype = torch.float32 if smoke else torch.bfloat16
    hidden, heads, tokens = (64, 4, 16) if smoke else (args.hidden, args.heads, args.tokens)
    torch.manual_seed(0)
    full = Block(hidden, heads).to(device=device, dtype=dtype)
    reference = copy.deepcopy(full)
    block = shard(full, device)
    x = torch.randn(1, tokens, hidden, device=device, dtype=dtype)
    with torch.no_grad():
        want = reference(x)
        rows: dict[str, dict[str, Any]] = {}
        runners: dict[str, Any] = {"eager": block}
        from fir.frontend.dynamo import COMPILED, FALLBACKS
        from fir.frontend.explain import wait_placement

        fir_graph = None
        variants = dict(v.split("=", 1) for v in args.fir_variant)
        compilers = ["inductor", "fir", *(f"fir {name}" for name in variants)]
        # one reset before all: a reset between them would empty the cache of the compilers
        # already built, and each would compile again at its next call (a second FIR graph
        # that the host profile below would not see)
        torch._dynamo.reset()
        for backend in compilers:
            torch._dynamo.utils.counters.clear()
            before = len(FALLBACKS)
            start = time.perf_counter()
            try:
                engine, _, variant = backend.partition(" ")
                compiled, seen = compile_counted(block, engine, variants.get(variant))
                out = compiled(x)
            except Exception as e:  # one compiler's failure is a row of the report, not a crash
                rows[backend] = {"failed": f"{type(e).__name__}: {str(e)[:300]}"}
                print(f"rank {rank}: {backend} failed: {e}", file=sys.stderr)
                continue
            breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
            if backend == "fir" and COMPILED:
                fir_graph = COMPILED[-1]
                module = fir_graph.module
                rows["fir_ir"] = {
                    "waits": [w for f in module.funcs for w in wait_placement(f)],
                    "steps": _steps(module),
                }
            rows[backend] = {
                "graphs": seen["graphs"],
                "breaks": breaks,
                "error": (out.float() - want.float()).abs().max().item(),
                "pytorch": len(FALLBACKS) - before,  # FIR graphs PyTorch ran instead
                "compile_s": time.perf_counter() - start,
            }
            runners[backend] = compiled
        # a compiler that failed on any rank is timed on none: the others would wait for it in
        # their collectives
        for backend in compilers:
            failed = torch.tensor([float(backend not in runners)], device=device)
            dist.all_reduce(failed, op=dist.ReduceOp.MAX)
            if failed.item() and backend in runners:
                del runners[backend]
                rows[backend] = {"failed": "failed on another rank"}
        rows["eager"] = {
            "graphs": 0,
            "breaks": 0,
            "error": (block(x) - want).abs().max().item(),
            "pytorch": 0,
        }
        # every rank's counts and error, so that the table shows each rank's, not rank 0's
        mine = {k: r for k, r in rows.items() if "graphs" in r}
        everyone: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        for k in mine:
            theirs = [other[k] for other in everyone if k in other]
            rows[k]["per_rank"] = [(r["graphs"], r["breaks"]) for r in theirs]
            rows[k]["pytorch"] = sum(r["pytorch"] for r in theirs)
            rows[k]["error"] = max(r["error"] for r in theirs)
        times: dict[str, list[float]] = {k: [] for k in runners}
        for f in runners.values():
            step_time(f, x, device, 3)
        # eager is timed on its own: its host-bound steps leave the GPU cooler, and whichever
        # compiler came right after it would start with faster clocks
        order = [k for k in runners if k != "eager"]
        for _ in range(args.rounds):
            times["eager"].append(step_time(block, x, device, args.steps))
        if args.noise and "inductor" in runners:
            # the same compiled Inductor timed once more per round: the ratio of two timings of
            # one program is the noise floor a FIR/Inductor ratio is read against
            order.append("inductor again")
            times["inductor again"] = []
        for r in range(args.rounds):
            # each round starts with the next compiler: none always runs right after another
            # (clocks settle under load; the one timed after a cool-down would gain)
            for k in order[r % len(order) :] + order[: r % len(order)]:
                f = runners[k.removesuffix(" again")]
                step_time(f, x, device, 3)  # untimed: each timing starts in its own steady state
                times[k].append(step_time(f, x, device, args.steps))
        profiled = profile(runners, x, device, args.steps) if args.profile else ""
        if args.profile and "fir" in runners and fir_graph is not None:
            profiled += "\n" + fir_host_split(runners["fir"], fir_graph, x, device, 10)
    for k in runners:
        rows[k]["ms"] = statistics.median(times[k]) * 1e3
    for k in times:  # the spread of each FIR's ratio to Inductor, round by round
        if k.startswith("fir") and "inductor" in times:
            rows[k]["rounds"] = sorted(f / i for f, i in zip(times[k], times["inductor"]))
    if "inductor again" in times:
        rows["inductor"]["rounds"] = sorted(
            a / i for a, i in zip(times["inductor again"], times["inductor"])
        )
    if rank == 0 and profiled:
        print(profiled)
    if rank == 0:
        report(rows, device, hidden, heads, tokens, dtype, smoke)


def report(
    rows: dict[str, dict[str, Any]],
    device: str,
    hidden: int,
    heads: int,
    tokens: int,
    dtype: torch.dtype,
    smoke: bool,
) -> None:
    lines = [
        "| compiler | graphs / breaks per rank | graphs run by PyTorch | step | vs Inductor "
        "| max abs diff vs unsharded (all ranks) |",
        "|---|---|---|---|---|---|",
    ]
    base = rows["inductor"].get("ms") or rows["eager"]["ms"]
    for k in ("eager", "inductor", "fir", *sorted(k for k in rows if k.startswith("fir "))):
        r = rows[k]
        if "failed" in r:
            lines.append(f"| {k} | failed: {r['failed']} | | | | |")
            continue
        first = f" (first call {r['compile_s']:.1f} s)" if "compile_s" in r else ""
        lines.append(
            f"| {k} | {_counts(r['per_rank'])} | {r['pytorch']} | {r['ms']:.3f} ms"
            f"{first} | {r['ms'] / base:.2f} | {r['error']:.3g} |"
        )
    for k, r in rows.items():
        ratios = r.get("rounds") if k.startswith("fir") else None
        if ratios:
            lines += [
                "",
                f"{k.replace('fir', 'FIR', 1)} against Inductor round by round ({len(ratios)} "
                f"rounds, each compiler first in turn, sorted; median "
                f"{statistics.median(ratios):.3f}): " + ", ".join(f"{q:.3f}" for q in ratios),
            ]
    again = rows["inductor"].get("rounds")
    if again:  # --noise
        lines += [
            "",
            f"Inductor against itself, timed twice per round (the noise floor; median "
            f"{statistics.median(again):.3f}): " + ", ".join(f"{r:.3f}" for r in again),
        ]
    ir = rows.get("fir_ir")
    if ir:
        lines += ["", "FIR's program on rank 0, in order:", ""]
        lines += [f"{k}. {step}" for k, step in enumerate(ir["steps"], 1)]
        lines += ["", "Where each wait stands (`fir.explain`):", ""]
        lines += [f"- {w}" for w in ir["waits"]] or ["- (no collective)"]
    table = "\n".join(lines)
    print(table)
    if smoke:
        return
    name = torch.cuda.get_device_name()
    # the hand-written notes (from "## Notes" on) survive a rerun
    old = DOC.read_text() if DOC.exists() else ""
    notes = old[old.find("\n## Notes\n") :] if "\n## Notes\n" in old else ""
    DOC.write_text(
        "# Tensor parallelism on two GPUs\n\n"
        f"Generated by `torchrun --nproc-per-node 2 benchmarks/bench_tp.py` on 2 x {name}, "
        f"NCCL, torch {torch.__version__}, Python {platform.python_version()}: one transformer "
        f"block (hidden {hidden}, {heads} heads, {tokens} tokens, {dtype}), sharded with "
        "`parallelize_module` (q/k/v and MLP up column-parallel, attention output and MLP down "
        "row-parallel).\n\n" + table + "\n" + notes
    )


def _spawned(rank: int, world: int, args: argparse.Namespace, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        run(args)
    finally:
        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="2 CPU processes, gloo, tiny sizes")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print each step's device time by op")
    ap.add_argument(
        "--noise", action="store_true", help="time Inductor twice per round: the noise floor"
    )
    ap.add_argument(
        "--fir-variant",
        action="append",
        default=[],
        metavar="NAME=PIPELINE",
        help="also time FIR compiled with this pass pipeline (a row 'fir NAME'; repeatable)",
    )
    args = ap.parse_args()
    for variant in args.fir_variant:
        name, eq, pipeline = variant.partition("=")
        if not (name and eq and pipeline) or " " in name:
            ap.error(f"--fir-variant wants NAME=PIPELINE (one word before '='), not {variant!r}")
    if "RANK" in os.environ:  # under torchrun
        # a rank whose compile failed inside the first call leaves the other one waiting in
        # a collective: NCCL's watchdog ends the job after two minutes instead of NCCL's ten
        dist.init_process_group(
            "gloo" if args.cpu_smoke else "nccl", timeout=datetime.timedelta(seconds=120)
        )
        try:
            run(args)
        finally:
            dist.destroy_process_group()
        return
    if not args.cpu_smoke:
        print("bench_tp: launch with torchrun --nproc-per-node 2 (or --cpu-smoke)", file=sys.stderr)
        sys.exit(1)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_spawned, args=(2, args, port), nprocs=2)


if __name__ == "__main__":
    main()
