"""IR → canonical text. ``parse(print(m))`` prints byte-identical text for every construct."""

from __future__ import annotations

from typing import Any

from .dtypes import DType
from .graph import (
    AliasNode,
    Body,
    BodyOp,
    BodyValue,
    ExternNode,
    Graph,
    Kernel,
    Literal,
    LoopNode,
    Module,
    Node,
    TensorOp,
    Value,
    literal_str,
)
from .types import dim_str

INDENT = "  "


def print_module(m: Module) -> str:
    return "\n".join(print_graph(f) for f in m.funcs)


def print_graph(g: Graph) -> str:
    out: list[str] = []
    args = ", ".join(f"%{a.name}: {a.type}" for a in g.args)
    results = ", ".join(str(t) for t in g.output_types)
    sizes = f" sizes ({', '.join(s.name for s in g.size_params)})" if g.size_params else ""
    head = f"func @{g.name}({args}){sizes} -> ({results})"
    if g.attrs:
        head += f" attributes {attr_dict_str(g.attrs)}"
    out.append(head + " {")
    if g.kernels:
        _print_nodes_with_kernels(g, out)
    else:
        for n in g.nodes:
            print_node(n, out, INDENT)
    ret = "return"
    if g.outputs:
        ret += " " + ", ".join("%" + v.name for v in g.outputs)
    out.append(INDENT + ret)
    out.append("}")
    return "\n".join(out) + "\n"


def _print_nodes_with_kernels(g: Graph, out: list[str]) -> None:
    kernel_of = g.kernel_of()
    printed: set[int] = set()
    for n in g.nodes:
        k = kernel_of.get(id(n))
        if k is None:
            print_node(n, out, INDENT)
            continue
        if id(k) in printed:
            continue
        printed.add(id(k))
        out.append(INDENT + kernel_head_str(k) + " {")
        for m in k.nodes:
            print_node(m, out, INDENT + INDENT)
        out.append(INDENT + "}")


def kernel_head_str(k: Kernel) -> str:
    """``kernel @k0 over (32; 64) local (%t) attributes {…}``: the space printed is the one the
    members run over (the declared one when they have none)."""
    from .kernels import describe_over, kernel_space, over_of

    info, _, _ = kernel_space(k)
    over = over_of(info) if info is not None else k.over
    text = f"kernel @{k.name}"
    if over is not None:
        text += f" over {describe_over(over)}"
    if k.local:
        text += " local (" + ", ".join("%" + v.name for v in k.local) + ")"
    if k.attrs:
        text += f" attributes {attr_dict_str(k.attrs)}"
    return text


def print_node(n: Node, out: list[str], indent: str) -> None:
    lhs = ", ".join("%" + r.name for r in n.results)
    types = ", ".join(str(r.type) for r in n.results)
    attrs = f" {attr_dict_str(n.attrs)}" if n.attrs else ""
    if isinstance(n, TensorOp):
        ops = ", ".join(operand_str(o) for o in n.operands)
        ops = " " + ops if ops else ""
        out.append(f"{indent}{lhs} = {n.op}{ops}{attrs} : {types}")
        print_deps(n, out, indent)
    elif isinstance(n, ExternNode):
        args = [attr_value_str(a) for a in n.args]
        args += [f"{k} = {attr_value_str(v)}" for k, v in n.kwargs.items()]
        out.append(
            f"{indent}{lhs} = extern {string_str(n.callee)}({', '.join(args)}){attrs} : {types}"
        )
        print_deps(n, out, indent)
    elif isinstance(n, AliasNode):
        assert n.base is not None
        out.append(f"{indent}{lhs} = view %{n.base.name}{attrs} : {types}")
        print_deps(n, out, indent)
    elif isinstance(n, LoopNode):
        kind = "pointwise" if n.reduction is None else f"reduction {n.reduction}"
        ranges = ", ".join(f"{v.name} < {dim_str(s)}" for v, s in n.ranges)
        if n.reduction is not None:
            red = ", ".join(f"{v.name} < {dim_str(s)}" for v, s in n.reduction_ranges)
            ranges = f"{ranges}; {red}" if ranges else f"; {red}"
        order = f" order ({schedule_str(n)})" if n.schedule is not None else ""
        out.append(f"{indent}{lhs} = {kind}{attrs} : {types} over ({ranges}){order} {{")
        assert n.body is not None
        print_body(n.body, out, indent + INDENT)
        out.append(indent + "}")
        print_deps(n, out, indent)
    else:  # pragma: no cover - every node kind is listed above
        raise TypeError(f"cannot print {type(n).__name__}")


def schedule_str(n: LoopNode) -> str:
    """``i1 < 64, i0 < 32`` or ``[i0, i1] < 2048; r0 < 64``: a node's loops in the order they
    run, merged loops in brackets."""
    assert n.schedule is not None

    def loops(items: Any) -> str:
        parts = []
        for loop in items:
            names = (
                loop.vars[0].name
                if len(loop.vars) == 1
                else ("[" + ", ".join(v.name for v in loop.vars) + "]")
            )
            parts.append(f"{names} < {dim_str(loop.size)}")
        return ", ".join(parts)

    text = loops(n.schedule.loops)
    if n.reduction is not None:
        red = loops(n.schedule.reduction)
        text = f"{text}; {red}" if text else f"; {red}"
    return text


def print_deps(n: Node, out: list[str], indent: str) -> None:
    """``deps { … }`` after the node's last line, one dependency per line."""
    if n.deps is None:
        return
    from .dependencies import deps_lines

    out[-1] += " deps {"
    inner = indent + INDENT
    out.extend(inner + line for line in deps_lines(n.deps))
    out.append(indent + "}")


def print_body(body: Body, out: list[str], indent: str) -> None:
    for op in body.ops:
        out.append(indent + body_op_str(op))
    out.append(f"{indent}yield {body_operand_str(body.result)}")


def body_op_str(op: BodyOp) -> str:
    lhs = f"%{op.result.name} = "
    if op.opcode == "load":
        from .symbolic import print_expr  # only here: most ops print no index expression

        assert op.buffer is not None and op.index is not None
        text = f"load %{op.buffer.name}[{print_expr(op.index)}]"
        if op.mask is not None:
            other = op.other if op.other is not None else Literal(0)
            text += f" if %{op.mask.name} else {other}"
        return lhs + text
    if op.opcode == "indirect":
        return lhs + f"indirect {body_operand_str(op.operands[0])} < {dim_str(op.bound)}"
    if op.opcode == "index":
        from .symbolic import print_expr

        assert op.index is not None and op.dtype is not None
        return lhs + f"index {print_expr(op.index)} : {op.dtype}"
    text = op.opcode
    if op.operands:
        text += " " + ", ".join(body_operand_str(o) for o in op.operands)
    if op.attrs:
        text += " " + attr_dict_str(op.attrs)
    if op.opcode in ("constant", "cast"):
        text += f" : {op.dtype}"
    return lhs + text


def body_operand_str(o: BodyValue | Literal) -> str:
    return f"%{o.name}" if isinstance(o, BodyValue) else str(o)


def operand_str(o: Value | Literal) -> str:
    return f"%{o.name}" if isinstance(o, Value) else str(o)


def string_str(s: str) -> str:
    esc = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{esc}"'


def attr_value_str(v: Any) -> str:
    if isinstance(v, Value):
        return f"%{v.name}"
    if v is None or isinstance(v, (bool, float)):
        return literal_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return string_str(v)
    if isinstance(v, DType):
        return v.value
    if isinstance(v, list):
        return "[" + ", ".join(attr_value_str(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "[" + ", ".join(attr_value_str(x) for x in v) + "]"
    if hasattr(v, "free_symbols"):
        from .symbolic import print_expr

        return print_expr(v)
    raise TypeError(f"cannot print attribute value {v!r}")


def attr_dict_str(attrs: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k} = {attr_value_str(v)}" for k, v in attrs.items()) + "}"
