"""Extern calls in hostile or broken ``.fir`` files: no code runs from a file, and a call that
fails or returns something else than its node declares is a clear error naming the node.

A ``.fir`` file is shared data (dumps, bug reports): ``extern "torch.os.system"(...)`` once ran a
shell command under ``fir-run``. An extern callee is now an operator registered with PyTorch
(``NAMESPACE.OP.OVERLOAD``) or one of the written ``torch.*`` functions; the verifier refuses
anything else in every tool, before anything runs, and the resolver checks again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fir.backends.compile import compile_function
from fir.ir.errors import FirError
from fir.ir.externs import (
    LAYOUTS,
    MEMORY_FORMATS,
    callee_problem,
    decode_torch_object,
    resolve_callee,
)
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline
from fir.tools import fir_opt, fir_run

# the tool commands, as modules (a path install has no console scripts)
TOOLS = {
    "fir-opt": ["fir.tools.fir_opt"],
    "fir-run": ["fir.tools.fir_run"],
    "fir-run-cpp": ["fir.tools.fir_run", "-p", "fusion", "--backend", "cpp"],
    "fir-run-llvm": ["fir.tools.fir_run", "-p", "fusion", "--backend", "llvm"],
    "fir-translate": ["fir.tools.fir_translate", "-p", "fusion", "--target", "call"],
}

# each payload creates the file {marker}: what would show that the call ran
PAYLOADS = {
    "system": 'extern "torch.os.system"("touch {marker}")',
    "popen": 'extern "torch.os.popen"("touch {marker}")',
    "exec": "extern \"torch.package.package_importer.builtins.exec\"(\"open('{marker}', 'w')\")",
}


def _hostile(tmp_path: Path, payload: str) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"
    src = tmp_path / "hostile.fir"
    src.write_text(
        "func @f(%x: f32[4]) -> (f32[4]) {\n"
        f"  %r = {PAYLOADS[payload].format(marker=marker)} : f32[4]\n"
        "  %y = add %x, %r : f32[4]\n"
        "  return %y\n"
        "}\n"
    )
    return src, marker


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_hostile_callee_never_runs(tmp_path: Path, tool: str, payload: str) -> None:
    src, marker = _hostile(tmp_path, payload)
    proc = subprocess.run(
        [sys.executable, "-m", *TOOLS[tool], str(src)], capture_output=True, text=True, timeout=300
    )
    assert not marker.exists(), f"{tool} ran the {payload} payload"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{src}:2:15: error: extern callee" in proc.stderr
    assert "is not allowed" in proc.stderr and "aten.mm.default" in proc.stderr


def test_the_verifier_refuses_a_callee_without_importing_torch(tmp_path: Path) -> None:
    src, marker = _hostile(tmp_path, "system")
    code = (
        "import sys\n"
        "from fir.tools.fir_opt import main\n"
        f"rc = main([{str(src)!r}])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "1 False"
    assert "extern callee" in out.stderr and not marker.exists()


# names that try to reach something other than an operator through ``torch`` or ``torch.ops``
REFUSED_BY_NAME = [
    "torch.os.system",
    "torch.ops.aten.mm.default",  # not how FIR writes an operator
    "torch.nn.functional.softmax",  # a torch function FIR does not emit
    "system",  # a bare name is never an operator
    "load_library.x",  # torch.ops.load_library loads a shared library
    "import_module.os",
    "higher_order.cond",
    "__builtins__.exec",
    "aten.mm.default.extra",
    "aten.mm.default()",
    "aten.save.default",  # writes a file
    "aten.from_file.default",  # maps a file (writable with shared=True)
    "",
]
# names that pass the syntax but are no operator: the resolver refuses them
REFUSED_BY_LOOKUP = [
    "os.system",
    "builtins.exec",
    "aten.name",  # an attribute of the namespace object, a str
    "aten.__class__.__init__",
    "aten.mm.__call__",
    "aten.mm._op",
    "aten.mm.overloads",
    "aten.no_such_op.default",
    "aten.mm.no_such_overload",
]


@pytest.mark.parametrize("name", REFUSED_BY_NAME)
def test_names_that_are_no_operator_are_refused_by_syntax(name: str) -> None:
    assert callee_problem(name) is not None
    with pytest.raises(FirError):
        resolve_callee(name)


@pytest.mark.parametrize("name", REFUSED_BY_LOOKUP)
def test_names_that_reach_no_operator_are_refused_when_looked_up(name: str) -> None:
    assert callee_problem(name) is None
    with pytest.raises(FirError, match="unknown extern callee"):
        resolve_callee(name)


def test_operators_and_the_written_torch_functions_resolve() -> None:
    assert resolve_callee("aten.mm.default") is torch.ops.aten.mm.default
    assert resolve_callee("aten.mm") is torch.ops.aten.mm  # the packet dispatches
    assert resolve_callee("_c10d_functional.wait_tensor.default") is (
        torch.ops._c10d_functional.wait_tensor.default
    )
    assert resolve_callee("prims.convert_element_type.default") is (
        torch.ops.prims.convert_element_type.default
    )
    assert resolve_callee("firhostile.wrong_dtype.default") is (
        torch.ops.firhostile.wrong_dtype.default
    )
    assert resolve_callee("torch.tensor") is torch.tensor


# ---------------------------------------------------------------------------------------------
# custom ops (torch.library) that misbehave

_LIB = torch.library.Library("firhostile", "DEF")
_LIB.define("wrong_dtype(Tensor x) -> Tensor")
_LIB.define("pair(Tensor x) -> (Tensor, Tensor)")
_LIB.define("refuses(Tensor x) -> Tensor")


def _wrong_dtype(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).double()


def _pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x + 1, x - 1


class CustomOpError(Exception):
    """An exception type of a custom op's own: what eager raises."""


def _refuses(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > -1e9:
        raise CustomOpError("refuses every input")
    return x.clone()


for _name, _fn in [("wrong_dtype", _wrong_dtype), ("pair", _pair), ("refuses", _refuses)]:
    _LIB.impl(_name, _fn, "CompositeExplicitAutograd")
_LIB._register_fake("wrong_dtype", lambda x: torch.empty_like(x, dtype=torch.float64))
_LIB._register_fake("pair", lambda x: (torch.empty_like(x), torch.empty_like(x)))
_LIB._register_fake("refuses", lambda x: torch.empty_like(x))

RUNNERS = ["interp", "cpp", "llvm"]


def _run(text: str, runner: str, *inputs: torch.Tensor) -> list[torch.Tensor]:
    """Run ``text`` as fir-run does: verified, then the interpreter or a compiled program
    (after fusion)."""
    module = parse_module(text, "t.fir")
    verify_module(module)
    if runner == "interp":
        return run_graph(module.funcs[0], list(inputs))
    module = parse_pipeline("fusion").run(module)
    return compile_function(module.funcs[0], runner)(*inputs)


def _program(call: str, names: str, types: str, x: str = "f32[4]") -> str:
    """``%y = add <first result>, 1.0`` after ``names = extern call : types``."""
    first = names.split(",")[0]
    return (
        f"func @f(%x: {x}) -> ({types.split(', ')[0]}) {{\n"
        f"  {names} = extern {call} : {types}\n"
        f"  %y = add {first}, 1.0 : {types.split(', ')[0]}\n"
        "  return %y\n"
        "}\n"
    )


@pytest.mark.parametrize(
    "size", ["4", "n"]
)  # static: the generated call; symbolic: the general path
@pytest.mark.parametrize("runner", RUNNERS)
def test_an_extern_result_of_another_dtype_is_an_error(runner: str, size: str) -> None:
    text = _program('"firhostile.wrong_dtype.default"(%x)', "%w", f"f32[{size}]", f"f32[{size}]")
    with pytest.raises(FirError) as e:
        _run(text, runner, torch.randn(4))
    assert 'extern "firhostile.wrong_dtype.default"' in str(e.value)
    assert "returned f64[4] as %w, whose type says f32[4]" in str(e.value)
    assert e.value.loc is not None and e.value.loc.line == 2


@pytest.mark.parametrize("size", ["4", "n"])
@pytest.mark.parametrize("runner", RUNNERS)
def test_an_extern_returning_fewer_results_than_declared_is_an_error(
    runner: str, size: str
) -> None:
    """``aten.relu`` returns one tensor; a node that declares two once got it twice."""
    t = f"f32[{size}]"
    text = _program('"aten.relu.default"(%x)', "%a, %b", f"{t}, {t}", t)
    with pytest.raises(FirError, match=r"returned 1 value\(s\), the node declares 2") as e:
        _run(text, runner, torch.randn(4))
    assert '%a, %b = extern "aten.relu.default"' in str(e.value)


@pytest.mark.parametrize("runner", RUNNERS)
def test_an_extern_returning_more_results_than_declared_is_an_error(runner: str) -> None:
    text = _program('"firhostile.pair.default"(%x)', "%p", "f32[4]")
    with pytest.raises(FirError, match=r"returned 2 value\(s\), the node declares 1"):
        _run(text, runner, torch.randn(4))


@pytest.mark.parametrize("runner", RUNNERS)
def test_an_extern_of_another_shape_is_an_error(runner: str) -> None:
    text = _program('"aten.sum.dim_IntList"(%x, [1], true)', "%s", "f32[4]", "f32[4, 3]")
    with pytest.raises(FirError, match=r"returned f32\[4, 1\] as %s, whose type says f32\[4\]"):
        _run(text, runner, torch.randn(4, 3))


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_well_typed_extern_still_runs(runner: str) -> None:
    text = (
        "func @f(%a: f32[4, 3], %b: f32[3, 5]) -> (f32[4, 5], f32[4]) {\n"
        '  %m = extern "aten.mm.default"(%a, %b) : f32[4, 5]\n'
        '  %p, %q = extern "firhostile.pair.default"(%m) : f32[4, 5], f32[4, 5]\n'
        '  %s = extern "aten.sum.dim_IntList"(%a, [1], false, dtype = f32) : f32[4]\n'
        "  %y = add %p, %q : f32[4, 5]\n"
        "  return %y, %s\n"
        "}\n"
    )
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    y, s = _run(text, runner, a, b)
    torch.testing.assert_close(y, 2 * (a @ b))
    torch.testing.assert_close(s, a.sum(1))


@pytest.mark.parametrize("size", ["4", "n"])
@pytest.mark.parametrize("runner", RUNNERS)
def test_an_extern_that_raises_is_an_error_naming_the_node(runner: str, size: str) -> None:
    text = _program('"firhostile.refuses.default"(%x)', "%r", f"f32[{size}]", f"f32[{size}]")
    with pytest.raises(FirError) as e:
        _run(text, runner, torch.randn(4))
    message = str(e.value)
    assert '%r = extern "firhostile.refuses.default"' in message
    assert "CustomOpError: refuses every input" in message
    assert e.value.loc is not None and e.value.loc.line == 2


def test_torch_compile_raises_what_eager_raises() -> None:
    """Under torch.compile the op's own exception reaches the caller, as in eager."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.firhostile.refuses(x.sin()) + 1

    x = torch.randn(8)
    with pytest.raises(CustomOpError, match="refuses every input"):
        f(x)
    torch._dynamo.reset()
    with pytest.raises(CustomOpError, match="refuses every input") as e:
        torch.compile(f, backend="fir")(x)
    assert not isinstance(e.value, FirError)


RAISES = """func @f(%a: f32[4, 3]) -> (f32[4, 4]) {
  %m = extern "aten.mm.default"(%a, %a) : f32[4, 4]
  %y = relu %m : f32[4, 4]
  return %y
}
"""


@pytest.mark.parametrize("tool", ["fir-run", "fir-run-cpp", "fir-run-llvm"])
def test_fir_run_reports_a_raising_extern_without_a_traceback(tmp_path: Path, tool: str) -> None:
    src = tmp_path / "raises.fir"
    src.write_text(RAISES)
    proc = subprocess.run(
        [sys.executable, "-m", *TOOLS[tool], str(src)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        f'{src}:2:15: error: %m = extern "aten.mm.default": RuntimeError: mat1 and mat2 shapes '
        "cannot be multiplied (4x3 and 4x3)"
    )


# ---------------------------------------------------------------------------------------------
# "torch:KIND=NAME" arguments


def test_torch_objects_come_from_the_written_tables() -> None:
    for name in MEMORY_FORMATS:
        assert decode_torch_object(f"torch:memory_format={name}") is getattr(torch, name)
    for name in LAYOUTS:
        assert decode_torch_object(f"torch:layout={name}") is getattr(torch, name)
    assert decode_torch_object("torch:device=cpu") == torch.device("cpu")
    assert decode_torch_object("not torch:layout=x") == "not torch:layout=x"
    for text in [
        "torch:layout=os",
        "torch:layout=__dict__",
        "torch:memory_format=float32",
        "torch:memory_format=layout",
        "torch:device=bogus",
    ]:
        with pytest.raises(FirError, match="unknown torch"):
            decode_torch_object(text)


LAYOUT = """func @f() -> (f32[4]) {
  %e = extern "aten.empty.memory_format"([4], dtype = f32, layout = "torch:layout=os", device = "torch:device=cpu") : f32[4]
  return %e
}
"""


@pytest.mark.parametrize("tool", [fir_opt, fir_run])
def test_an_unknown_torch_layout_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: object
) -> None:
    src = tmp_path / "layout.fir"
    src.write_text(LAYOUT)
    assert tool.main([str(src)]) == 1  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert f'{src}:2:15: error: unknown torch layout "os" in "torch:layout=os"' in err
    assert "Traceback" not in err


def test_the_runtime_checks_a_torch_object_the_verifier_did_not_see() -> None:
    """A graph built in memory (no verifier): the interpreter's decode is an error too."""
    module = parse_module(LAYOUT.replace("layout=os", "layout=strided"), "t.fir")
    (node,) = module.funcs[0].nodes
    node.kwargs["layout"] = "torch:layout=os"
    with pytest.raises(FirError, match='unknown torch layout "os"'):
        run_graph(module.funcs[0], [])
