"""The ``deps`` and ``dce`` passes and the ``deps { … }`` clause.

* The clause round-trips: on random programs of both levels, the text after ``deps`` parses,
  verifies and prints byte-identically (also respelled with other whitespace and comments), and
  running ``deps`` twice prints the same text.
* What ``deps`` computes: canonical renaming (equal accesses compare equal whatever the loop
  variables are called), byte counts, StarDeps, weak dependencies around mutation, users and
  ancestors; ``compute_deps`` does not attach.
* ``dce`` removes dead nodes, orders the rest stably and topologically (honouring weak
  dependencies), reports a cycle, and keeps recorded dependencies up to date.
* Neither pass changes what the reference interpreter computes.
"""

from __future__ import annotations

import glob
import os

import pytest
import strategies as S
import torch
from fir.ir.dependencies import MemoryDep, NodeDeps, StarDep, WeakDep
from fir.ir.errors import FirError
from fir.ir.graph import Graph, LoopNode, Module
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_file, parse_module
from fir.ir.printer import print_module
from fir.ir.rewrite import remove_dead_nodes
from fir.ir.symbolic import index_var, print_expr
from fir.ir.verifier import verify_module
from fir.passes.analysis.deps import (
    DepsPass,
    compute_deps,
    names_in_mask,
    rename_symbols,
    topological_order,
)
from fir.passes.cleanup.dce import DCEPass
from fir.passes.pipeline import parse_pipeline
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.fir")))

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def round_trip(m: Module) -> str:
    """``m`` verifies; its text parses, verifies and prints byte-identically."""
    verify_module(m)
    text = print_module(m)
    again = parse_module(text, "roundtrip.fir")
    verify_module(again)
    assert print_module(again) == text
    return text


def run_pass(m: Module, pipeline: str) -> Module:
    return parse_pipeline(pipeline).run(m)


def func(text: str) -> Graph:
    m = parse_module(text)
    verify_module(m)
    return m.funcs[0]


# ---------------------------------------------------------------------------------------------
# The clause round-trips


@settings(max_examples=S.examples(30), **SETTINGS)
@given(S.loop_modules(), st.booleans(), st.booleans())
def test_deps_output_round_trips_on_loop_programs(m: Module, users: bool, ancestors: bool) -> None:
    DepsPass(users=users, ancestors=ancestors).apply(m)
    text = round_trip(m)
    assert " deps {" in text
    # computed from the program, not from what is recorded: a second run prints the same text
    again = parse_module(text)
    DepsPass(users=users, ancestors=ancestors).apply(again)
    assert print_module(again) == text


@settings(max_examples=S.examples(20), **SETTINGS)
@given(S.mixed_modules())
def test_deps_output_round_trips_on_mixed_programs(m: Module) -> None:
    DepsPass(ancestors=True).apply(m)
    round_trip(m)


@settings(max_examples=S.examples(15), **SETTINGS)
@given(S.loop_modules(max_funcs=1), st.data())
def test_respelled_clause_parses_back(m: Module, data: st.DataObject) -> None:
    DepsPass(ancestors=True).apply(m)
    text = print_module(m)
    respelled = S.reformat(S.HypothesisChooser(data.draw), text)
    assert print_module(parse_module(respelled)) == text


_PROGRAM = """\
func @f(%x: f32[s0, 8], %i: i64[4]) -> (f32[s0, 8]) {{
  %a = relu %x : f32[s0, 8]
  %b = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {{
    %0 = load %a[8*i0 + i1]
    yield %0
  }} deps {{
    {line}
  }}
  %c = exp %b : f32[s0, 8]
  return %c
}}
"""

CLAUSE_LINES = [
    "read %a[8*c0 + c1] over (c0 < s0, c1 < 8) bytes 32*s0",
    "read %x[c1 + 8*floordiv(c0, 2) + mod(c0, 2)] over (c0 < s0, c1 < 8) bytes 32*s0",
    "read %x[max(0, c0 - 1) + min(7, c1)] over (c0 < s0, c1 < 8) bytes min(32, 4*s0)",
    "read %i[0] over () bytes 8",
    "read %x[*] bytes 32*s0",
    "write %b[8*c0 + c1] over (c0 < s0, c1 < 8) bytes 32*s0",
    "write %b[*] bytes 0",
    "write %x[*] bytes 32*s0",
    "weak %a for %x",
    "users %c",
    "users %c, return",
    "users return",
    "users none",
    "ancestors %a",
    "ancestors none",
]


@pytest.mark.parametrize("line", CLAUSE_LINES)
def test_each_clause_line_round_trips(line: str) -> None:
    text = _PROGRAM.format(line=line)
    m = parse_module(text)
    verify_module(m)
    assert print_module(m) == text


def test_parsed_clause_builds_the_data_model() -> None:
    g = func(
        _PROGRAM.format(
            line="read %x[c1 + 8*c0] over (c0 < s0, c1 < 8) bytes 32*s0\n"
            "    read %i[*] bytes 32\n    weak %a for %x\n    users %c, return\n"
            "    ancestors %a"
        )
    )
    d = g.nodes[1].deps
    assert d is not None
    (mem, star) = d.reads
    assert isinstance(mem, MemoryDep) and isinstance(star, StarDep)
    assert mem.buffer == "x" and mem.variables == (index_var("c0"), index_var("c1"))
    assert str(mem.sizes[0]) == "s0" and mem.sizes[1] == 8 and str(mem.nbytes) == "32*s0"
    assert star == StarDep("i", 32)
    assert d.weak == [WeakDep("a", "x")]
    assert d.users == ["c"] and d.is_output and d.ancestors == ["a"]
    assert d.writes == [] and g.nodes[0].deps is None


# ---------------------------------------------------------------------------------------------
# What deps computes

_RENAMED = """\
func @f(%x: f32[8, 16], %w: f32[16]) -> (f32[8], f32[8]) {
  %s = reduction sum : f32[8] over (i0 < 8; r0 < 16) {
    %0 = load %x[16*i0 + r0]
    %1 = load %w[r0]
    %2 = mul %0, %1
    yield %2
  }
  %t = reduction sum : f32[8] over (row < 8; col < 16) {
    %0 = load %x[col + 16*row]
    %1 = load %w[col]
    %2 = mul %0, %1
    yield %2
  }
  return %s, %t
}
"""


def test_canonical_renaming_makes_equal_accesses_equal() -> None:
    g = func(_RENAMED)
    deps = compute_deps(g)
    s, t = (deps[n] for n in g.nodes)
    assert s.reads == t.reads
    assert [w.index for w in s.writes] == [w.index for w in t.writes]
    x, w = s.reads
    assert isinstance(x, MemoryDep) and x.nbytes == 512 and w.nbytes == 64
    assert x.ranges == ((index_var("c0"), 8), (index_var("c1"), 16))
    assert s.writes[0].ranges == ((index_var("c0"), 8),)


def test_compute_deps_does_not_attach_and_deps_pass_does() -> None:
    m = parse_module(_RENAMED)
    g = m.funcs[0]
    deps = compute_deps(g, users=False)
    assert all(n.deps is None for n in g.nodes)
    assert all(d.users is None and d.ancestors is None for d in deps.values())
    p = DepsPass(ancestors=True)
    p.apply(m)
    assert all(isinstance(n.deps, NodeDeps) for n in g.nodes)
    assert g.nodes[0].deps.users == [] and g.nodes[0].deps.is_output
    assert p.statistics == {"nodes": 2, "memory-deps": 6, "star-deps": 0, "weak-deps": 0}


def test_deps_on_the_loop_level_example() -> None:
    m = parse_file(os.path.join(ROOT, "examples", "loop_level.fir"))
    g = m.funcs[0]
    deps = compute_deps(g, ancestors=True)
    emb, ss, out = (deps[n] for n in g.nodes)
    assert [type(r).__name__ for r in emb.reads] == ["MemoryDep", "StarDep", "MemoryDep"]
    assert emb.reads[1] == StarDep("table", 100 * 64 * 4)
    assert emb.users == ["ss", "out"] and emb.is_output and emb.ancestors == []
    # the padded read reaches 68 columns of a 64-column buffer: capped at its storage
    assert out.reads[0].nbytes == 32 * 64 * 4 and out.writes[0].nbytes == 32 * 68 * 4
    assert out.ancestors == ["emb", "ss"] and ss.users == ["out"]


def test_mutation_weak_dependencies() -> None:
    g = func(
        """\
func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %r1 = exp %x : f32[4]
  %m = extern "lib.add_"(%x, %y) {mutates = [0]} : f32[4]
  %r2 = neg %x : f32[4]
  %m2 = extern "lib.add_"(%x, %r1) {mutates = [0]} : f32[4]
  %r3 = add %x, %r2 : f32[4]
  return %r3
}
"""
    )
    deps = {n.results[0].name: d for n, d in compute_deps(g).items()}
    assert deps["r1"].weak == []
    assert deps["m"].weak == [WeakDep("r1", "x")]
    assert StarDep("x", 16) in deps["m"].writes
    assert deps["r2"].weak == [WeakDep("m", "x")]
    assert deps["m2"].weak == [WeakDep("m", "x"), WeakDep("r2", "x")]
    assert deps["r3"].weak == [WeakDep("m2", "x")]
    assert deps["r1"].users == ["m", "m2"]


@settings(max_examples=S.examples(25), **SETTINGS)
@given(S.loop_modules(max_funcs=1))
def test_fast_renaming_agrees_with_xreplace(m: Module) -> None:
    # rename_symbols rebuilds without re-evaluating; it must give sympy's own canonical result
    for n in m.funcs[0].nodes:
        if not isinstance(n, LoopNode):
            continue
        loops = [v for v, _ in n.ranges + n.reduction_ranges]
        mapping = {v: index_var(f"c{k}") for k, v in enumerate(loops)}
        for op in n.body.ops if n.body is not None else []:
            if op.index is None or isinstance(op.index, int):
                continue
            fast, slow = rename_symbols(op.index, mapping), op.index.xreplace(mapping)
            assert fast == slow and hash(fast) == hash(slow)
            assert print_expr(fast) == print_expr(slow)


def test_names_in_mask() -> None:
    names = [f"n{k}" for k in range(70)]
    assert names_in_mask(0, names) == []
    assert names_in_mask(1 | 1 << 3 | 1 << 69, names) == ["n0", "n3", "n69"]


def test_topological_order_is_stable_and_reports_cycles() -> None:
    assert topological_order([[], [0], [1]]) == [0, 1, 2]
    # node 0 reads node 2: 2 first, then the smallest ready position
    assert topological_order([[2], [], []]) == [1, 2, 0]
    with pytest.raises(
        FirError, match=r"dependency cycle: %b -> %a -> %b \(each node must run before the next\)"
    ):
        topological_order([[1], [0], []], ["a", "b", "c"])


def test_verifier_checks_recorded_deps() -> None:
    m = parse_module(_DEAD)
    run_pass(m, "deps")
    verify_module(m)
    # a pass that removes nodes without updating the clauses leaves stale users
    g = m.funcs[0]
    g.nodes = [n for n in g.nodes if n.results[0].name not in ("d1", "d2")]
    with pytest.raises(FirError, match=r"user %d1 does not name a node of @f \(stale"):
        verify_module(m)
    # the shared helper forgets the clauses instead (deps must run again)
    m = parse_module(_DEAD)
    run_pass(m, "deps")
    assert remove_dead_nodes(m.funcs[0]) > 0
    assert all(n.deps is None for n in m.funcs[0].nodes)
    verify_module(m)
    m = parse_module(_DEAD)
    run_pass(m, "deps")
    a = m.funcs[0].nodes[0]
    assert a.deps is not None
    a.deps.reads = [MemoryDep("x", index_var("c1"), ((index_var("c0"), 4),), 16)]
    with pytest.raises(FirError, match=r"dependency index of %x uses unknown variable 'c1'"):
        verify_module(m)
    a.deps.reads = [StarDep("a", 16)]  # its own result, not defined before it
    with pytest.raises(FirError, match=r"reads %a, which is not defined before this node"):
        verify_module(m)


# ---------------------------------------------------------------------------------------------
# dce

_DEAD = """\
func @f(%x: f32[4]) -> (f32[4]) {
  %a = exp %x : f32[4]
  %d1 = neg %a : f32[4]
  %d2 = mul %d1, 2.0 : f32[4]
  %b = relu %a : f32[4]
  %e = extern "lib.log"(%b) : f32[4]
  %p = extern "lib.pure"(%b) {pure = true} : f32[4]
  %c = add %a, %b : f32[4]
  return %c
}
"""


def test_dce_removes_dead_nodes_transitively() -> None:
    m = parse_module(_DEAD)
    p = DCEPass()
    p.apply(m)
    assert [n.results[0].name for n in m.funcs[0].nodes] == ["a", "b", "e", "c"]
    assert p.statistics == {"removed": 3, "moved": 0}
    text = round_trip(m)
    DCEPass().apply(m)
    assert print_module(m) == text


def test_dce_restores_a_topological_order_stably() -> None:
    m = parse_module(_DEAD)
    g = m.funcs[0]
    g.nodes.reverse()  # as a pass that appends nodes out of order might leave them
    p = DCEPass()
    p.apply(m)
    # %e (impure) and %b only need %a: of the ready nodes the earliest in the input goes first
    assert [n.results[0].name for n in g.nodes] == ["a", "b", "c", "e"]
    assert p.statistics["removed"] == 3 and p.statistics["moved"] > 0
    round_trip(m)


def test_dce_order_honours_weak_dependencies() -> None:
    g = func(
        """\
func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {
  %p = relu %y : f32[4]
  %r = add %x, %p : f32[4]
  %m = extern "lib.add_"(%x, %y) {mutates = [0]} : f32[4]
  return %r, %x
}
"""
    )
    p, r, m = g.nodes
    g.nodes = [r, m, p]  # %r must follow %p (data) and precede %m (it reads %x before %m)
    DCEPass().apply(Module([g]))
    assert [n.results[0].name for n in g.nodes] == ["p", "r", "m"]


def test_dce_reports_a_cycle() -> None:
    m = parse_module(_DEAD)
    g = m.funcs[0]
    a, b = g.nodes[0], g.nodes[3]
    a.deps = NodeDeps(weak=[WeakDep("b", "x")])  # %a after %b, but %b reads %a
    with pytest.raises(FirError, match=r"in @f: dependency cycle: %b -> %a -> %b"):
        DCEPass().apply(m)
    assert b.results[0].name == "b"


def test_dce_updates_recorded_deps() -> None:
    m = parse_module(_DEAD)
    run_pass(m, "deps{ancestors}")
    a = m.funcs[0].nodes[0]
    assert a.deps is not None and a.deps.users == ["d1", "b", "c"]
    run_pass(m, "dce")
    assert a.deps.users == ["b", "c"]
    fresh = parse_module(_DEAD)
    run_pass(fresh, "dce,deps{ancestors}")
    assert print_module(m) == print_module(fresh)


# ---------------------------------------------------------------------------------------------
# Semantics: the interpreter computes the same outputs after deps and dce


def _inputs(g: Graph, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for a in g.args:
        shape = [d if isinstance(d, int) else 3 for d in a.type.shape]
        dt = a.type.dtype
        if dt.is_bool:
            out.append(torch.rand(shape, generator=gen) < 0.5)
        elif dt.is_int:
            out.append(torch.randint(0, 3, shape, generator=gen).to(dt.to_torch()))
        else:
            out.append(torch.randn(shape, generator=gen).to(dt.to_torch()))
    return out


def _check_unchanged(
    text: str, pipelines: tuple[str, ...] = ("deps", "dce", "deps{ancestors},dce,deps")
) -> None:
    m = parse_module(text)
    verify_module(m)
    for k, g in enumerate(m.funcs):
        args = _inputs(g, k)
        try:
            before = run_graph(g, args)
        except (FirError, KeyError):
            # the random program has no defined result on these inputs (an extern call whose
            # declared types its callee does not return, an out-of-range index)
            assume(False)
            return
        for pipeline in pipelines:
            after_m = parse_module(round_trip(run_pass(parse_module(text), pipeline)))
            after = run_graph(after_m.funcs[k], args)
            assert len(after) == len(before)
            for x, y in zip(after, before):
                torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_examples_compute_the_same(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        _check_unchanged(f.read())


def test_dce_keeps_results_of_a_program_with_dead_nodes() -> None:
    text = """\
func @f(%x: f32[4, 8], %w: f32[8]) -> (f32[4, 8], f32[4]) {
  %dead = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    yield %0
  }
  %a = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    %1 = load %w[i1]
    %2 = mul %0, %1
    yield %2
  }
  %s = reduction sum : f32[4] over (i0 < 4; r0 < 8) {
    %0 = load %a[8*i0 + r0]
    yield %0
  }
  %unused = exp %s : f32[4]
  return %a, %s
}
"""
    _check_unchanged(text)
    m = run_pass(parse_module(text), "dce")
    assert [n.results[0].name for n in m.funcs[0].nodes] == ["a", "s"]


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@settings(max_examples=S.examples(20), **SETTINGS)
@given(st.one_of(S.loop_modules(max_funcs=1), S.tensor_modules(max_funcs=1)))
def test_random_programs_compute_the_same(m: Module) -> None:
    _check_unchanged(print_module(m), ("deps{ancestors},dce",))


# ---------------------------------------------------------------------------------------------
# The documentation shows real output


def _blocks(path: str) -> list[tuple[str, str]]:
    """(kind, text) of each fenced block of a markdown file."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, kind, body = [], None, []
    for line in lines:
        if kind is None and line.startswith("```") and len(line) > 3:
            kind, body = line[3:], []
        elif kind is not None and line == "```":
            out.append((kind, "\n".join(body) + "\n"))
            kind = None
        elif kind is not None:
            body.append(line)
    return out


@pytest.mark.parametrize(
    "path,pipeline", [("docs/passes/deps.md", "deps"), ("docs/passes/dce.md", "dce")]
)
def test_pass_doc_example_is_real_output(path: str, pipeline: str) -> None:
    blocks = _blocks(path)
    pairs = [(a, b) for (ka, a), (kb, b) in zip(blocks, blocks[1:]) if ka == "fir" and kb == "text"]
    assert pairs, f"{path} has no example"
    for source, printed in pairs:
        assert print_module(run_pass(parse_module(source), pipeline)) == printed, path


def test_language_doc_dependencies_section() -> None:
    with open(os.path.join(ROOT, "docs", "language.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Dependencies")[1].split("\n## ")[0]
    sources = [b.split("```")[0] for b in section.split("```fir\n")[1:]]
    assert sources
    for source in sources:
        m = parse_module(source)
        verify_module(m)
        assert print_module(m) == source
        # what the deps pass prints for that program
        assert print_module(run_pass(parse_module(source), "deps{ancestors}")) == source
