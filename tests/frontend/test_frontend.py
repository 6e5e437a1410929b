"""The PyTorch frontend end to end: imported examples, torch.compile(backend="fir") and its
options, fallbacks for what FIR does not support, fir-import, and fir.explain."""

from __future__ import annotations

import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from fir.frontend import dynamo as fir_backend  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.ir.printer import print_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402
from fir.tools import fir_import, fir_opt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IMPORTED = ROOT / "examples" / "imported"


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compile_fir(fn: Any, **options: Any) -> Any:
    return torch.compile(fn, backend="fir", options=options or None)


def new_graphs(start: int) -> list[Any]:
    return fir_backend.COMPILED[start:]


# ---------------------------------------------------------------------------------------------
# (a) the imported examples: regenerate.sh is the single source of what each file is


def _regenerate_commands() -> list[list[str]]:
    lines = (IMPORTED / "regenerate.sh").read_text().splitlines()
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith("fir-import ")]


COMMANDS = _regenerate_commands()


def test_every_imported_example_comes_from_regenerate_sh() -> None:
    outputs = {fir_import.build_arg_parser().parse_args(argv).output for argv in COMMANDS}
    on_disk = {p.name for p in IMPORTED.glob("*.fir")}
    assert on_disk == outputs
    assert {
        "rms_norm.fir",
        "softmax.fir",
        "layer_norm.fir",
        "gelu_mlp.fir",
        "cross_entropy.fir",
        "transformer_encoder_layer.fir",
    } <= on_disk


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0].partition(":")[2])
def test_imported_example_round_trips_and_matches_eager(argv: list[str], tmp_path: Path) -> None:
    args = fir_import.build_arg_parser().parse_args(argv)
    path = IMPORTED / args.output
    text = path.read_text()

    # the printer reproduces the file, and so does fir-opt
    module = parse_module(text, str(path))
    assert print_module(module) == text
    out = tmp_path / "out.fir"
    assert fir_opt.main([str(path), "-o", str(out)]) == 0
    assert out.read_text() == text

    # rebuild the program exactly as fir-import did: same seed, same inputs
    module_path, _, attr = args.target.partition(":")
    obj = fir_import.resolve_target(f"{IMPORTED / module_path}:{attr}")
    fn = fir_import.instantiate(obj, args.target, args.seed)
    specs = [fir_import.parse_input_spec(s) for s in args.input]
    inputs = fir_import.make_inputs(specs, args.seed, args.int_high)
    graph = module.funcs[0]
    lifted = fir_import.state_arguments(graph, fn, len(inputs))
    assert len(lifted) + len(inputs) == len(graph.args)
    with torch.no_grad():
        expected = fn(*inputs)
        got = run_graph(graph, [*lifted, *inputs])
    assert len(got) == 1
    torch.testing.assert_close(got[0], expected, rtol=1e-5, atol=1e-5)


def test_transformer_example_keeps_attention_as_an_extern() -> None:
    text = (IMPORTED / "transformer_encoder_layer.fir").read_text()
    assert 'extern "aten.scaled_dot_product_attention.default"' in text
    assert "layer_norm %" in text and "linear %" in text


# ---------------------------------------------------------------------------------------------
# (b) torch.compile of a whole TransformerEncoderLayer


def test_torch_compile_transformer_encoder_layer_matches_eager() -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4).eval()
    x = torch.randn(8, 2, 64)
    start = len(fir_backend.COMPILED)
    with torch.no_grad():
        expected = layer(x)
        got = torch.compile(layer, backend="fir")(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    graphs = new_graphs(start)
    assert len(graphs) == 1
    report = graphs[0].report
    assert report.imported["aten.addmm.default"] == 4
    assert report.imported["aten.native_layer_norm.default"] == 2
    assert sum(report.fallbacks.values()) <= 1  # only the fused attention kernel


# ---------------------------------------------------------------------------------------------
# (c) backend options


def _small(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * w + 1.0, dim=-1).sum(0)


def test_option_pipeline_and_dump_dir(tmp_path: Path) -> None:
    x, w = torch.randn(4, 8), torch.randn(8)
    start = len(fir_backend.COMPILED)
    got = compile_fir(
        _small, pipeline="canonicalize,cse", dump_dir=str(tmp_path), backend="interp"
    )(x, w)
    torch.testing.assert_close(got, _small(x, w))
    (graph,) = new_graphs(start)
    assert [stage for stage, _ in graph.stages] == ["import", "canonicalize", "cse"]
    dumps = sorted(tmp_path.glob("*.fir"))
    assert [p.name.split(".")[-2] for p in dumps] == ["import", "canonicalize", "cse"]
    for p, (_, text) in zip(dumps, graph.stages):
        assert p.read_text() == text
        assert fir_opt.main([str(p), "-o", str(tmp_path / "replay.out")]) == 0
        assert (tmp_path / "replay.out").read_text() == text
    assert "imported ops" in (tmp_path / f"{graph.name}.report.txt").read_text()


def test_option_backend_interp() -> None:
    x, w = torch.randn(4, 8), torch.randn(8)
    torch.testing.assert_close(compile_fir(_small, backend="interp")(x, w), _small(x, w))


def test_option_backend_llvm() -> None:
    from fir.frontend.dynamo import COMPILED

    x, w = torch.randn(4, 8), torch.randn(8)
    torch.testing.assert_close(compile_fir(_small, backend="llvm")(x, w), _small(x, w))
    assert type(COMPILED[-1].program.kernels).__name__ == "LLVMKernels"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"backend": "tpu"}, "unknown fir backend 'tpu'"),
        ({"no_such_option": 1}, "unknown fir backend option 'no_such_option'"),
        ({"pipeline": "no-such-pass"}, "unknown pass 'no-such-pass'"),
    ],
)
def test_bad_options_give_a_clear_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception) as e:
        compile_fir(_small, **options)(torch.randn(4, 8), torch.randn(8))
    assert message in str(e.value)
    assert "Traceback" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# (d) what FIR does not support runs with PyTorch (or fails clearly)


def test_unmapped_op_runs_as_an_extern() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.exp(), dim=1) * 2

    x = torch.randn(4, 6)
    start = len(fir_backend.COMPILED)
    torch.testing.assert_close(compile_fir(f)(x), f(x))
    (graph,) = new_graphs(start)
    assert graph.report.fallbacks["aten.cumsum.default"] == 1
    assert graph.report.imported["aten.exp.default"] == 1
    assert 'extern "aten.cumsum.default"' in graph.stages[0][1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_rms_norm_is_imported_not_called(dtype: torch.dtype) -> None:
    """``rms_norm`` reaches the graph as ``aten._fused_rms_norm`` on CUDA (a CPU build
    decomposes it before the backend sees it, so the graph is built here): imported as FIR's
    own op, so that the residual add before it fuses into the norm's kernel; the f32 rstd when
    the graph reads it (training)."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def f(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> Any:
        y, rstd = torch.ops.aten._fused_rms_norm.default(
            torch.ops.aten.add.Tensor(x, r), [16], w, 1e-6
        )
        return y, torch.ops.aten.mul.Tensor(rstd, 2)

    def g(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> Any:
        y = torch.ops.aten._fused_rms_norm.default(torch.ops.aten.add.Tensor(x, r), [16], w, None)
        return (torch.ops.aten.mul.Tensor(y[0], 3),)

    x, r, w = (torch.randn(*s, dtype=dtype) for s in ((5, 16), (5, 16), (16,)))
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    for fn in (f, g):
        gm = torch.fx.symbolic_trace(fn)
        FakeTensorProp(gm).propagate(x, r, w)
        compiled = fir_backend.compile_graph_module(gm, [x, r, w], fir_backend.CompileOptions())
        assert compiled.report.imported["aten._fused_rms_norm.default"] == 1
        assert not compiled.report.fallbacks
        assert "extern" not in compiled.stages[0][1]
        want = fn(x, r, w)
        for got, expected in zip(compiled(x, r, w), want):
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_safe_softmax_tells_masked_rows_by_the_softmax_max(dtype: torch.dtype) -> None:
    """``aten._safe_softmax`` (an attention softmax with a mask): a row of -inf only is one
    whose max is -inf, so the import reads the max (which cse merges with the softmax's own,
    in f32) where it had reduced ``all(x == -inf)``: two row reductions in the kernel, not
    three. Rows of -inf give 0, a NaN stays NaN, as eager."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def f(x: torch.Tensor) -> Any:
        return (torch.ops.aten._safe_softmax.default(x, -1),)

    x = torch.randn(3, 4, 8, dtype=dtype)
    x[0, 1] = float("-inf")
    x[1, 2, 3] = float("-inf")
    x[2, 0, 5] = float("nan")
    gm = torch.fx.symbolic_trace(f)
    FakeTensorProp(gm).propagate(x)
    compiled = fir_backend.compile_graph_module(gm, [x], fir_backend.CompileOptions())
    imported = compiled.stages[0][1]
    assert " all " not in imported and " max " in imported
    (got,) = compiled(x)
    (want,) = f(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert (got[0, 1] == 0).all() and got[2, 0].isnan().all()
    if dtype == torch.float32:
        (g,) = parse_pipeline("decompose,cse").run(parse_module(imported)).funcs
        assert sum(1 for n in g.nodes if getattr(n, "op", None) == "max") == 1


def test_native_layer_norm_statistics_come_from_the_norms_one_pass() -> None:
    """A training forward's ``native_layer_norm`` returns the mean and rstd it normalized with:
    imported as one ``var_mean`` that cse merges with the layer norm's own welford, so the
    kernel makes one row reduction (it had made a separate sum for the mean: a third cross-warp
    reduction in each of BERT's layer norms)."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
        y, mean, rstd = torch.ops.aten.native_layer_norm.default(x, [96], w, b, 1e-12)
        return y, mean, rstd

    x, w, b = torch.randn(12, 96), torch.randn(96), torch.randn(96)
    gm = torch.fx.symbolic_trace(f)
    FakeTensorProp(gm).propagate(x, w, b)
    compiled = fir_backend.compile_graph_module(gm, [x, w, b], fir_backend.CompileOptions())
    for got, want in zip(compiled(x, w, b), f(x, w, b)):
        torch.testing.assert_close(got, want)
    imported = compiled.stages[0][1]
    merged = print_module(parse_pipeline("decompose,cse").run(parse_module(imported)))
    assert " mean " not in imported and merged.count(" = welford ") == 1
    fused = print_module(parse_pipeline("fusion").run(parse_module(imported)))
    assert fused.count(" = reduction ") == 1


def test_mutation_of_an_input_gives_the_eager_result() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x * 2

    x = torch.randn(5)
    x_eager, x_compiled = x.clone(), x.clone()
    expected = f(x_eager)
    got = compile_fir(f)(x_compiled)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x_compiled, x_eager)  # the input was updated in place too


def test_data_dependent_shape_breaks_the_graph() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x[x > 0] * 2

    x = torch.randn(16)
    torch.testing.assert_close(compile_fir(f)(x), f(x))


def test_data_dependent_shape_in_the_graph_compiles() -> None:
    # nonzero's size is known once it has run: the graph is cut there into FIR programs
    # (fir.frontend.segments), with no graph left to PyTorch and no warning
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x > 0) + 1

    x = torch.randn(16)
    with (
        torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        got = compile_fir(f)(x)
    torch.testing.assert_close(got, f(x))
    messages = [str(w.message) for w in caught if str(w.message).startswith("fir:")]
    assert messages == []
    assert fir_backend.SEGMENTED and fir_backend.SEGMENTED[-1].calls == 1


def test_unsupported_dtype_falls_back_cleanly() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).abs()

    x = torch.randn(4, dtype=torch.complex64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compile_fir(f)(x)
    torch.testing.assert_close(got, f(x))
    assert any("complex64" in str(w.message) for w in caught)

    torch._dynamo.reset()
    with pytest.raises(Exception) as e:
        compile_fir(f, fallback=False)(x)
    assert "dtype torch.complex64 is not supported" in str(e.value)


# ---------------------------------------------------------------------------------------------
# (e) fir-import


MODELS = """
import torch

def scale_rows(x, w):
    return torch.softmax(x, dim=-1) * w

def fixed_batch(x):
    return x.reshape(4, -1)

def broken(x):
    raise ValueError("model bug")

def inplace(x):
    x.mul_(2)
    return x

def takes_index(x, idx):
    return torch.nn.functional.embedding(idx, x)

class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)
        self.register_buffer("shift", torch.arange(4.0))

    def forward(self, x):
        return self.lin(x) + self.shift

def make_small():
    return Small()

VALUE = 3
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "usermodels.py"
    path.write_text(MODELS)
    return path


def run_import(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = fir_import.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_fir_import_function(
    models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "scale_rows.fir"
    rc, _, err = run_import(
        [
            f"{models}:scale_rows",
            "--input",
            "f32[4, 8]",
            "--input",
            "f32[8]",
            "-o",
            str(dst),
            "--report",
        ],
        capsys,
    )
    assert rc == 0, err
    text = dst.read_text()
    assert text.startswith("func @scale_rows(%x: f32[4, 8], %w: f32[8]) -> (f32[4, 8])")
    assert "softmax %x" in text
    assert "imported ops" in err and "fallback ops (run by PyTorch): 0" in err


def test_fir_import_module_class_and_factory(
    models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target, name in ((f"{models}:Small", "Small"), (f"{models}:make_small", "small")):
        dst = tmp_path / f"{name}.fir"
        rc, _, err = run_import(
            [target, "--input", "f32[2,8]", "--name", name, "-o", str(dst)], capsys
        )
        assert rc == 0, err
        graph = parse_module(dst.read_text()).funcs[0]
        assert graph.name == name
        # lifted parameters and buffers lead, the user input comes last
        assert [a.name for a in graph.args] == ["p_lin_weight", "p_lin_bias", "b_shift", "x"]
    obj = fir_import.resolve_target(f"{models}:Small")
    module = fir_import.instantiate(obj, "Small", seed=0)
    x = torch.randn(2, 8)
    lifted = fir_import.state_arguments(graph, module, 1)
    with torch.no_grad():
        torch.testing.assert_close(run_graph(graph, [*lifted, x])[0], module(x))


def test_fir_import_dynamic_batch(
    models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dyn.fir"
    rc, _, err = run_import(
        [
            f"{models}:scale_rows",
            "--input",
            "f32[4,8]",
            "--input",
            "f32[8]",
            "--dynamic",
            "-o",
            str(dst),
        ],
        capsys,
    )
    assert rc == 0, err
    text = dst.read_text()
    assert "%x: f32[s0, 8], %w: f32[8]" in text  # w's dim 0 is not the batch: it stays static
    graph = parse_module(text).funcs[0]
    x, w = torch.randn(7, 8), torch.randn(8)  # another batch size than the example's
    torch.testing.assert_close(run_graph(graph, [x, w])[0], torch.softmax(x, -1) * w)
    assert fir_opt.main([str(dst), "-o", str(tmp_path / "again.fir")]) == 0


def test_fir_import_integer_inputs_are_valid_indices(
    models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_import(
        [
            f"{models}:takes_index",
            "--input",
            "f32[10,4]",
            "--input",
            "i64[6]",
            "--int-high",
            "10",
            "--check",
        ],
        capsys,
    )
    assert rc == 0, err
    assert "embedding %x, %idx" in out
    assert "agrees with eager" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{m}:nope", "--input", "f32[4]"], "has no attribute 'nope'"),
        (
            ["no_such_package.mod:f", "--input", "f32[4]"],
            "cannot import module 'no_such_package.mod'",
        ),
        (["{m}", "--input", "f32[4]"], "expected package.module:function"),
        (["{m}:VALUE", "--input", "f32[4]"], "not callable"),
        (["{m}:scale_rows", "--input", "f33[4]"], "unknown dtype 'f33'"),
        (["{m}:scale_rows", "--input", "f32[4,n]"], "size 'n' is not a non-negative integer"),
        (["{m}:scale_rows", "--input", "f32[4"], "expected a FIR type"),
        (["{m}:scale_rows"], "give the example inputs with --input"),
        (["{m}:broken", "--input", "f32[4]"], "torch.export failed for"),
        (["{m}:scale_rows", "--input", "f32[4,8]"], "torch.export failed for"),
        (["{m}:inplace", "--input", "f32[4]"], "mutates x in place"),
        (
            ["{m}:fixed_batch", "--input", "f32[8]", "--dynamic"],
            "torch.export with a dynamic dim 0 failed",
        ),
        (
            ["{m}:scale_rows", "--input", "f32[1,8]", "--input", "f32[8]", "--dynamic"],
            "batch size of at least 2",
        ),
    ],
)
def test_fir_import_errors_are_one_line(
    models: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run_import([a.replace("{m}", str(models)) for a in argv], capsys)
    assert rc == 1
    assert message in err
    lines = [ln for ln in err.splitlines() if ln.startswith("fir-import: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and out == ""


def test_fir_import_names_a_bug_in_fir_as_such(
    models: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fir.frontend import aten

    def broken_converter(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("converter bug")

    monkeypatch.setitem(aten.CONVERTERS, "aten._softmax.default", broken_converter)
    monkeypatch.setitem(aten.CONVERTERS, "aten.softmax.int", broken_converter)
    rc, _, err = run_import(
        [f"{models}:scale_rows", "--input", "f32[4,8]", "--input", "f32[8]"], capsys
    )
    assert rc == 1
    assert "internal error of the FIR importer" in err and "converter bug" in err
    assert "Traceback" not in err


def test_fir_import_usage_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        fir_import.main(["x:y", "--no-such-flag"])
    assert e.value.code == 1


def test_fir_import_console_script(tmp_path: Path) -> None:
    dst = tmp_path / "softmax.fir"
    target = f"{IMPORTED / 'models.py'}:softmax"
    ok = subprocess.run(
        ["fir-import", target, "--input", "f32[4,8]", "-o", str(dst)],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert dst.read_text().startswith("func @softmax(%x: f32[4, 8])")
    bad = subprocess.run(
        ["fir-import", target, "--input", "c64[4]"], capture_output=True, text=True
    )
    assert bad.returncode == 1
    assert "unknown dtype 'c64'" in bad.stderr and "Traceback" not in bad.stderr


def test_docs_list_every_mapped_op(capsys: pytest.CaptureFixture[str]) -> None:
    assert fir_import.main(["--list-ops"]) == 0
    listed = capsys.readouterr().out
    doc = (ROOT / "docs" / "frontend.md").read_text()
    begin, end = "<!-- BEGIN mapped-ops (fir-import --list-ops) -->\n", "<!-- END mapped-ops -->"
    section = doc[doc.index(begin) + len(begin) : doc.index(end)]
    assert section == listed, (
        "docs/frontend.md is stale: paste `fir-import --list-ops` between the markers"
    )


# ---------------------------------------------------------------------------------------------
# (f) fir.explain


def test_explain_reports_graph_breaks_and_fallbacks(capsys: pytest.CaptureFixture[str]) -> None:
    import fir

    def branchy(x: torch.Tensor) -> torch.Tensor:
        y = x.sin() * 2
        if y.sum().item() > 0:  # a graph break: .item() leaves the graph
            return torch.cumsum(y, 0)
        return y.cos()

    ex = fir.explain(branchy, torch.ones(4))
    printed = capsys.readouterr().out
    assert ex.graph_count == 2
    assert ex.graph_break_count == 1
    assert "item()" in ex.graph_breaks[0].reason
    assert "test_frontend.py" in ex.graph_breaks[0].location
    assert len(ex.compiled_graphs) == 2
    assert ex.imported["aten.sin.default"] == 1
    assert ex.fallbacks["aten.cumsum.default"] == 1
    # compiled through the 'fusion' pipeline: y = sin(x) * 2 and y.sum() fuse into one kernel;
    # the second graph (x is all ones, so the cumsum branch) is one extern call
    assert ex.kernel_count == 1
    assert "graphs: 2, graph breaks: 1" in printed
    assert "aten.cumsum.default x1" in printed
    assert f"kernels: {ex.kernel_count}" in printed
    assert "fusion:" in printed


def test_explain_one_graph_no_breaks(capsys: pytest.CaptureFixture[str]) -> None:
    import fir

    ex = fir.explain(_small, torch.randn(4, 8), torch.randn(8))
    assert (ex.graph_count, ex.graph_break_count, len(ex.compiled_graphs)) == (1, 0, 1)
    assert not ex.fallbacks and not ex.graphs_run_by_pytorch
    assert "graphs: 1, graph breaks: 0" in capsys.readouterr().out


def test_import_fir_does_not_import_torch() -> None:
    code = "import sys, fir; print(callable(fir.explain), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


# ---------------------------------------------------------------------------------------------
# Run-time faults: the exception eager PyTorch raises, the node named once


@pytest.mark.parametrize("pipeline", ["cleanup", "fusion"])
def test_out_of_range_index_raises_an_index_error(pipeline: str) -> None:
    from fir.ir.errors import InterpreterError

    x, i = torch.randn(4), torch.tensor([7])
    with pytest.raises(IndexError):  # what eager raises
        x[i]
    f = compile_fir(lambda x, i: x[i], pipeline=pipeline, backend="interp")
    with pytest.raises(IndexError) as info:
        f(x, i)
    e = info.value
    assert isinstance(e, InterpreterError)
    assert "7 is out of bounds [0, 4)" in e.message and "%arg0_1 (f32[4])" in e.message
    node = e.message.split(":")[0]  # "%index_rows = pointwise"
    assert node.startswith("%") and e.message.count(node.split(" =")[0] + " =") == 1
    if pipeline == "fusion":
        assert e.message.startswith("%index_rows = pointwise: %5 = load %arg0_1[%4]: ")


def test_out_of_range_embedding_index_raises_an_index_error() -> None:
    w, ids = torch.randn(4, 3), torch.tensor([1, 9])
    f = compile_fir(
        lambda w, i: torch.nn.functional.embedding(i, w), pipeline="fusion", backend="interp"
    )
    with pytest.raises(IndexError) as info:
        f(w, ids)
    assert info.value.message == (
        "%embedding = pointwise: %2 = load %arg1_1[3*%1 + i1]: indirect index %1 = 9 is out of "
        "bounds [0, 4) for %arg1_1 (f32[4, 3]) at (i0=1, i1=0)"
    )


@pytest.mark.parametrize("pipeline", ["cleanup", "fusion"])
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_integer_division_by_zero_raises_like_eager(pipeline: str, op: str) -> None:
    fn = (lambda a, b: a // b) if op == "floordiv" else (lambda a, b: a % b)
    a, b = torch.tensor([4, 5]), torch.tensor([2, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # what eager raises
        fn(a, b)
    f = compile_fir(fn, pipeline=pipeline, backend="interp")
    with pytest.raises(ZeroDivisionError) as info:
        f(a, b)
    assert isinstance(info.value, RuntimeError)  # `except RuntimeError` keeps working
    message = info.value.message
    assert "integer division by zero: %" in message
    node = message.split(" =")[0]  # the node is named once
    assert message.startswith("%") and node not in message[len(node) :]


def test_compiled_kernels_raise_what_eager_raises() -> None:
    from fir.ir.errors import KernelIndexError, KernelZeroDivisionError

    f = compile_fir(lambda w, i: torch.nn.functional.embedding(i, w))  # the C++ back end
    w = torch.randn(4, 3)
    torch.testing.assert_close(f(w, torch.tensor([1, 3])), w[[1, 3]])
    with pytest.raises(IndexError) as info:
        f(w, torch.tensor([1, 9]))
    assert isinstance(info.value, KernelIndexError) and isinstance(info.value, RuntimeError)
    assert "out of bounds [0, 4) for %arg1_1: the index is 9" in info.value.message
    g = compile_fir(lambda a, b: a // b)
    with pytest.raises(ZeroDivisionError) as zinfo:
        g(torch.tensor([4, 5]), torch.tensor([2, 0]))
    assert isinstance(zinfo.value, KernelZeroDivisionError) and isinstance(
        zinfo.value, RuntimeError
    )
    assert "integer division by zero" in zinfo.value.message


def test_tensors_on_a_device_fir_has_no_back_end_for_run_with_pytorch() -> None:
    # FIR compiles the graph (its kernels are reported) and PyTorch runs it, with a warning
    from fir.frontend.dynamo import COMPILED

    COMPILED.clear()
    x = torch.ones(4, 8, device="meta")
    f = torch.compile(lambda t: (t.sin() * 2).sum(1), backend="fir", options={"pipeline": "fusion"})
    with pytest.warns(UserWarning, match="meta tensors, which FIR has no back end for yet"):
        y = f(x)
    assert y.device.type == "meta" and y.shape == (4,)
    assert COMPILED and COMPILED[-1].module.funcs[0].kernels is not None


# ---------------------------------------------------------------------------------------------
# The C++ back end under torch.compile: symbolic sizes, a machine without a compiler


def test_a_graph_with_symbolic_sizes_compiles_once_and_runs_for_every_size() -> None:
    # torch.compile(dynamic=True) importing SymInt inputs is issue 14; a graph exported with a
    # dynamic batch is symbolic FIR today, and one C++ build runs it for every batch size
    from fir.backends.compile import compile_function
    from fir.frontend.dynamo import export_and_import
    from fir.passes.pipeline import parse_pipeline

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    w = torch.randn(16)
    module, _, constants, lifted = export_and_import(f, [torch.randn(4, 16), w], dynamic_batch=True)
    module = parse_pipeline("fusion").run(module)
    assert "f32[s" in print_module(module)  # a symbolic batch
    program = compile_function(module.funcs[0], "cpp")
    assert not program.static
    for rows in (2, 5, 17, 64):
        x = torch.randn(rows, 16)
        (got,) = program(*lifted, x, w, *constants)
        torch.testing.assert_close(got, f(x, w))


def test_no_cxx_compiler_runs_the_graph_with_pytorch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    monkeypatch.setenv("FIR_CACHE_DIR", str(tmp_path / "cache"))

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 3, -1)

    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match="running this graph with PyTorch: .*no-such-c\\+\\+"):
        got = compile_fir(f)(x)
    torch.testing.assert_close(got, f(x))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="no-such-c\\+\\+"):
        compile_fir(f, fallback=False)(x)
