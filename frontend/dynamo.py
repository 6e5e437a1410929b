"""``torch.compile(fn, backend="fir")``: Dynamo → AOTAutograd (aten) → FIR, forward and backward.

AOTAutograd hands FIR the inference graph of a call that needs no gradients, or, in training,
the forward graph and (at the first ``backward()``) the backward graph; all three go through
:func:`compile_graph_module`.

Options (``torch.compile(..., options={...})``):

* ``pipeline``: FIR passes run on each imported graph (default: the back end's, ``"cuda"`` for
  Triton (``"fusion"`` with ``split-reductions``), ``"fusion"`` for the others: down to fused,
  ordered, planned loop level);
* ``dump_dir``: write the ``.fir`` of every graph after import and after every pass, so any
  stage can be replayed with ``fir-opt``;
* ``backend``: what runs the compiled program: by default the back end of the inputs' device,
  ``"cpp"`` for CPU tensors (C++/OpenMP kernels, :mod:`fir.backends.cpp`) and ``"triton"`` for
  CUDA tensors (:mod:`fir.backends.triton`); or ``"interp"`` (the reference interpreter, any
  pipeline), or ``"llvm"`` (kernels compiled in the process by llvmlite, CPU tensors).
  Tensors on another device run with PyTorch, with a warning;
* ``cuda_graphs``: capture each compiled CUDA graph module in a CUDA graph on its second call
  and replay it after (default False): one launch per call instead of one per kernel.
  Parameters and other inputs that stay where they are are read in place; results are
  returned without a copy, and a call made while a result of the last replay is still held
  runs without the graph (:mod:`fir.backends.runtime.cuda_graphs`);
* ``autotune``: each Triton kernel times a few block configurations at its first launch and
  keeps the fastest, cached on disk (default False: the heuristic's choice);
* ``recompute``: in training, AOTAutograd splits the joint graph with PyTorch's min-cut
  rematerialization partitioner, as for Inductor (default True): cheap pointwise values the
  backward needs are computed again there from fewer saved tensors instead of each being
  written by the forward and read back (GPT-2's tanh-GELU backward read five saved tensors).
  False keeps AOTAutograd's default partition (everything the backward uses is saved);
* ``fallback``: ``"unsupported"`` (default; also ``True``): what FIR reports as unsupported (an
  op with no mapping, a dtype, a device or a machine without a back end)
  runs with PyTorch, with its reason; ``"never"`` (also ``False``): every such fallback is an
  error.

A graph with data-dependent sizes (``u0``: ``.item()`` as a size, ``nonzero``) is cut at the ops
that make them into FIR programs (:mod:`fir.frontend.segments`).

FIR's own faults never fall back: an internal error (a verifier failure after a pass, an
assertion, any exception that is not a :class:`~fir.ir.errors.FirError`, a back end that fails
on a graph it accepted) raises :class:`FirInternalError`, whose message names a file with the
dump of the graph (:func:`write_dump`).
"""

from __future__ import annotations

import itertools
import os
import struct
import tempfile
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from fir.backends.prewarm import prewarm_triton
from fir.backends.registry import BACKENDS, for_device
from fir.ir.errors import FirError
from fir.ir.externs import ExternCallError
from fir.ir.graph import ExternNode, Module, TensorOp
from fir.ir.printer import print_module

from .emitter import UnsupportedError
from .fx_import import ImportReport, import_graph_module
from .logs import enabled, log

# Dynamo imports this module when it looks the backend up, before it traces: Triton's one-time
# costs start now, in the background, where a GPU exists (see fir.backends.prewarm)
prewarm_triton()

# the back ends (fir.backends.registry), and the reference interpreter
RUNNERS = (*BACKENDS, "interp")
PLANNED_RUNNERS: tuple[str, ...] = ()
DEFAULT_PIPELINE = "fusion"  # the interpreter's
# "unsupported": what FIR reports as unsupported runs with PyTorch; "never": that is an error
FALLBACK_MODES = ("unsupported", "never")
# where an internal error's dump goes when no dump_dir is given
DUMP_ENV = "FIR_DUMP_DIR"
_graph_ids = itertools.count()


@dataclass
class CompileOptions:
    pipeline: str | None = None  # None: the back end's (its registry entry), else DEFAULT_PIPELINE
    dump_dir: str | None = None
    backend: str | None = None  # None: the inputs' device's (registry.for_device)
    fallback: str = "unsupported"  # FALLBACK_MODES; True and False are read as the two modes
    cuda_graphs: bool = False
    autotune: bool = False
    recompute: bool = True

    @staticmethod
    def from_dict(options: Any) -> CompileOptions:
        """The options of ``torch.compile(..., options=...)``, each checked for its type and
        value: a wrong one is a :class:`FirError` naming the option and what it takes."""
        opts = CompileOptions()
        if options is None:
            return opts
        if not isinstance(options, Mapping):
            raise FirError(
                f"fir backend options must be a dict, got {type(options).__name__} {options!r}"
            )
        known = ", ".join(CompileOptions.__dataclass_fields__)
        for key, value in options.items():
            if not isinstance(key, str) or key not in OPTION_TYPES:
                raise FirError(f"unknown fir backend option {key!r} (options: {known})")
            types, what = OPTION_TYPES[key]
            if not (value is None and key in NULLABLE_OPTIONS) and not isinstance(value, types):
                raise FirError(
                    f"fir backend option '{key}' must be {what}, got "
                    f"{type(value).__name__} {value!r}"
                )
            setattr(opts, key, value)
        if isinstance(opts.fallback, bool):  # the option's first form: True/False
            opts.fallback = "unsupported" if opts.fallback else "never"
        if opts.fallback not in FALLBACK_MODES:
            raise FirError(
                f"unknown fallback mode {opts.fallback!r} (choose from {', '.join(FALLBACK_MODES)})"
            )
        if opts.backend is not None and opts.backend not in RUNNERS:
            if opts.backend in PLANNED_RUNNERS:
                raise FirError(
                    f"fir backend '{opts.backend}' is not available yet; use "
                    "'cpp', 'triton' or 'interp'"
                )
            raise FirError(
                f"unknown fir backend '{opts.backend}' (choose from {', '.join(RUNNERS)})"
            )
        if opts.dump_dir is not None:
            opts.dump_dir = _writable_folder(os.fspath(opts.dump_dir))
        from fir.passes.pipeline import parse_pipeline

        # a bad pipeline is the user's error, not a graph to fall back on
        if opts.pipeline is not None:
            parse_pipeline(opts.pipeline)
        return opts


# each option's accepted types, and how an error message says them
OPTION_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "pipeline": ((str,), "a str (a pass pipeline such as 'fusion')"),
    "dump_dir": ((str, os.PathLike), "a folder path (str or os.PathLike)"),
    "backend": ((str,), f"a str (one of {', '.join(RUNNERS)})"),
    "fallback": ((str, bool), f"a str (one of {', '.join(FALLBACK_MODES)}) or a bool"),
    "cuda_graphs": ((bool,), "a bool"),
    "autotune": ((bool,), "a bool"),
    "recompute": ((bool,), "a bool"),
}
# options whose None is their default: "not given"
NULLABLE_OPTIONS = ("pipeline", "dump_dir", "backend")


def _writable_folder(path: str) -> str:
    """``dump_dir`` checked before any graph compiles: a folder (made if missing) that a file
    can be written in, else a :class:`FirError` saying why."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise FirError(f"fir backend option 'dump_dir': {path} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # the only sure test, whoever runs it
            pass
    except OSError as e:
        raise FirError(
            f"fir backend option 'dump_dir': cannot write in {path}: {e.strerror or e}"
        ) from None
    return path


class BackendCompileError(FirError):
    """FIR imported and transformed a graph, but its back end failed on it (no compiler, a
    compile error, a plan it cannot write). Only a machine without the back end's compiler is
    a reason to fall back (:func:`is_unsupported`); the rest is a :class:`FirInternalError`."""


class FirInternalError(FirError):
    """FIR failed on a graph it had accepted: a bug of FIR (or of its back end's compiler), never
    a reason to run the graph with PyTorch. ``dump`` is the file with the graph's stages."""

    def __init__(self, message: str, dump: Path | None = None) -> None:
        super().__init__(message)
        self.dump = dump


class FallbackError(FirError):
    """``fallback="never"``: something FIR does not support would have run with PyTorch."""


def is_unsupported(e: BaseException) -> bool:
    """Whether FIR reports ``e`` as unsupported (an op, a dtype, a feature, a machine without
    the back end's compiler): the errors a graph may fall back to PyTorch for."""
    from fir.backends.cpp.build import CompilerNotFound

    cause = e.__cause__ if isinstance(e, BackendCompileError) else e
    return isinstance(e, UnsupportedError) or isinstance(cause, CompilerNotFound)


@dataclass
class CompiledGraph:
    """One imported graph and how to run it."""

    module: Module
    report: ImportReport
    constants: list[torch.Tensor]
    name: str
    stages: list[tuple[str, str]] = field(default_factory=list)
    program: Any = None  # the compiled program (a code generator's), None for the interpreter
    kind: str = "inference"  # "inference", "forward" or "backward" (AOTAutograd's graphs)
    # the graph's outputs, with None where AOTAutograd's graph returns None (no gradient for
    # that input); FIR computes only the others
    none_outputs: tuple[int, ...] = ()
    calls: int = 0  # how many times the compiled graph ran
    _kept: list[int] | None = None  # the positions of the inputs the program takes
    # the graph as PyTorch runs it: for a call whose computed size is not positive
    eager: Callable[..., Any] | None = None
    # moved inputs' device copies by position, keyed by dtype and value (None: not kept)
    _moved: dict[int, tuple[Any, torch.Tensor]] | None = None

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        self.calls += 1
        sizes = {name: int(inputs[k]) for k, name in self.report.size_inputs.items()}
        if self.report.computed_sizes:
            computed = self._computed_sizes(inputs)
            if computed is None:  # a size of 0 or less this time: PyTorch runs this call
                if self.eager is None:
                    raise FirError(
                        f"{self.name}: a size this call computes is not positive, and the graph "
                        "has no eager version (CompiledGraph.eager) to run it"
                    )
                return list(self.eager(list(inputs)))
            sizes |= computed
        if self.report.moved_inputs and self.program is not None:
            inputs = self._moved_inputs(inputs)
        given = inputs
        if self.report.dropped_inputs:  # sizes come from the tensors' shapes; tokens are None
            keep = self._kept
            if keep is None or len(keep) + len(self.report.dropped_inputs) != len(inputs):
                skip = set(self.report.dropped_inputs)
                keep = self._kept = [k for k in range(len(inputs)) if k not in skip]
            inputs = tuple([inputs[k] for k in keep])
        scalars = self._scalars(given) if self.report.scalar_inputs else []
        if self.program is not None:  # kernels write memory; extern calls run under no_grad
            try:
                if sizes:
                    out = self.program(*inputs, *self.constants, *scalars, sizes=sizes)
                else:
                    out = self.program(*inputs, *self.constants, *scalars)
            except ExternCallError as e:
                if e.__cause__ is None:
                    raise
                # an op that raised: the caller gets what eager PyTorch raises
                raise e.__cause__ from None
        else:
            from fir.ir.interpreter import run_graph

            with torch.no_grad():
                args = [*inputs, *self.constants, *scalars]
                out = run_graph(self.module.funcs[0], args, sizes=sizes)
        if self.report.scalar_outputs:
            out = self._with_scalars(list(out), given, inputs, sizes)
        if not self.none_outputs:
            return out
        full: list[Any] = []
        results = iter(out)
        for k in range(len(out) + len(self.none_outputs)):
            full.append(None if k in self.none_outputs else next(results))
        return full

    def _symbol_values(self, given: Sequence[Any]) -> dict[str, int]:
        """The values of PyTorch's size symbols in this call (``ImportReport.symbol_sources``)."""
        values: dict[str, int] = {}
        for name, (k, dim) in self.report.symbol_sources.items():
            x = given[k]
            values[name] = int(x) if dim is None else int(x.shape[dim])
        return values

    def _moved_inputs(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        """``inputs`` with the 0-d CPU tensors of ``ImportReport.moved_inputs`` on the
        program's device. Under ``dynamic=True`` dynamo passes each float attribute of the
        model (a norm's epsilon) as such a tensor, made anew at every call: a dynamic Llama
        copied 18 of them to the GPU per step. A copy is kept and reused while the value is
        the same (its bits: ``-0.0`` is not ``0.0``) and the program writes no input."""
        device = self.program.alloc_device
        out = list(inputs)
        cache = self._moved
        if cache is None:
            cache = self._moved = {} if not self.program.writes_inputs() else None
        for k in self.report.moved_inputs:
            x = out[k]
            if cache is None or not isinstance(x, torch.Tensor):
                out[k] = x.to(device)
                continue
            key = (x.dtype, _bits(x.item()))
            kept = cache.get(k)
            if kept is None or kept[0] != key:
                kept = cache[k] = (key, x.to(device))
            out[k] = kept[1]
        return tuple(out)

    def _computed_sizes(self, given: Sequence[Any]) -> dict[str, int] | None:
        """The computed size parameters (``ImportReport.computed_sizes``) for this call; None
        where one is not positive (FIR's sizes are), which PyTorch then runs."""
        from .sizes import evaluate_torch_expr

        values = self._symbol_values(given)
        out = {}
        for name, expr in self.report.computed_sizes.items():
            v = evaluate_torch_expr(expr, values)
            if not isinstance(v, int) or v < 1:
                return None
            out[name] = v
        return out

    def _scalars(self, given: Sequence[Any]) -> list[torch.Tensor]:
        """The 0-d arguments of the numbers the graph computes from its inputs
        (``ImportReport.scalar_inputs``), evaluated for this call."""
        from .sizes import evaluate_torch_expr

        values = self._symbol_values(given)
        device = self.program.alloc_device if self.program is not None else "cpu"
        return [
            torch.tensor(evaluate_torch_expr(expr, values), dtype=dtype.to_torch(), device=device)
            for expr, dtype in self.report.scalar_inputs
        ]

    def _with_scalars(
        self,
        out: list[Any],
        given: Sequence[Any],
        tensors: Sequence[Any],
        sizes: dict[str, int],
    ) -> list[Any]:
        """The program's tensors with the graph's other outputs put back in their places: int
        arguments returned as they came, constants, sizes evaluated from the call's sizes."""
        scalars = self.report.scalar_outputs
        full: list[Any] = []
        results = iter(out)
        for k in range(len(out) + len(scalars)):
            if k not in scalars:
                full.append(next(results))
                continue
            kind, what = scalars[k]
            if kind == "input":
                full.append(given[what])
            elif kind == "value":
                full.append(what)
            else:
                full.append(_evaluate_size(what, self.module.funcs[0], tensors, sizes))
        return full


def _evaluate_size(expr: Any, graph: Any, tensors: Sequence[Any], sizes: dict[str, int]) -> int:
    """A size expression's value in one call: its symbols from ``sizes`` (passed as ints) or
    from the dimensions of the tensor arguments that are one symbol."""
    import sympy
    from fir.ir.symbolic import evaluate

    env: dict[Any, int] = {}
    for a, x in zip(graph.args, tensors):
        for d, n in zip(a.type.shape, x.shape):
            if isinstance(d, sympy.Symbol):
                env[d] = int(n)
    for s in expr.free_symbols:
        if s.name in sizes:
            env[s] = sizes[s.name]
    return int(evaluate(expr, env))


def _bits(v: Any) -> Any:
    """A number as what tells its values apart: a float's bytes (``-0.0`` and ``0.0``
    differ, a NaN equals itself), an int or bool as it is."""
    return struct.pack("<d", v) if isinstance(v, float) else v


# every graph compiled in this process, for fir.explain and tests


COMPILED: list[CompiledGraph] = []


@dataclass
class GraphFallback:
    """A graph that ran with PyTorch, and why."""

    name: str
    kind: str
    reason: str


# every graph that fell back to PyTorch in this process, for fir.explain and tests
FALLBACKS: list[GraphFallback] = []
# every graph with data-dependent sizes compiled in this process, cut into FIR programs
# (its parts are in COMPILED too)
SEGMENTED: list[Any] = []


def compile_graph_module(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: CompileOptions,
    name: str | None = None,
    kind: str = "inference",
    any_layout: frozenset[int] = frozenset(),
) -> CompiledGraph:
    """Import an aten-level graph, run the pipeline, compile it, and dump stages if asked.
    ``any_layout``: the positions of outputs that may keep FIR's layout
    (:func:`saved_activations`); their strides are reported to AOTAutograd.

    Raises what FIR reports as unsupported (:func:`is_unsupported`) as it is, and every other
    error as a :class:`FirInternalError` naming the dump of the graph."""
    name = name or f"graph_{next(_graph_ids)}"
    stages: list[tuple[str, str]] = []
    stage = ["import"]  # the stage running now, for the dump
    try:
        return _compile(gm, example_inputs, options, name, kind, stages, stage, any_layout)
    except Exception as e:
        if is_unsupported(e):
            raise
        what = e.message if isinstance(e, FirError) else f"{type(e).__name__}: {e}"
        dump = write_dump(name, kind, stages, stage[0], e, options.dump_dir, _fx_text(gm))
        raise FirInternalError(
            f"internal error while compiling {name} ({kind} graph) at stage '{stage[0]}': {what}"
            f"; the graph's dump is in {dump}",
            dump,
        ) from e


def _compile(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: CompileOptions,
    name: str,
    kind: str,
    stages: list[tuple[str, str]],
    stage: list[str],
    any_layout: frozenset[int] = frozenset(),
) -> CompiledGraph:
    from fir.ir.verifier import verify_module
    from fir.passes.pipeline import Pipeline, parse_pipeline

    where = list(example_inputs) + _output_values(gm)
    backend = choose_backend(options, where)
    if backend in (None, "interp"):  # the interpreter returns dense tensors: eager's layouts
        any_layout = frozenset()
    with _without_none_outputs(gm) as none_outputs:
        module, report, constants = import_graph_module(gm, list(example_inputs), name, any_layout)
    compiled = CompiledGraph(module, report, constants, name, stages, kind=kind)
    compiled.none_outputs = none_outputs
    stages.append(("import", print_module(module)))
    pipeline_name = pipeline_for(options, backend)
    pipeline = parse_pipeline(pipeline_name)
    for p in pipeline.passes:
        p.collect_reports = p.reports_decisions and enabled("fusion")

    def after(p: Any, m: Module) -> None:
        # the pipeline's own verification is off so that the stage a pass broke is printed
        # (for the dump) before the verifier rejects it
        try:
            stages.append((p.name, print_module(m)))
        except Exception as e:  # a program too broken to print: say so in the dump
            stages.append((p.name, f"(cannot print the program: {type(e).__name__}: {e})"))
        try:
            verify_module(m)
        except FirError as e:
            raise FirError(f"after pass '{p.name}': {e.message}", e.loc) from None

    # one pass at a time, so that the stage a pass fails in is known (a crash names its pass)
    for p in pipeline.passes:
        stage[0] = p.name
        module = Pipeline([p]).run(module, verify_each=False, after_pass=after)
    compiled.module = module
    for p in pipeline.passes:
        for r in p.reports:
            log("fusion", f"{name} ({kind}):\n{r.text()}")
    at_tensor_level = any(isinstance(n, TensorOp) for f in compiled.module.funcs for n in f.nodes)
    if backend not in (None, "interp") and at_tensor_level:
        warnings.warn(
            f"fir: pipeline '{pipeline_name}' leaves {name} at tensor level, which the "
            f"'{backend}' back end cannot compile: the interpreter runs it (use a "
            "pipeline that ends at loop level, such as 'fusion')",
            stacklevel=2,
        )
    elif backend not in (None, "interp"):
        from fir.backends.compile import compile_function

        stage[0] = f"{backend} back end"
        try:
            compiled.program = compile_function(
                compiled.module.funcs[0],
                backend,
                device=_placement(where),
                autotune=options.autotune,
            )
        except FirError as e:
            raise BackendCompileError(
                f"the {backend} back end could not compile {name}: {e.message}", e.loc
            ) from e
        device = compiled.program.device
        if device != "cpu":  # constants the import made (folded arange, eye …) go with it
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            place = compiled.program.alloc_device
            with unset_fake_temporarily():  # real tensors, moved outside Dynamo's fake mode
                compiled.constants = [c.to(place) for c in compiled.constants]
        if options.cuda_graphs and device == "cuda":
            from fir.backends.runtime.cuda_graphs import CudaGraphProgram

            compiled.program = CudaGraphProgram(compiled.program)
        log("kernels", f"{name} ({kind}, {backend}):\n{_program_steps(compiled.program)}")
        if any_layout:
            _report_output_strides(gm, compiled)
    if options.dump_dir:
        out = Path(options.dump_dir)
        out.mkdir(parents=True, exist_ok=True)
        for k, (stage_name, text) in enumerate(stages):
            (out / f"{name}.{k:02d}.{stage_name}.fir").write_text(text)
        (out / f"{name}.report.txt").write_text(report.summary() + "\n")
    _log_graph(compiled, gm, backend)
    COMPILED.append(compiled)
    return compiled


def saved_activations(gm: torch.fx.GraphModule) -> frozenset[int]:
    """The positions of a training forward's outputs that only its backward reads (the
    activations AOTAutograd saves, after the user's outputs and mutated inputs): FIR may return
    them in the layout it computes them in, rather than copy each into eager's, where it can
    tell AOTAutograd their strides (which compiles the backward for them, as for Inductor's
    layouts). None where there is no such channel (no tracing context)."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    first = getattr(meta, "num_forward", None)
    if context is None or getattr(context, "output_strides", None) is None or first is None:
        return frozenset()
    return frozenset(range(first, len(_output_nodes(gm))))


def _output_nodes(gm: torch.fx.GraphModule) -> list[Any]:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out.args[0]
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def _report_output_strides(gm: torch.fx.GraphModule, compiled: CompiledGraph) -> None:
    """Tell AOTAutograd the strides of the outputs returned in FIR's layout (the rest: None,
    eager's), one entry per output of the graph, through its tracing context."""
    from fir.ir.types import contiguous_strides
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    strides = getattr(context, "output_strides", None)
    if strides is None:
        return
    graph = compiled.module.funcs[0]
    free = graph.attrs.get("any_layout")
    free_set = set(free) if isinstance(free, list) else set()
    k = 0  # the position among the graph's tensor outputs
    for pos in range(len(_output_nodes(gm))):
        if pos in compiled.report.scalar_outputs:
            strides.append(None)
            continue
        t = graph.outputs[k].type if k in free_set else None
        k += 1
        if t is None:
            strides.append(None)
            continue
        # the importer frees static outputs only: their strides are numbers
        given = t.layout.strides if t.layout is not None else contiguous_strides(t.shape)
        strides.append(tuple(int(s) for s in given))


class _without_none_outputs:
    """AOTAutograd's backward graph returns None for an input that gets no gradient (an index
    tensor, a frozen weight); FIR returns tensors only. While the graph is imported its output
    node lists the tensors alone; the positions of the Nones are kept to put them back."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.node = next(n for n in gm.graph.nodes if n.op == "output")
        self.saved = self.node.args

    def __enter__(self) -> tuple[int, ...]:
        outs = self.node.args[0]
        if not isinstance(outs, (tuple, list)):
            return ()
        nones = tuple(k for k, o in enumerate(outs) if o is None)
        if nones:
            self.node.args = ([o for o in outs if o is not None],)
        return nones

    def __exit__(self, *exc: Any) -> None:
        self.node.args = self.saved


def _fx_text(gm: torch.fx.GraphModule) -> str:
    try:
        return str(gm.graph)
    except Exception as e:  # the dump must not fail on a graph that cannot print itself
        return f"(cannot print the FX graph: {type(e).__name__}: {e})"


def _program_steps(program: Any) -> str:
    plan = getattr(program, "plan", None)
    # the plan's text lists the steps, then each kernel's plan: the steps are the summary
    return plan.text().split("\n\n", 1)[0] if plan is not None else "(no plan)"


def _log_graph(compiled: CompiledGraph, gm: torch.fx.GraphModule, backend: str | None) -> None:
    """FIR_LOGS topics ``graphs`` (the graph's op counts) and ``fallback`` (its extern ops)."""
    if enabled("graphs"):
        from fir.passes.fusion.report import count_noun

        report = compiled.report
        nodes = [n for f in compiled.module.funcs for n in f.nodes]
        aten = sum(1 for n in gm.graph.nodes if n.op == "call_function")
        externs = sum(1 for n in nodes if isinstance(n, ExternNode))
        runner = "interpreter" if compiled.program is None else backend
        log(
            "graphs",
            f"{compiled.name} ({compiled.kind}): {count_noun(aten, 'FX call')}, "
            f"{sum(report.imported.values())} aten ops imported, "
            f"{sum(report.fallbacks.values())} kept as extern calls; "
            f"{count_noun(len(nodes), 'FIR node')} after the pipeline "
            f"({count_noun(externs, 'extern call')}); run by {runner}",
        )
    _log_fallbacks(compiled)


def _log_fallbacks(compiled: CompiledGraph) -> None:
    report = compiled.report
    for op, count in sorted(report.fallbacks.items()):
        log(
            "fallback",
            f"{compiled.name}: {op} x{count} runs as an extern call: {report.reasons.get(op, '')}",
        )


def write_dump(
    name: str,
    kind: str,
    stages: list[tuple[str, str]],
    failed: str,
    error: BaseException,
    dump_dir: str | None = None,
    fx_text: str = "",
) -> Path:
    """Write what FIR knows about a graph it failed on: the error and its traceback, the stage
    that failed, and the program after import and after each stage that ran (the last one is
    the program the failing stage produced or received), then the aten graph that was imported
    (``fx_text``: what an import failure is about). Returns the file's path: in
    ``dump_dir``, else in ``$FIR_DUMP_DIR``, else in a new temporary folder. Each stage is
    also written as its own ``.fir`` file next to it, to replay with ``fir-opt``."""
    base = dump_dir or os.environ.get(DUMP_ENV)
    if base:
        folder = Path(base)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix=f"fir-{name}-"))
    path = folder / f"{name}.error.txt"
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    parts = [
        f"FIR internal error compiling {name} ({kind} graph)",
        f"failed at stage: {failed}",
        f"stages that ran: {', '.join(s for s, _ in stages) or 'none'}",
        "",
        tb.rstrip(),
    ]
    for k, (stage, text) in enumerate(stages):
        if k == 0 or k == len(stages) - 1:
            parts += ["", f"// ---- stage {k}: {stage} ----", text.rstrip()]
        (folder / f"{name}.{k:02d}.{stage}.fir").write_text(text)
    if fx_text:
        parts += ["", "// ---- the aten graph (torch.fx) ----", fx_text.rstrip()]
    path.write_text("\n".join(parts) + "\n")
    return path


def fir_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
    **_: Any,
) -> Callable[..., Any]:
    """The Dynamo backend registered as ``"fir"`` (entry point ``torch_dynamo_backends``)."""
    from torch._dynamo.backends.common import aot_autograd

    opts = CompileOptions.from_dict(options)

    def compiler(kind: str) -> Callable[..., Any]:
        def compile_fx(fx_gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            return _compile_or_fall_back(fx_gm, inputs, opts, kind)

        return compile_fx

    # the backward graph goes through the same path as the forward: AOTAutograd compiles it
    # at the first backward() (its inputs are the saved activations and the output gradients)
    extra: dict[str, Any] = {}
    if opts.recompute:
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        extra["partition_fn"] = min_cut_rematerialization_partition
    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        **extra,
    )
    return backend(gm, example_inputs)


def _compile_or_fall_back(
    fx_gm: torch.fx.GraphModule, inputs: Sequence[Any], opts: CompileOptions, kind: str
) -> Callable[..., Any]:
    from torch._functorch.aot_autograd import make_boxed_func

    from .segments import has_data_dependent_sizes

    try:
        if has_data_dependent_sizes(fx_gm):
            return _compile_segmented(fx_gm, opts, kind)
        free = saved_activations(fx_gm) if kind == "forward" else frozenset()
        compiled = compile_graph_module(fx_gm, inputs, opts, kind=kind, any_layout=free)
    except FirInternalError:
        raise
    except FirError as e:  # unsupported: compile_graph_module raises nothing else
        return make_boxed_func(_fall_back(fx_gm, opts, kind, e.message))

    _check_extern_fallbacks(compiled, opts, kind)
    if compiled.program is None and choose_backend(opts, [*inputs, *_output_values(fx_gm)]) is None:
        # FIR has compiled the graph (fir.explain reports its kernels), but it generates no
        # code for this device: PyTorch runs it
        _fall_back(
            fx_gm,
            opts,
            kind,
            f"{compiled.name} takes {_devices(inputs)} tensors, which FIR has no back end for "
            "yet: PyTorch runs this graph (FIR's kernels are reported, not run)",
            warning=f"fir: {compiled.name} takes {_devices(inputs)} tensors, which FIR has no "
            "back end for yet: PyTorch runs this graph (FIR's kernels are reported, not run)",
            name=compiled.name,
        )
        return make_boxed_func(fx_gm.forward)

    compiled.eager = fx_gm.forward

    def run(args: list[Any]) -> list[Any]:
        return compiled(*args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _check_extern_fallbacks(compiled: CompiledGraph, opts: CompileOptions, kind: str) -> None:
    """``fallback="never"``: a graph whose aten ops would run with PyTorch is an error."""
    if opts.fallback == "never" and compiled.report.fallbacks:
        ops = ", ".join(
            f"{op}: {compiled.report.reasons.get(op, '')}"
            for op in sorted(compiled.report.fallbacks)
        )
        raise FallbackError(
            f"fallback='never': {compiled.name} ({kind}) would run aten ops with PyTorch: {ops}"
        )


def _compile_segmented(
    fx_gm: torch.fx.GraphModule, opts: CompileOptions, kind: str
) -> Callable[..., Any]:
    """A graph with data-dependent sizes, cut at the ops that make them
    (:mod:`fir.frontend.segments`): each part compiled by FIR, the data-dependent ops called
    between them as extern calls are. Raises what a part raises (unsupported: the whole graph
    falls back)."""
    from .segments import compile_segments, host_ops

    name = f"graph_{next(_graph_ids)}"

    def compile_one(sub: torch.fx.GraphModule, examples: Sequence[Any], part: str) -> Any:
        compiled = compile_graph_module(sub, examples, opts, name=f"{name}_{part}", kind=kind)
        _check_extern_fallbacks(compiled, opts, kind)
        if compiled.program is None and choose_backend(opts, examples) is None:
            raise UnsupportedError(
                f"{compiled.name} takes {_devices(examples)} tensors, which FIR has no back "
                "end for yet"
            )
        compiled.eager = lambda args: list(sub(*args))
        return compiled

    split = compile_segments(fx_gm, compile_one)
    custom = sorted({op for op in host_ops(split) if not op.startswith(("aten.", "prims."))})
    if custom:
        why = "no FIR mapping (it makes a data-dependent size)"
        if opts.fallback == "never":
            raise FallbackError(
                f"fallback='never': {name} ({kind}) would run ops with PyTorch: "
                + ", ".join(f"{op}: {why}" for op in custom)
            )
        for op in custom:
            log("fallback", f"{name}: {op} runs as an extern call: {why}")
    log(
        "graphs",
        f"{name} ({kind}): cut at {len(split.steps) - len(split.segments)} host step(s) into "
        f"{len(split.segments)} FIR program(s) for its data-dependent sizes",
    )
    SEGMENTED.append(split)

    def run(args: list[Any]) -> list[Any]:
        return split(*args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _fall_back(
    fx_gm: torch.fx.GraphModule,
    opts: CompileOptions,
    kind: str,
    reason: str,
    warning: str | None = None,
    name: str = "",
) -> Callable[..., Any]:
    """Run the graph with PyTorch for ``reason`` (an unsupported thing), or raise under
    ``fallback="never"``."""
    if opts.fallback == "never":
        raise FallbackError(f"fallback='never': a {kind} graph would run with PyTorch: {reason}")
    FALLBACKS.append(GraphFallback(name, kind, reason))
    log("fallback", f"{kind} graph run by PyTorch: {reason}")
    warnings.warn(warning or f"fir: running this graph with PyTorch: {reason}", stacklevel=3)
    return fx_gm.forward


def _output_values(gm: torch.fx.GraphModule) -> list[Any]:
    """The example values of a graph's outputs: where a graph with no tensor input (``arange``,
    ``eye`` with a ``device=``) computes."""
    out: list[Any] = []
    for node in gm.graph.nodes:
        if node.op == "output":
            torch.fx.map_arg(node.args, lambda n: out.append(n.meta.get("val")))
    return [v for v in out if isinstance(v, torch.Tensor)]


def _device(inputs: Sequence[Any]) -> str:
    kinds = {x.device.type for x in inputs if isinstance(x, torch.Tensor)}
    return "cuda" if "cuda" in kinds else ("cpu" if kinds <= {"cpu"} else sorted(kinds)[0])


def _placement(inputs: Sequence[Any]) -> str:
    """The device a graph's program runs on, with the GPU's index (``cuda:1``): the graph's
    CUDA tensors', not the device current when it is called (a model put on ``cuda:1``
    without ``torch.cuda.set_device``)."""
    device = _device(inputs)
    if device != "cuda":
        return device
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            index = x.device.index
            return f"cuda:{torch.cuda.current_device() if index is None else index}"
    return device


def pipeline_for(options: CompileOptions, backend: str | None) -> str:
    """The pipeline a graph compiles with: the option's, else its back end's default."""
    if options.pipeline is not None:
        return options.pipeline
    known = BACKENDS.get(backend or "")
    return known.pipeline if known is not None else DEFAULT_PIPELINE


def choose_backend(options: CompileOptions, inputs: Sequence[Any]) -> str | None:
    """The back end that runs a graph on ``inputs``: the option's, else the device's; None
    where FIR has none for the device (PyTorch runs the graph)."""
    device = _device(inputs)
    if options.backend == "interp":
        return "interp" if device == "cpu" else None
    if options.backend is None:
        known = for_device(device)
        return known.name if known is not None else None
    chosen = BACKENDS[options.backend]
    return chosen.name if device == chosen.default_device() else None


def _devices(inputs: Sequence[Any]) -> str:
    kinds = sorted({x.device.type for x in inputs if isinstance(x, torch.Tensor)} - {"cpu"})
    return "/".join(kinds)


def export_and_import(
    fn: Callable[..., Any] | torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    name: str = "main",
    dynamic_batch: bool = False,
) -> tuple[Module, ImportReport, list[torch.Tensor], list[torch.Tensor]]:
    """Capture ``fn`` with ``torch.export`` (inference) and import it.

    Returns the module, the report, the extra constant arguments, and the parameters and
    buffers that ``torch.export`` lifted to leading inputs (pass them before the user inputs).
    """
    module = fn if isinstance(fn, torch.nn.Module) else _FunctionModule(fn)
    module = module.eval()
    dynamic_shapes: tuple[Any, ...] | None = None
    if dynamic_batch:
        # the batch is dim 0 of the first input; every input whose dim 0 has that size shares it
        # (a weight whose dim 0 happens to differ stays static instead of failing the export)
        batch = torch.export.Dim("s0", min=2)
        size = example_inputs[0].shape[0] if example_inputs and example_inputs[0].dim() else None
        dynamic_shapes = tuple(
            {0: batch} if t.dim() and t.shape[0] == size else {} for t in example_inputs
        )
        if isinstance(module, _FunctionModule):
            dynamic_shapes = (dynamic_shapes,)  # forward(*args): one entry for the varargs tuple
    with torch.no_grad():
        ep = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes)
        ep = ep.run_decompositions({})
    lifted = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            t = ep.state_dict.get(spec.target)
            if t is None:
                t = ep.constants[spec.target]
            lifted.append(t.detach())
        elif spec.kind.name != "USER_INPUT":
            raise FirError(f"exported input of kind {spec.kind.name} is not supported")
    for out in ep.graph_signature.output_specs:
        if out.kind.name in ("USER_INPUT_MUTATION", "BUFFER_MUTATION", "PARAMETER_MUTATION"):
            # torch.export turns an in-place update into an extra output; a FIR function has
            # no in-place semantics, so that output would silently change the signature
            what = out.target or out.arg.name
            raise FirError(
                f"the program mutates {what} in place ({out.kind.name.lower()}); "
                "FIR imports functions without in-place updates"
            )
    gm = ep.graph_module
    mod, report, constants = import_graph_module(gm, None, name)
    return mod, report, constants, lifted


class _FunctionModule(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)
