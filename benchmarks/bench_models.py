"""Real models: FIR against eager PyTorch and Inductor, end to end, one mode per run.

    python benchmarks/bench_models.py --mode gpu        # bf16 inference on a GPU
    python benchmarks/bench_models.py --mode graphs     # FIR cuda_graphs vs Inductor reduce-overhead
    python benchmarks/bench_models.py --mode train      # bf16 forward + backward on a GPU
    python benchmarks/bench_models.py --mode cpu        # fp32 inference, FIR-cpp and FIR-llvm
    python benchmarks/bench_models.py --mode dynamic    # dynamic=True, 5 lengths, one compile
    python benchmarks/bench_models.py --mode cpu-dynamic  # the same on the CPU (fp32, FIR-cpp)
    python benchmarks/bench_models.py --cpu-smoke      # every mode's logic, tiny models, CPU

The models are those of ``hf_models.py`` (random weights; ``transformers`` is a benchmark-only
extra). Each mode's table replaces its own section of ``docs/benchmarks/models.md``; the other
sections and the hand-written notes stay.

How it measures (docs/benchmarks/models.md repeats it):

* **step**: the wall time of a step as a user sees it: ``calls`` steps queued back to back, then
  one wait, divided by ``calls`` (a host-bound step shows its host time, a device-bound one its
  device time). Every column is timed in turn for ``rounds`` rounds (the machine's noise hits all
  alike) and the figure is the median of the round figures. **Inductor'** is Inductor timed in a
  second slot of the same rounds: Inductor' / Inductor is the run's noise floor.
* **host**: the median time a step's call takes to return after the device went idle (what the
  Python side, the wrapper and the launches cost), sampled in the same interleaved rounds; **device**: the sum of the step's device
  kernels' durations from ``torch.profiler``; **launches**: device kernels and copies per step.
* **cold**: the first call in this process with empty compiler caches (FIR's, Inductor's,
  Triton's in fresh temporary folders), compile included, minus a step.
* **max diff**: the largest absolute difference of the output (training: of the gradients)
  against eager's; Inductor's is the error a compiler may have.
* **ref err**: the same against the model run eagerly in a wider dtype (f32 for a bf16 model, f64
  for an f32 one; same weights and input): each column's own error, eager's included. A bf16
  result differs from eager's by a rounding either way; this says which is nearer the exact
  value (Llama's gradients: max diff 1.91e-5 for FIR against Inductor's 1.57e-5, both 1.6e-5
  from the f32 gradients, eager too).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks" / "models.md"
MODES = ("gpu", "graphs", "train", "cpu", "dynamic", "cpu-dynamic")

# (batch, sequence length) per model: the GPU shapes, smaller ones on the CPU
GPU_SHAPES = {"gpt2": (8, 512), "llama": (4, 512), "bert": (8, 256), "t5": (8, 512)}
CPU_SHAPES = {"gpt2": (2, 128), "llama": (1, 128), "bert": (2, 128), "t5": (2, 128)}
SMOKE_SHAPES = {"gpt2": (2, 16), "llama": (1, 16), "bert": (2, 16), "t5": (2, 16)}
DYNAMIC_LENGTHS = (64, 96, 128, 200, 256)
SMOKE_LENGTHS = (8, 12, 16)
HOST_SAMPLES = 3  # host-time samples of each column in each round (Bench.interleaved)


def _fresh_caches() -> None:
    """Every compiler's cache in a new temporary folder: the cold compiles are cold."""
    root = tempfile.mkdtemp(prefix="bench_models_")
    for var, sub in (
        ("FIR_CACHE_DIR", "fir"),
        ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
        ("TRITON_CACHE_DIR", "triton"),
    ):
        os.environ.setdefault(var, os.path.join(root, sub))


@dataclass
class Column:
    """One way of running a model: its step function and what was measured of it."""

    name: str
    step: Callable[[], Any]
    cold: float | None = None  # seconds
    times: list[float] = field(default_factory=list)
    host: float | None = None
    host_times: list[float] = field(default_factory=list)  # seconds, sampled in the rounds
    device: float | None = None
    launches: float | None = None
    diff: float | None = None
    ref_err: float | None = None  # against the model in a wider dtype (module docstring)
    kernels: list[tuple[str, float]] = field(default_factory=list)  # (name, ms per step)

    @property
    def time(self) -> float:
        return statistics.median(self.times)


@dataclass
class Bench:
    device: str
    rounds: int
    calls: int
    profile: bool

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def steps(self, step: Callable[[], Any]) -> float:
        """Seconds per step of ``calls`` steps queued back to back, then one wait."""
        self.sync()
        t = time.perf_counter()
        for _ in range(self.calls):
            step()
        self.sync()
        return (time.perf_counter() - t) / self.calls

    def host_samples(self, step: Callable[[], Any], n: int) -> list[float]:
        """Seconds each of ``n`` calls takes to return with the device idle when it starts."""
        times = []
        for _ in range(n):
            self.sync()
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        self.sync()
        return times

    def host(self, step: Callable[[], Any]) -> float:
        """Median seconds a call takes to return with the device idle when it starts."""
        return statistics.median(self.host_samples(step, max(3, self.calls)))

    def first(self, col: Column, make: Callable[[], Any]) -> Any:
        """The first call (compiling) and its seconds beyond a step: ``col.cold``."""
        self.sync()
        t = time.perf_counter()
        out = _detached(make())
        self.sync()
        first = time.perf_counter() - t
        col.cold = max(first - self.steps(col.step), 0.0)
        return out

    def interleaved(self, cols: list[Column], host: bool = True) -> None:
        for c in cols:  # warm
            c.step()
        # the compiles just made leave Python's collector a full (oldest-generation) collection
        # due: on an H200's host it took 0.7-0.9 s with about a million objects alive, and it
        # fell into the first timed round of whichever column ran next. Collect it here.
        gc.collect()
        for _ in range(self.rounds):
            for c in cols:
                c.times.append(self.steps(c.step))
                # the host time in the same rounds: a host's noise (another tenant, a slow
                # loan) comes and goes, and falls on every column alike. Taken one column
                # after another after the rounds, GPT-2's host was 5.51 ms for FIR against
                # 5.00 for Inductor on one H200 loan, 4.61 against 5.76 on another
                if host:
                    c.host_times += self.host_samples(c.step, HOST_SAMPLES)

    def profiled(self, col: Column, steps: int = 3) -> None:
        """Device kernel time, launches and the top kernels per step, from torch.profiler."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        col.host = statistics.median(col.host_times) if col.host_times else self.host(col.step)
        if self.device != "cuda" or not self.profile:
            return
        self.sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                col.step()
            self.sync()
        per: dict[str, float] = {}
        count = 0
        for e in prof.events():
            if e.device_type != torch.autograd.DeviceType.CUDA:
                continue
            count += 1
            per[e.name] = per.get(e.name, 0.0) + e.time_range.elapsed_us() / 1e3 / steps
        col.launches = count / steps
        col.device = sum(per.values()) / 1e3
        col.kernels = sorted(per.items(), key=lambda kv: -kv[1])[:8]


def _detached(out: Any) -> Any:
    """A copy of a call's tensors: CUDA-graph replays (reduce-overhead, cuda_graphs) write the
    next step's results where this step's were."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_detached(x) for x in out)
    return out


def _max_diff(got: Any, want: Any) -> float:
    import torch

    gs = list(got) if isinstance(got, (tuple, list)) else [got]
    ws = list(want) if isinstance(want, (tuple, list)) else [want]
    worst = 0.0
    for g, w in zip(gs, ws):
        if isinstance(g, torch.Tensor) and g.numel():
            worst = max(worst, (g.double() - w.double()).abs().max().item())
    return worst


def _wider(model: Any) -> Any:
    """A copy of ``model`` in the next wider float dtype: f32 for f16/bf16, f64 for f32."""
    import copy

    import torch

    dtype = next(model.parameters()).dtype
    return copy.deepcopy(model).to(torch.float64 if dtype == torch.float32 else torch.float32)


# --------------------------------------------------------------------------------------------
# the models in each mode


def _model(name: str, device: str, dtype: Any, smoke: bool) -> tuple[Any, int]:
    sys.path.insert(0, str(HERE))
    import hf_models

    model, vocab = hf_models.build(name, small=smoke)
    return model.to(device, dtype), vocab


def _ids(vocab: int, shape: tuple[int, int], device: str, seed: int = 0) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g).to(device)


def _forward(model: Any) -> Callable[[Any], Any]:
    import hf_models

    return hf_models.forward(model)


def _compiled(run: Callable[..., Any], kind: str, **kw: Any) -> Callable[..., Any]:
    import torch

    if kind == "inductor":
        return torch.compile(run, **kw)
    return torch.compile(run, backend="fir", **kw)


def inference(
    bench: Bench, name: str, shape: tuple[int, int], smoke: bool, graphs: bool = False
) -> list[Column]:
    """Eager, Inductor (twice: the noise floor) and FIR on one model, no gradients. With
    ``graphs``: Inductor's reduce-overhead against FIR's cuda_graphs option."""
    import torch

    dtype = torch.bfloat16 if bench.device == "cuda" else torch.float32
    model, vocab = _model(name, bench.device, dtype, smoke)
    run = _forward(model)
    ids = _ids(vocab, shape, bench.device)
    torch._dynamo.reset()
    ind_kw: dict[str, Any] = {"mode": "reduce-overhead"} if graphs else {}
    fir_opts: dict[str, Any] = {"cuda_graphs": True} if graphs else {}
    if bench.device == "cpu":
        fir_opts["backend"] = "cpp"
    inductor = _compiled(run, "inductor", **ind_kw)
    fir = _compiled(run, "fir", options=fir_opts)
    cols = [Column("eager", lambda: run(ids))]
    with torch.no_grad():
        wide = _wider(model)
        exact = _forward(wide)(ids)
        del wide
        want = run(ids)
        cols[0].ref_err = _max_diff(want, exact)
        ind = Column("Inductor", lambda: inductor(ids))
        cols.append(ind)
        got = bench.first(ind, lambda: inductor(ids))
        ind.diff, ind.ref_err = _max_diff(got, want), _max_diff(got, exact)
        f = Column("FIR", lambda: fir(ids))
        cols.append(f)
        got = bench.first(f, lambda: fir(ids))
        f.diff, f.ref_err = _max_diff(got, want), _max_diff(got, exact)
        if bench.device == "cpu":
            llvm = _compiled(run, "fir", options={"backend": "llvm"})
            lc = Column("FIR-llvm", lambda: llvm(ids))
            cols.append(lc)
            got = bench.first(lc, lambda: llvm(ids))
            lc.diff, lc.ref_err = _max_diff(got, want), _max_diff(got, exact)
        cols.insert(2, Column("Inductor'", ind.step))
        bench.interleaved(cols)
        for c in cols:
            if c.name != "Inductor'":
                bench.profiled(c)
    return cols


def training(bench: Bench, name: str, shape: tuple[int, int], smoke: bool) -> list[Column]:
    """Forward and backward of ``out.float().square().mean()`` (dropout off: eval mode, so
    that every column computes the same thing), gradients dropped between steps."""
    import torch

    dtype = torch.bfloat16 if bench.device == "cuda" else torch.float32
    model, vocab = _model(name, bench.device, dtype, smoke)
    run = _forward(model)
    ids = _ids(vocab, shape, bench.device)
    params = [p for p in model.parameters() if p.requires_grad]
    torch._dynamo.reset()

    def stepper(fn: Callable[[Any], Any]) -> Callable[[], Any]:
        def step() -> Any:
            for p in params:
                p.grad = None
            loss = fn(ids).float().square().mean()
            loss.backward()
            return loss

        return step

    def grads() -> list[Any]:
        return [p.grad.detach().clone() for p in params if p.grad is not None]

    wide = _wider(model)
    wide_params = [p for p in wide.parameters() if p.requires_grad]
    _forward(wide)(ids).float().square().mean().backward()
    exact = [p.grad.detach() for p in wide_params if p.grad is not None]
    del wide, wide_params
    cols = [Column("eager", stepper(run))]
    cols[0].step()
    want = grads()
    cols[0].ref_err = _max_diff(want, exact)
    for label, kind in (("Inductor", "inductor"), ("FIR", "fir")):
        c = Column(label, stepper(_compiled(run, kind)))
        cols.append(c)
        bench.first(c, c.step)
        c.step()
        got = grads()
        c.diff, c.ref_err = _max_diff(got, want), _max_diff(got, exact)
    cols.insert(2, Column("Inductor'", cols[1].step))
    bench.interleaved(cols)
    for c in cols:
        if c.name != "Inductor'":
            bench.profiled(c)
    return cols


@dataclass
class DynamicRow:
    model: str
    compiles: int  # FIR graphs compiled for the five lengths under dynamic=True
    fallbacks: int
    per_length: list[tuple[int, float, float, float]]  # (length, eager, FIR static, FIR dynamic)
    diff: float
    # (Inductor static, Inductor dynamic) per length: how much of the gap is Dynamo's own
    # per-call work under dynamic=True (guards on symbolic sizes, floats wrapped as tensors),
    # which every backend pays; absent where Inductor was not timed
    inductor: list[tuple[float, float]] | None = None


def dynamic(
    bench: Bench,
    name: str,
    batch: int,
    lengths: tuple[int, ...],
    smoke: bool,
    inductor: bool = True,
) -> DynamicRow:
    """One ``dynamic=True`` compile for every length, against a static FIR compile per length."""
    import torch
    from fir.frontend import dynamo as fir_backend

    dtype = torch.bfloat16 if bench.device == "cuda" else torch.float32
    model, vocab = _model(name, bench.device, dtype, smoke)
    run = _forward(model)
    torch._dynamo.reset()
    # Dynamo keeps its compiled entries per code object, and the default limit (8) is less
    # than the 12 entries here (dynamic and static, FIR and Inductor, for one `run`): past it
    # a call silently runs eager
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    start, fell = len(fir_backend.COMPILED), len(fir_backend.FALLBACKS)
    dyn = torch.compile(run, backend="fir", dynamic=True)
    rows, diff = [], 0.0
    with torch.no_grad():
        for n in lengths:
            ids = _ids(vocab, (batch, n), bench.device, seed=n)
            diff = max(diff, _max_diff(dyn(ids), run(ids)))
        compiles = len(fir_backend.COMPILED) - start
        fallbacks = len(fir_backend.FALLBACKS) - fell
        # one static compile per length, kept beside the dynamic one (no reset in between,
        # which would make the dynamic function compile again at each length)
        static = torch.compile(run, backend="fir", dynamic=False)
        ind_static = ind_dyn = None
        if inductor:
            ind_static = torch.compile(run, dynamic=False)
            ind_dyn = torch.compile(run, dynamic=True)
        for n in lengths:
            ids = _ids(vocab, (batch, n), bench.device, seed=n)
            static(ids)
            if ind_static is not None and ind_dyn is not None:
                ind_static(ids)
                ind_dyn(ids)
        ind_rows: list[tuple[float, float]] = []
        for n in lengths:
            ids = _ids(vocab, (batch, n), bench.device, seed=n)
            cols = [
                Column("eager", lambda ids=ids: run(ids)),
                Column("static", lambda ids=ids, s=static: s(ids)),
                Column("dynamic", lambda ids=ids: dyn(ids)),
            ]
            if ind_static is not None and ind_dyn is not None:
                cols.append(Column("Inductor static", lambda ids=ids, s=ind_static: s(ids)))
                cols.append(Column("Inductor dynamic", lambda ids=ids, d=ind_dyn: d(ids)))
            bench.interleaved(cols, host=False)
            rows.append((n, cols[0].time, cols[1].time, cols[2].time))
            if len(cols) == 5:
                ind_rows.append((cols[3].time, cols[4].time))
    return DynamicRow(name, compiles, fallbacks, rows, diff, ind_rows or None)


# --------------------------------------------------------------------------------------------
# the document


def _ms(s: float | None) -> str:
    return "–" if s is None else f"{s * 1e3:.2f}"


def _num(x: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if x is None else fmt.format(x)


def versions(device: str) -> str:
    import torch

    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "not installed"
    if device == "cuda":
        where = f"{torch.cuda.get_device_name()}, CUDA {torch.version.cuda}"
    else:
        where = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    return f"{where}, torch {torch.__version__}, Triton {tv}, Python {platform.python_version()}"


def model_table(results: dict[str, list[Column]], baseline: str = "Inductor") -> str:
    out = []
    for model, cols in results.items():
        by = {c.name: c for c in cols}
        base = by[baseline].time
        out += [f"**{model}**", ""]
        out.append(
            "| column | step ms | / Inductor | cold s | host ms | device ms | launches | max diff "
            "| ref err |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|")
        for c in cols:
            out.append(
                f"| {c.name} | {_ms(c.time)} | {c.time / base:.2f} | {_num(c.cold, '{:.1f}')} "
                f"| {_ms(c.host)} | {_ms(c.device)} | {_num(c.launches)} "
                f"| {_num(c.diff, '{:.3g}')} | {_num(c.ref_err, '{:.3g}')} |"
            )
        tops = [c for c in cols if c.kernels and c.name in ("Inductor", "FIR")]
        if len(tops) == 2:
            out += [
                "",
                "| Inductor's top kernels | ms | FIR's top kernels | ms |",
                "|---|---|---|---|",
            ]
            a, b = tops[0].kernels, tops[1].kernels
            for k in range(max(len(a), len(b))):
                left = (a[k][0][:60], f"{a[k][1]:.3f}") if k < len(a) else ("", "")
                right = (b[k][0][:60], f"{b[k][1]:.3f}") if k < len(b) else ("", "")
                out.append(f"| `{left[0]}` | {left[1]} | `{right[0]}` | {right[1]} |")
        out.append("")
    return "\n".join(out)


def summary(results: dict[str, list[Column]], fir: str = "FIR", base: str = "Inductor") -> str:
    out = ["| model | eager ms | Inductor ms | FIR ms | FIR / Inductor | Inductor' / Inductor |"]
    out.append("|---|---|---|---|---|---|")
    for model, cols in results.items():
        by = {c.name: c for c in cols}
        i, f = by[base].time, by[fir].time
        out.append(
            f"| {model} | {_ms(by['eager'].time)} | {_ms(i)} | {_ms(f)} | **{f / i:.2f}** "
            f"| {by[base + chr(39)].time / i:.2f} |"
        )
    return "\n".join(out)


def dynamic_table(rows: list[DynamicRow]) -> str:
    out = [
        "| model | compiles | fallbacks | max diff | length: eager / FIR static / FIR dynamic ms "
        "(dynamic / static) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        cells = "; ".join(
            f"{n}: {_ms(e)} / {_ms(s)} / {_ms(d)} ({d / s:.2f})" for n, e, s, d in r.per_length
        )
        out.append(f"| {r.model} | {r.compiles} | {r.fallbacks} | {r.diff:.3g} | {cells} |")
    timed = [r for r in rows if r.inductor]
    if timed:
        out += [
            "",
            "Inductor on the same lengths in the same rounds, static / dynamic ms (dynamic / "
            "static): the part of the ratio that Dynamo's own per-call work takes",
            "",
            "| model | length: Inductor static / Inductor dynamic ms (dynamic / static) |",
            "|---|---|",
        ]
        for r in timed:
            cells = "; ".join(
                f"{n}: {_ms(s)} / {_ms(d)} ({d / s:.2f})"
                for (n, *_), (s, d) in zip(r.per_length, r.inductor or [], strict=True)
            )
            out.append(f"| {r.model} | {cells} |")
    return "\n".join(out)


HEADINGS = {
    "gpu": "GPU bf16 inference",
    "graphs": "GPU bf16 inference with CUDA graphs (FIR cuda_graphs, Inductor reduce-overhead)",
    "train": "GPU bf16 training (forward + backward)",
    "cpu": "CPU fp32 inference (FIR-cpp and FIR-llvm)",
    "dynamic": "dynamic=True: one compile, five lengths",
    "cpu-dynamic": "dynamic=True on the CPU (FIR-cpp, fp32): one compile, five lengths",
}
NOTES_HEADING = "## Notes"


def write_section(mode: str, body: str, path: Path = DOC) -> None:
    """Replace this mode's section of the document (between its markers), keep the rest."""
    start, end = f"<!-- mode:{mode} -->", f"<!-- /mode:{mode} -->"
    section = f"{start}\n## {HEADINGS[mode]}\n\n{body.rstrip()}\n{end}"
    text = (
        path.read_text()
        if path.exists()
        else (
            "# Real models: FIR against eager PyTorch and Inductor\n\n"
            "Written by `benchmarks/bench_models.py` (its docstring says how it measures); each mode "
            "replaces its own section.\n\n" + NOTES_HEADING + "\n"
        )
    )
    if start in text and end in text:
        a, b = text.index(start), text.index(end) + len(end)
        text = text[:a] + section + text[b:]
    else:
        at = text.find(NOTES_HEADING)
        at = len(text) if at < 0 else at
        text = text[:at] + section + "\n\n" + text[at:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def run_mode(mode: str, models: list[str], bench: Bench, smoke: bool, inductor: bool = True) -> str:
    shapes = SMOKE_SHAPES if smoke else (CPU_SHAPES if bench.device == "cpu" else GPU_SHAPES)
    when = time.strftime("%Y-%m-%d")
    import torch

    floats = (
        " Float attributes specialised (`specialize_float`)."
        if torch._dynamo.config.specialize_float
        else ""
    )
    head = (
        f"Measured {when} on {versions(bench.device)}: {bench.rounds} rounds of {bench.calls} "
        f"steps per column, interleaved.{floats}\n\n"
    )
    if mode in ("dynamic", "cpu-dynamic"):
        lengths = SMOKE_LENGTHS if smoke else DYNAMIC_LENGTHS
        rows = []
        for m in models:
            rows.append(dynamic(bench, m, shapes[m][0], lengths, smoke, inductor and not smoke))
            print(dynamic_table(rows[-1:]), file=sys.stderr, flush=True)
        return head + dynamic_table(rows)
    results: dict[str, list[Column]] = {}
    for m in models:
        if mode == "train":
            results[m] = training(bench, m, shapes[m], smoke)
        else:
            results[m] = inference(bench, m, shapes[m], smoke, graphs=mode == "graphs")
        print(model_table({m: results[m]}), file=sys.stderr, flush=True)
    text = head + summary(results)
    if mode == "cpu":
        text += "\n\nFIR-llvm / Inductor: " + ", ".join(
            f"{m} {next(c for c in cols if c.name == 'FIR-llvm').time / next(c for c in cols if c.name == 'Inductor').time:.2f}"
            for m, cols in results.items()
        )
    shape_text = ", ".join(f"{m} {shapes[m][0]}×{shapes[m][1]}" for m in models)
    return text + f"\n\nShapes (batch × tokens): {shape_text}.\n\n" + model_table(results)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=MODES, default="gpu")
    ap.add_argument("--models", nargs="+", default=["gpt2", "llama", "bert", "t5"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny models on the CPU, no doc")
    ap.add_argument("--out", type=Path, default=DOC)
    # dynamic modes: Inductor static and dynamic beside FIR's (its cold compiles take 45-50 s
    # a graph on the 16-core host: 12 graphs a model)
    ap.add_argument("--no-inductor", action="store_true", help="dynamic modes: FIR alone")
    # dynamic modes: Dynamo specialises float attributes instead of passing them as tensors
    ap.add_argument("--specialize-float", action="store_true")
    args = ap.parse_args(argv)
    _fresh_caches()
    import torch

    smoke = args.cpu_smoke
    device = "cpu" if smoke or args.mode in ("cpu", "cpu-dynamic") else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_models: this mode needs a CUDA GPU (try --mode cpu or --cpu-smoke)")
    bench = Bench(
        device, 2 if smoke else args.rounds, 2 if smoke else args.calls, not args.no_profile
    )
    modes = ["cpu", "train", "dynamic"] if smoke else [args.mode]
    if args.specialize_float:
        torch._dynamo.config.specialize_float = True
    for mode in modes:
        body = run_mode(mode, args.models, bench, smoke, inductor=not args.no_inductor)
        if not smoke:
            write_section(mode, body, args.out)
        print(body)


if __name__ == "__main__":
    main()
