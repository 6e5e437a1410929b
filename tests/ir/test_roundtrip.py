"""Printing and parsing are inverse: ``parse(print(m))`` verifies and prints the same text, and
parse→print is a fixed point from any spelling of a program."""

from __future__ import annotations

import math

import pytest
import strategies as S
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.graph import ExternNode, Graph, Module, Value
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.ir.types import TensorType
from fir.ir.verifier import verify_module
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

# No "explain" phase: it re-runs failing examples many times and only adds a hint.
SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def assert_roundtrip(m: Module) -> str:
    """``m`` verifies; its text parses, verifies and prints byte-identically."""
    verify_module(m)
    text = print_module(m)
    again = parse_module(text, "roundtrip.fir")
    verify_module(again)
    printed = print_module(again)
    assert printed == text, _diff(text, printed)
    return text


def assert_fixed_point(text: str) -> str:
    """parse→print→parse→print gives the same text twice."""
    m1 = parse_module(text, "input.fir")
    verify_module(m1)
    p1 = print_module(m1)
    m2 = parse_module(p1, "printed.fir")
    verify_module(m2)
    p2 = print_module(m2)
    assert p1 == p2, _diff(p1, p2)
    return p1


def _diff(a: str, b: str) -> str:
    import difflib

    return "printed text differs after a round trip:\n" + "\n".join(
        difflib.unified_diff(a.split("\n"), b.split("\n"), "first", "second", lineterm="")
    )


# ---------------------------------------------------------------------------------------------
# Random programs


@settings(max_examples=S.examples(50), **SETTINGS)
@given(S.tensor_modules())
def test_tensor_level_roundtrip(m: Module) -> None:
    assert_roundtrip(m)


@settings(max_examples=S.examples(40), **SETTINGS)
@given(S.loop_modules())
def test_loop_level_roundtrip(m: Module) -> None:
    assert_roundtrip(m)


@settings(max_examples=S.examples(20), **SETTINGS)
@given(S.mixed_modules())
def test_mixed_module_roundtrip(m: Module) -> None:
    assert_roundtrip(m)


@settings(max_examples=S.examples(30), **SETTINGS)
@given(S.any_modules(), st.data())
def test_any_spelling_prints_canonically(m: Module, data: st.DataObject) -> None:
    """Other whitespace, comments and number spellings parse to the same program, and
    parse→print→parse→print is a fixed point."""
    text = print_module(m)
    respelled = S.reformat(S.HypothesisChooser(data.draw), text)
    assert assert_fixed_point(respelled) == text


# ---------------------------------------------------------------------------------------------
# The repository's own .fir files


def _valid_corpus() -> list[tuple[str, str]]:
    """Each valid program of the repository's .fir files (split at ``// -----`` markers)."""
    out = []
    for path, text in zip(S.corpus_files(), S.corpus_texts()):
        chunks = text.split("// -----\n")
        for k, chunk in enumerate(chunks):
            try:
                verify_module(parse_module(chunk, path))
            except FirError:
                continue  # error tests hold invalid programs on purpose
            name = path.split("/tests/")[-1].split("/examples/")[-1]
            out.append((f"{name}#{k}" if len(chunks) > 1 else name, chunk))
    return out


_CORPUS = _valid_corpus()


@pytest.mark.skipif(not _CORPUS, reason="no valid .fir files in examples/ or tests/lit/")
@pytest.mark.parametrize("name,text", _CORPUS, ids=[name for name, _ in _CORPUS])
def test_corpus_file_fixed_point(name: str, text: str) -> None:
    assert_fixed_point(text)


# ---------------------------------------------------------------------------------------------
# Constructs worth pinning one by one


def test_index_expressions_keep_every_argument() -> None:
    text = (
        "func @f(%x: f32[64], %i: i64[4]) -> (f32[4, 4]) {\n"
        "  %b = pointwise : f32[4, 4] over (i0 < 4, i1 < 4) {\n"
        "    %0 = load %i[i0]\n"
        "    %1 = indirect %0 < 4\n"
        "    %2 = load %x[min(3, i0) + max(1, i1, mod(i0, 3)) + floordiv(i0 + 2*i1, 3) + 16*%1]\n"
        "    yield %2\n"
        "  }\n"
        "  return %b\n"
        "}\n"
    )
    printed = assert_fixed_point(text)
    assert "min(3, i0)" in printed and "max(1, i1, mod(i0, 3))" in printed
    assert "floordiv(i0 + 2*i1, 3)" in printed and "16*%1" in printed


def test_extern_keyword_arguments_named_like_keywords() -> None:
    """Known bug "keyword-kwarg": ``extern "aten.clamp"(%x, min = 0.0)`` prints but does not
    parse back (the lexer reads ``min`` as the index-expression keyword, ``true``/``inf``/...
    as literals), although attribute dicts accept the same names."""
    failing = []
    for name in S.VALUE_KEYWORDS:
        x = Value("x", TensorType(DType.F32, (8,)))
        node = ExternNode(results=[], callee="aten.clamp", args=[x], kwargs={name: 0.0})
        node.results = [Value("y", TensorType(DType.F32, (8,)), node)]
        g = Graph(
            "f", args=[x], nodes=[node], outputs=node.results, output_types=[node.results[0].type]
        )
        try:
            assert_roundtrip(Module([g]))
        except FirError as e:
            failing.append(f"{name}: {e.render()}")
    assert not failing, "extern keyword arguments that do not round-trip:\n" + "\n".join(failing)


@pytest.mark.parametrize("between", ["\n", " // a comment\n", "\r\n", "\n\n   "])
def test_keyword_argument_name_and_equal_sign_on_different_lines(between: str) -> None:
    """Known bug "keyword-kwarg-newline": whitespace and comments are insignificant, but a
    keyword-named extern argument is only recognised when '=' follows on the same line."""
    text = (
        "func @f(%x: f32[8]) -> (f32[8]) {\n"
        f'  %y = extern "aten.clamp"(%x, min{between}= 0.0, max = 6.0) : f32[8]\n'
        "  return %y\n"
        "}\n"
    )
    assert "min = 0.0" in assert_fixed_point(text)


def test_special_floats_and_strings() -> None:
    text = (
        "func @f(%x: f32[2]) -> (f32[2]) attributes {a = [inf, -inf, nan, -0.0, 1e-300, "
        '5e-324, 1.7976931348623157e+308], s = "q\\"b\\\\n\\n\\t\\u00e9\x7f"} {\n'
        "  %0 = add %x, -inf : f32[2]\n"
        "  %1 = maximum %0, nan : f32[2]\n"
        "  %2 = mul %1, -0.0 : f32[2]\n"
        "  %3 = where true, %2, 1e+308 : f32[2]\n"
        "  return %3\n"
        "}\n"
    )
    printed = assert_fixed_point(text)
    m = parse_module(printed)
    a = m.funcs[0].attrs["a"]
    assert math.isinf(a[0]) and a[0] > 0 and math.isinf(a[1]) and a[1] < 0 and math.isnan(a[2])
    assert math.copysign(1.0, a[3]) == -1.0 and a[5] == 5e-324


def test_empty_function_and_zero_results() -> None:
    assert_fixed_point("func @f() -> () {\n  return\n}\n")
    assert_fixed_point("func @a.b$c(%0: f32[]) -> () attributes {} {\n  return\n}\n")


# ---------------------------------------------------------------------------------------------
# Size


def test_ten_thousand_ops_parse_verify_print() -> None:
    m = S.big_tensor_module(10_000)
    assert len(m.funcs[0].nodes) >= 10_000
    verify_module(m)
    text = print_module(m)
    assert text.count("\n") > 10_000
    again = parse_module(text, "big.fir")
    verify_module(again)
    assert print_module(again) == text


def test_negative_strides_are_rejected_or_bounded_correctly() -> None:
    """The parser accepts negative strides; then a load that stays inside the storage they span
    must verify (storage of ``f32[4, 3] strided [-3, 1] offset 9`` is elements 0..11).
    Rejecting negative strides in the type (line 1) would be fine too."""
    text = (
        "func @f(%x: f32[4, 3] strided [-3, 1] offset 9) -> (f32[4, 3]) {\n"
        "  %b = pointwise : f32[4, 3] over (i0 < 4, i1 < 3) {\n"
        "    %0 = load %x[-3*i0 + i1 + 9]\n"
        "    yield %0\n"
        "  }\n"
        "  return %b\n"
        "}\n"
    )
    try:
        assert_fixed_point(text)
    except FirError as e:
        assert e.loc is not None and e.loc.line == 1, (
            "negative strides are accepted, but the load is then judged against a wrong "
            f"storage size:\n{e.render()}"
        )


def test_an_unevaluated_max_prints_as_the_parser_reads_it() -> None:
    # hypothesis found it: a substitution left Min(i2, Max(1, 2)) unevaluated; the text must be
    # what parsing gives back (min(2, i2)), or the round trip changes it
    import sympy
    from fir.ir.symbolic import print_expr

    i2 = sympy.Symbol("i2", integer=True, nonnegative=True)
    e = sympy.Min(i2, sympy.Max(1, 2, evaluate=False), evaluate=False)
    assert print_expr(e) == "min(2, i2)"
