"""``torch.compile(fn, backend="fir")``: Dynamo → AOTAutograd (aten, inference) → FIR.

Options (``torch.compile(..., options={...})``):

* ``pipeline``: FIR passes run on each imported graph (default ``"fusion"``: down to fused,
  ordered, planned loop level);
* ``dump_dir``: write the ``.fir`` of every graph after import and after every pass, so any
  stage can be replayed with ``fir-opt``;
* ``backend``: what runs the compiled program: by default the back end of the inputs' device,
  ``"cpp"`` for CPU tensors (C++/OpenMP kernels, :mod:`fir.backends.cpp`) and ``"triton"`` for
  CUDA tensors (:mod:`fir.backends.triton`); or ``"interp"`` (the reference interpreter, any
  pipeline), or ``"llvm"`` (kernels compiled in the process by llvmlite, CPU tensors).
  Tensors on another device run with PyTorch, with a warning;
* ``cuda_graphs``: capture each compiled CUDA graph module in a CUDA graph on its second call
  and replay it after (default False): one launch per call instead of one per kernel;
* ``autotune``: each Triton kernel times a few block configurations at its first launch and
  keeps the fastest, cached on disk (default False: the heuristic's choice);
* ``fallback``: on a graph FIR cannot import or compile, run it with PyTorch (default True)
  instead of raising.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from fir.backends.prewarm import prewarm_triton
from fir.ir.errors import FirError
from fir.ir.graph import Module, TensorOp
from fir.ir.printer import print_module

from .fx_import import ImportReport, import_graph_module

# Dynamo imports this module when it looks the backend up, before it traces: Triton's one-time
# costs start now, in the background, where a GPU exists (see fir.backends.prewarm)
prewarm_triton()

RUNNERS = ("cpp", "triton", "llvm", "interp")
PLANNED_RUNNERS: tuple[str, ...] = ()
DEVICE_BACKENDS = {"cpu": "cpp", "cuda": "triton"}
_graph_ids = itertools.count()


@dataclass
class CompileOptions:
    pipeline: str = "fusion"
    dump_dir: str | None = None
    backend: str | None = None  # None: the inputs' device's (DEVICE_BACKENDS)
    fallback: bool = True
    cuda_graphs: bool = False
    autotune: bool = False

    @staticmethod
    def from_dict(options: dict[str, Any] | None) -> CompileOptions:
        opts = CompileOptions()
        for key, value in (options or {}).items():
            if not hasattr(opts, key):
                known = ", ".join(CompileOptions.__dataclass_fields__)
                raise FirError(f"unknown fir backend option '{key}' (options: {known})")
            setattr(opts, key, value)
        if opts.backend is not None and opts.backend not in RUNNERS:
            if opts.backend in PLANNED_RUNNERS:
                raise FirError(
                    f"fir backend '{opts.backend}' is not available yet; use "
                    "'cpp', 'triton' or 'interp'"
                )
            raise FirError(
                f"unknown fir backend '{opts.backend}' (choose from {', '.join(RUNNERS)})"
            )
        from fir.passes.pipeline import parse_pipeline

        # a bad pipeline is the user's error, not a graph to fall back on
        parse_pipeline(opts.pipeline)
        return opts


class BackendCompileError(FirError):
    """FIR imported and transformed a graph, but its back end failed on it (no compiler, a
    compile error, a plan it cannot write): a fault of FIR or of the machine, not an unsupported
    program; tests treat it as a failure even where the graph falls back to PyTorch."""


@dataclass
class CompiledGraph:
    """One imported graph and how to run it."""

    module: Module
    report: ImportReport
    constants: list[torch.Tensor]
    name: str
    stages: list[tuple[str, str]] = field(default_factory=list)
    program: Any = None  # the compiled program (a code generator's), None for the interpreter

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        if self.report.size_inputs:  # sizes come from the tensors' shapes
            skip = set(self.report.size_inputs)
            inputs = tuple(x for k, x in enumerate(inputs) if k not in skip)
        if self.program is not None:  # kernels write memory; extern calls run under no_grad
            return self.program(*inputs, *self.constants)
        from fir.ir.interpreter import run_graph

        with torch.no_grad():
            return run_graph(self.module.funcs[0], [*inputs, *self.constants])


# every graph compiled in this process, for fir.explain and tests
COMPILED: list[CompiledGraph] = []


def compile_graph_module(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: CompileOptions,
    name: str | None = None,
) -> CompiledGraph:
    """Import an aten-level graph, run the pipeline, and dump stages if asked."""
    from fir.passes.pipeline import parse_pipeline

    name = name or f"graph_{next(_graph_ids)}"
    module, report, constants = import_graph_module(gm, list(example_inputs), name)
    compiled = CompiledGraph(module, report, constants, name)
    compiled.stages.append(("import", print_module(module)))
    pipeline = parse_pipeline(options.pipeline)

    def after(p: Any, m: Module) -> None:
        compiled.stages.append((p.name, print_module(m)))

    compiled.module = pipeline.run(module, after_pass=after)
    where = list(example_inputs) + _output_values(gm)
    backend = choose_backend(options, where)
    at_tensor_level = any(isinstance(n, TensorOp) for f in compiled.module.funcs for n in f.nodes)
    if backend not in (None, "interp") and at_tensor_level:
        warnings.warn(
            f"fir: pipeline '{options.pipeline}' leaves {name} at tensor level, which the "
            f"'{backend}' back end cannot compile: the interpreter runs it (use a "
            "pipeline that ends at loop level, such as 'fusion')",
            stacklevel=2,
        )
    elif backend not in (None, "interp"):
        from fir.backends.compile import compile_function

        try:
            compiled.program = compile_function(
                compiled.module.funcs[0], backend, device=_device(where), autotune=options.autotune
            )
        except FirError as e:
            raise BackendCompileError(
                f"the {backend} back end could not compile {name}: {e.message}", e.loc
            ) from e
        device = compiled.program.device
        if device != "cpu":  # constants the import made (folded arange, eye …) go with it
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():  # real tensors, moved outside Dynamo's fake mode
                compiled.constants = [c.to(device) for c in compiled.constants]
        if options.cuda_graphs and device == "cuda":
            from fir.backends.graphs import CudaGraphProgram

            compiled.program = CudaGraphProgram(compiled.program)
    if options.dump_dir:
        out = Path(options.dump_dir)
        out.mkdir(parents=True, exist_ok=True)
        for k, (stage, text) in enumerate(compiled.stages):
            (out / f"{name}.{k:02d}.{stage}.fir").write_text(text)
        (out / f"{name}.report.txt").write_text(report.summary() + "\n")
    COMPILED.append(compiled)
    return compiled


def fir_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
    **_: Any,
) -> Callable[..., Any]:
    """The Dynamo backend registered as ``"fir"`` (entry point ``torch_dynamo_backends``)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    opts = CompileOptions.from_dict(options)

    def fw_compiler(fx_gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        try:
            compiled = compile_graph_module(fx_gm, inputs, opts)
        except FirError as e:
            if not opts.fallback:
                raise
            warnings.warn(f"fir: running this graph with PyTorch: {e.message}", stacklevel=2)
            return make_boxed_func(fx_gm.forward)

        if (
            compiled.program is None
            and choose_backend(opts, [*inputs, *_output_values(fx_gm)]) is None
        ):
            # FIR has compiled the graph (fir.explain reports its kernels), but it generates no
            # code for this device: PyTorch runs it
            warnings.warn(
                f"fir: {compiled.name} takes {_devices(inputs)} tensors, which FIR has no back "
                "end for yet: PyTorch runs this graph (FIR's kernels are reported, not run)",
                stacklevel=2,
            )
            return make_boxed_func(fx_gm.forward)

        def run(args: list[Any]) -> list[torch.Tensor]:
            return compiled(*args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    # Gradients are not compiled by FIR: the backward graph (if any) runs with PyTorch.
    backend = aot_autograd(
        fw_compiler=fw_compiler, bw_compiler=lambda g, _: make_boxed_func(g.forward)
    )
    return backend(gm, example_inputs)


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


def choose_backend(options: CompileOptions, inputs: Sequence[Any]) -> str | None:
    """The back end that runs a graph on ``inputs``: the option's, else the device's; None
    where FIR has none for the device (PyTorch runs the graph)."""
    device = _device(inputs)
    if options.backend == "interp":
        return "interp" if device == "cpu" else None
    if options.backend is None:
        return DEVICE_BACKENDS.get(device)
    if options.backend == "triton":
        from fir.backends.triton import default_device

        return "triton" if device == default_device() else None
    return options.backend if device == "cpu" else None


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
    dynamic_shapes = None
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
