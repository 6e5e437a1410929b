"""Compile each distinct kernel of a program once: an in-process cache of ``triton.compile``
results, the runtime's (what it keys on is the rendered source, which it only reads; no kernel
is rendered here), like the on-disk cache of :mod:`fir.backends.cache`.

A model's layers repeat: BERT's training step has 383 kernels, and its twelve layers make most
of them copies of one another that differ only in the names FIR gave their buffers and values
(``p_x``/``v_n3_7`` in one layer, ``p_x_1``/``v_n3_19`` in the next). Triton's own cache is keyed
by the source text, names included, so each copy used to be compiled again: 25 s of a 26 s
cold compile on an H200's 16-core host went to 383 ``triton.compile`` calls.

:func:`canonical_source` writes a kernel up to the names of its parameters and locals (the only
names FIR's renderer invents; globals such as ``tl`` and the helpers keep theirs), so two
kernels with the same canonical source, the same parameter types, constants and launch options
compile to the same binary. :class:`CompileMemo` keeps one ``triton.compile`` result per such
key for one program; each kernel still gets its own loaded function and argument slots
(:class:`~fir.backends.runtime.triton_launch.CubinKernel`). The binary keeps the name of the
first kernel of its kind, so a profiler lists the copies under that name, as Inductor's
deduplicated kernels are.
"""

from __future__ import annotations

import ast
import textwrap
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any


class _Renamer(ast.NodeTransformer):
    """Renames the kernel's function, its parameters and every name it assigns to ``_0``,
    ``_1``, … in order of first appearance, and the helpers named after the kernel
    (``kernel_k3_max_f32``: a reduction's merge, whose body its kind and dtype make) to
    ``_self_max_f32``."""

    def __init__(self, local: set[str], own: str) -> None:
        self.local = local
        self.own = own + "_"
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"_{len(self.names)}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        for a in node.args.args:
            a.arg = self._name(a.arg)
            a.annotation = self.visit(a.annotation) if a.annotation else None
        node.body = [self.visit(s) for s in _without_docstring(node.body)]
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.local:
            node.id = self._name(node.id)
        elif node.id.startswith(self.own):
            node.id = "_self_" + node.id[len(self.own) :]
        return node


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return body[1:]
    return body


def canonical_source(source: str) -> str:
    """``source`` (one function definition) with its function, parameter and local names
    replaced by position and its comments and docstring dropped: equal for two kernels that
    differ only in what those names are."""
    tree = ast.parse(textwrap.dedent(source))
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return source
    local = {a.arg for a in fn.args.args}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    return ast.unparse(_Renamer(local, fn.name).visit(tree))


class CompileMemo:
    """One compile per key, also when threads ask for the same key at once: the first asks,
    the others wait for its result (or its exception)."""

    def __init__(self) -> None:
        self._results: dict[Hashable, Future[Any]] = {}
        self._lock = threading.Lock()
        self.compiles = 0  # keys compiled (for tests and reports)
        self.reused = 0  # calls answered by an earlier compile

    def get(self, key: Hashable, compile_fn: Callable[[], Any]) -> Any:
        with self._lock:
            future = self._results.get(key)
            first = future is None
            if future is None:
                future = self._results[key] = Future()
                self.compiles += 1
            else:
                self.reused += 1
        if first:
            try:
                future.set_result(compile_fn())
            except BaseException as e:
                future.set_exception(e)
        return future.result()


__all__ = ["CompileMemo", "canonical_source"]
