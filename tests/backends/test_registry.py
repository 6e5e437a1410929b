"""The back-end registry: every reader names the back ends from it, and what ``fir-translate``
prints for a back end is the code that back end builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.registry import BACKENDS, NAMES, backend_named  # noqa: E402
from fir.frontend import dynamo as fir_backend  # noqa: E402
from fir.ir.errors import FirError  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402
from fir.tools import fir_run, fir_translate  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _buildable(name: str) -> bool:
    if name != "triton":
        return True
    return torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"


def _built_source(kernels: object) -> str:
    """The code a back end's kernels were compiled from."""
    text = getattr(kernels, "ir", None) or getattr(kernels, "source", None)
    assert isinstance(text, str), type(kernels)
    return text


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("example", ["softmax.fir", "layer_norm.fir", "cross_entropy.fir"])
def test_what_fir_translate_prints_is_what_the_back_end_builds(name: str, example: str) -> None:
    # the llvm back end planned scratch rows that ``fir-translate --target llvm`` did not:
    # the tool printed code the back end never built
    if not _buildable(name):
        pytest.skip("Triton kernels build on a GPU or under TRITON_INTERPRET=1")
    backend = backend_named(name)
    text = (EXAMPLES / example).read_text()
    module = parse_pipeline(backend.pipeline).run(parse_module(text, example))
    printed = fir_translate.translate(module, name)
    (g,) = module.funcs
    program = compile_function(g, name)
    assert _built_source(program.kernels) == printed  # type: ignore[attr-defined]


def test_the_back_ends_are_named_once() -> None:
    assert set(NAMES) == set(BACKENDS) == {"cpp", "llvm", "triton"}
    assert set(fir_backend.RUNNERS) == {*NAMES, "interp"}
    translate_targets = fir_translate.build_arg_parser()._option_string_actions["--target"]
    assert set(translate_targets.choices) == {*NAMES, "plan", "call"}  # type: ignore[arg-type]
    run_backends = fir_run.build_arg_parser()._option_string_actions["--backend"]
    assert set(run_backends.choices) == {*NAMES, "interp"}  # type: ignore[arg-type]
    for b in BACKENDS.values():
        assert b.device in ("cpu", "cuda") and b.pipeline and b.summary
    with pytest.raises(FirError, match="unknown code generator 'cuda'.*cpp, triton, llvm"):
        backend_named("cuda")


def test_torch_compile_picks_the_back_end_of_the_device_and_its_pipeline() -> None:
    options = fir_backend.CompileOptions()
    assert fir_backend.choose_backend(options, [torch.ones(2)]) == "cpp"
    assert fir_backend.pipeline_for(options, "triton") == "cuda"
    assert fir_backend.pipeline_for(options, "llvm") == "fusion"
    assert fir_backend.pipeline_for(options, "interp") == "fusion"
    llvm = fir_backend.CompileOptions(backend="llvm")
    assert fir_backend.choose_backend(llvm, [torch.ones(2)]) == "llvm"
