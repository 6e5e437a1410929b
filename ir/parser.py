"""Text → IR. A lark LALR parser whose callbacks build the IR while parsing (no parse tree).

Callbacks run in source order, so names are resolved as they are read: a value must be defined
before it is used, loop variables are in scope inside their node's body, and size symbols are
declared by the function's argument types. Every error carries ``file:line:col``.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from ._lark import (
    Lark,
    Token,
    Transformer,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from .dependencies import Dep, MemoryDep, NodeDeps, StarDep, WeakDep
from .dtypes import DType, parse_dtype
from .errors import FirError, Location, ParseError
from .fast_parse import parse_canonical
from .graph import (
    REDUCTION_KINDS,
    AliasNode,
    Body,
    BodyOp,
    BodyValue,
    ExternNode,
    Graph,
    Kernel,
    Literal,
    Loop,
    LoopNode,
    LoopSchedule,
    Module,
    TensorOp,
    Value,
)
from .lexer import FirLexer, Origin
from .ops import OPS
from .types import Layout, TensorType, dim_str, dims_mul

GRAMMAR_PATH = Path(__file__).with_name("fir.lark")

BODY_SPECIAL = ("load", "indirect", "index", "constant", "cast")


class _Attrs(dict):
    """An attribute dict as parsed (keeps the location of each key)."""

    locs: dict[str, Token]


class _Sizes(list):
    """A function's size parameters (``sizes (s1)``), as size symbols."""


class _Types(list):
    pass


class _Over:
    def __init__(self, ranges: list[tuple[Token, Any]], reduction: list[tuple[Token, Any]] | None):
        self.ranges = ranges
        self.reduction = reduction


@functools.cache
def _symbolic() -> Any:
    """``fir.ir.symbolic``, imported on first use: it imports sympy, which static programs never
    need. A call to this costs a fifth of an ``import`` statement, and the hottest callbacks
    (dependency variables, memory dependencies, loop ranges) run once per line."""
    from . import symbolic

    return symbolic


def _surely_positive(e: Any) -> bool:
    """Whether ``e`` is positive for all positive sizes. sympy decides some forms only once
    expanded: the printer writes ``3*s0*(max(2, s0) - 1) + 3*s0`` as
    ``s0*(3*max(2, s0) - 3) + 3*s0``, which parses back to a sum sympy cannot sign until it is
    expanded to ``3*s0*max(2, s0)`` (a round trip that hypothesis found failing)."""
    if e.is_positive is True:
        return True
    import sympy

    return sympy.expand(e).is_positive is True


def _is_int_expr(x: Any) -> bool:
    """An int or a sympy expression. Asks the type, not the object: sympy computes
    ``free_symbols`` by walking the whole expression each time it is read."""
    return isinstance(x, int) or hasattr(type(x), "free_symbols")


def _sympy_any(*xs: Any) -> bool:
    return any(not isinstance(x, int) for x in xs)


class _Builder(Transformer):
    """The parser callbacks. One instance serves one parse at a time (guarded by a lock)."""

    def reset(self, text: str, filename: str, line_offset: int) -> None:
        self.filename = filename
        self.lines = text.split("\n")
        Origin.filename, Origin.lines, Origin.line_offset, Origin.base = (
            filename,
            self.lines,
            line_offset,
            None,
        )
        self.line_offset = line_offset
        self.graph: Graph | None = None
        self.values: dict[str, Value] = {}
        self.size_symbols: dict[str, Any] = {}
        self.declaring_sizes = False
        self.loop_vars: dict[str, Any] = {}
        self.body_values: dict[str, BodyValue] = {}
        self.body_ops: list[BodyOp] = []
        self.in_body = False
        self.in_extern = False
        # inside a statement, an attribute may name an earlier value (``{reuses = %buf0}``)
        self.in_stmt = False
        self.reset_deps()

    def reset_deps(self) -> None:
        # inside ``deps { … }``: names that are not size symbols are the variables of the
        # current line, declared by its ``over`` list after the index (name -> its uses)
        self.in_deps = False
        self.dep_free: dict[str, list[Token]] = {}
        self.node_names: set[str] = set()
        # the kernel block being read, and the names of `local` waiting for its members
        self.open_kernel: Kernel | None = None
        self.pending_local: list[Token] = []
        self.kernel_names: set[str] = set()

    # -- locations and errors

    def loc(self, tok: Token) -> Location:
        line = tok.line or 1
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Location(self.filename, line + self.line_offset, tok.column or 1, src)

    def error(self, tok: Token, message: str) -> ParseError:
        return ParseError(message, self.loc(tok))

    # -- functions

    def start(self, children: list[Any]) -> Module:
        funcs = [c for c in children if isinstance(c, Graph)]
        seen: dict[str, Graph] = {}
        for f in funcs:
            if f.name in seen:
                raise ParseError(f"redefinition of function @{f.name}", f.loc)
            seen[f.name] = f
        return Module(funcs)

    def func_head(self, children: list[Any]) -> Graph:
        tok = children[0]
        self.graph = Graph(name=tok[1:], loc=self.loc(tok))
        self.values = {}
        self.kernel_names = set()
        self.size_symbols = {}
        self.declaring_sizes = True
        self.reset_deps()
        return self.graph

    def func_args(self, children: list[Any]) -> list[Value]:
        # size symbols are declared by argument types only
        self.declaring_sizes = False
        return [c for c in children if c is not None]

    def arg(self, children: list[Any]) -> Value:
        tok, ty = children
        name = tok[1:]
        if name in self.values:
            raise self.error(tok, f"redefinition of %{name}")
        v = Value(name, ty)
        self.values[name] = v
        return v

    def func_sizes(self, children: list[Any]) -> _Sizes:
        """``sizes (s1, s2)``: size symbols the caller passes; each is new to the function."""
        from .symbolic import size_symbol

        out = _Sizes()
        for tok in children[1:]:
            name = str(tok)
            if name in self.size_symbols:
                what = (
                    "is declared twice"
                    if size_symbol(name) in out
                    else "is bound by an argument type"
                )
                raise self.error(tok, f"size parameter '{name}' {what}")
            sym = size_symbol(name)
            self.size_symbols[name] = sym
            out.append(sym)
        return out

    def func_attrs(self, children: list[Any]) -> _Attrs:
        return children[0]

    def func(self, children: list[Any]) -> Graph:
        g = children[0]
        assert isinstance(g, Graph)
        args = children[1]
        types = [c for c in children if isinstance(c, TensorType)]
        attrs = next((c for c in children if isinstance(c, _Attrs)), None)
        sizes = next((c for c in children if isinstance(c, _Sizes)), None)
        ret_tok, outputs = children[-1]
        g.args = args
        g.size_params = list(sizes or [])
        g.output_types = types
        g.outputs = outputs
        g.return_loc = self.loc(ret_tok)
        if attrs is not None:
            g.attrs = dict(attrs)
        if len(outputs) != len(types):
            raise self.error(
                ret_tok,
                f"function @{g.name} declares {len(types)} result(s) but returns {len(outputs)}",
            )
        self.graph = None
        return g

    def return_stmt(self, children: list[Any]) -> tuple[Token, list[Value]]:
        tok = children[0]
        return tok, [self.lookup(t) for t in children[1:] if t is not None]

    def lookup(self, tok: Token) -> Value:
        name = tok[1:]
        v = self.values.get(name)
        if v is None:
            hint = difflib.get_close_matches(name, list(self.values), n=1)
            extra = f"; did you mean %{hint[0]}?" if hint else ""
            raise self.error(tok, f"use of undefined value %{name}{extra}")
        return v

    # -- types

    def type(self, children: list[Any]) -> TensorType:
        tok = children[0]
        layout = children[1] if len(children) > 1 else None
        word, _, rest = str(tok).partition("[")
        dtype = parse_dtype(word)
        if dtype is None:
            raise self.error(tok, f"unknown dtype '{word}' (expected one of {_dtype_names()})")
        inner = rest[:-1]
        parts = inner.split(",")
        if all(p.strip().isdigit() for p in parts):
            dims: list[Any] = [int(p) for p in parts]
        elif not inner.strip():
            dims = []
        else:
            dims = self.parse_dims(inner, tok, len(word) + 1)
        if layout is not None and len(layout.strides) != len(dims):
            raise self.error(
                tok, f"layout has {len(layout.strides)} strides for {len(dims)} dimensions"
            )
        return TensorType(dtype, tuple(dims), layout)

    def parse_dims(self, inner: str, tok: Token, column_shift: int) -> list[Any]:
        line, column = tok.line, tok.column
        assert line is not None and column is not None  # FIR's lexers place every token
        saved, saved_in_stmt = Origin.base, self.in_stmt
        Origin.base = (line, column + column_shift)
        self.in_stmt = False
        try:
            # the builder transforms as lark parses: the result is type_dims' list, not a tree
            dims = cast(list[Any], _get_lark().parse(inner, start="type_dims"))
        except UnexpectedInput as e:
            message = _convert(_get_lark(), e, inner, "", 0).message
            # the dimensions end at the type's ']', not at the end of the input
            message = message.replace("unexpected end of input", "unexpected ']'")
            message = message.replace("end of input", "']'")
            at = e.token if isinstance(e, UnexpectedToken) and e.token.type != "$END" else None
            if at is None:
                loc = self.loc(tok)
                raise ParseError(
                    message,
                    Location(loc.file, loc.line, column + len(tok) - 1, loc.source_line),
                ) from None
            raise self.error(at, message) from None
        finally:
            Origin.base, self.in_stmt = saved, saved_in_stmt
        return [self.as_size(d, tok, "a size") for d in dims]

    def type_dims(self, children: list[Any]) -> list[Any]:
        return [c for c in children if c is not None]

    def as_size(self, c: Any, tok: Token, what: str, allow_negative: bool = False) -> Any:
        if isinstance(c, int):
            if c < 0 and not allow_negative:
                raise self.error(tok, f"{what} must not be negative, got {c}")
            return c
        if isinstance(c, (DType, Value)) or c is None or isinstance(c, (Literal, str, list)):
            raise self.error(tok, f"{what} must be an integer expression")
        from .symbolic import to_dim

        return to_dim(c)

    def layout(self, children: list[Any]) -> Layout:
        kw = children[0]
        strides = [c for c in children[1:] if c is not None and not isinstance(c, _Offset)]
        offset = next((c.value for c in children if isinstance(c, _Offset)), 0)
        for s in strides + [offset]:
            if not _is_int_expr(s) or isinstance(s, Value):
                raise self.error(kw, "strides and offset must be integer expressions")
            if isinstance(s, int) and s < 0:
                raise self.error(kw, f"strides and offset must not be negative, got {s}")
        return Layout(tuple(strides), offset)

    def offset(self, children: list[Any]) -> _Offset:
        return _Offset(children[0])

    def type_list(self, children: list[Any]) -> _Types:
        return _Types(children)

    # -- statements

    def result_list(self, children: list[Any]) -> list[Token]:
        self.in_stmt = True
        return children

    def stmt(self, children: list[Any]) -> None:
        self.in_stmt = False
        result_toks, spec, deps = children
        node = spec
        types = node._types
        if len(types) != len(result_toks):
            raise ParseError(
                f"{len(result_toks)} result name(s) but {len(types)} result type(s)", node.loc
            )
        results: list[Value] = []
        for k, (tok, ty) in enumerate(zip(result_toks, types)):
            name = tok[1:]
            if name in self.values or any(r.name == name for r in results):
                raise self.error(tok, f"redefinition of %{name}")
            results.append(Value(name, ty, node, k))
        node.results = results
        del node._types
        if deps is not None:
            own = {r.name for r in results}
            for w in deps.writes:
                if w.buffer not in own and w.buffer not in self.values:
                    raise ParseError(
                        f"write of undefined value %{w.buffer} (a node writes its own results "
                        "or, when it mutates one, an earlier value)",
                        w.loc,
                    )
            node.deps = deps
        for r in results:
            self.values[r.name] = r
        self.node_names.add(results[0].name)
        assert self.graph is not None
        self.graph.nodes.append(node)
        if self.open_kernel is not None:
            self.open_kernel.nodes.append(node)

    # -- kernels

    def kernel_head(self, children: list[Any]) -> Kernel:
        kw, name_tok, over, local, attrs = children
        name = str(name_tok)[1:]
        if name in self.kernel_names:
            raise self.error(name_tok, f"redefinition of kernel @{name}")
        self.kernel_names.add(name)
        if over is not None:
            over = (
                self.as_size(over[0], name_tok, "a kernel's number of elements"),
                None
                if over[1] is None
                else self.as_size(over[1], name_tok, "a kernel's reduction size"),
            )
        k = Kernel(name, loc=self.loc(kw), over=over, attrs=dict(attrs) if attrs else {})
        self.open_kernel = k
        self.pending_local = local or []
        return k

    def kernel_over(self, children: list[Any]) -> tuple[Any, Any]:
        return children[0], children[2] if len(children) > 2 else None

    def kernel_local(self, children: list[Any]) -> list[Token]:
        toks = [c for c in children[1:] if c is not None]
        seen: set[str] = set()
        for t in toks:
            if str(t) in seen:
                raise self.error(t, f"'{t}' is listed twice")
            seen.add(str(t))
        return toks

    def kernel_attrs(self, children: list[Any]) -> _Attrs:
        return children[0]

    def kernel(self, children: list[Any]) -> None:
        k = children[0]
        assert isinstance(k, Kernel) and self.graph is not None
        results = {r.name: r for n in k.nodes for r in n.results}
        for tok in self.pending_local:
            name = str(tok)[1:]
            v = results.get(name)
            if v is None:
                where = "defined before" if name in self.values else "not defined in"
                raise self.error(
                    tok,
                    f"local %{name} is not a result of a node of kernel @{k.name} (it is {where} "
                    "the kernel)",
                )
            k.local.append(v)
            k.local_locs.append(self.loc(tok))
        self.graph.kernels.append(k)
        self.open_kernel = None
        self.pending_local = []

    def tensor_op(self, children: list[Any]) -> TensorOp | AliasNode:
        self.declaring_sizes = False
        name_tok = children[0]
        opname = str(name_tok)
        if opname == "view":
            return self.alias_node(name_tok, children)
        if opname not in OPS:
            raise self.error(name_tok, _unknown_op_message(opname, list(OPS)))
        operands = [c for c in children[1:] if isinstance(c, (Value, Literal))]
        attrs = next((c for c in children if isinstance(c, _Attrs)), _Attrs())
        types = next(c for c in children if isinstance(c, _Types))
        node = TensorOp(
            results=[], attrs=dict(attrs), loc=self.loc(name_tok), op=opname, operands=operands
        )
        node._types = types  # type: ignore[attr-defined]
        node._attr_locs = {k: self.loc(t) for k, t in getattr(attrs, "locs", {}).items()}  # type: ignore[attr-defined]
        return node

    def alias_node(self, name_tok: Token, children: list[Any]) -> AliasNode:
        """``%v = view %base {attrs} : TYPE``: an alias of ``%base``'s storage (same syntax as a
        tensor op, so the grammar needs no rule of its own)."""
        operands = [c for c in children[1:] if isinstance(c, (Value, Literal))]
        if len(operands) != 1 or not isinstance(operands[0], Value):
            raise self.error(
                name_tok, f"a view takes one base buffer, got {len(operands)} operand(s)"
            )
        attrs = next((c for c in children if isinstance(c, _Attrs)), _Attrs())
        types = next(c for c in children if isinstance(c, _Types))
        node = AliasNode(results=[], attrs=dict(attrs), loc=self.loc(name_tok), base=operands[0])
        node._types = types  # type: ignore[attr-defined]
        return node

    def value_operand(self, children: list[Any]) -> Value:
        return self.lookup(children[0])

    def extern_head(self, children: list[Any]) -> Token:
        self.in_extern = True
        return children[0]

    def extern_op(self, children: list[Any]) -> ExternNode:
        self.declaring_sizes = False
        self.in_extern = False
        callee_tok = children[0]
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        attrs = _Attrs()
        types = _Types()
        for c in children[1:]:
            if isinstance(c, _Kwarg):
                if c.name in kwargs:
                    raise self.error(c.tok, f"keyword argument '{c.name}' given twice")
                kwargs[c.name] = c.value
            elif isinstance(c, _Attrs):
                attrs = c
            elif isinstance(c, _Types):
                types = c
            elif isinstance(c, _Arg):
                args.append(c.value)
        node = ExternNode(
            results=[],
            attrs=dict(attrs),
            loc=self.loc(callee_tok),
            callee=_unquote(str(callee_tok)),
            args=args,
            kwargs=kwargs,
        )
        node._types = types  # type: ignore[attr-defined]
        return node

    def call_arg(self, children: list[Any]) -> _Arg:
        return _Arg(_unwrap(children[0]))

    def kwarg(self, children: list[Any]) -> _Kwarg:
        return _Kwarg(children[0], str(children[0]), _unwrap(children[1]))

    # -- loop nodes

    def over_clause(self, children: list[Any]) -> _Over:
        self.declaring_sizes = False
        ranges, reduction = _split_at_semicolon(children)
        if reduction == [] and any(isinstance(c, Token) and c.type == "SEMI" for c in children):
            semi = next(c for c in children if isinstance(c, Token) and c.type == "SEMI")
            raise self.error(semi, "expected at least one reduction loop after ';'")
        index_var = _symbolic().index_var
        self.loop_vars = {}
        for tok, _ in ranges + (reduction or []):
            name = str(tok)
            if name in self.loop_vars:
                raise self.error(tok, f"loop variable '{tok}' is bound twice")
            if name in self.size_symbols:
                raise self.error(tok, f"loop variable '{tok}' shadows a size symbol")
            self.loop_vars[name] = index_var(name)
        self.body_values = {}
        self.body_ops = []
        self.in_body = True
        return _Over(ranges, reduction)

    def loop_range(self, children: list[Any]) -> tuple[Token, Any]:
        tok, size = children
        return tok, self.as_size(size, tok, "a loop size")

    # -- loop orders

    def single_loop(self, children: list[Any]) -> _OrderLoop:
        tok, size = children
        return _OrderLoop([tok], size, tok)

    def merged_loop(self, children: list[Any]) -> _OrderLoop:
        toks = [c for c in children[:-1] if isinstance(c, Token)]
        return _OrderLoop(toks, children[-1], toks[0])

    def order_clause(self, children: list[Any]) -> _Order:
        loops, reduction = _split_at_semicolon(children[1:])
        return _Order(children[0], loops, reduction)

    def schedule(
        self, order: _Order, reduction: str | None, ranges: list[Any], red: list[Any]
    ) -> LoopSchedule:
        """Check an ``order (…)`` clause against the node's loops and build its schedule."""
        from .kernels import dims_equal

        sizes = {v: s for v, s in ranges + red}
        pointwise = {v for v, _ in ranges}
        seen: set[Any] = set()

        def build(items: list[_OrderLoop], part: str) -> list[Loop]:
            out = []
            for item in items:
                vs = []
                for tok in item.toks:
                    v = self.loop_vars.get(str(tok))
                    if v is None:
                        raise self.error(tok, f"'{tok}' is not a loop variable of this node")
                    if v in seen:
                        raise self.error(tok, f"loop '{tok}' appears twice in the order")
                    if (v in pointwise) != (part == "pointwise"):
                        where = "pointwise" if v in pointwise else "reduction"
                        raise self.error(
                            tok,
                            f"'{tok}' is a {where} loop; the order lists pointwise loops, then "
                            "';', then reduction loops",
                        )
                    seen.add(v)
                    vs.append(v)
                size = self.as_size(item.size, item.tok, "a loop size")
                want = dims_mul(sizes[v] for v in vs)
                if not dims_equal(size, want):
                    raise self.error(
                        item.tok,
                        f"loop {_loop_text(item.toks)} runs {dim_str(want)} times, not "
                        f"{dim_str(size)}",
                    )
                out.append(Loop(tuple(vs), size))
            return out

        if order.reduction is not None and reduction is None:
            raise self.error(order.kw, "a pointwise node has no reduction loops to order")
        loops = build(order.loops, "pointwise")
        red_loops = build(order.reduction or [], "reduction")
        for v, size in ranges + red:
            if v not in seen and not (isinstance(size, int) and size == 1):
                raise self.error(
                    order.kw, f"the order leaves out loop '{v.name}' (of size {dim_str(size)})"
                )
        return LoopSchedule(loops, red_loops, self.loc(order.kw))

    def _loop_node(self, kw_tok: Token, reduction: str | None, children: list[Any]) -> LoopNode:
        over: _Over | None = None
        body: Body | None = None
        attrs = _Attrs()
        types: _Types | None = None
        order: _Order | None = None
        for c in children:
            if isinstance(c, _Over):
                over = c
            elif isinstance(c, Body):
                body = c
            elif isinstance(c, _Attrs):
                attrs = c
            elif isinstance(c, _Types):
                types = c
            elif isinstance(c, _Order):
                order = c
        assert over is not None and body is not None and types is not None
        ranges = [(self.loop_vars[str(t)], s) for t, s in over.ranges]
        if reduction is None and over.reduction is not None:
            raise self.error(kw_tok, "a pointwise node has no reduction loops (remove the ';')")
        if reduction is not None and over.reduction is None:
            raise self.error(kw_tok, "a reduction node needs reduction loops after ';'")
        red = [(self.loop_vars[str(t)], s) for t, s in (over.reduction or [])]
        schedule = self.schedule(order, reduction, ranges, red) if order is not None else None
        node = LoopNode(
            results=[],
            attrs=dict(attrs),
            loc=self.loc(kw_tok),
            reduction=reduction,
            ranges=ranges,
            reduction_ranges=red,
            body=body,
            schedule=schedule,
        )
        node._types = types  # type: ignore[attr-defined]
        node._attr_locs = {k: self.loc(t) for k, t in getattr(attrs, "locs", {}).items()}  # type: ignore[attr-defined]
        self.in_body = False
        self.loop_vars = {}
        return node

    def pointwise_op(self, children: list[Any]) -> LoopNode:
        return self._loop_node(children[0], None, children[1:])

    def reduction_op(self, children: list[Any]) -> LoopNode:
        kind_tok = children[1]
        if str(kind_tok) not in REDUCTION_KINDS:
            raise self.error(
                kind_tok,
                f"unknown reduction kind '{kind_tok}' (expected one of {', '.join(REDUCTION_KINDS)})",
            )
        return self._loop_node(children[0], str(kind_tok), children[2:])

    # -- bodies

    def body(self, children: list[Any]) -> Body:
        result, ytok = children[-1]
        return Body(ops=self.body_ops, result=result, yield_loc=self.loc(ytok))

    def yield_stmt(self, children: list[Any]) -> tuple[Any, Token]:
        return children[1], children[0]

    def body_stmt(self, children: list[Any]) -> None:
        tok, op = children
        name = tok[1:]
        if name in self.body_values:
            raise self.error(tok, f"redefinition of %{name} in this loop body")
        op.result.name = name
        op.result.owner = op
        self.body_values[name] = op.result
        self.body_ops.append(op)

    def body_value(self, children: list[Any]) -> BodyValue:
        tok = children[0]
        v = self.body_values.get(tok[1:])
        if v is None:
            if tok[1:] in self.values:
                raise self.error(tok, f"%{tok[1:]} is a tensor; load it to use it in a loop body")
            raise self.error(tok, f"use of undefined value %{tok[1:]} in this loop body")
        return v

    def load_op(self, children: list[Any]) -> BodyOp:
        kw, buf_tok, index, if_tok, mask_tok, other = children
        buf = self.lookup(buf_tok)
        mask = None
        if mask_tok is not None:
            mask = self.body_value([mask_tok])
        return BodyOp(
            "load",
            BodyValue("", None),
            buffer=buf,
            index=self.as_index(index, buf_tok),
            mask=mask,
            other=other,
            loc=self.loc(kw),
        )

    def indirect_op(self, children: list[Any]) -> BodyOp:
        kw, src_tok, bound = children
        src = self.body_value([src_tok])
        return BodyOp(
            "indirect",
            BodyValue("", DType.I64),
            operands=[src],
            bound=self.as_size(bound, kw, "an indirect bound"),
            loc=self.loc(kw),
        )

    def index_op(self, children: list[Any]) -> BodyOp:
        kw, expr, dt_tok = children
        dtype = self.dtype(dt_tok)
        return BodyOp(
            "index",
            BodyValue("", dtype),
            index=self.as_index(expr, kw),
            dtype=dtype,
            loc=self.loc(kw),
        )

    def scalar_op(self, children: list[Any]) -> BodyOp:
        name_tok = children[0]
        opname = str(name_tok)
        spec = OPS.get(opname)
        if opname != "constant" and (spec is None or not spec.scalar):
            if spec is not None:
                raise self.error(
                    name_tok, f"'{opname}' is a tensor op; it cannot appear in a loop body"
                )
            raise self.error(name_tok, _unknown_op_message(opname, _body_op_names()))
        operands = []
        attrs: dict[str, Any] = {}
        for c in children[1:]:
            if isinstance(c, (BodyValue, Literal)):
                operands.append(c)
            elif isinstance(c, _Attrs):
                attrs = c
        dt_tok = children[-1] if isinstance(children[-1], Token) else None
        dtype = self.dtype(dt_tok) if dt_tok is not None else None
        if opname in ("constant", "cast") and dtype is None:
            raise self.error(name_tok, f"'{opname}' in a loop body needs a result dtype (': f32')")
        if opname not in ("constant", "cast") and dt_tok is not None:  # i.e. dtype is not None
            raise self.error(dt_tok, f"'{opname}' takes no result dtype in a loop body")
        return BodyOp(
            opname,
            BodyValue("", dtype),
            operands=operands,
            dtype=dtype,
            attrs=dict(attrs),
            loc=self.loc(name_tok),
        )

    def dtype(self, tok: Token) -> DType:
        dt = parse_dtype(str(tok))
        if dt is None:
            raise self.error(tok, f"unknown dtype '{tok}' (expected one of {_dtype_names()})")
        return dt

    def as_index(self, e: Any, tok: Token) -> Any:
        if isinstance(e, (DType, Value)) or not _is_int_expr(e):
            raise self.error(tok, "index must be an integer expression")
        return e

    # -- dependencies

    def deps_head(self, children: list[Any]) -> Token:
        self.in_deps = True
        self.dep_free = {}
        return children[0]

    def deps_clause(self, children: list[Any]) -> NodeDeps:
        self.in_deps = False
        kw = children[0]
        deps = NodeDeps(loc=self.loc(kw))
        for kind, tok, payload in children[1:]:
            if kind == "read":
                deps.reads.append(payload)
            elif kind == "write":
                deps.writes.append(payload)
            elif kind == "weak":
                deps.weak.append(payload)
            elif kind == "users":
                if deps.users is not None:
                    raise self.error(tok, "'users' given twice in one deps clause")
                deps.users = [str(t)[1:] for t in payload if t.type == "VALUE"]
                deps.users_locs = [self.loc(t) for t in payload if t.type == "VALUE"]
                deps.is_output = any(t.type == "RETURN" for t in payload)
            else:
                if deps.ancestors is not None:
                    raise self.error(tok, "'ancestors' given twice in one deps clause")
                deps.ancestors = [str(t)[1:] for t in payload]
                deps.ancestors_locs = [self.loc(t) for t in payload]
        return deps

    def read_dep(self, children: list[Any]) -> tuple[str, Token, Dep]:
        kw, (buf_tok, dep) = children
        self.lookup(buf_tok)  # a node reads values defined before it
        return "read", kw, dep

    def write_dep(self, children: list[Any]) -> tuple[str, Token, Dep]:
        kw, (_, dep) = children
        return "write", kw, dep  # checked against the node's results in ``stmt``

    def dep_range(self, children: list[Any]) -> tuple[Token, Any]:
        return children[0], children[1]

    def memory_dep(self, children: list[Any]) -> tuple[Token, MemoryDep]:
        index_var = _symbolic().index_var
        buf_tok, index = children[0], children[1]
        bytes_tok, nbytes = children[-2], children[-1]
        declared: dict[str, Any] = {}
        ranges: list[tuple[Any, Any]] = []
        for c in children[2:-2]:
            if c is None:
                continue
            tok, size = c
            name = str(tok)
            if name in declared:
                raise self.error(tok, f"dependency variable '{name}' is bound twice")
            if name in self.size_symbols:
                raise self.error(tok, f"dependency variable '{name}' shadows a size symbol")
            declared[name] = var = index_var(name)
            ranges.append((var, self.dep_size(size, tok, "a dependency size")))
        index = self.as_index(index, buf_tok)
        for name, toks in self.dep_free.items():
            if name not in declared:
                raise self.error(
                    toks[0],
                    f"unknown variable '{name}' in a dependency (declare it in the line's "
                    "'over' list; sizes and byte counts use size symbols only)",
                )
        dep = MemoryDep(
            str(buf_tok)[1:],
            index,
            tuple(ranges),
            self.dep_size(nbytes, bytes_tok, "a byte count"),
            loc=self.loc(buf_tok),
        )
        self.dep_free = {}
        return buf_tok, dep

    def star_dep(self, children: list[Any]) -> tuple[Token, StarDep]:
        buf_tok, _, bytes_tok, nbytes = children
        dep = StarDep(
            str(buf_tok)[1:], self.dep_size(nbytes, bytes_tok, "a byte count"), self.loc(buf_tok)
        )
        self.dep_free = {}
        return buf_tok, dep

    def dep_size(self, e: Any, tok: Token, what: str) -> Any:
        """A size or byte count: an integer expression over size symbols only."""
        size = self.as_size(e, tok, what)
        if not isinstance(size, int):
            sizes = set(self.size_symbols.values())
            for s in sorted(size.free_symbols, key=str):
                if s not in sizes:
                    # the first use of the name after the size's own start
                    start = tok.start_pos
                    assert start is not None  # FIR's lexers place every token
                    uses = [
                        t
                        for t in self.dep_free.get(s.name, [])
                        if t.start_pos is not None and t.start_pos > start
                    ]
                    at = uses[0] if uses else tok
                    raise self.error(
                        at, f"{what} must be an expression over size symbols, got '{s.name}'"
                    )
        return size

    def weak_dep(self, children: list[Any]) -> tuple[str, Token, WeakDep]:
        kw, node_tok, _, buf_tok = children
        if str(node_tok)[1:] not in self.node_names:
            raise self.error(
                node_tok, f"weak dependency on {node_tok}, which does not name an earlier node"
            )
        self.lookup(buf_tok)
        return "weak", kw, WeakDep(str(node_tok)[1:], str(buf_tok)[1:], self.loc(node_tok))

    def users_dep(self, children: list[Any]) -> tuple[str, Token, list[Token]]:
        kw, names = children
        seen: set[str] = set()
        for t in names:
            if str(t) in seen:
                raise self.error(t, f"'{t}' is listed twice")
            seen.add(str(t))
        return "users", kw, names

    def ancestors_dep(self, children: list[Any]) -> tuple[str, Token, list[Token]]:
        kw, names = children
        seen: set[str] = set()
        for t in names:
            if t.type == "RETURN":
                raise self.error(t, "'return' is a user, not an ancestor")
            if str(t)[1:] not in self.node_names:
                raise self.error(t, f"ancestor {t} does not name an earlier node")
            if str(t) in seen:
                raise self.error(t, f"'{t}' is listed twice")
            seen.add(str(t))
        return "ancestors", kw, names

    def dep_names(self, children: list[Any]) -> list[Token]:
        return [c for c in children if c.type != "NONE"]

    def dep_name(self, children: list[Any]) -> Token:
        return children[0]

    # -- attributes and literals

    def attr_dict(self, children: list[Any]) -> _Attrs:
        out = _Attrs()
        out.locs = {}
        for c in children:
            if c is None:
                continue
            tok, value = c
            if str(tok) in out:
                raise self.error(tok, f"attribute '{tok}' given twice")
            out[str(tok)] = value
            out.locs[str(tok)] = tok
        return out

    def attr(self, children: list[Any]) -> tuple[Token, Any]:
        tok, value = children
        value = _unwrap(value)
        if not self.in_stmt and _contains_value(value):
            raise self.error(tok, f"attribute '{tok}' cannot hold a tensor value")
        return tok, value

    def int_lit(self, children: list[Any]) -> Literal:
        return Literal(int(children[0]))

    def neg_int_lit(self, children: list[Any]) -> Literal:
        return Literal(-int(children[0]))

    def float_lit(self, children: list[Any]) -> Literal:
        return Literal(float(children[0]))

    def neg_float_lit(self, children: list[Any]) -> Literal:
        return Literal(-float(children[0]))

    def string_lit(self, children: list[Any]) -> str:
        return _unquote(str(children[0]))

    def list_lit(self, children: list[Any]) -> list[Any]:
        return [_unwrap(c) for c in children if c is not None]

    def special_lit(self, children: list[Any]) -> Literal:
        t = children[0].type
        return Literal(
            {"TRUE": True, "FALSE": False, "NONE": None, "INF": float("inf"), "NAN": float("nan")}[
                t
            ]
        )

    def neg_inf(self, children: list[Any]) -> Literal:
        return Literal(float("-inf"))

    def literal(self, children: list[Any]) -> Literal:
        return children[0]

    def operand(self, children: list[Any]) -> Literal:
        return children[0]

    def body_operand(self, children: list[Any]) -> Literal:
        return children[0]

    # -- index expressions

    def int_atom(self, children: list[Any]) -> int:
        return int(children[0])

    def name_atom(self, children: list[Any]) -> Any:
        tok = children[0]
        name = str(tok)
        var = self.loop_vars.get(name)
        if var is not None:
            return var
        dt = parse_dtype(name)
        if dt is not None:
            return dt
        sym = self.size_symbols.get(name)
        if sym is None and self.in_deps:
            self.dep_free.setdefault(name, []).append(tok)
            return _symbolic().index_var(name)
        if sym is None:
            if not self.declaring_sizes:
                where = "loop variable or size symbol" if self.in_body else "size symbol"
                raise self.error(
                    tok,
                    f"unknown {where} '{name}' (size symbols are declared by the function's argument types)",
                )
            from .symbolic import size_symbol

            sym = size_symbol(name)
            self.size_symbols[name] = sym
        return sym

    def indirect_atom(self, children: list[Any]) -> Any:
        tok = children[0]
        if self.in_deps:
            raise self.error(
                tok,
                f"a dependency index cannot use {tok} (an indirect access depends on the "
                "whole buffer: write %name[*])",
            )
        if self.in_extern or (self.in_stmt and not self.in_body):
            return self.lookup(tok)
        if not self.in_body:
            raise self.error(tok, f"value %{tok[1:]} cannot appear in an integer expression here")
        v = self.body_values.get(tok[1:])
        if v is None or v.owner is None or v.owner.opcode != "indirect":
            raise self.error(tok, f"%{tok[1:]} is not an 'indirect' index in this loop body")
        from .symbolic import indirect_symbol

        return indirect_symbol("%" + v.name)

    def _arith(self, a: Any, op_tok: Token, b: Any) -> Any:
        for x in (a, b):
            if not _is_int_expr(x):
                raise self.error(
                    op_tok, f"'{op_tok}' needs integer expressions, got {_describe(x)}"
                )
        if op_tok == "+":
            return a + b
        if op_tok == "-":
            return a - b
        return a * b

    def add(self, children: list[Any]) -> Any:
        return self._arith(*children)

    def sub(self, children: list[Any]) -> Any:
        return self._arith(*children)

    def mul(self, children: list[Any]) -> Any:
        return self._arith(*children)

    def neg(self, children: list[Any]) -> Any:
        return self._arith(0, *children)

    def _divmod(self, children: list[Any], kind: str) -> Any:
        a, b = children[-2], children[-1]
        kw = children[0]
        for x in (a, b):
            if not _is_int_expr(x):
                raise self.error(kw, f"{kind} needs integer expressions, got {_describe(x)}")
        if isinstance(b, int) and b <= 0 or (not isinstance(b, int) and not _surely_positive(b)):
            raise self.error(kw, f"{kind} needs a positive divisor, got {b}")
        if isinstance(a, int) and isinstance(b, int):
            return a // b if kind == "floordiv" else a % b
        from .symbolic import FloorDiv, Modulo

        return (FloorDiv if kind == "floordiv" else Modulo)(a, b)

    def floordiv(self, children: list[Any]) -> Any:
        return self._divmod(children, "floordiv")

    def mod(self, children: list[Any]) -> Any:
        return self._divmod(children, "mod")

    def _minmax(self, children: list[Any], kind: str) -> Any:
        kw, args = children[0], children[1:]
        for x in args:
            if not _is_int_expr(x):
                raise self.error(kw, f"{kind} needs integer expressions, got {_describe(x)}")
        if all(isinstance(a, int) for a in args):
            return min(args) if kind == "min" else max(args)
        import sympy

        return (sympy.Min if kind == "min" else sympy.Max)(*args)

    def imin(self, children: list[Any]) -> Any:
        return self._minmax(children, "min")

    def imax(self, children: list[Any]) -> Any:
        return self._minmax(children, "max")


class _OrderLoop:
    def __init__(self, toks: list[Token], size: Any, tok: Token):
        self.toks = toks
        self.size = size
        self.tok = tok


class _Order:
    def __init__(self, kw: Token, loops: list[_OrderLoop], reduction: list[_OrderLoop] | None):
        self.kw = kw
        self.loops = loops
        self.reduction = reduction


def _split_at_semicolon(children: list[Any]) -> tuple[list[Any], list[Any] | None]:
    """The items of a loop list before the ``;`` and after it (None when there is no ``;``)."""
    before: list[Any] = []
    after: list[Any] | None = None
    for c in children:
        if c is None:
            continue
        if isinstance(c, Token) and c.type == "SEMI":
            after = []
        elif after is not None:
            after.append(c)
        else:
            before.append(c)
    return before, after


def _loop_text(toks: list[Token]) -> str:
    return str(toks[0]) if len(toks) == 1 else "[" + ", ".join(str(t) for t in toks) + "]"


class _Offset:
    def __init__(self, value: Any):
        self.value = value


class _Arg:
    def __init__(self, value: Any):
        self.value = value


class _Kwarg:
    def __init__(self, tok: Token, name: str, value: Any):
        self.tok = tok
        self.name = name
        self.value = value


def _describe(x: Any) -> str:
    if isinstance(x, DType):
        return f"dtype {x}"
    if isinstance(x, Value):
        return f"tensor %{x.name}"
    return repr(x)


def _unwrap(v: Any) -> Any:
    if isinstance(v, Literal):
        return v.value
    if isinstance(v, list):
        return [_unwrap(x) for x in v]
    return v


def _contains_value(v: Any) -> bool:
    if isinstance(v, Value):
        return True
    if isinstance(v, list):
        return any(_contains_value(x) for x in v)
    return False


def _unquote(s: str) -> str:
    body = s[1:-1]
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _dtype_names() -> str:
    return ", ".join(dt.value for dt in DType)


def _body_op_names() -> list[str]:
    return [n for n, s in OPS.items() if s.scalar] + list(BODY_SPECIAL)


def _unknown_op_message(name: str, known: list[str]) -> str:
    hint = difflib.get_close_matches(name, known, n=1)
    extra = f"; did you mean '{hint[0]}'?" if hint else ""
    return f"unknown op '{name}'{extra}"


# ---------------------------------------------------------------------------------------------

_TERMINAL_NAMES = {
    "VALUE": "a value (%name)",
    "FUNC_NAME": "a function name (@name)",
    "NAME": "a name",
    "FLOAT": "a float",
    "INT": "an integer",
    "STRING": "a string",
    "TYPE": "a type (f32[...])",
    "$END": "end of input",
}

_lock = threading.Lock()
_builder = _Builder()
_lark: Lark | None = None


def _get_lark() -> Lark:
    global _lark
    if _lark is None:
        _lark = Lark(
            GRAMMAR_PATH.read_text(),
            parser="lalr",
            lexer=FirLexer,
            start=["start", "type_dims"],
            transformer=_builder,
            maybe_placeholders=True,
            cache=_cache_file(),
        )
    return _lark


def _cache_file() -> str | bool:
    """Cache the LALR tables next to the user's temp files, keyed by the grammar's contents."""
    import hashlib
    import tempfile

    digest = hashlib.sha256(GRAMMAR_PATH.read_bytes()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / f"fir-grammar-{digest}.lark-cache")


def _terminal_display(lark: Lark, name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        term = lark.get_terminal(name)
    except KeyError:
        return name
    pattern = term.pattern
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return name.lower()


def _expected(lark: Lark, names: set[str] | frozenset[str]) -> str:
    shown = sorted({_terminal_display(lark, n) for n in names if n not in ("WS", "COMMENT")})
    if len(shown) > 12:
        shown = shown[:12] + ["…"]
    return ", ".join(shown)


def parse_module(
    text: str, filename: str = "<input>", line_offset: int = 0, *, fast_path: bool = True
) -> Module:
    """Parse FIR text into a :class:`Module`. Raises :class:`ParseError` with a location.

    Text laid out as the printer writes it goes through :mod:`fir.ir.fast_parse`, which drives
    the same callbacks as lark and gives the same module; whatever it is unsure of (including
    every error) is parsed again by lark, here. ``fast_path=False`` always uses lark (the
    differential tests compare the two)."""
    with _lock, _paused_gc():
        if fast_path:
            _builder.reset(text, filename, line_offset)
            try:
                return parse_canonical(_builder, _builder.lines)
            except Exception:  # Unsure, a callback's error, anything: lark decides
                pass
        lark = _get_lark()  # built only when the fast path gives up
        _builder.reset(text, filename, line_offset)
        try:
            result = lark.parse(text, start="start")
        except FirError:
            raise
        except UnexpectedInput as e:
            raise _convert(lark, e, text, filename, line_offset) from None
        except RecursionError:
            raise ParseError(
                "input is nested too deeply", _loc_at(text, filename, 1, 1, line_offset)
            ) from None
        except Exception as e:  # a callback failed on input it did not foresee
            inner = getattr(e, "orig_exc", e)
            if isinstance(inner, FirError):
                raise inner from None
            raise ParseError(
                f"internal error while parsing: {type(inner).__name__}: {inner}",
                _loc_at(text, filename, 1, 1, line_offset),
            ) from None
    assert isinstance(result, Module)
    return result


@contextlib.contextmanager
def _paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while parsing: a large program allocates hundreds of
    thousands of objects that live on, and the collections they trigger walk all of them and
    find nothing to free (a third of the time on a 100,000-line program). The passes do the same
    (``passes.base.paused_gc``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _loc_at(text: str, filename: str, line: int, col: int, line_offset: int) -> Location:
    lines = text.split("\n")
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return Location(filename, line + line_offset, col, src)


def _convert(
    lark: Lark, e: UnexpectedInput, text: str, filename: str, line_offset: int
) -> ParseError:
    line = getattr(e, "line", 1) or 1
    col = getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedCharacters):
        pos = e.pos_in_stream  # always set for UnexpectedCharacters
        ch = text[pos] if pos is not None and pos < len(text) else "?"
        msg = f"unexpected character '{ch}'"
        if e.allowed:
            msg += f", expected {_expected(lark, e.allowed)}"
    elif isinstance(e, UnexpectedEOF) or (
        isinstance(e, UnexpectedToken) and e.token.type == "$END"
    ):
        lines = text.split("\n")
        line = len(lines)
        col = len(lines[-1]) + 1
        while line > 1 and not lines[line - 1].strip():
            line -= 1
            col = len(lines[line - 1]) + 1
        msg = "unexpected end of input"
        expected = getattr(e, "expected", None)
        if expected:
            msg += f", expected {_expected(lark, expected)}"
    elif isinstance(e, UnexpectedToken):
        msg = f"unexpected {_token_text(e.token)}, expected {_expected(lark, e.accepts or e.expected)}"
    else:  # pragma: no cover - lark has no other kinds
        msg = str(e).splitlines()[0]
    return ParseError(msg, _loc_at(text, filename, line, col, line_offset))


def _token_text(tok: Token) -> str:
    return f"'{tok}'"


def parse_file(path: str | Path) -> Module:
    p = Path(path)
    return parse_module(p.read_text(), str(p))
