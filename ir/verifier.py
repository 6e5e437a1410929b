"""Static checks that every pass relies on: scoping, typing rules of each op, loop bounds.

The verifier also fills in the dtypes of loop-body values that the text leaves implicit
(``%1 = mul %0, %0`` has the dtype of ``%0``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from .dependencies import MemoryDep
from .dtypes import DType
from .errors import Location, VerifyError
from .externs import callee_problem, torch_object_problem
from .graph import (
    ANNOTATION_KEYS,
    REDUCTION_KINDS,
    AliasNode,
    Body,
    BodyOp,
    BodyValue,
    ExternNode,
    Graph,
    Literal,
    LoopNode,
    LoopSchedule,
    Module,
    Node,
    TensorOp,
    Value,
    alias_root,
)
from .kernels import describe_over, dims_equal, kernel_space, over_of, same_over
from .ops import OPS, AttrSpec, OpSpec, TypeRule, literal_fits
from .types import TensorType, dim_str, dims_mul

if TYPE_CHECKING:
    from typing_extensions import TypeIs


def verify_module(m: Module) -> None:
    for g in m.funcs:
        verify_graph(g)


def verify_graph(g: Graph) -> None:
    _GraphVerifier(g).run()


# reductions that have no value over no element
_EMPTY_REDUCTIONS = frozenset(["max", "min", "argmax", "argmin"])


# the most elements :func:`layout_overlaps` enumerates to decide a layout the sorted-stride
# rule cannot (larger ones are refused)
_OVERLAP_POINTS = 1 << 20


def layout_overlaps(t: TensorType) -> bool:
    """Whether two elements of ``t`` may share storage. Symbolic sizes and strides are tried at
    small values (every symbol 2, then 3): a layout that overlaps there is refused."""
    if t.layout is None:
        return False
    dims = list(zip(t.shape, t.strides))
    if all(_is_int(x) for pair in dims for x in pair):
        return _static_overlap(dims)
    symbols = set().union(*(_free_symbols(x) for pair in dims for x in pair if not _is_int(x)))
    for value in (2, 3):
        at = {s: value for s in symbols}
        try:
            static = [(int(_subs(d, at)), int(_subs(s, at))) for d, s in dims]
        except (TypeError, ValueError, ZeroDivisionError):
            return False
        if _static_overlap(static):
            return True
    return False


def _subs(x: Any, at: dict[Any, int]) -> Any:
    return x if _is_int(x) else x.subs(at)


def _static_overlap(dims: list[tuple[int, int]]) -> bool:
    if any(d == 0 for d, _ in dims):
        return False  # no element at all
    moving = sorted(((d, abs(s)) for d, s in dims if d > 1), key=lambda p: p[1])
    reach = 0  # the farthest element the smaller strides reach from the first
    for d, s in moving:
        if s <= reach:
            break
        reach += (d - 1) * s
    else:
        return False  # each stride steps past everything the smaller ones reach
    if any(st == 0 for _, st in moving):
        return True  # a broadcast dimension: its elements share memory
    points = math.prod(d for d, _ in moving)
    if points > _OVERLAP_POINTS:
        return True  # cannot be shown apart
    # every element's offset, counted in plain Python: torch may be under a fake-tensor mode
    # here (the frontend verifies while Dynamo traces), where its ops compute nothing
    offsets = {0}
    for d, st in moving:
        offsets = {o + k * st for o in offsets for k in range(d)}
    return len(offsets) != points


def _is_int(v: Any) -> TypeIs[int]:  # a size or index is never a bool
    return isinstance(v, int) and not isinstance(v, bool)


def _is_sym(v: Any) -> bool:
    return hasattr(v, "free_symbols") and not isinstance(v, (Value,))


def _torch_object_problem(a: Any) -> str | None:
    """What is wrong with a ``"torch:KIND=NAME"`` extern argument (in lists too), or None."""
    if isinstance(a, str):
        return torch_object_problem(a)
    if isinstance(a, list):
        return next((p for x in a if (p := _torch_object_problem(x)) is not None), None)
    return None


def _check_attr_kind(spec: AttrSpec, v: Any) -> str | None:
    kind = spec.kind
    ok = {
        "int": _is_int(v),
        "ints": isinstance(v, list) and all(_is_int(x) for x in v),
        "float": (_is_int(v) or isinstance(v, float)),
        "optfloat": v is None or _is_int(v) or isinstance(v, float),
        "bool": isinstance(v, bool),
        "str": isinstance(v, str),
        "dtype": isinstance(v, DType),
        "dim": _is_int(v) or _is_sym(v),
        "optdim": v is None or _is_int(v) or _is_sym(v),
        "any": True,
    }[kind]
    if not ok:
        return {
            "int": "an integer",
            "ints": "a list of integers",
            "float": "a number",
            "optfloat": "a number or none",
            "bool": "true or false",
            "str": "a string",
            "dtype": "a dtype",
            "dim": "an integer expression",
            "optdim": "an integer expression or none",
        }[kind]
    if spec.choices and v not in spec.choices:
        return "one of " + ", ".join(f'"{c}"' for c in spec.choices)
    return None


def _same_dims(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if _is_int(x) and _is_int(y):
            return False
        import sympy

        if sympy.simplify(sympy.sympify(x) - sympy.sympify(y)) != 0:
            return False
    return True


def _types_equal(a: TensorType, b: TensorType) -> bool:
    return a.dtype == b.dtype and _same_dims(a.shape, b.shape)


def _equal_numel(a: Any, b: Any) -> bool:
    return _same_dims((a,), (b,))


class _GraphVerifier:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.defined: set[int] = set()
        self.names: set[str] = set()
        self.size_symbols: set[Any] = set()
        # node name (its first result) -> position, for the names in dependency clauses
        self.node_pos: dict[str, int] = {}
        self.checked_accesses: set[Any] = set()
        self.checked_indices: set[Any] = set()
        self.loop_spaces: dict[Any, tuple[frozenset[Any], dict[Any, tuple[int, int]]]] = {}
        self.reads: list[list[Value]] = []  # the values each node reads, in node order

    def error(self, message: str, loc: Location | None, node: Node | None = None) -> VerifyError:
        if loc is None and node is not None:
            message = f"in {node.describe()}: {message}"
        return VerifyError(message, loc)

    def define(self, v: Value, loc: Location | None) -> None:
        if v.name in self.names:
            raise self.error(f"redefinition of %{v.name}", loc)
        self.names.add(v.name)
        self.defined.add(id(v))

    def use(self, v: Value, loc: Location | None, node: Node | None = None) -> None:
        if id(v) not in self.defined:
            raise self.error(f"%{v.name} is used before it is defined", loc, node)

    def run(self) -> None:
        g = self.g
        for a in g.args:
            self.define(a, g.loc)
            for d in list(a.type.shape) + list(a.type.strides) + [a.type.offset]:
                if not _is_int(d):
                    self.size_symbols |= set(d.free_symbols)
        self.size_params(g)
        self.size_symbol_key = frozenset(self.size_symbols)
        for pos, n in enumerate(g.nodes):
            reads = n.operand_values()
            if isinstance(n, TensorOp):
                self.tensor_op(n)
            elif isinstance(n, ExternNode):
                self.extern(n)
            elif isinstance(n, LoopNode):
                self.loop_node(n, reads)
            elif isinstance(n, AliasNode):
                self.alias(n)
            else:
                raise self.error(f"unknown node kind {type(n).__name__}", n.loc, n)
            self.reads.append(reads)
            if n.deps is not None:
                self.node_deps(n)
            for r in n.results:
                self.define(r, n.loc)
                self.check_sizes(r.type, n.loc, n)
                if isinstance(n, (TensorOp, LoopNode)) and r.type.layout is not None:
                    self.written_layout(r, n)
            if n.results:
                self.node_pos[n.results[0].name] = pos
        for pos, n in enumerate(g.nodes):
            if n.deps is not None and n.deps.users is not None:
                self.deps_users(n, pos)
        for n in g.nodes:
            if "nofuse" in n.attrs:
                self.nofuse(n)
        if g.kernels:
            self.kernels()
        if len(g.outputs) != len(g.output_types):
            raise self.error(
                f"function @{g.name} declares {len(g.output_types)} result(s) but returns {len(g.outputs)}",
                g.return_loc,
            )
        for k, (v, t) in enumerate(zip(g.outputs, g.output_types)):
            self.use(v, g.return_loc)
            if not _types_equal(v.type, t):
                raise self.error(
                    f"returned value #{k} %{v.name} has type {v.type}, but @{g.name} declares {t}",
                    g.return_loc,
                )
            # FIR writes what a tensor op or a loop node computes; a view, an argument or an
            # extern call's result (``as_strided`` in PyTorch) may overlap as eager's do
            written = isinstance(v.owner, LoopNode) or (
                isinstance(v.owner, TensorOp) and OPS[v.owner.op].category != "view"
            )
            if t.layout is not None and written and layout_overlaps(t):
                raise self.error(
                    f"result #{k} of @{g.name} is declared {t}, whose elements overlap: a "
                    "computed result must give each element its own memory",
                    g.return_loc,
                )

    def size_params(self, g: Graph) -> None:
        """``sizes (s1)``: new size symbols, each once, that the caller passes as ints."""
        if not g.size_params:
            return
        import sympy

        for s in g.size_params:
            if not (isinstance(s, sympy.Symbol) and s.is_positive and not s.name.startswith("%")):
                raise self.error(f"size parameter {s} of @{g.name} is not a size symbol", g.loc)
            if s in self.size_symbols:
                raise self.error(
                    f"size parameter '{s.name}' of @{g.name} is declared twice or bound by an "
                    "argument type",
                    g.loc,
                )
            self.size_symbols.add(s)

    def check_sizes(self, t: TensorType, loc: Location | None, node: Node) -> None:
        for d in list(t.shape) + (list(t.layout.strides) + [t.layout.offset] if t.layout else []):
            if not _is_int(d):
                unknown = set(d.free_symbols) - self.size_symbols
                if unknown:
                    name = sorted(s.name for s in unknown)[0]
                    raise self.error(
                        f"size symbol '{name}' is not bound by the function's argument types",
                        loc,
                        node,
                    )

    # -- tensor level

    def tensor_op(self, n: TensorOp) -> None:
        previous = getattr(n, "_verified", None)
        if previous is not None and previous == self.tensor_fingerprint(n):
            for o in n.operands:  # what depends on the rest of the graph
                if isinstance(o, Value):
                    self.use(o, n.loc, n)
            return
        self.check_tensor_op(n)
        n._verified = self.tensor_fingerprint(n)  # type: ignore[attr-defined]

    def tensor_fingerprint(self, n: TensorOp) -> tuple[Any, ...]:
        """What :meth:`check_tensor_op` reads (see :meth:`loop_fingerprint`)."""
        return (
            n.op,
            tuple(n.operands),
            tuple(o.type if isinstance(o, Value) else None for o in n.operands),
            tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in n.attrs.items()),
            tuple(r.type for r in n.results),
            self.size_symbol_key,
        )

    def check_tensor_op(self, n: TensorOp) -> None:
        spec = OPS.get(n.op)
        if spec is None:
            raise self.error(f"unknown op '{n.op}'", n.loc, n)
        for o in n.operands:
            if isinstance(o, Value):
                self.use(o, n.loc, n)
        if n.op in _EMPTY_REDUCTIONS:
            self.empty_reduction(n)
        # programs repeat the same typings (f32[32, 64] add f32[32, 64]) thousands of times
        typing = _tensor_typing_key(n)
        if typing is not None and typing in _CHECKED_TENSOR_TYPINGS:
            return
        count = len(n.operands)
        if count < spec.min_operands or (
            spec.max_operands is not None and count > spec.max_operands
        ):
            raise self.error(f"'{n.op}' takes {_arity(spec)}, got {count}", n.loc, n)
        self.attrs(n, spec)
        if len(n.results) != spec.num_results:
            raise self.error(
                f"'{n.op}' has {spec.num_results} result(s), got {len(n.results)}", n.loc, n
            )
        operand_types = [o.type if isinstance(o, Value) else o for o in n.operands]
        declared = [r.type for r in n.results]
        try:
            inferred = spec.infer(operand_types, n.attrs, declared)
        except TypeRule as e:
            raise self.error(_rule_message(n.op, e), n.loc, n) from None
        for k, (d, i) in enumerate(zip(declared, inferred)):
            if not _types_equal(d, i):
                which = "result type" if len(declared) == 1 else f"result #{k} type"
                raise self.error(
                    f"'{n.op}' {which} {d} does not match the inferred type {i}", n.loc, n
                )
        if typing is not None and len(_CHECKED_TENSOR_TYPINGS) < 100_000:
            _CHECKED_TENSOR_TYPINGS.add(typing)

    def written_layout(self, r: Value, n: Node) -> None:
        """A node that computes ``r`` writes each element once: no two may share memory (a
        view may, as ``expand`` does, since nothing writes through it)."""
        if layout_overlaps(r.type):
            raise self.error(
                f"%{r.name} has layout {r.type}, whose elements overlap: a computed result "
                "must give each element its own memory",
                n.loc,
                n,
            )

    def empty_reduction(self, n: TensorOp) -> None:
        """A max, min, argmax or argmin over a dimension of size 0 has no value: eager raises
        (IndexError), so the program is refused before anything runs."""
        x = n.operands[0] if n.operands else None
        if not isinstance(x, Value):
            return
        shape = x.type.shape
        dims = n.attrs.get("dims") if n.op in ("max", "min") else n.attrs.get("dim")
        if dims is None:
            reduced = list(range(len(shape)))
        else:
            reduced = [d for d in (dims if isinstance(dims, list) else [dims]) if _is_int(d)]
        for d in reduced:
            if -len(shape) <= d < len(shape) and _is_int(shape[d]) and shape[d] == 0:
                raise self.error(
                    f"'{n.op}' reduces dimension {d % len(shape)} of %{x.name} ({x.type}), "
                    "which has no element: eager raises 'Expected reduction dim to have "
                    "non-zero size'",
                    n.loc,
                    n,
                )

    def attrs(self, n: TensorOp, spec: OpSpec) -> None:
        locs: dict[str, Location] = getattr(n, "_attr_locs", {})
        for key, value in n.attrs.items():
            aspec = spec.attrs.get(key)
            loc = locs.get(key, n.loc)
            if aspec is None and key in ANNOTATION_KEYS:
                continue
            if aspec is None:
                known = ", ".join(spec.attrs) or "none"
                raise self.error(f"'{n.op}' has no attribute '{key}' (attributes: {known})", loc, n)
            wanted = _check_attr_kind(aspec, value)
            if wanted is not None:
                raise self.error(f"'{n.op}' attribute '{key}' must be {wanted}", loc, n)
        for key, aspec in spec.attrs.items():
            if aspec.required and key not in n.attrs:
                raise self.error(f"'{n.op}' needs attribute '{key}'", n.loc, n)

    def alias(self, n: AliasNode) -> None:
        """A view of a buffer's storage: same dtype, every element inside that storage."""
        if n.base is None:
            raise self.error("a view names no base buffer", n.loc, n)
        self.use(n.base, n.loc, n)
        if len(n.results) != 1:
            raise self.error("a view has one result", n.loc, n)
        t, base = n.result.type, n.base.type
        if t.dtype != base.dtype:
            raise self.error(
                f"a view has its base's dtype: %{n.base.name} is {base.dtype}, not {t.dtype}",
                n.loc,
                n,
            )
        if any(_is_int(d) and d == 0 for d in t.shape):
            return  # no element: no storage reached
        root = alias_root(n.base)
        reach: Any = t.offset
        for d, s in zip(t.shape, t.strides):
            reach = reach + (d - 1) * s
        size = root.type.storage_size()
        if _is_int(reach) and _is_int(size) and not (0 <= reach < size):
            where = (
                f"%{n.base.name}" if root is n.base else f"%{root.name} (through %{n.base.name})"
            )
            raise self.error(
                f"view %{n.result.name} ({t}) reaches storage element {reach} of {where}, "
                f"which holds {size} elements",
                n.loc,
                n,
            )

    def extern(self, n: ExternNode) -> None:
        for v in n.operand_values():
            self.use(v, n.loc, n)
        if not n.callee:
            raise self.error("extern call names no callee", n.loc, n)
        if not n.results:
            raise self.error("extern call has no results", n.loc, n)
        # what the call may name is decided here, by the name alone, so that no tool runs
        # anything a file chose (the interpreter and runtime check again when they look it up)
        problem = callee_problem(n.callee)
        if problem is not None:
            raise self.error(problem, n.loc, n)
        for a in [*n.args, *n.kwargs.values()]:
            problem = _torch_object_problem(a)
            if problem is not None:
                raise self.error(problem, n.loc, n)
        kept = n.attrs.get("results")
        if kept is not None and (
            not isinstance(kept, list)
            or len(kept) != len(n.results)
            or not all(_is_int(k) and k >= 0 for k in kept)
            or kept != sorted(set(kept))
        ):
            raise self.error(
                f"'results' must list, in increasing order, the positions of the call's "
                f"{len(n.results)} result(s) among what it returns",
                n.loc,
                n,
            )
        mutates = n.attrs.get("mutates")
        if mutates is not None:
            if not isinstance(mutates, list) or not all(_is_int(k) for k in mutates):
                raise self.error("'mutates' must be a list of argument positions", n.loc, n)
            for k in mutates:
                a = n.args[k] if 0 <= k < len(n.args) else None
                # a tensor, or a list of tensors (``Tensor(a!)[]``: each one is written)
                if not (
                    isinstance(a, Value)
                    or (isinstance(a, list) and a and all(isinstance(x, Value) for x in a))
                ):
                    raise self.error(
                        f"'mutates' names argument {k}, which is not a tensor argument", n.loc, n
                    )

        aliases = n.attrs.get("aliases")
        if aliases is not None:
            if not isinstance(aliases, list) or len(aliases) != len(n.results):
                raise self.error(
                    f"'aliases' must have one entry per result ({len(n.results)})", n.loc, n
                )
            for k in aliases:
                if k is not None and not (
                    _is_int(k) and 0 <= k < len(n.args) and isinstance(n.args[k], Value)
                ):
                    raise self.error(
                        f"'aliases' names argument {k}, which is not a tensor argument", n.loc, n
                    )

    # -- dependencies (``deps { … }``): every name refers to a value or node that exists

    def node_deps(self, n: Node) -> None:
        d = n.deps
        assert d is not None
        own = {r.name for r in n.results}
        where = d.loc or n.loc
        # the shapes of the accesses (variables, sizes) depend on the clause alone: checked
        # once while it stays as it is; the names are checked against the graph every time
        shapes = (d, tuple(d.reads), tuple(d.writes), self.size_symbol_key)
        shapes_checked = getattr(n, "_verified_deps", None) == shapes
        for dep in d.reads:
            if dep.buffer not in self.names:
                raise self.error(
                    f"dependency reads %{dep.buffer}, which is not defined before this node",
                    dep.loc or where,
                    n,
                )
            if not shapes_checked:
                self.dep_shape(dep, n, where)
        for dep in d.writes:
            if dep.buffer not in own and dep.buffer not in self.names:
                raise self.error(
                    f"dependency writes %{dep.buffer}, which is neither a result of this node "
                    "nor defined before it",
                    dep.loc or where,
                    n,
                )
            if not shapes_checked:
                self.dep_shape(dep, n, where)
        for w in d.weak:
            if w.buffer not in self.node_pos:
                raise self.error(
                    f"weak dependency on %{w.buffer}, which does not name an earlier node",
                    w.loc or where,
                    n,
                )
            if w.mutated not in self.names:
                raise self.error(
                    f"weak dependency for %{w.mutated}, which is not defined before this node",
                    w.loc or where,
                    n,
                )
        for k, name in enumerate(d.ancestors or []):
            if name not in self.node_pos:
                loc = d.ancestors_locs[k] if k < len(d.ancestors_locs) else where
                raise self.error(
                    f"ancestor %{name} does not name an earlier node (stale dependencies? "
                    "run 'deps' again)",
                    loc,
                    n,
                )
        n._verified_deps = shapes  # type: ignore[attr-defined]

    def dep_shape(self, dep: Any, n: Node, where: Location | None) -> None:
        if isinstance(dep, MemoryDep):
            # the same access recurs across nodes; its variables and sizes need one check
            key = (dep.index, dep.ranges, dep.nbytes)
            if key in self.checked_accesses:
                return
        elif _is_int(dep.nbytes) and dep.nbytes >= 0:
            return
        loc = dep.loc or where
        sizes = [dep.nbytes]
        if isinstance(dep, MemoryDep):
            variables = set()
            for var, size in dep.ranges:
                if var in variables or var in self.size_symbols:
                    raise self.error(
                        f"dependency variable '{var.name}' is bound twice or shadows a size symbol",
                        loc,
                        n,
                    )
                variables.add(var)
                sizes.append(size)
            if not _is_int(dep.index):
                unknown = set(dep.index.free_symbols) - variables - self.size_symbols
                if unknown:
                    name = sorted(s.name for s in unknown)[0]
                    raise self.error(
                        f"dependency index of %{dep.buffer} uses unknown variable '{name}'", loc, n
                    )
        for size in sizes:
            if _is_int(size):
                if size < 0:
                    raise self.error(f"dependency sizes must not be negative, got {size}", loc, n)
            elif set(size.free_symbols) - self.size_symbols:
                raise self.error(
                    f"dependency size {_expr(size)} is not an expression over size symbols",
                    loc,
                    n,
                )
        if isinstance(dep, MemoryDep):
            self.checked_accesses.add((dep.index, dep.ranges, dep.nbytes))

    def deps_users(self, n: Node, pos: int) -> None:
        d = n.deps
        assert d is not None and d.users is not None
        for k, name in enumerate(d.users):
            loc = d.users_locs[k] if k < len(d.users_locs) else (d.loc or n.loc)
            at = self.node_pos.get(name)
            if at is None:
                raise self.error(
                    f"user %{name} does not name a node of @{self.g.name} (stale dependencies? "
                    "run 'deps' again)",
                    loc,
                    n,
                )
            if at <= pos:
                raise self.error(f"user %{name} does not come after this node", loc, n)

    # -- loop orders and tiling hints (reorder)

    def schedule(self, n: LoopNode) -> None:
        """``order (…)``: every loop of size other than 1 once, pointwise loops before the ';'
        and reduction loops after, each loop's size the product of its variables' sizes."""
        sched = n.schedule
        assert sched is not None
        # loops and orders repeat across nodes: a combination that passed passes again
        key = (
            tuple(sched.loops),
            tuple(sched.reduction),
            tuple(n.ranges),
            tuple(n.reduction_ranges),
        )
        if key in _CHECKED_SCHEDULES:
            return
        self.check_schedule(n, sched)
        if len(_CHECKED_SCHEDULES) < 100_000:
            _CHECKED_SCHEDULES.add(key)

    def check_schedule(self, n: LoopNode, sched: LoopSchedule) -> None:
        loc = sched.loc or n.loc
        sizes = dict(n.ranges + n.reduction_ranges)
        pointwise = {v for v, _ in n.ranges}
        seen: set[Any] = set()
        for part, loops in (("pointwise", sched.loops), ("reduction", sched.reduction)):
            for loop in loops:
                if not loop.vars:
                    raise self.error("a loop of the order runs over no variable", loc, n)
                for v in loop.vars:
                    if v not in sizes:
                        raise self.error(
                            f"'{v.name}' in the order is not a loop of this node", loc, n
                        )
                    if v in seen:
                        raise self.error(f"loop '{v.name}' appears twice in the order", loc, n)
                    if (v in pointwise) != (part == "pointwise"):
                        raise self.error(
                            f"'{v.name}' is ordered with the {part} loops but is not one", loc, n
                        )
                    seen.add(v)
                want = dims_mul(sizes[v] for v in loop.vars)
                if not dims_equal(want, loop.size):
                    raise self.error(
                        f"a loop over {', '.join(v.name for v in loop.vars)} runs "
                        f"{dim_str(want)} times, not {dim_str(loop.size)}",
                        loc,
                        n,
                    )
        for v, size in n.ranges + n.reduction_ranges:
            if v not in seen and not (_is_int(size) and size == 1):
                raise self.error(f"the order leaves out loop '{v.name}'", loc, n)

    def tile_hint(self, n: LoopNode) -> None:
        """``tile = ["i0", "i1"]``: two pointwise loops of the node for a 2-D tile."""
        v = n.attrs["tile"]
        loc = getattr(n, "_attr_locs", {}).get("tile", n.loc)
        names = {var.name for var, _ in n.ranges}
        if (
            not isinstance(v, list)
            or len(v) != 2
            or not all(isinstance(x, str) for x in v)
            or v[0] == v[1]
        ):
            raise self.error('\'tile\' must name two pointwise loops: tile = ["i0", "i1"]', loc, n)
        for x in v:
            if x not in names:
                raise self.error(
                    f"'tile' names '{x}', which is not a pointwise loop of this node", loc, n
                )

    # -- fusion: user control and kernels

    def nofuse(self, n: Node) -> None:
        """``nofuse = true`` (never fuse this node) or ``nofuse = [%a, …]`` (never in one kernel
        with those nodes' results)."""
        v = n.attrs["nofuse"]
        loc = getattr(n, "_attr_locs", {}).get("nofuse", n.loc)
        if isinstance(v, bool):
            return
        if isinstance(v, Value):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, Value) for x in v):
            raise self.error(
                "'nofuse' must be true, false or a list of values (nodes this one must not share "
                "a kernel with)",
                loc,
                n,
            )
        for x in v:
            if x.owner is None:
                raise self.error(
                    f"'nofuse' names %{x.name}, a function argument; name a node's result", loc, n
                )

    def kernels(self) -> None:
        g = self.g
        pos_of = {id(n): k for k, n in enumerate(g.nodes)}
        owner: dict[int, str] = {}
        names: set[str] = set()
        outputs = {id(v) for v in g.outputs}
        local = {id(v) for k in g.kernels for v in k.local}
        readers: dict[int, list[Node]] = {}
        for n, reads in zip(g.nodes, self.reads):
            for v in reads:
                if id(v) in local:
                    readers.setdefault(id(v), []).append(n)
        for k in g.kernels:
            where = f"kernel @{k.name}"
            if k.name in names:
                raise self.error(f"redefinition of {where}", k.loc)
            names.add(k.name)
            if not k.nodes:
                raise self.error(f"{where} has no nodes", k.loc)
            start = pos_of.get(id(k.nodes[0]))
            for j, n in enumerate(k.nodes):
                at = pos_of.get(id(n))
                if at is None:
                    raise self.error(
                        f"{where} holds {n.describe()}, which is not in @{g.name}", k.loc
                    )
                if id(n) in owner:
                    raise self.error(
                        f"{n.describe()} is in two kernels (@{owner[id(n)]} and @{k.name})",
                        n.loc,
                        n,
                    )
                owner[id(n)] = k.name
                if start is None or at != start + j:
                    raise self.error(
                        f"the nodes of {where} must stand together, in the order they run", n.loc, n
                    )
                if not isinstance(n, LoopNode):
                    what = "an extern call" if isinstance(n, ExternNode) else "a tensor-level op"
                    raise self.error(
                        f"{where}: {n.describe()} is {what}; only loop nodes run in a kernel",
                        n.loc,
                        n,
                    )
            # the iteration space depends on the members' loops, orders and reductions only
            space_key = (
                tuple(k.nodes),
                tuple(
                    (
                        tuple(n.ranges),
                        tuple(n.reduction_ranges),
                        n.reduction,
                        (tuple(n.schedule.loops), tuple(n.schedule.reduction))
                        if n.schedule is not None
                        else None,
                    )
                    for n in k.nodes
                    if isinstance(n, LoopNode)
                ),
                k.over,
            )
            if getattr(k, "_verified_space", None) == space_key:
                info, bad, why = k._verified_space_info, None, ""  # type: ignore[attr-defined]
            else:
                info, bad, why = kernel_space(k)
            if info is None:
                assert bad is not None
                raise self.error(
                    f"{where}: {bad.describe()} does not fit the kernel's iteration space: "
                    f"incompatible iteration spaces: {why}",
                    bad.loc,
                    bad,
                )
            if k.over is not None and not same_over(k.over, over_of(info)):
                raise self.error(
                    f"{where} declares over {describe_over(k.over)}, but its nodes run over "
                    f"{describe_over(over_of(info))}",
                    k.loc,
                )
            k._verified_space, k._verified_space_info = space_key, info  # type: ignore[attr-defined]
            members = {id(n) for n in k.nodes}
            results = {id(r) for n in k.nodes for r in n.results}
            for j, v in enumerate(k.local):
                loc = k.local_locs[j] if j < len(k.local_locs) else k.loc
                if id(v) not in results:
                    raise self.error(f"local %{v.name} is not a result of a node of {where}", loc)
                if id(v) in outputs:
                    raise self.error(
                        f"%{v.name} cannot be local to {where}: the function returns it", loc
                    )
                outside = [u for u in readers.get(id(v), []) if id(u) not in members]
                if outside:
                    raise self.error(
                        f"%{v.name} cannot be local to {where}: {outside[0].describe()}, outside "
                        "the kernel, reads it",
                        loc,
                    )

    # -- loop level

    def loop_node(self, n: LoopNode, reads: list[Value]) -> None:
        previous = getattr(n, "_verified", None)
        if previous is not None and previous == self.loop_fingerprint(n):
            # the loop order and the tiling hint are not in the fingerprint: they are cheap to
            # check and change often (reorder)
            if n.schedule is not None:
                self.schedule(n)
            if "tile" in n.attrs:
                self.tile_hint(n)
            # nothing the body checks read has changed since this node last verified: only
            # what depends on the rest of the graph (its buffers defined before it) is left
            for v in reads:
                self.use(v, n.loc, n)
            return
        self.check_loop_node(n)
        # taken again: the checks fill in the dtypes of body values the text leaves implicit
        n._verified = self.loop_fingerprint(n)  # type: ignore[attr-defined]

    def loop_fingerprint(self, n: LoopNode) -> tuple[Any, ...] | None:
        """Everything :meth:`check_loop_node` reads, by identity where the object is immutable
        (sympy expressions, types, literals) and by value where a pass may mutate it in place
        (lists, a body op's fields, attributes). Equal fingerprints mean the checks would pass
        again. Holding the objects (not their ids) keeps them alive, so an id cannot be reused."""
        body = n.body
        if body is None:
            return None
        ops = tuple(
            (
                op,
                op.opcode,
                op.result,
                op.result.dtype,
                tuple(op.operands),
                op.buffer,
                op.buffer.type if op.buffer is not None else None,
                op.index,
                op.mask,
                op.other,
                op.bound,
                op.dtype,
                tuple(op.attrs.items()) if op.attrs else None,
            )
            for op in body.ops
        )
        return (
            body,
            ops,
            body.result,
            n.reduction,
            tuple(n.ranges),
            tuple(n.reduction_ranges),
            tuple(r.type for r in n.results),
            self.size_symbol_key,
        )

    def check_loop_node(self, n: LoopNode) -> None:
        if n.reduction is not None and n.reduction not in REDUCTION_KINDS:
            raise self.error(f"unknown reduction kind '{n.reduction}'", n.loc, n)
        if n.reduction is not None and not n.reduction_ranges:
            raise self.error("a reduction node needs at least one reduction loop", n.loc, n)
        if n.reduction is None and n.reduction_ranges:
            raise self.error("a pointwise node cannot have reduction loops", n.loc, n)
        # an index whose variables are all loops of the node was checked before if another
        # node with the same loops loaded it from a buffer of the same size
        loops_key = (tuple(n.ranges), tuple(n.reduction_ranges))
        space = self.loop_spaces.get(loops_key)
        if space is None:
            space = self.loop_spaces[loops_key] = self.loop_space(n)
        known, interval = space
        if n.schedule is not None:
            self.schedule(n)
        if "tile" in n.attrs:
            self.tile_hint(n)
        assert n.body is not None
        body_defined: set[int] = set()
        for op in n.body.ops:
            loc = op.loc or n.loc
            self.body_op(op, n, body_defined, loc)
            if op.opcode == "indirect":
                from .symbolic import indirect_symbol

                sym = indirect_symbol("%" + op.result.name)
                known, interval = known | {sym}, dict(interval)  # this node's own
                if _is_int(op.bound):
                    interval[sym] = (0, op.bound - 1)
            if op.index is None or _is_int(op.index):
                if op.opcode == "load" and op.mask is None:
                    self.check_load_bounds(op, interval, loc, n)
            else:
                size = op.buffer.type.storage_size() if op.buffer is not None else None
                done = (op.index, loops_key, size, op.mask is None)
                if done in self.checked_indices:
                    body_defined.add(id(op.result))
                    continue
                from .symbolic import is_indirect  # here: most indices were checked before

                indirect = False
                for s in _free_symbols(op.index):
                    if is_indirect(s):
                        indirect = True
                    if s in known:
                        continue
                    if is_indirect(s):
                        raise self.error(
                            f"{s.name} is not an 'indirect' index defined before this use", loc, n
                        )
                    raise self.error(f"index uses unknown variable '{s.name}'", loc, n)
                if op.opcode == "load" and op.mask is None:
                    self.check_load_bounds(op, interval, loc, n)
                if not indirect:  # an indirect symbol's bound is the node's own
                    self.checked_indices.add(done)
            body_defined.add(id(op.result))
        y = n.body.result
        if isinstance(y, BodyValue):
            if id(y) not in body_defined:
                raise self.error(
                    f"yield of undefined value %{y.name}", n.body.yield_loc or n.loc, n
                )
            ydtype = y.dtype
        else:
            ydtype = None
        self.loop_results(n, ydtype)

    def loop_space(self, n: LoopNode) -> tuple[frozenset[Any], dict[Any, tuple[int, int]]]:
        """Check a node's loops; return the symbols its indices may use and the static
        interval of each loop variable."""
        ranges: dict[Any, tuple[int, int] | None] = {}
        for var, size in n.ranges + n.reduction_ranges:
            if var in ranges:
                raise self.error(f"loop variable '{var.name}' is bound twice", n.loc, n)
            if _is_int(size) and size <= 0:
                raise self.error(
                    f"loop '{var.name}' must have a positive size, got {size}", n.loc, n
                )
            if not _is_int(size):
                unknown = set(size.free_symbols) - self.size_symbols
                if unknown:
                    raise self.error(
                        f"size symbol '{sorted(s.name for s in unknown)[0]}' is not bound by the function's argument types",
                        n.loc,
                        n,
                    )
            ranges[var] = (0, size - 1) if _is_int(size) else None
        known = frozenset(ranges) | self.size_symbol_key
        return known, {k: v for k, v in ranges.items() if v is not None}

    def check_load_bounds(
        self, op: BodyOp, interval: dict[Any, tuple[int, int]], loc: Location | None, n: LoopNode
    ) -> None:
        from .symbolic import bounds

        assert op.buffer is not None
        size = op.buffer.type.storage_size()
        b = bounds(op.index, interval)
        if _is_int(size) and b is not None and (b[0] < 0 or b[1] >= size):
            raise self.error(
                f"load of %{op.buffer.name} is out of bounds: index "
                f"{_expr(op.index)} spans [{b[0]}, {b[1]}] but the buffer holds {size} elements",
                loc,
                n,
            )

    def loop_results(self, n: LoopNode, ydtype: DType | None) -> None:
        assert n.body is not None  # loop_node checked it
        loc = n.loc
        if n.reduction == "welford":
            if len(n.results) != 3:
                raise self.error("a welford reduction has three results: mean, m2, count", loc, n)
        elif len(n.results) != 1:
            raise self.error(
                f"a {'pointwise' if n.reduction is None else n.reduction} node has one result",
                loc,
                n,
            )
        out = n.results[0].type
        for r in n.results[1:]:
            if not _same_dims(r.type.shape, out.shape):
                raise self.error("welford results must have the same shape", loc, n)
        numel: Any = 1
        for _, s in n.ranges:
            numel = numel * s
        if not _equal_numel(numel, out.numel):
            raise self.error(
                f"the loops cover {dim_str(numel)} elements but the result {out} has {dim_str(out.numel)}",
                loc,
                n,
            )
        if ydtype is None:
            if n.body is not None and isinstance(n.body.result, Literal):
                lit = n.body.result
                if not literal_fits(lit, out.dtype):
                    raise self.error(
                        f"yielded literal {lit} does not fit {out.dtype}",
                        n.body.yield_loc or loc,
                        n,
                    )
                return
            raise self.error("the yielded value has no known dtype", loc, n)
        expected = {"argmax": DType.I64, "argmin": DType.I64, "any": DType.BOOL}.get(
            n.reduction or "", ydtype
        )
        if n.reduction == "any" and ydtype != DType.BOOL:
            raise self.error(f"'any' reduces bool values, got {ydtype}", n.body.yield_loc or loc, n)
        if n.reduction == "welford" and not ydtype.is_float:
            raise self.error(f"'welford' reduces floating-point values, got {ydtype}", loc, n)
        for r in n.results:
            if r.type.dtype != expected:
                raise self.error(
                    f"result %{r.name} has dtype {r.type.dtype}, but the node produces {expected}",
                    loc,
                    n,
                )

    def body_op(self, op: BodyOp, n: LoopNode, defined: set[int], loc: Location | None) -> None:
        for o in op.operands:
            if isinstance(o, BodyValue) and id(o) not in defined:
                raise self.error(
                    f"%{o.name} is used before it is defined in this loop body", loc, n
                )
        if op.opcode == "load":
            if op.buffer is None or op.index is None:
                raise self.error("load needs a buffer and an index", loc, n)
            self.use(op.buffer, loc, n)
            if op.mask is not None:
                if id(op.mask) not in defined:
                    raise self.error(f"mask %{op.mask.name} is used before it is defined", loc, n)
                if op.mask.dtype != DType.BOOL:
                    raise self.error(f"load mask must be bool, got {op.mask.dtype}", loc, n)
                other = op.other if op.other is not None else Literal(0)
                if not literal_fits(other, op.buffer.type.dtype):
                    raise self.error(
                        f"masked-load value {other} does not fit {op.buffer.type.dtype}", loc, n
                    )
            self.set_dtype(op, op.buffer.type.dtype, loc, n)
        elif op.opcode == "indirect":
            src = op.operands[0] if op.operands else None
            if not isinstance(src, BodyValue) or src.dtype is None or not (src.dtype.is_int):
                got = src.dtype if isinstance(src, BodyValue) else src
                raise self.error(f"'indirect' needs an integer value, got {got}", loc, n)
            if _is_int(op.bound) and op.bound <= 0:
                raise self.error(f"'indirect' bound must be positive, got {op.bound}", loc, n)
            self.set_dtype(op, DType.I64, loc, n)
        elif op.opcode == "index":
            if op.dtype is None or not op.dtype.is_int:
                raise self.error(f"'index' yields an integer dtype, got {op.dtype}", loc, n)
            self.set_dtype(op, op.dtype, loc, n)
        elif op.opcode == "constant":
            lit = op.operands[0] if len(op.operands) == 1 else None
            if not isinstance(lit, Literal) or op.dtype is None or not literal_fits(lit, op.dtype):
                raise self.error(f"'constant' needs one literal that fits {op.dtype}", loc, n)
            self.set_dtype(op, op.dtype, loc, n)
        else:
            spec = OPS.get(op.opcode)
            if spec is None or not spec.scalar:
                raise self.error(f"'{op.opcode}' cannot appear in a loop body", loc, n)
            count = len(op.operands)
            if count < spec.min_operands or (
                spec.max_operands is not None and count > spec.max_operands
            ):
                raise self.error(f"'{op.opcode}' takes {_arity(spec)}, got {count}", loc, n)
            if op.attrs:
                raise self.error(f"'{op.opcode}' takes no attributes in a loop body", loc, n)
            key: list[Any] = [op.opcode, op.dtype]
            for o in op.operands:
                if isinstance(o, BodyValue):
                    if o.dtype is None:
                        raise self.error(f"%{o.name} has no known dtype", loc, n)
                    key.append(o.dtype)
                else:  # the literal's type too: 1 == 1.0 == True for a dict
                    key.append((type(o.value), o.value))
            typed = _scalar_typing(tuple(key), spec, op)
            if isinstance(typed, str):
                raise self.error(typed, loc, n)
            self.set_dtype(op, typed, loc, n)

    def set_dtype(self, op: BodyOp, dtype: DType, loc: Location | None, n: LoopNode) -> None:
        r = op.result
        if r.dtype is None:
            r.dtype = dtype
        elif r.dtype != dtype:
            raise self.error(f"%{r.name} has dtype {r.dtype}, expected {dtype}", loc, n)


# (op, operand types, attributes, result types) of tensor ops that passed their checks
_CHECKED_TENSOR_TYPINGS: set[tuple[Any, ...]] = set()


def _tensor_typing_key(n: TensorOp) -> tuple[Any, ...] | None:
    """What the checks of a tensor op (other than its operands' scoping) depend on, or None
    when an attribute value cannot be a dict key."""
    key = (
        n.op,
        tuple(o.type if isinstance(o, Value) else (type(o.value), o.value) for o in n.operands),
        tuple((k, _frozen(v)) for k, v in n.attrs.items() if k not in ANNOTATION_KEYS),
        tuple(r.type for r in n.results),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(v: Any) -> Any:
    if isinstance(v, list):
        return ("list", tuple(_frozen(x) for x in v))
    if isinstance(v, Value):
        return ("value", v.type)
    return (type(v), v)


# (loops, order, ranges) of the loop orders that passed their checks
_CHECKED_SCHEDULES: set[tuple[Any, ...]] = set()

# (opcode, declared dtype, operand dtypes and literals) -> result dtype, or the error message:
# loop bodies repeat a handful of typings (f32 mul f32, f32 add literal) thousands of times
_SCALAR_TYPINGS: dict[tuple[Any, ...], DType | str] = {}


def _scalar_typing(key: tuple[Any, ...], spec: OpSpec, op: BodyOp) -> DType | str:
    typed = _SCALAR_TYPINGS.get(key)
    if typed is None:
        # body_op rejected an operand of unknown dtype
        types = [
            TensorType(cast(DType, o.dtype), ()) if isinstance(o, BodyValue) else o
            for o in op.operands
        ]
        declared = [TensorType(op.dtype, ())] if op.dtype is not None else []
        try:
            (result,) = spec.infer(types, {}, declared)
            typed = result.dtype
        except TypeRule as e:
            typed = _rule_message(op.opcode, e)
        if len(_SCALAR_TYPINGS) < 100_000:
            _SCALAR_TYPINGS[key] = typed
    return typed


def _rule_message(op: str, e: TypeRule) -> str:
    text = str(e)
    return text if text.startswith(f"'{op}'") else f"'{op}': {text}"


def _arity(spec: OpSpec) -> str:
    lo, hi = spec.min_operands, spec.max_operands
    if hi is None:
        return f"at least {lo} operand(s)"
    if lo == hi:
        return f"{lo} operand(s)"
    return f"{lo} to {hi} operands"


def _expr(e: Any) -> str:
    from .symbolic import print_expr

    return print_expr(e)


@lru_cache(maxsize=65536)
def _free_symbols(e: Any) -> frozenset[Any]:
    return frozenset(e.free_symbols)


def body_defined_dtypes(body: Body) -> dict[str, DType | None]:
    return {op.result.name: op.result.dtype for op in body.ops}
