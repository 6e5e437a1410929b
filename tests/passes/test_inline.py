"""The ``inline`` pass keeps program semantics and makes Inductor's realize decisions.

Semantics are checked with the reference interpreter: every program of tests/lit/inline/ under
every pipeline its RUN lines use, random loop-level programs (tests/strategies.py) under several
option sets, and, once ``lower`` exists, the example programs through
``decompose,lower,inline``. The result must verify and print/parse back to the same text.
"""

from __future__ import annotations

import glob
import os
import random
import re
import shlex

import pytest
import strategies as S
import sympy
import torch
from fir.ir.errors import FirError
from fir.ir.graph import Graph, LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_file, parse_module
from fir.ir.printer import print_module
from fir.ir.symbolic import evaluate
from fir.ir.verifier import verify_module
from fir.passes.fusion.inline import InlinePass
from fir.passes.pipeline import parse_pipeline
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIT_DIR = os.path.join(ROOT, "tests", "lit", "inline")
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.fir")))


# ---------------------------------------------------------------------------------------------
# helpers


def random_inputs(g: Graph, seed: int = 0, sizes: int = 3) -> list[torch.Tensor]:
    """Inputs for ``g``: every size symbol is ``sizes``; integers are small and non-negative
    (indices, non-zero divisors), floats normal, bools fair coins."""
    gen = torch.Generator().manual_seed(seed)
    env: dict[sympy.Symbol, int] = {}
    for a in g.args:
        for d in a.type.shape:
            if not isinstance(d, int):
                for s in d.free_symbols:
                    env[s] = sizes
    out = []
    for a in g.args:
        shape = [d if isinstance(d, int) else int(evaluate(d, env)) for d in a.type.shape]
        dt = a.type.dtype
        if dt.is_bool:
            x = torch.rand(shape, generator=gen) < 0.5
        elif dt.is_int:
            x = torch.randint(1, 4, shape, generator=gen).to(dt.to_torch())
        else:
            x = torch.randn(shape, generator=gen).to(dt.to_torch())
        out.append(x)
    return out


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def close(after: list[torch.Tensor], before: list[torch.Tensor], where: str) -> None:
    assert len(after) == len(before), where
    for k, (a, b) in enumerate(zip(after, before)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: result #{k}"
        label = f"{where} #{k}"
        torch.testing.assert_close(a, b, equal_nan=True, msg=lambda m, label=label: f"{label}: {m}")


def round_trip(m: Module) -> Module:
    verify_module(m)
    text = print_module(m)
    again = parse_module(text, "<after inline>")
    verify_module(again)
    assert print_module(again) == text
    return again


def check_same_results(text: str, pipeline: str, name: str, seeds: int = 2) -> Module:
    before = parse_module(text, name)
    verify_module(before)
    after = round_trip(parse_pipeline(pipeline).run(parse_module(text, name)))
    for g, h in zip(before.funcs, after.funcs):
        for seed in range(seeds):
            inputs = random_inputs(g, seed)
            expected = run_graph(g, [x.clone() for x in inputs])  # externs may write in place
            close(run_graph(h, inputs), expected, f"{name} @{g.name} -p {pipeline}")
    return after


def lit_pipelines(path: str) -> list[str]:
    """The pipelines of the RUN lines that expect success."""
    out = []
    for line in read(path).splitlines():
        m = re.match(r"// RUN: (.*)", line)
        if not m or m.group(1).startswith("not "):
            continue
        words = shlex.split(m.group(1).split("|")[0])
        if "%s" in words:  # this file is the input
            out.append(words[words.index("-p") + 1])
    return out


LIT_CASES = [
    pytest.param(path, pipe, id=f"{os.path.basename(path)}:{pipe}")
    for path in sorted(glob.glob(os.path.join(LIT_DIR, "*.fir")))
    for pipe in dict.fromkeys(lit_pipelines(path))
]


def loop_nodes(m: Module) -> list[LoopNode]:
    return [n for g in m.funcs for n in g.nodes if isinstance(n, LoopNode)]


def run_inline(text: str, **options: object) -> tuple[Module, InlinePass]:
    m = parse_module(text)
    verify_module(m)
    p = InlinePass(**options)
    m = p.apply(m)
    return round_trip(m), p


# ---------------------------------------------------------------------------------------------
# every lit program keeps its results


@pytest.mark.parametrize("path,pipeline", LIT_CASES)
def test_lit_programs_keep_results(path: str, pipeline: str) -> None:
    text = read(path)
    check_same_results(text, pipeline, os.path.basename(path))


def test_lit_cases_found() -> None:
    assert len(LIT_CASES) >= 15


# ---------------------------------------------------------------------------------------------
# acceptance: rms_norm and softmax


def _kinds(m: Module) -> tuple[int, int]:
    nodes = loop_nodes(m)
    return sum(n.is_reduction for n in nodes), sum(not n.is_reduction for n in nodes)


def test_rms_norm_leaves_one_reduction_and_one_pointwise() -> None:
    text = read(os.path.join(LIT_DIR, "rms_norm.fir"))
    m, p = run_inline(text)
    assert _kinds(m) == (1, 1)
    assert p.statistics == {
        "inlined": 5,
        "bodies copied": 5,
        "realized (reduction)": 1,
        "realized (graph output)": 1,
    }
    off, p_off = run_inline(text, disable=True)
    assert _kinds(off) == (1, 6)
    assert p_off.statistics == {
        "inlined": 0,
        "bodies copied": 0,
        "realized (inline disabled)": 7,
    }
    assert all(n.attrs["realized"] == "inline disabled" for n in loop_nodes(off))


def test_softmax_leaves_two_reductions_and_one_pointwise() -> None:
    text = read(os.path.join(LIT_DIR, "softmax.fir"))
    m, _ = run_inline(text)
    assert _kinds(m) == (2, 1)
    assert sorted(n.reduction for n in loop_nodes(m) if n.is_reduction) == ["max", "sum"]
    off, _ = run_inline(text, disable=True)
    assert _kinds(off) == (2, 3)


def test_statistics_count_reasons_and_copies() -> None:
    text = read(os.path.join(LIT_DIR, "thresholds.fir"))
    _, p = run_inline(text)
    assert list(p.statistics.items()) == [
        ("inlined", 7),
        ("bodies copied", 8),  # %b of @shared_cheap goes into both readers
        ("realized (graph output)", 11),
        ("realized (max-acc-reads)", 1),
        ("realized (max-reads)", 2),
        ("realized (max-ops)", 2),
    ]


# ---------------------------------------------------------------------------------------------
# random loop-level programs


OPTION_SETS = [
    {},
    {"disable": True},
    {"max-body-ops": 2},
    {"max-reads": 0, "max-ops": 0},
    {"max-acc-reads": 1},
]

SETTINGS = settings(
    max_examples=S.examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(S.loop_modules(max_funcs=1, max_nodes=6), st.sampled_from(OPTION_SETS), st.integers(0, 9))
def test_random_loop_programs_keep_results(m: Module, options: dict, seed: int) -> None:
    verify_module(m)
    text = print_module(m)
    g = m.funcs[0]
    inputs = random_inputs(g, seed)
    try:
        expected = run_graph(g, [x.clone() for x in inputs])
    except FirError:
        # no defined result on these inputs (an out-of-range indirect index, an unbound size)
        assume(False)
        return
    p = InlinePass(**options)
    after = round_trip(p.apply(parse_module(text)))
    event(f"bodies copied: {min(p.statistics['bodies copied'], 3)}")
    close(run_graph(after.funcs[0], inputs), expected, f"inline {options}\n{text}")
    for n in loop_nodes(after):
        assert isinstance(n.attrs.get("realized"), str), "every remaining loop node is realized"


# ---------------------------------------------------------------------------------------------
# random inlinable programs: pointwise chains through views, padding, gathers and reductions


A, B = 3, 4  # the argument %x is f32[3, 4]; %ids is i64[3] with rows of a 3-row buffer


def _views(shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], str]]:
    """(consumer shape, load index over i0, i1) for reading a contiguous buffer of ``shape``:
    itself, transposed, flattened, reshaped (and read transposed), broadcast."""
    n = 1
    for d in shape:
        n *= d
    out: list[tuple[tuple[int, ...], str]] = [((n,), "i0")]
    for c in range(2, n):
        if n % c == 0:
            d = n // c
            out += [((c, d), f"{d}*i0 + i1"), ((d, c), f"i0 + {d}*i1")]
    if len(shape) == 1:
        out += [((2, n), "i1"), ((n, 2), "i0")]
    return out


def _unary(k: int) -> str:
    return ["tanh", "sin", "neg", "abs", "cos"][k % 5]


def random_inlinable_program(seed: int) -> str:
    rnd = random.Random(seed)
    values: list[tuple[str, tuple[int, ...]]] = [("x", (A, B))]
    lines = [f"func @p{seed}(%x: f32[{A}, {B}], %ids: i64[{A}]) -> (RESULTS) {{"]

    def ranges(shape: tuple[int, ...]) -> str:
        return ", ".join(f"i{k} < {d}" for k, d in enumerate(shape))

    def ty(shape: tuple[int, ...]) -> str:
        return f"f32[{', '.join(map(str, shape))}]"

    for k in range(rnd.randint(2, 8)):
        name = f"n{k}"
        # mostly the latest values, so that chains form
        src, shape = rnd.choice(values[-2:] if rnd.random() < 0.7 else values)
        kind = rnd.choice(["unary", "binary", "binary", "reduction", "pad", "gather"])
        if kind == "reduction" and len(shape) == 2:
            a, b = shape
            red = rnd.choice(["sum", "max"])
            if rnd.random() < 0.5:
                head, index, out = f"i0 < {a}; r0 < {b}", f"{b}*i0 + r0", (a,)
            else:
                head, index, out = f"i0 < {b}; r0 < {a}", f"i0 + {b}*r0", (b,)
            lines += [
                f"  %{name} = reduction {red} : {ty(out)} over ({head}) {{",
                f"    %0 = load %{src}[{index}]",
                f"    %1 = {_unary(k)} %0",
                "    yield %1",
                "  }",
            ]
        elif kind == "pad" and len(shape) == 2:
            a, b = shape
            out = (a, b + 2)
            lines += [
                f"  %{name} = pointwise : {ty(out)} over ({ranges(out)}) {{",
                "    %0 = index i1 - 1 : i64",
                "    %1 = ge %0, 0",
                f"    %2 = lt %0, {b}",
                "    %3 = logical_and %1, %2",
                f"    %4 = load %{src}[{b}*i0 + i1 - 1] if %3 else -1.0",
                "    yield %4",
                "  }",
            ]
        elif kind == "gather" and len(shape) == 2 and shape[0] == A:
            out = shape
            lines += [
                f"  %{name} = pointwise : {ty(out)} over ({ranges(out)}) {{",
                "    %0 = load %ids[i0]",
                f"    %1 = indirect %0 < {A}",
                f"    %2 = load %{src}[{shape[1]}*%1 + i1]",
                f"    %3 = {_unary(k)} %2",
                "    yield %3",
                "  }",
            ]
        else:
            out, index = rnd.choice(_views(shape) + [(shape, "")])
            if not index:  # the buffer's own shape
                index = "i0" if len(shape) == 1 else f"{shape[1]}*i0 + i1"
            body = [f"    %0 = load %{src}[{index}]", f"    %1 = {_unary(k)} %0"]
            if kind == "binary":
                others = [
                    (v, i)
                    for v, sh in values
                    for o, i in _views(sh) + [(sh, "i0" if len(sh) == 1 else f"{sh[-1]}*i0 + i1")]
                    if o == out
                ]
                other, other_index = rnd.choice(others)
                op = rnd.choice(["add", "mul", "sub", "maximum"])
                body += [f"    %2 = load %{other}[{other_index}]", f"    %3 = {op} %1, %2"]
            lines += [f"  %{name} = pointwise : {ty(out)} over ({ranges(out)}) {{", *body]
            lines += [f"    yield %{len(body) - 1}", "  }"]
        values.append((name, out))
    results = [values[-1]] + [v for v in values[1:-1] if rnd.random() < 0.2]
    lines.append("  return " + ", ".join(f"%{v}" for v, _ in results))
    lines.append("}")
    text = "\n".join(lines) + "\n"
    return text.replace("RESULTS", ", ".join(ty(sh) for _, sh in results))


@pytest.mark.parametrize("chunk", range(6))
def test_random_inlinable_programs_keep_results(chunk: int) -> None:
    copied = 0
    for seed in range(chunk * 20, chunk * 20 + 20):
        text = random_inlinable_program(seed)
        g = parse_module(text).funcs[0]
        inputs = [torch.randn(A, B), torch.randint(0, A, (A,))]
        expected = run_graph(g, inputs)
        for options in OPTION_SETS:
            p = InlinePass(**options)
            after = round_trip(p.apply(parse_module(text)))
            close(run_graph(after.funcs[0], inputs), expected, f"inline {options}\n{text}")
            copied += p.statistics["bodies copied"]
    assert copied > 20  # the programs do inline


# ---------------------------------------------------------------------------------------------
# structure


@pytest.mark.parametrize("other", ["-1208925819614629174706176", "16777217", "-3", "2.5"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64"])
def test_a_masked_load_of_an_inlined_buffer_keeps_its_other(other: str, dtype: str) -> None:
    # the masked load's integer `other` becomes an operand of a `where` of the buffer's dtype:
    # it must hold what the load gave (-2**80 overflowed the interpreter's `where`; 2**24 + 1
    # is not an f32), found by test_random_loop_programs_keep_results
    text = f"""
func @f(%x: i64[4], %m: bool[4]) -> ({dtype}[4]) {{
  %c = pointwise : {dtype}[4] over (i0 < 4) {{
    %0 = load %x[i0]
    %1 = cast %0 : {dtype}
    yield %1
  }}
  %y = pointwise : {dtype}[4] over (i0 < 4) {{
    %0 = load %m[i0]
    %1 = load %c[i0] if %0 else {other}
    yield %1
  }}
  return %y
}}"""
    m = parse_module(text)
    inputs = [torch.tensor([1, -2, 3, 4]), torch.tensor([True, False, True, False])]
    want = run_graph(m.funcs[0], inputs)
    after = round_trip(InlinePass().apply(parse_module(text)))
    assert not any(n.attrs.get("realized") is None for n in loop_nodes(after))
    assert len(after.funcs[0].nodes) == 1, "the cast was inlined into its user"
    torch.testing.assert_close(run_graph(after.funcs[0], inputs), want, rtol=0, atol=0)


def test_long_chain_is_expanded_without_recursion() -> None:
    # 3000 nodes that only copy: no ops, so every node is inlined into the last one
    lines = ["func @chain(%x: f32[4]) -> (f32[4]) {"]
    prev = "x"
    for k in range(3000):
        lines += [
            f"  %c{k} = pointwise : f32[4] over (i0 < 4) {{",
            f"    %0 = load %{prev}[i0]",
            "    yield %0",
            "  }",
        ]
        prev = f"c{k}"
    lines += [f"  return %{prev}", "}"]
    m, p = run_inline("\n".join(lines) + "\n")
    (node,) = loop_nodes(m)
    assert [op.opcode for op in node.body.ops] == ["load"]
    assert p.statistics["inlined"] == 2999
    x = torch.randn(4)
    close(run_graph(m.funcs[0], [x]), [x], "chain")


def test_inline_twice_changes_nothing_more() -> None:
    for name in ("rms_norm.fir", "softmax.fir", "views.fir", "masked.fir"):
        text = read(os.path.join(LIT_DIR, name))
        once, _ = run_inline(text)
        twice, p = run_inline(print_module(once))
        assert print_module(twice) == print_module(once), name
        assert p.statistics["inlined"] == 0


def test_tensor_level_program_is_left_alone() -> None:
    text = read(os.path.join(ROOT, "examples", "rms_norm.fir"))
    m, p = run_inline(text)
    assert print_module(m) == print_module(parse_module(text))
    assert p.statistics == {"inlined": 0, "bodies copied": 0}


# ---------------------------------------------------------------------------------------------
# the real lowering pipeline


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_examples_through_decompose_lower_inline(path: str) -> None:
    name = os.path.basename(path)
    # inline is compared with its own input (the lowered program), exactly: it copies ops and
    # changes no arithmetic; lowering itself may reorder a reduction
    lowered = round_trip(parse_pipeline("decompose,lower").run(parse_file(path)))
    text = print_module(lowered)
    after = check_same_results(text, "inline", name, 1)
    for n in loop_nodes(after):
        assert "realized" in n.attrs


def test_lowered_rms_norm_and_softmax_counts() -> None:
    for name, want in (("rms_norm.fir", (1, 1)), ("softmax.fir", (2, 1))):
        m = parse_file(os.path.join(ROOT, "examples", name))
        m = parse_pipeline("decompose,lower,inline").run(m)
        assert _kinds(m) == want, name
        off = parse_pipeline("decompose,lower,inline{disable}").run(
            parse_file(os.path.join(ROOT, "examples", name))
        )
        assert all(n.attrs.get("realized") == "inline disabled" for n in loop_nodes(off))


# ---------------------------------------------------------------------------------------------
# the documentation shows real output


def test_doc_examples_are_real_output() -> None:
    doc = read(os.path.join(ROOT, "docs", "passes", "inline.md"))
    blocks = [b.split("```")[0] for b in doc.split("```fir\n")[1:]]
    assert len(blocks) == 4
    rms = parse_file(os.path.join(ROOT, "examples", "rms_norm.fir"))
    lowered = print_module(parse_pipeline("decompose,lower").run(rms))
    assert blocks[0] == lowered, "docs/passes/inline.md: the lowered rms_norm is stale"
    for before, after in ((blocks[0], blocks[1]), (blocks[2], blocks[3])):
        m, _ = run_inline(before)
        assert print_module(m) == after, f"docs/passes/inline.md is stale for:\n{before}"


def test_doc_lists_every_reason_and_option() -> None:
    from fir.passes.fusion.inline import CATEGORIES

    doc = read(os.path.join(ROOT, "docs", "passes", "inline.md"))
    for category in CATEGORIES:
        assert f"| `{category}` |" in doc, category
    for option in InlinePass.options:
        assert f"| `{option}` |" in doc, option
