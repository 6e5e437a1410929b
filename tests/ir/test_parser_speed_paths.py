"""The parser's fast path (``fir.ir.fast_parse``) gives what the lark path gives.

``parse_module`` first reads text through the fast path, which drives the lark path's callbacks
line by line, and falls back to lark whenever the fast path is unsure. These tests parse the same
text both ways (``fast_path=False`` is lark alone) and compare:

* the modules, object by object: every field, every location, which objects are shared (a
  body operand is the very value its defining op produced), not just the printed text;
* the errors: the same message at the same place, whichever path found the problem first;
* that the fast path really takes what the printer writes (else it would only be slow, not
  wrong, and nothing else would notice).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from typing import Any

import pytest
import strategies as S
from fir.ir import fast_parse, lexer
from fir.ir.errors import FirError
from fir.ir.graph import Module
from fir.ir.parser import _Builder, _builder, _get_lark, _lock, parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_parser_fuzz import mutate

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)

# ---------------------------------------------------------------------------------------------
# Helpers


def _is_sympy(x: Any) -> bool:
    return type(x).__module__.startswith("sympy") or hasattr(type(x), "free_symbols")


def _fields(x: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` (dataclass fields and extras such as a node's
    ``_attr_locs``) and its slots."""
    out = dict(getattr(x, "__dict__", {}))
    for cls in type(x).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name != "__weakref__" and hasattr(x, name):
                out[name] = getattr(x, name)
    return out


def assert_same_ir(a: Any, b: Any) -> None:
    """``a`` and ``b`` are equal object graphs: same types, same attributes, and the same sharing
    (where ``a`` uses one object twice, so does ``b``). Sympy expressions, numbers, strings and
    enums are compared by value (sympy's caches may or may not share them)."""
    pairs: dict[int, int] = {}
    keep: list[Any] = []  # keep the objects alive so that ids stay unique
    stack: list[tuple[Any, Any, str]] = [(a, b, "module")]
    while stack:
        x, y, path = stack.pop()
        assert type(x) is type(y), f"{path}: {type(x).__name__} vs {type(y).__name__}"
        if x is None or isinstance(x, (str, int, enum.Enum)) or _is_sympy(x):
            assert x == y, f"{path}: {x!r} vs {y!r}"
            continue
        if isinstance(x, float):
            assert repr(x) == repr(y), f"{path}: {x!r} vs {y!r}"
            continue
        if id(x) in pairs:
            assert pairs[id(x)] == id(y), f"{path}: shared in one module, not in the other"
            continue
        pairs[id(x)] = id(y)
        keep += [x, y]
        if isinstance(x, (list, tuple)):
            assert len(x) == len(y), f"{path}: {len(x)} items vs {len(y)}"
            stack += [(u, v, f"{path}[{k}]") for k, (u, v) in enumerate(zip(x, y))]
        elif isinstance(x, dict):
            assert list(x) == list(y), f"{path}: keys {list(x)} vs {list(y)}"
            stack += [(x[k], y[k], f"{path}[{k!r}]") for k in x]
        elif isinstance(x, (set, frozenset)):
            assert x == y, f"{path}: {x!r} vs {y!r}"
        else:
            fx, fy = _fields(x), _fields(y)
            assert list(fx) == list(fy), f"{path}: attributes {list(fx)} vs {list(fy)}"
            stack += [(fx[k], fy[k], f"{path}.{k}") for k in fx]


def fast_only(text: str, filename: str = "fast.fir") -> Module:
    """Parse with the fast path alone (raises ``fast_parse.Unsure`` where it would hand over)."""
    _get_lark()
    with _lock:
        _builder.reset(text, filename, 0)
        return fast_parse.parse_canonical(_builder, _builder.lines)


def outcome(text: str, fast: bool, filename: str = "input.fir") -> tuple[str, Any]:
    try:
        return "module", parse_module(text, filename, fast_path=fast)
    except FirError as e:
        return "error", e.render()


def assert_same_outcome(text: str) -> None:
    """``parse_module`` gives the same module or the same error with and without the fast path;
    and where the fast path alone accepts the text, lark accepts it too, with the same module."""
    (kind_fast, fast), (kind_lark, lark) = outcome(text, True), outcome(text, False)
    assert kind_fast == kind_lark, (fast, lark)
    if kind_lark == "error":
        assert fast == lark
    else:
        assert_same_ir(fast, lark)
    try:
        alone = fast_only(text, "input.fir")
    except (fast_parse.Unsure, FirError):
        return
    assert kind_lark == "module", f"the fast path accepts what lark rejects: {lark}"
    assert_same_ir(alone, lark)


def assert_fast_path_takes(text: str) -> None:
    """The fast path reads ``text`` by itself, and its module is the lark path's."""
    assert_same_ir(fast_only(text, "input.fir"), parse_module(text, "input.fir", fast_path=False))


def _chunks(text: str) -> list[str]:
    return text.split("// -----") if "// -----" in text else []


# ---------------------------------------------------------------------------------------------
# Files of the repository and what the pipelines make of them


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return S.strip_run_lines(f.read())


_CORPUS = [(path, _read(path)) for path in S.corpus_files()]


def _short(path: str) -> str:
    return path.split("/tests/")[-1].split("/examples/")[-1]


@pytest.mark.parametrize("path,text", _CORPUS, ids=[_short(p) for p, _ in _CORPUS])
def test_corpus_files_parse_the_same_both_ways(path: str, text: str) -> None:
    for piece in [text, *_chunks(text)]:
        assert_same_outcome(piece)
        if outcome(piece, False)[0] == "module":
            assert_fast_path_takes(piece)  # every valid file of the corpus is in printer layout


_EXAMPLES = [(p, t) for p, t in _CORPUS if "/examples/" in p]


@pytest.mark.parametrize("pipeline", ["lowering", "fusion"])
@pytest.mark.parametrize("path,text", _EXAMPLES, ids=[_short(p) for p, _ in _EXAMPLES])
def test_pipeline_outputs_take_the_fast_path(path: str, text: str, pipeline: str) -> None:
    from fir.passes.pipeline import parse_pipeline

    m = parse_module(text, path, fast_path=False)
    printed = print_module(parse_pipeline(pipeline).run(m))
    assert_fast_path_takes(printed)
    assert print_module(parse_module(printed)) == printed


def test_big_generated_loop_program_takes_the_fast_path() -> None:
    """A loop-level program with kernels, orders, deps clauses and plan annotations, as the
    benchmark's (smaller)."""
    from fir.passes.pipeline import parse_pipeline

    m = parse_pipeline("fusion").run(S.big_tensor_module(300, seed=3))
    assert_fast_path_takes(print_module(m))


# ---------------------------------------------------------------------------------------------
# Random programs, other spellings, mutants


@settings(max_examples=S.examples(60), **SETTINGS)
@given(S.any_modules())
def test_printed_random_modules_take_the_fast_path(m: Module) -> None:
    text = print_module(m)
    assert_fast_path_takes(text)
    verify_module(parse_module(text))


@settings(max_examples=S.examples(40), **SETTINGS)
@given(S.any_modules(), st.data())
def test_other_spellings_parse_the_same_both_ways(m: Module, data: st.DataObject) -> None:
    assert_same_outcome(S.reformat(S.HypothesisChooser(data.draw), print_module(m)))


_SEEDS = [t for _, t in _CORPUS] + S.generated_texts(12)


@settings(max_examples=S.examples(300), **SETTINGS)
@given(st.sampled_from(_SEEDS), st.data())
def test_mutated_programs_give_the_same_error_both_ways(text: str, data: st.DataObject) -> None:
    assert_same_outcome(mutate(S.HypothesisChooser(data.draw), text))


@settings(max_examples=S.examples(60), **SETTINGS)
@given(S.any_modules(), st.data())
def test_mutated_random_programs_give_the_same_error_both_ways(
    m: Module, data: st.DataObject
) -> None:
    assert_same_outcome(mutate(S.HypothesisChooser(data.draw), print_module(m), max_mutations=2))


# ---------------------------------------------------------------------------------------------
# Hand-picked inputs: what the fast path must hand to lark, and why

_F = "func @f(%x: f32[8], %i: i64[8]) -> (f32[8]) {{\n{body}\n  return %x\n}}\n"


def _loop(*lines: str, deps: str = "") -> str:
    body = "\n".join("    " + line for line in lines)
    text = f"  %b = pointwise : f32[8] over (i0 < 8) {{\n{body}\n    yield 0.0\n  }}"
    if deps:
        text += " deps {\n" + "\n".join("    " + d for d in deps.split("\n")) + "\n  }"
    return _F.format(body=text)


GOOD = {
    "canonical": _loop("%0 = load %x[i0]", "%1 = add %0, 1.0"),
    # lark reads on across the line end; the fast path hands such a text over
    "construct_over_two_lines": _loop("%0 = load %x[i0]", "%1 = add %0,", "1.0"),
    # too deep for the fast path's recursion: handed over
    "deep_parentheses": _loop("%0 = load %x[" + "(" * 3000 + "i0" + ")" * 3000 + "]"),
    # spellings the whole-line shapes do not cover go through the fast path's tokenizer
    "no_spaces": _loop("%0=load %x[i0]", "%1=add %0,-1.0"),
    "trailing_comment": _loop("%0 = load %x[i0] // the input", "%1 = neg %0"),
    "comment_lines": "// a function\n" + _loop("// a body line", "%0 = load %x[i0]"),
    "tab_in_line": _loop("%0 = load\t%x[i0]"),
    "crlf": _loop("%0 = load %x[i0]").replace("\n", "\r\n"),
    "masked_load": _loop("%m = lt 0, 1", "%0 = load %x[i0] if %m else -inf"),
    "indirect": _loop("%0 = load %i[i0]", "%1 = indirect %0 < 8", "%2 = load %x[%1]"),
    "index_expr": _loop("%0 = index floordiv(i0, 2) + mod(-i0, 3)*min(i0, 4, 5) : i64"),
    "special_literals": _loop("%0 = where true, nan, -inf", "%1 = where false, none, inf"),
    "keyword_names_as_loop_vars": _F.format(
        body="  %b = pointwise : f32[8] over (if < 8) {\n    %0 = load %x[if]\n    yield %0\n  }"
    ),
    "deps_spellings": _F.format(
        body="  %y = neg %x : f32[8] deps {\n    read %x[ c0 ] over (c0 < 8) bytes 4*8\n"
        "    write %y[*] bytes 32\n    users return\n    ancestors none\n  }"
    ),
    "extern_kwargs_named_like_keywords": _F.format(
        body='  %e = extern "f"(%x, [1, -2.5, "s"], min = 0.0, true = false, dtype = f32)'
        " {frees = [%x]} : f32[8]"
    ),
    "loop_headers": _F.format(
        body='  %a = pointwise {s = "} : f32[8] over (i0 < 8) {", n = [%x]} : f32[8] over (i0 < 8) {\n'
        "    yield 1.0\n  }\n"
        "  %r = reduction max : f32[] over (; r0 < 8) order (; r0 < 8) {\n    yield 1.0\n  }\n"
        "  %m, %v, %n = reduction welford {k = -1} : f32[2, 4, 1], f32[2, 4, 1], f32[2, 4, 1]"
        " over (i0 < 2, i1 < 4; r0 < 8) order ([i0, i1] < 8; r0 < 8) {\n"
        "    %0 = load %x[r0]\n    yield %0\n  }"
    ),
    "view_with_layout": "func @f(%x: f32[8, 4]) -> (f32[4, 8]) {\n"
    "  %t = view %x : f32[4, 8] strided [1, 4] deps {\n    read %x[*] bytes 128\n  }\n"
    "  return %t\n}\n",
    "symbolic_sizes": "func @f(%x: f32[s0, 4] strided [4, 1] offset s0) -> (f32[s0, 4]) {\n"
    "  %y = pointwise : f32[s0, 4] over (i0 < s0, i1 < 4) order ([i0, i1] < 4*s0) {\n"
    "    %0 = load %x[s0 + 4*i0 + i1]\n    yield %0\n  } deps {\n"
    "    read %x[s0 + 4*c0 + c1] over (c0 < s0, c1 < 4) bytes 16*s0\n  }\n  return %y\n}\n",
}

BAD = {
    # an op with nothing after its name takes the next line's value as an operand in lark
    "operandless_op_then_line": _loop("%0 = load %x[i0]", "%1 = exp", "%2 = add %1, %0"),
    "keyword_as_op": _loop("%0 = yield %x"),
    "index_as_scalar_op": _loop("%0 = load %x[i0]", "%1 = index %0, 1"),
    "load_without_brackets": _loop("%0 = load %x"),
    "undefined_body_value": _loop("%1 = add %0, 1.0"),
    "tensor_in_body": _loop("%0 = add %x, 1.0"),
    "bad_literal": _loop("%0 = load %x[i0]", "%1 = add %0, 1.5e"),
    "neg_nan": _loop("%0 = load %x[i0]", "%1 = add %0, -nan"),
    "float_in_index": _loop("%0 = load %x[i0 + 1.5]"),
    "type_in_index": _loop("%0 = load %x[i0[1]]"),
    "max_without_call": _loop("%0 = load %x[max]"),
    "floordiv_one_argument": _loop("%0 = load %x[floordiv(i0)]"),
    "star_in_memory_dep": _loop(
        "%0 = load %x[i0]", deps="read %x[*] over (c0 < 8) bytes 32\nwrite %b[*] bytes 32"
    ),
    "undeclared_dep_variable": _loop("%0 = load %x[i0]", deps="read %x[c1] over (c0 < 8) bytes 32"),
    "dep_line_outside_deps": _loop("read %x[*] bytes 32"),
    "users_none_and_more": _loop("%0 = load %x[i0]", deps="users none, %x"),
    "return_in_kernel": _F.format(
        body="  kernel @k over (8) {\n    %y = neg %x : f32[8]\n    return %y\n  }"
    ),
    "empty_kernel": _F.format(body="  kernel @k over (8) {\n  }"),
    "empty_reduction_list": _F.format(
        body="  %r = reduction sum : f32[8] over (i0 < 8;) {\n    yield 1.0\n  }"
    ),
    "order_leaves_out_a_loop": _F.format(
        body="  %r = pointwise : f32[8, 2] over (i0 < 8, i1 < 2) order (i0 < 8) {\n    yield 1.0\n  }"
    ),
    "merged_loop_in_over": _F.format(
        body="  %b = pointwise : f32[8] over ([i0, i1] < 8) {\n    yield 0.0\n  }"
    ),
    "greater_than": _loop("%0 = load %x[i0 > 1]"),
    "bad_character_before_comment": _loop("%0 = load %x[i0] $// a comment"),
    "vertical_tab_line": _loop("%0 = load %x[i0]", "\x0b"),
    "unicode_digit": _loop("%0 = load %x[i0 + ²]"),
    "missing_closing_brace": _loop("%0 = load %x[i0]").rstrip("}\n"),
}


# valid texts the fast path hands to lark (all others it reads by itself)
HANDED_OVER = {"construct_over_two_lines", "deep_parentheses"}


@pytest.mark.parametrize("name", list(GOOD))
def test_hand_picked_programs_parse_the_same_both_ways(name: str) -> None:
    text = GOOD[name]
    assert outcome(text, False)[0] == "module", outcome(text, False)
    assert_same_outcome(text)
    if name in HANDED_OVER:
        with pytest.raises(fast_parse.Unsure):
            fast_only(text)
    else:
        assert_fast_path_takes(text)


@pytest.mark.parametrize("name", list(BAD))
def test_malformed_inputs_give_the_same_error_both_ways(name: str) -> None:
    text = BAD[name]
    kind, error = outcome(text, False)
    assert kind == "error", f"lark accepts {name}"
    assert_same_outcome(text)
    with pytest.raises((fast_parse.Unsure, FirError)):
        fast_only(text)


def test_errors_keep_their_file_and_line_offset() -> None:
    text = _loop("%0 = load %x[i0]", "%1 = exp", "%2 = add %1, %0")
    for fast in (True, False):
        with pytest.raises(FirError) as e:
            parse_module(text, "chunk.fir", line_offset=40, fast_path=fast)
        assert str(e.value).startswith("chunk.fir:45:"), str(e.value)


def test_a_valid_text_after_an_invalid_one_is_not_affected() -> None:
    """A failed fast parse leaves nothing behind in the shared callbacks."""
    with pytest.raises(FirError):
        parse_module(BAD["undefined_body_value"])
    text = GOOD["canonical"]
    assert_same_ir(parse_module(text), parse_module(text, fast_path=False))


# ---------------------------------------------------------------------------------------------
# The fast path's assumptions about the lexer and the grammar


def _lexer_keywords_and_punct() -> tuple[dict[str, str], set[str]]:
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
    keywords, punct = {}, set()
    for term in _get_lark().lexer_conf.terminals:
        if term.pattern.type == "str":
            if word.match(term.pattern.value):
                keywords[term.pattern.value] = term.name
            else:
                punct.add(term.pattern.value)
    return keywords, punct


def test_fast_path_names_tokens_as_the_lexer_does() -> None:
    keywords, punct = _lexer_keywords_and_punct()
    assert punct == fast_parse._PUNCT
    for table in (
        fast_parse._SPECIAL,
        fast_parse._IEXPR_FUNCS,
        fast_parse._BODY_KEYWORDS,
        fast_parse._KEYWORD_TYPES,
    ):
        for word, kind in table.items():
            assert keywords[word] == kind
    # a type token is never split by the lexer: no dtype name is a keyword
    from fir.ir.dtypes import DType

    assert not {d.value for d in DType} & set(keywords)


def test_int_atom_is_int() -> None:
    """The fast path reads a lone integer as ``int(text)`` instead of calling ``int_atom``."""
    from fir.ir.lexer import make_token

    for text in ["0", "007", "123456789012345678901234567890"]:
        assert _Builder().int_atom([make_token("INT", text, 0, 1, 1)]) == int(text)


def _lexer_tokens(line: str) -> list[tuple[str, str, int]] | None:
    """The tokens lark's lexer reads in ``line`` (before keywords), None where it fails."""
    out = []
    pos = 0
    while pos < len(line):
        m = lexer.TOKEN_RE.match(line, pos)
        if m is None:
            return None
        kind, text = m.lastgroup, m.group()
        if kind == "COMMENT":
            break
        if kind == "PUNCT" and text not in fast_parse._PUNCT:
            return None
        if kind != "WS":
            out.append((kind, text, pos))
        pos = m.end()
    return out


_LINE_ALPHABET = 'abfiklnorstx019_%@."\\[]{}()<>=,:;+-*/ \t\r$é²'


@settings(max_examples=S.examples(500), **SETTINGS)
@given(st.text(alphabet=_LINE_ALPHABET, max_size=40))
def test_line_splitting_matches_the_lexer(line: str) -> None:
    p = fast_parse._FastParser(None, [line])
    p.s = line
    expected = _lexer_tokens(line)
    try:
        p.split(0)
    except fast_parse.Unsure:
        assert expected is None, f"the lexer reads {line!r}"
        return
    assert p.tk[:-1] == expected


@pytest.mark.parametrize(
    "index",
    ["256*c0 + c1", "-(c0 - 2)*3", "floordiv(mod(c0, 4) + 1, 2)", "min(c0, 3) - max(1, c1)"],
)
def test_index_expressions_evaluate_as_lark_builds_them(index: str) -> None:
    """The same index text in a body (loop variables) and in a deps clause (variables of the
    line), twice each: compiled once, its callbacks run every time."""
    body = f"    %0 = load %x[{index}]\n    %1 = load %x[{index}]\n    yield %1\n"
    dep = f"    read %x[{index}] over (c0 < 8, c1 < 1) bytes 32\n"
    program = (
        "func @f(%x: f32[8]) -> () {\n"
        f"  %b = pointwise : f32[8, 1] over (c0 < 8, c1 < 1) {{\n{body}  }} deps {{\n"
        f"{dep}{dep}  }}\n  return\n}}\n"
    )
    assert outcome(program, False)[0] == "module", outcome(program, False)
    assert_fast_path_takes(program)


def test_comparison_helper_compares_floats_and_sharing() -> None:
    assert_same_ir([math.nan], [math.nan])
    with pytest.raises(AssertionError):
        assert_same_ir([-0.0], [0.0])
    shared = [1]
    with pytest.raises(AssertionError):
        assert_same_ir([shared, shared], [[1], [1]])


def test_comparison_helper_sees_locations() -> None:
    a = parse_module(GOOD["canonical"], "a.fir")
    b = parse_module(GOOD["canonical"], "b.fir")
    with pytest.raises(AssertionError):
        assert_same_ir(a, b)
    assert dataclasses.is_dataclass(a.funcs[0])
