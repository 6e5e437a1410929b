"""The import graph of FIR's own modules: no cycles, and layers that only point down.

Every ``import`` and ``from … import`` of a ``fir`` module counts, wherever it stands: at the top
of a module, inside a function (lazy imports) or under ``if TYPE_CHECKING:``. A cycle through
lazy or type-only imports still means two modules that cannot be understood, tested or moved
one without the other.

Layers, lowest first: ``ir`` → ``passes`` → ``backends`` → ``frontend`` → ``tools`` (and the
``fir`` facade package). A module may import its own layer and the layers below it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# folder in the repository -> the package it is installed as (pyproject's package-dir)
FOLDERS = {
    "ir": "fir.ir",
    "passes": "fir.passes",
    "backends": "fir.backends",
    "frontend": "fir.frontend",
    "tools": "fir.tools",
    "fir": "fir",
}
LAYERS = ["fir.ir", "fir.passes", "fir.backends", "fir.frontend", "fir.tools", "fir"]


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int


def module_files(root: Path, folders: dict[str, str]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the folders."""
    out: dict[str, Path] = {}
    for folder, package in folders.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if "Output" in parts or "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def import_edges(modules: dict[str, Path]) -> list[Edge]:
    """Every import of one of ``modules`` by another, with its line."""
    edges: list[Edge] = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # `from pkg import mod` imports the module pkg.mod when there is one
                targets = [
                    f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem
                    for a in node.names
                ]
            for t in targets:
                # `import fir.a.b` also runs fir.a; count the deepest module that exists
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.append(Edge(name, t, node.lineno))
    return edges


def find_cycles(modules: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {m: [] for m in modules}
    for e in edges:
        graph[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = graph[v]
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return cycles


def layer_of(module: str) -> int:
    best = -1
    for k, layer in enumerate(LAYERS):
        if (module == layer or module.startswith(layer + ".")) and (
            best < 0 or len(layer) > len(LAYERS[best])
        ):
            best = k
    return best


def upward_imports(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if layer_of(e.target) > layer_of(e.source)]


def describe(edge: Edge, modules: dict[str, Path], root: Path) -> str:
    path = modules[edge.source].relative_to(root)
    return f"{path}:{edge.line}: {edge.source} imports {edge.target}"


def check_tree(root: Path, folders: dict[str, str]) -> list[str]:
    """Every problem of the tree under ``root``, one line each."""
    modules = module_files(root, folders)
    edges = import_edges(modules)
    problems = []
    for cycle in find_cycles(modules, edges):
        members = set(cycle)
        inside = sorted(
            {describe(e, modules, root) for e in edges if {e.source, e.target} <= members}
        )
        problems.append("import cycle: " + " <-> ".join(cycle) + "\n    " + "\n    ".join(inside))
    for e in upward_imports(edges):
        problems.append("upward import: " + describe(e, modules, root))
    return problems


def test_fir_has_no_import_cycles_and_no_upward_imports() -> None:
    problems = check_tree(ROOT, FOLDERS)
    assert not problems, "\n".join(problems)


def test_the_walk_sees_every_package() -> None:
    modules = module_files(ROOT, FOLDERS)
    edges = import_edges(modules)
    # a sanity check that the walk is not vacuous: it sees the passes' imports of the IR
    assert len(modules) > 60
    assert any(
        e.source == "fir.passes.fusion.fuse" and e.target.startswith("fir.ir") for e in edges
    )
    assert any(e.source.startswith("fir.tools") for e in edges)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for folder in FOLDERS:
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize(
    "a_imports, b_imports",
    [
        ("from .b import g\n", "from .a import f\n"),  # plain
        ("from .b import g\n", "def f():\n    from fir.passes.a import h\n"),  # lazy
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
            "from . import a\n",
        ),  # type-only
    ],
    ids=["plain", "lazy", "type-only"],
)
def test_a_planted_cycle_fails(tmp_path: Path, a_imports: str, b_imports: str) -> None:
    root = _plant(tmp_path, {"passes/a.py": a_imports, "passes/b.py": b_imports})
    problems = check_tree(root, FOLDERS)
    assert len(problems) == 1
    assert problems[0].startswith("import cycle: fir.passes.a <-> fir.passes.b")


def test_a_planted_longer_cycle_fails(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "ir/x.py": "import fir.ir.y\n",
            "ir/y.py": "from fir.ir import z\n",
            "ir/z.py": "from .x import thing\n",
        },
    )
    problems = check_tree(root, FOLDERS)
    assert problems and "fir.ir.x <-> fir.ir.y <-> fir.ir.z" in problems[0]


def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "passes/p.py": "def f():\n    from fir.backends.cpp import render\n",
            "backends/cpp.py": "from fir.passes import p\n",
            "ir/graph.py": "from fir.frontend import fx\n",
            "frontend/fx.py": "",
        },
    )
    problems = check_tree(root, FOLDERS)
    assert any("cycle" in p for p in problems)  # p <-> cpp
    ups = [p for p in problems if p.startswith("upward import")]
    assert len(ups) == 2
    assert any("fir.passes.p imports fir.backends.cpp" in p for p in ups)
    assert any("fir.ir.graph imports fir.frontend.fx" in p for p in ups)


if __name__ == "__main__":  # `python tests/tools/test_imports.py` prints the problems
    print("\n".join(check_tree(ROOT, FOLDERS)) or "no problems")
    sys.exit(0)


def test_pyproject_installs_every_package() -> None:
    """A package missing from pyproject's ``packages`` is left out of a wheel or a plain
    ``pip install .`` (an editable install finds it anyway, so nothing else would notice): the
    Triton and llvmlite back ends were, until this test."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if "Output" not in parts and "__pycache__" not in parts:
                found.add(".".join((package, *parts)))
    assert found - listed == set(), "add these to pyproject.toml's packages"
    assert listed - found == set(), "these in pyproject.toml's packages do not exist"
