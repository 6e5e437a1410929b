"""Copy the bodies of inlined buffers into the bodies of the buffers that read them.

Used by the ``inline`` pass once it has decided which buffers are realized.
:meth:`BodyInliner.build` rebuilds the body of one realized loop node ``R``: every
``load %B[e]`` of an inlined pointwise buffer ``B`` becomes a copy of ``B``'s body, with ``B``'s
loop variables expressed from ``e`` (``B`` is contiguous, so its element ``p`` sits at storage
position ``linear(p)``). Loads in the copy may read other inlined buffers; those are expanded the
same way, so one walk builds the final body and every op is created once.

* A masked load ``load %B[e] if %m else o`` becomes ``where %m, <copy>, o``, and every load of the
  copy is masked by ``%m`` as well (and-ed with its own mask), so no memory is touched where the
  mask is false.
* The new body is built by hash-consing: an op identical to an earlier one (same opcode,
  operands, buffer, index, mask, literal, dtype) reuses the earlier value, so ``x*x`` with ``x``
  inlined loads once. Values are named ``%0, %1, …`` in order, and the ``%k`` symbols of
  ``indirect`` indices are renamed with them inside every index expression.
* Index substitution avoids sympy where it can: when ``e`` is ``B``'s own write index over loop
  variables of the same sizes, the substitution is a renaming (often the identity); when the
  strides split ``e`` cleanly, the variables are plain sums (:func:`_aligned_split`); only the
  remaining cases build floordiv/mod terms and simplify them over the reader's loop ranges.

The expansion is iterative (a stack of generators), so long chains of inlined buffers do not hit
Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy
from fir.ir.dtypes import DType, int_to_float
from fir.ir.graph import Body, BodyOp, BodyOperand, BodyValue, Literal, LoopNode
from fir.ir.symbolic import FloorDiv, Modulo, bounds, indirect_symbol, simplify_index

RangeKey = tuple[tuple[sympy.Symbol, Any], ...]  # ((loop variable, size), ...)
Mapping = tuple[tuple[sympy.Symbol, Any], ...]  # ((old symbol, new expression), ...)


@dataclass(frozen=True)
class VarMap:
    """Where the loop variables of an inlined producer come from in the consumer."""

    items: Mapping  # producer variable -> expression over the consumer's variables
    renaming: bool  # every expression is a consumer variable with the same range
    identity: bool  # ... and the same symbol: indices need no rewriting at all
    affine: bool = True  # sums of integer multiples of atoms (variables, floordiv/mod terms)
    divmod_atoms: bool = False  # ... some of which are floordiv/mod terms


IDENTITY = VarMap((), True, True)


def producer_var_map(producer: LoopNode, index: Any, consumer_ranges: RangeKey) -> VarMap:
    """The producer's loop variables as expressions of ``index``, a storage position of the
    (contiguous) producer read in a consumer with loops ``consumer_ranges``."""
    return _var_map(tuple(producer.ranges), index, consumer_ranges)


@lru_cache(maxsize=65536)
def _var_map(ranges: RangeKey, index: Any, consumer_ranges: RangeKey) -> VarMap:
    renamed = _as_renaming(ranges, index, consumer_ranges)
    if renamed is not None:
        identity = all(v is e for v, e in renamed)
        return VarMap(tuple((v, e) for v, e in renamed if v is not e), True, identity)
    aligned = _aligned_split(ranges, index, consumer_ranges)
    if aligned is not None:
        atoms = any(_has_divmod(e) for _, e in aligned)
        return VarMap(aligned, False, False, True, atoms)
    # element p is at linear(p): v_k = mod(floordiv(e, n_{k+1}*...*n_last), n_k), no mod for v_0
    items: list[tuple[sympy.Symbol, Any]] = []
    stride: Any = sympy.Integer(1)
    e = sympy.Integer(index) if isinstance(index, int) else index
    for k in range(len(ranges) - 1, -1, -1):
        var, size = ranges[k]
        expr = FloorDiv(e, stride)
        if k > 0:
            expr = Modulo(expr, size)
        items.append((var, expr))  # simplified once substituted (substitute_index)
        stride = stride * size
    return VarMap(tuple(reversed(items)), False, False, False, True)


Terms = list[tuple[int, Any]]  # (integer coefficient, atom) pairs of a sum


def _aligned_split(ranges: RangeKey, index: Any, consumer_ranges: RangeKey) -> Mapping | None:
    """The loop variables without sympy simplification, where every static stride splits the
    index cleanly: ``e = S*q + r`` with ``q`` the terms whose coefficients ``S`` divides and
    ``0 <= r < S`` by interval arithmetic, so ``floordiv(e, S) = q``; likewise for the ``mod``.
    This covers reshapes, slices and broadcasts whose strides line up. None otherwise."""
    if not all(isinstance(n, int) for _, n in ranges):
        return None
    intervals = {v: (0, n - 1) for v, n in consumer_ranges if isinstance(n, int)}
    terms: Terms = []
    const = 0
    for t in sympy.Add.make_args(sympy.sympify(index)):
        if t.is_Integer:
            const += int(t)
            continue
        coeff, atom = t.as_coeff_Mul()
        if not coeff.is_Integer:
            return None
        terms.append((int(coeff), atom))
    spans: dict[Any, tuple[int, int]] = {}
    for _, atom in terms:
        span = bounds(atom, intervals)
        if span is None:
            return None
        spans[atom] = span
    out: list[tuple[sympy.Symbol, Any]] = []
    stride = 1
    for k in range(len(ranges) - 1, -1, -1):
        var, size = ranges[k]
        split = _split(terms, const, stride, spans)
        if split is None:
            return None
        q_terms, q_const = split
        if k > 0:
            kept = [(c, a) for c, a in q_terms if c % size != 0]
            r_const = q_const % size
            lo, hi = _span(kept, r_const, spans)
            if lo < 0 or hi >= size:
                return None
            q_terms, q_const = kept, r_const
        out.append((var, sympy.Add(*(c * a for c, a in q_terms), sympy.Integer(q_const))))
        stride *= size
    return tuple(reversed(out))


def _split(
    terms: Terms, const: int, divisor: int, spans: dict[Any, tuple[int, int]]
) -> tuple[Terms, int] | None:
    """``floordiv(sum, divisor)`` as a sum, when the remainder provably lies in [0, divisor)."""
    if divisor == 1:
        return terms, const
    q_const, r_const = divmod(const, divisor)
    quotient = [(c // divisor, a) for c, a in terms if c % divisor == 0]
    rest = [(c, a) for c, a in terms if c % divisor != 0]
    lo, hi = _span(rest, r_const, spans)
    if lo < 0 or hi >= divisor:
        return None
    return quotient, q_const


def _span(terms: Terms, const: int, spans: dict[Any, tuple[int, int]]) -> tuple[int, int]:
    lo = hi = const
    for c, a in terms:
        a_lo, a_hi = spans[a]
        lo += min(c * a_lo, c * a_hi)
        hi += max(c * a_lo, c * a_hi)
    return lo, hi


def _as_renaming(
    ranges: RangeKey, index: Any, consumer_ranges: RangeKey
) -> list[tuple[sympy.Symbol, Any]] | None:
    """``index == sum(stride_k * c_k)`` with each ``c_k`` a distinct consumer variable of size
    ``n_k`` (``stride_k`` the contiguous stride of producer loop ``k``): then ``v_k = c_k``."""
    sizes = dict(consumer_ranges)
    static = all(isinstance(n, int) for _, n in ranges)
    terms = [] if index == 0 else list(sympy.Add.make_args(sympy.sympify(index)))
    # term -> (consumer variable, coefficient)
    split: list[tuple[sympy.Symbol, Any]] = []
    for t in terms:
        if t.is_Symbol:
            var, coeff = t, sympy.Integer(1)
        else:
            coeff, var = t.as_coeff_Mul()
            if not var.is_Symbol:
                if static:
                    return None  # integer strides: the coefficient would be an integer
                found = [s for s in t.free_symbols if s in sizes]
                if len(found) != 1:
                    return None
                var = found[0]
                coeff = sympy.cancel(t / var)
                if var in coeff.free_symbols:
                    return None
        if var not in sizes:
            return None
        split.append((var, coeff))
    out: list[tuple[sympy.Symbol, Any]] = []
    used: set[int] = set()
    stride: Any = sympy.Integer(1)
    for var, size in reversed(ranges):
        if _equal(size, 1):
            out.append((var, sympy.Integer(0)))
            continue
        match = next(
            (
                k
                for k, (c, coeff) in enumerate(split)
                if k not in used and _equal(coeff, stride) and _equal(sizes[c], size)
            ),
            None,
        )
        if match is None:
            return None
        used.add(match)
        out.append((var, split[match][0]))
        stride = stride * size
    if len(used) != len(split):
        return None
    return list(reversed(out))


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, (int, sympy.Integer)) and isinstance(b, (int, sympy.Integer)):
        return int(a) == int(b)
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


@lru_cache(maxsize=65536)
def substitute_index(expr: Any, mapping: Mapping, ranges: RangeKey | None, fold: bool) -> Any:
    """``expr`` with symbols replaced by ``mapping``, then simplified over ``ranges`` (unless
    None) and folded by the division identity (if ``fold``)."""
    if isinstance(expr, int):
        return expr
    out = expr.xreplace(dict(mapping))
    if ranges is not None:
        out = simplify_index(out, dict(ranges))
    if fold:
        out = fold_divmod(out)
    return int(out) if isinstance(out, sympy.Integer) else out


@lru_cache(maxsize=65536)
def _has_divmod(expr: Any) -> bool:
    return bool(expr.has(FloorDiv, Modulo))


def fold_divmod(e: Any) -> Any:
    """Rewrite ``c*k*floordiv(a, k) + c*mod(a, k)`` as ``c*a`` (the division identity),
    repeatedly, so that reading a reshaped buffer gives back plain affine indices:
    ``64*floordiv(i0, 64) + mod(i0, 64)`` → ``i0``."""
    if not isinstance(e, sympy.Basic) or not e.has(Modulo):
        return e
    return _fold(e)


def _fold(e: Any) -> Any:
    if not e.args:
        return e
    args = [_fold(a) for a in e.args]
    if any(a is not b for a, b in zip(args, e.args)):
        e = e.func(*args)
    if not isinstance(e, sympy.Add):
        return e
    coeffs: dict[Any, Any] = {}
    for term in e.args:
        c, rest = term.as_coeff_Mul()
        coeffs[rest] = coeffs.get(rest, 0) + c
    folded = False
    while True:
        pair = next(
            (
                (t, c)
                for t, c in coeffs.items()
                if isinstance(t, Modulo)
                and c != 0
                and coeffs.get(FloorDiv(*t.args)) == c * t.args[1]
            ),
            None,
        )
        if pair is None:
            break
        term, c = pair
        a, _ = term.args
        del coeffs[term]
        del coeffs[FloorDiv(*term.args)]
        for t2 in sympy.Add.make_args(a):
            c2, r2 = t2.as_coeff_Mul()
            coeffs[r2] = coeffs.get(r2, 0) + c * c2
        folded = True
    if not folded:
        return e
    return sympy.Add(*(c * t for t, c in coeffs.items() if c != 0))


# ---------------------------------------------------------------------------------------------


def _operand_key(o: BodyOperand) -> Any:
    """Body values compare by identity; literals by kind and value (``1``, ``1.0`` and ``true``
    are different literals although Python finds them equal)."""
    if o.__class__ is BodyValue:
        return o
    return _literal_key(o)  # type: ignore[arg-type]


def _literal_key(o: Literal | None) -> Any:
    return None if o is None else (o.value.__class__, o.value)


def _zero(dtype: DType) -> Literal:
    if dtype.is_bool:
        return Literal(False)
    if dtype.is_int:
        return Literal(0)
    return Literal(0.0)


# A request from an expansion frame: inline this producer at this index under this mask.
_Request = tuple[LoopNode, Any, BodyValue | None]
_Frame = Generator[_Request, BodyOperand, BodyOperand]


class BodyInliner:
    """Rebuilds the bodies of realized nodes; ``inlined`` maps ``id(value)`` of every inlined
    buffer to the node that computes it."""

    def __init__(self, inlined: dict[int, LoopNode]) -> None:
        self.inlined = inlined
        self.leaf: dict[int, bool] = {}  # id(node) -> its body loads no inlined buffer
        self.copies = 0  # producer bodies copied in (after memoisation)
        # per rebuilt body
        self.ranges: RangeKey = ()
        self.ops: list[BodyOp] = []
        self.table: dict[Any, BodyValue] = {}  # hash-consing: op key -> its value
        self.memo: dict[Any, BodyOperand] = {}  # (producer, index, mask) -> its copy's value

    def needs_rebuild(self, node: LoopNode) -> bool:
        return not self.is_leaf(node)

    def is_leaf(self, node: LoopNode) -> bool:
        known = self.leaf.get(id(node))
        if known is None:
            assert node.body is not None
            inlined = self.inlined
            known = not any(
                op.buffer is not None and id(op.buffer) in inlined for op in node.body.ops
            )
            self.leaf[id(node)] = known
        return known

    def build(self, root: LoopNode) -> Body:
        """``root``'s body with the inlined buffers it reads copied in."""
        assert root.body is not None
        self.ranges = tuple(root.ranges + root.reduction_ranges)
        self.ops, self.table, self.memo = [], {}, {}
        stack: list[tuple[_Frame, Any]] = [(self.expand(root, IDENTITY, None), None)]
        sent: BodyOperand | None = None
        while True:
            frame, key = stack[-1]
            try:
                producer, index, mask = frame.send(sent)  # type: ignore[arg-type]
            except StopIteration as done:
                stack.pop()
                if key is not None:
                    self.memo[key] = done.value
                if not stack:
                    return Body(self.ops, done.value, root.body.yield_loc)
                sent = done.value
                continue
            key = (id(producer), index, mask)
            sent = self.memo.get(key)
            if sent is not None:
                continue
            self.copies += 1
            vmap = producer_var_map(producer, index, self.ranges)
            if self.is_leaf(producer):  # most producers: no frame needed
                sent = self.memo[key] = self.expand_leaf(producer, vmap, mask)
            else:
                stack.append((self.expand(producer, vmap, mask), key))

    def expand(self, node: LoopNode, vmap: VarMap, mask: BodyValue | None) -> _Frame:
        """Emit the ops of ``node``'s body with its loop variables mapped by ``vmap`` and every
        load masked by ``mask``; each load of an inlined buffer asks the caller (``yield``) for
        the value of that buffer's copy. Returns what the body yields."""
        assert node.body is not None
        env: dict[BodyValue, BodyValue] = {}  # a copied op's value is never a literal
        renames: dict[sympy.Symbol, sympy.Symbol] = {}
        inlined, copy = self.inlined, self.copy
        for op in node.body.ops:
            producer = inlined.get(id(op.buffer)) if op.buffer is not None else None
            if producer is None:
                env[op.result] = copy(op, env, vmap, renames, mask)
                continue
            index = self.index(op.index, vmap, renames)
            own = env[op.mask] if op.mask is not None else None
            both = own if mask is None else self.logical_and(mask, own)
            value = yield (producer, index, both)
            dtype = producer.result.type.dtype
            if isinstance(value, Literal):
                value = self.op("constant", dtype, [value], dtype, op.loc)
            if own is not None:
                other = op.other if op.other is not None else _zero(dtype)
                if dtype.is_float and type(other.value) is int:
                    # the value the load gave is of its buffer's dtype: an integer past what
                    # the float holds exactly (or past int64) becomes that value here
                    other = Literal(int_to_float(other.value, dtype))
                value = self.op("where", dtype, [own, value, other], None, op.loc)
            env[op.result] = value
        y = node.body.result
        return env[y] if isinstance(y, BodyValue) else y

    def expand_leaf(self, node: LoopNode, vmap: VarMap, mask: BodyValue | None) -> BodyOperand:
        """:meth:`expand` for a body that reads no inlined buffer."""
        assert node.body is not None
        env: dict[BodyValue, BodyValue] = {}
        renames: dict[sympy.Symbol, sympy.Symbol] = {}
        copy = self.copy
        for op in node.body.ops:
            env[op.result] = copy(op, env, vmap, renames, mask)
        y = node.body.result
        return env[y] if isinstance(y, BodyValue) else y

    def copy(
        self,
        op: BodyOp,
        env: dict[BodyValue, BodyValue],
        vmap: VarMap,
        renames: dict[sympy.Symbol, sympy.Symbol],
        mask: BodyValue | None,
    ) -> BodyValue:
        """Emit ``op`` (anything but a load of an inlined buffer) with operands from ``env``,
        its index rewritten by ``vmap`` and ``renames``, and its load masked by ``mask``."""
        opcode = op.opcode
        if opcode == "load":
            buffer = op.buffer
            assert buffer is not None
            index = (
                op.index if vmap.identity and not renames else self.index(op.index, vmap, renames)
            )
            own = env[op.mask] if op.mask is not None else None
            both = own if mask is None else self.logical_and(mask, own)
            other = op.other if own is not None else None
            if both is not None and other is None:
                other = _zero(buffer.type.dtype)
            key: tuple[Any, ...] = (id(buffer), index, both, _literal_key(other))
            return self.table.get(key) or self.add(
                key,
                "load",
                op.result.dtype,
                buffer=buffer,
                index=index,
                mask=both,
                other=other,
                loc=op.loc,
            )
        if opcode == "index":
            index = self.index(op.index, vmap, renames)
            key = ("index", index, op.dtype)
            return self.table.get(key) or self.add(
                key, "index", op.result.dtype, index=index, dtype=op.dtype, loc=op.loc
            )
        operands = [env[o] if o.__class__ is BodyValue else o for o in op.operands]
        if opcode == "indirect":
            key = ("indirect", operands[0], op.bound)
            value = self.table.get(key) or self.add(
                key, "indirect", op.result.dtype, operands, bound=op.bound, loc=op.loc
            )
            renames[indirect_symbol("%" + op.result.name)] = indirect_symbol("%" + value.name)
            return value
        if op.attrs:  # no scalar op takes attributes today; keep them apart if one does
            key = (opcode, *map(_operand_key, operands), op.dtype, repr(op.attrs))
            return self.table.get(key) or self.add(
                key, opcode, op.result.dtype, operands, dtype=op.dtype, attrs=op.attrs
            )
        return self.op(opcode, op.result.dtype, operands, op.dtype, op.loc)

    def index(self, expr: Any, vmap: VarMap, renames: dict[sympy.Symbol, sympy.Symbol]) -> Any:
        if isinstance(expr, int) or (vmap.identity and not renames):
            return expr
        mapping = vmap.items + tuple(renames.items()) if renames else vmap.items
        if vmap.renaming:
            return substitute_index(expr, mapping, None, False)
        if vmap.affine and not _has_divmod(expr):
            # a sum of atoms stays one: nothing to simplify with the new ranges, but the atoms
            # may pair up (8*floordiv(a, 8) + mod(a, 8) when reading back a reshape)
            return substitute_index(expr, mapping, None, vmap.divmod_atoms)
        return substitute_index(expr, mapping, self.ranges, True)

    def logical_and(self, a: BodyValue, b: BodyValue | None) -> BodyValue:
        if b is None or a is b:
            return a
        return self.op("logical_and", DType.BOOL, [a, b], None, None)

    def op(
        self,
        opcode: str,
        result_dtype: DType | None,
        operands: list[BodyOperand],
        dtype: DType | None,
        loc: Any,
    ) -> BodyValue:
        """A scalar op (``constant``, ``cast`` and the elementwise ops), emitted once."""
        key = (opcode, *map(_operand_key, operands), dtype)
        return self.table.get(key) or self.add(
            key, opcode, result_dtype, operands, dtype=dtype, loc=loc
        )

    def add(
        self, key: Any, opcode: str, result_dtype: DType | None, operands: Any = (), **fields: Any
    ) -> BodyValue:
        """Append a new op (its identical twins are looked up under ``key`` first)."""
        result = BodyValue(str(len(self.ops)), result_dtype)
        op = BodyOp(opcode, result, list(operands), **fields)
        result.owner = op
        self.ops.append(op)
        self.table[key] = result
        return result
