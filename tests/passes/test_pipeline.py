"""The pass pipeline: parsing pipeline text, running passes with verification after each one,
and the canonicalize/cse passes on random programs."""

from __future__ import annotations

import re

import pytest
import strategies as S
from fir.ir.errors import FirError, PipelineError
from fir.ir.graph import Module
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.ir.types import TensorType
from fir.ir.verifier import verify_module
from fir.passes import registry
from fir.passes.base import Pass
from fir.passes.cleanup.canonicalize import CanonicalizePass
from fir.passes.cleanup.cse import CSEPass
from fir.passes.pipeline import Pipeline, parse_pipeline
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def names(p: Pipeline) -> list[str]:
    return [x.name for x in p.passes]


# ---------------------------------------------------------------------------------------------
# Parsing pipeline text


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_empty_pipeline(text: str) -> None:
    assert len(parse_pipeline(text)) == 0


def test_passes_and_options() -> None:
    p = parse_pipeline("canonicalize{dce=false},cse,canonicalize")
    assert names(p) == ["canonicalize", "cse", "canonicalize"]
    assert isinstance(p.passes[0], CanonicalizePass) and isinstance(p.passes[1], CSEPass)
    assert p.passes[0].option_values() == {"dce": False}
    assert p.passes[2].option_values() == {"dce": True}  # the default
    assert p.passes[0] is not p.passes[2]


@pytest.mark.parametrize(
    "text,value",
    [
        ("canonicalize{dce}", True),  # a bare flag is true
        ("canonicalize{dce=true}", True),
        ("canonicalize{dce=1}", True),
        ("canonicalize{dce=false}", False),
        ("canonicalize{dce=0}", False),
        ("canonicalize{ dce=false }", False),
        ("canonicalize{}", True),
        ("  canonicalize  { dce=false\t}  ", False),
    ],
)
def test_bool_option_spellings(text: str, value: bool) -> None:
    (p,) = parse_pipeline(text).passes
    assert p.option_values() == {"dce": value}


def test_whitespace_between_passes() -> None:
    assert names(parse_pipeline(" cse , canonicalize{dce=false} ,verify ")) == [
        "cse",
        "canonicalize",
        "verify",
    ]


def test_named_pipeline_expands() -> None:
    expansion = registry.pipeline_text("cleanup")
    assert expansion is not None
    expected = [s.split("{")[0].strip() for s in expansion.split(",")]
    assert names(parse_pipeline("cleanup")) == expected
    assert names(parse_pipeline("verify,cleanup,cse")) == ["verify"] + expected + ["cse"]


def test_registered_pipeline_expands_recursively(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._PIPELINES, "twice-cleanup", "cleanup,canonicalize{dce=false}")
    p = parse_pipeline("twice-cleanup")
    assert names(p)[-1] == "canonicalize" and p.passes[-1].option_values() == {"dce": False}
    assert len(p) == len(parse_pipeline("cleanup")) + 1


def test_self_expanding_pipeline_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._PIPELINES, "loop-forever", "cse,loop-forever")
    with pytest.raises(PipelineError) as info:
        parse_pipeline("loop-forever")
    assert info.value.loc is not None


def _error(text: str, source: str = "<pipeline>") -> PipelineError:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text, source)
    e = info.value
    assert isinstance(e, FirError)
    assert e.loc is not None and e.loc.line == 1 and e.loc.file == source
    # one line `file:1:col: error: message`, the pipeline text, then a caret under the column
    lines = e.render().split("\n")
    assert re.match(rf"^{re.escape(source)}:1:{e.loc.column}: error: \S", lines[0]), lines
    assert lines[1] == text and lines[2] == " " * (e.loc.column - 1) + "^", lines
    return e


@pytest.mark.parametrize(
    "text,bad,pattern",
    [
        (
            "canonicalise",
            "canonicalise",
            r"unknown pass 'canonicalise'; did you mean 'canonicalize'\?",
        ),
        ("cse,bogus{x=1}", "bogus", r"unknown pass 'bogus'"),
        ("cse, cleanupp", "cleanupp", r"unknown pass 'cleanupp'; did you mean 'cleanup'\?"),
        (
            "canonicalize{foo=1}",
            "foo",
            r"pass 'canonicalize' has no option 'foo' \(options: dce \(bool\)\)",
        ),
        ("cse,canonicalize{dce=false fold=1}", "fold", r"has no option 'fold'"),
        ("cse{dce=true}", "dce", r"pass 'cse' has no option 'dce' \(options: none\)"),
        ("cleanup{dce=false}", "cleanup", r"pipeline 'cleanup' takes no options"),
        ("canonicalize{dce=true dce=false}", "dce=false", r"option 'dce' given twice"),
        ("canonicalize cse", "cse", r"expected ',' between passes, got 'c'"),
        (",cse", ",cse", r"expected a pass name, got ','"),
        ("cse,,cse", ",cse", r"expected a pass name, got ','"),
        ("canonicalize{=1}", "=1}", r"expected an option name, got '='"),
        ("canonicalize{dce=}", "}", r"option 'dce' has no value"),
    ],
)
def test_errors_point_at_the_bad_token(text: str, bad: str, pattern: str) -> None:
    e = _error(text)
    assert re.search(pattern, e.message), e.message
    assert e.loc.column == text.rindex(bad) + 1, (e.loc.column, e.render())


@pytest.mark.parametrize(
    "text,key,value",
    [
        ("canonicalize{dce=maybe}", "dce", "maybe"),
        ("cse,canonicalize{dce=1.5}", "dce", "1.5"),
        ("canonicalize{dce=[true]}", "dce", "[true]"),
    ],
)
def test_bad_option_value_points_at_the_option(text: str, key: str, value: str) -> None:
    e = _error(text)
    assert f"option '{key}' of pass 'canonicalize' takes a bool, got '{value}'" in e.message
    # the caret is on `key=value` (the golden tests pin the start of the key)
    start = text.index(key + "=")
    assert start + 1 <= e.loc.column <= start + len(key) + 1 + len(value), e.render()


@pytest.mark.parametrize("text", ["canonicalize,", "cse, "])
def test_trailing_comma(text: str) -> None:
    e = _error(text)
    assert "expected a pass name, got end of pipeline" in e.message
    assert len(text.rstrip()) + 1 <= e.loc.column <= len(text) + 1


def test_unterminated_option_list() -> None:
    e = _error("canonicalize{dce")
    assert "unterminated option list" in e.message and e.loc.column == len("canonicalize{dce") + 1


def test_error_names_its_source() -> None:
    _error("nope", source="-p")


@settings(max_examples=S.examples(300), **SETTINGS)
@given(
    st.text(alphabet=st.sampled_from(list("{}=,[] \t-_acdeflnorstuvpyiz019é")), max_size=30)
    | st.lists(
        st.sampled_from(
            [
                "cse",
                "canonicalize",
                "cleanup",
                "verify",
                "{",
                "}",
                "dce",
                "=",
                "true",
                "false",
                ",",
                " ",
                "x",
            ]
        ),
        max_size=10,
    ).map("".join)
)
def test_any_pipeline_text_parses_or_fails_cleanly(text: str) -> None:
    try:
        p = parse_pipeline(text)
    except PipelineError as e:
        assert e.loc is not None and e.loc.line == 1
        assert 1 <= e.loc.column <= len(text) + 1, e.render()
        assert not e.message.startswith("internal error")
        return
    assert all(isinstance(x, Pass) for x in p.passes)


# ---------------------------------------------------------------------------------------------
# Running a pipeline


class BreakTypesPass(Pass):
    """Changes the declared type of the first result: a pass that leaves the IR invalid."""

    name = "break-types"
    summary = "test pass"

    def apply(self, module: Module) -> Module:
        for g in module.funcs:
            for n in g.nodes:
                r = n.results[0]
                r.type = TensorType(r.type.dtype, r.type.shape + (7,))
                return module
        return module


class RecordPass(Pass):
    name = "record"
    summary = "test pass"
    seen: list[str] = []

    def apply(self, module: Module) -> Module:
        RecordPass.seen.append(print_module(module))
        return module


PROGRAM = (
    "func @f(%x: f32[4, 8], %w: f32[8]) -> (f32[4, 8]) {\n"
    "  %a = add %x, 0 : f32[4, 8]\n"
    "  %b = mul %a, %w : f32[4, 8]\n"
    "  %c = mul %a, %w : f32[4, 8]\n"
    "  %d = transpose %b {dim0 = 0, dim1 = 1} : f32[8, 4]\n"
    "  %e = transpose %d {dim0 = 1, dim1 = 0} : f32[4, 8]\n"
    "  %f = add %e, %c : f32[4, 8]\n"
    "  %dead = exp %f : f32[4, 8]\n"
    "  return %f\n"
    "}\n"
)


def test_cleanup_simplifies_and_verifies() -> None:
    m = parse_module(PROGRAM)
    verify_module(m)
    out = parse_pipeline("cleanup").run(m)
    text = print_module(out)
    assert "%dead" not in text and "transpose" not in text and "add %x, 0" not in text
    assert text.count("mul") == 1
    verify_module(parse_module(text))


def test_canonicalize_dce_option() -> None:
    kept = print_module(parse_pipeline("canonicalize{dce=false}").run(parse_module(PROGRAM)))
    dropped = print_module(parse_pipeline("canonicalize").run(parse_module(PROGRAM)))
    assert "%dead" in kept and "%dead" not in dropped


def test_run_verifies_after_each_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._PASSES, "break-types", f"{__name__}:BreakTypesPass")
    monkeypatch.setitem(registry._PASSES, "record", f"{__name__}:RecordPass")
    RecordPass.seen = []
    p = parse_pipeline("cse,break-types,record")
    with pytest.raises(FirError) as info:
        p.run(parse_module(PROGRAM, "prog.fir"))
    e = info.value
    assert e.message.startswith("after pass 'break-types': "), e.message
    assert e.loc is not None and e.loc.file == "prog.fir"
    assert RecordPass.seen == []  # the pipeline stopped at the broken pass

    # without verification the broken IR flows on to the next pass
    p = parse_pipeline("cse,break-types,record")
    p.run(parse_module(PROGRAM), verify_each=False)
    assert len(RecordPass.seen) == 1


def test_run_reports_each_pass() -> None:
    seen: list[str] = []
    timings: list[tuple[str, float]] = []
    parse_pipeline("cleanup,verify").run(
        parse_module(PROGRAM), after_pass=lambda p, m: seen.append(p.name), timings=timings
    )
    assert seen == ["canonicalize", "cse", "canonicalize", "verify"]
    # each pass, then the verification after it
    assert [name for name, _ in timings] == [
        s for name in seen for s in (name, f"{name}: verify")
    ] and all(t >= 0 for _, t in timings)
    timings.clear()
    parse_pipeline("cleanup").run(parse_module(PROGRAM), verify_each=False, timings=timings)
    assert [name for name, _ in timings] == ["canonicalize", "cse", "canonicalize"]


def test_cse_keeps_random_ops_apart() -> None:
    """Two ``dropout {train = true}`` ops draw different masks; merging them changes results."""
    text = (
        "func @f(%x: f32[16]) -> (f32[16], f32[16]) {\n"
        "  %a = dropout %x {p = 0.5, train = true} : f32[16]\n"
        "  %b = dropout %x {p = 0.5, train = true} : f32[16]\n"
        "  return %a, %b\n"
        "}\n"
    )
    out = print_module(parse_pipeline("cse").run(parse_module(text)))
    assert out.count("dropout") == 2, out


def test_cse_keeps_impure_externs_and_merges_pure_ones() -> None:
    text = (
        "func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {\n"
        '  %a = extern "lib.rand"(%x) : f32[4]\n'
        '  %b = extern "lib.rand"(%x) : f32[4]\n'
        '  %c = extern "lib.mm"(%x) {pure = true} : f32[4]\n'
        '  %d = extern "lib.mm"(%x) {pure = true} : f32[4]\n'
        "  return %a, %b, %c, %d\n"
        "}\n"
    )
    out = print_module(parse_pipeline("cse").run(parse_module(text)))
    assert out.count('extern "lib.rand"') == 2 and out.count('extern "lib.mm"') == 1
    assert "return %a, %b, %c, %c" in out


# ---------------------------------------------------------------------------------------------
# Passes on random programs


def _copy(m: Module) -> Module:
    return parse_module(print_module(m))


@settings(max_examples=S.examples(40), **SETTINGS)
@given(
    S.any_modules(),
    st.sampled_from(
        ["canonicalize", "cse", "canonicalize{dce=false}", "cleanup", "cse,canonicalize"]
    ),
)
def test_passes_keep_random_programs_valid(m: Module, pipeline: str) -> None:
    """Every pass leaves the IR verifying, printable and round-tripping; running the pipeline
    again changes nothing more."""
    m = _copy(m)
    out = parse_pipeline(pipeline).run(m)
    verify_module(out)
    text = print_module(out)
    again = parse_module(text)
    verify_module(again)
    assert print_module(again) == text
    if pipeline == "cleanup":
        assert print_module(parse_pipeline("cleanup").run(again)) == text


def _random_inputs(torch, g, seed: int) -> list:
    from fir.ir.dtypes import DType

    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for a in g.args:
        shape = tuple(a.type.shape)
        dt = a.type.dtype
        if dt.is_float:
            x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(dt.to_torch())
        elif dt == DType.BOOL:
            x = torch.randint(0, 2, shape, generator=gen).bool()
        elif dt == DType.U8:
            x = torch.randint(0, 6, shape, generator=gen).to(torch.uint8)
        else:
            x = torch.randint(-4, 5, shape, generator=gen).to(dt.to_torch())
        inputs.append(x)
    return inputs


@settings(max_examples=S.examples(40), **SETTINGS)
@given(S.simple_tensor_funcs(), st.integers(0, 2**31 - 1))
def test_canonicalize_cse_preserve_results(g, seed: int) -> None:
    torch = pytest.importorskip("torch")
    interpreter = pytest.importorskip("fir.ir.interpreter")
    from fir.ir.errors import InterpreterError

    before = _copy(Module([g]))
    after = parse_pipeline("canonicalize,cse").run(_copy(Module([g])))
    inputs = _random_inputs(torch, before.funcs[0], seed)
    try:
        expected = interpreter.run_graph(before.funcs[0], [x.clone() for x in inputs])
    except InterpreterError:
        assume(False)  # e.g. an integer division by zero in the original program
    got = interpreter.run_graph(after.funcs[0], [x.clone() for x in inputs])
    assert len(got) == len(expected)
    for k, (a, b) in enumerate(zip(got, expected)):
        assert a.dtype == b.dtype and a.shape == b.shape, (k, a, b)
        torch.testing.assert_close(
            a, b, rtol=0, atol=0, equal_nan=True, msg=lambda m, k=k: f"result #{k}: {m}"
        )
