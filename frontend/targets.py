"""Loading an import target and its example inputs, exporting it and importing it to FIR: the
library behind ``fir-import`` (see that tool for the target forms and argument order)."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path
from typing import Any


def mapped_ops_markdown() -> str:
    """The aten → FIR table as a markdown table: one row per aten op with its overloads."""
    from fir.frontend.aten import mapped_ops

    overloads: dict[str, list[str]] = {}
    for name in mapped_ops():
        parts = name.split(".")
        op = ".".join(parts[:2])
        overloads.setdefault(op, [])
        if len(parts) > 2:
            overloads[op].append(parts[2])
    lines = [
        f"{len(mapped_ops())} aten overloads of {len(overloads)} ops map to FIR ops.",
        "",
        "| aten op | overloads |",
        "| --- | --- |",
    ]
    for op, ovs in sorted(overloads.items()):
        lines.append(f"| `{op}` | {', '.join(f'`{o}`' for o in ovs) or '(packet)'} |")
    return "\n".join(lines) + "\n"


class ImportFailure(Exception):
    """A user error of fir-import: printed as one line, exit status 1."""


# ---------------------------------------------------------------------------------------------
# input specs

_SPEC = re.compile(r"^\s*([A-Za-z0-9]+)\s*\[(.*)\]\s*$")


def parse_input_spec(text: str) -> tuple[Any, tuple[int, ...]]:
    """``f32[8, 16]`` → (DType.F32, (8, 16)). Sizes must be integers (use --dynamic for s0)."""
    from fir.ir.dtypes import DType, parse_dtype

    m = _SPEC.match(text)
    if not m:
        raise ImportFailure(f"bad --input '{text}': expected a FIR type such as f32[8, 16]")
    dtype = parse_dtype(m.group(1))
    if dtype is None:
        names = ", ".join(d.value for d in DType)
        raise ImportFailure(f"bad --input '{text}': unknown dtype '{m.group(1)}' (dtypes: {names})")
    dims: list[int] = []
    body = m.group(2).strip()
    for part in body.split(",") if body else []:
        part = part.strip()
        if not re.fullmatch(r"\d+", part):
            hint = (
                " (use --dynamic for a symbolic batch size)" if re.fullmatch(r"s\d+", part) else ""
            )
            raise ImportFailure(
                f"bad --input '{text}': size '{part}' is not a non-negative integer{hint}"
            )
        dims.append(int(part))
    return dtype, tuple(dims)


def make_inputs(
    specs: list[tuple[Any, tuple[int, ...]]], seed: int, int_high: int | None
) -> list[Any]:
    """Random example inputs: floats ~ N(0, 1), integers in [0, int_high), bools fair coins."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    sizes = [d for _, shape in specs for d in shape if d > 1]
    high = int_high if int_high is not None else (min(sizes) if sizes else 2)
    out = []
    for dtype, shape in specs:
        if dtype.is_float:
            t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype.to_torch())
        elif dtype.is_bool:
            t = torch.rand(shape, generator=gen) < 0.5
        else:
            t = torch.randint(0, max(high, 1), shape, generator=gen, dtype=torch.int64)
            t = t.to(dtype.to_torch())
        out.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# targets


def _import_module(spec: str) -> Any:
    import importlib
    import importlib.util

    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec)
        if not path.is_file():
            raise ImportFailure(f"cannot load target: no file {spec}")
        name = "_fir_import_" + re.sub(r"\W", "_", path.stem)
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ImportFailure(f"cannot load target: {spec} is not a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
        return module
    # like `python -m`: modules in the current directory are importable
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        raise ImportFailure(f"cannot import module '{spec}': {e}") from None


def resolve_target(target: str) -> Any:
    """``module:attr.path`` → the Python object. Exceptions while importing are user errors."""
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ImportFailure(f"bad target '{target}': expected package.module:function")
    try:
        obj = _import_module(module_name)
    except ImportFailure:
        raise
    except Exception as e:  # the user's module raised while being imported
        raise ImportFailure(f"importing '{module_name}' failed: {_one_line(e)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportFailure(f"bad target '{target}': '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def _takes_no_arguments(fn: Any) -> bool:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not inspect.Parameter.empty or p.kind is inspect.Parameter.VAR_KEYWORD
        for p in sig.parameters.values()
    ) and not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values())


def instantiate(obj: Any, target: str, seed: int) -> Any:
    """The callable to export: a module (built under ``manual_seed(seed)``, eval mode) or a
    function wrapped so that ``torch.export`` names its inputs after the function's parameters."""
    import torch

    torch.manual_seed(seed)
    if isinstance(obj, type):
        if not issubclass(obj, torch.nn.Module):
            raise ImportFailure(f"target '{target}' is a class but not an nn.Module subclass")
        try:
            obj = obj()
        except Exception as e:
            raise ImportFailure(
                f"cannot instantiate {obj.__name__}() with no arguments: {_one_line(e)}"
            ) from None
    elif not isinstance(obj, torch.nn.Module) and callable(obj) and _takes_no_arguments(obj):
        try:
            made = obj()
        except Exception as e:
            raise ImportFailure(f"factory '{target}' raised: {_one_line(e)}") from None
        if not isinstance(made, torch.nn.Module):
            raise ImportFailure(
                f"'{target}' takes no arguments, so it is used as a factory, but it returned "
                f"{type(made).__name__}, not an nn.Module"
            )
        obj = made
    if isinstance(obj, torch.nn.Module):
        return obj.eval()
    if not callable(obj):
        raise ImportFailure(f"target '{target}' is a {type(obj).__name__}, not callable")
    return _named_function_module(obj)


def _named_function_module(fn: Any) -> Any:
    """An ``nn.Module`` whose ``forward`` has ``fn``'s signature, so that the FIR arguments get
    the function's parameter names (``%x``) instead of ``%args_0``."""
    import inspect

    import torch

    class FunctionModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, *args: Any) -> Any:
            return self.fn(*args)

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return FunctionModule()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if all(p.kind in positional for p in params):
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        FunctionModule.forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [self_param, *(p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params)]
        )
    return FunctionModule()


def default_name(obj: Any, target: str) -> str:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    return re.sub(r"\W", "_", name) or target.rpartition(":")[2].replace(".", "_")


# ---------------------------------------------------------------------------------------------
# lifted state


def _export_placeholder_name(prefix: str, fqn: str) -> str:
    # torch.export's placeholder naming (placeholder_naming_pass): "p_" / "b_" + the path with a
    # leading "self_" dropped, lowercased, non-alphanumerics → "_" (self_attn.w → p_attn_w)
    for strip in ("L__self___", "self_"):
        if fqn.startswith(strip):
            fqn = fqn[len(strip) :]
            break
    return prefix + re.sub(r"[^a-zA-Z0-9]", "_", fqn.lower())


def state_arguments(graph: Any, module: Any, user_inputs: int) -> list[Any]:
    """The tensors for the leading (lifted) arguments of an imported ``graph``, taken from
    ``module``'s parameters and buffers by name. ``user_inputs`` is the number of user inputs."""
    import torch

    by_name: dict[str, Any] = {}
    if isinstance(module, torch.nn.Module):
        for fqn, p in module.named_parameters():
            by_name.setdefault(_export_placeholder_name("p_", fqn), p.detach())
        for fqn, b in module.named_buffers():
            by_name.setdefault(_export_placeholder_name("b_", fqn), b.detach())
    lifted = []
    for a in graph.args[: max(len(graph.args) - user_inputs, 0)]:
        if a.name not in by_name:
            raise ImportFailure(f"argument %{a.name} is not a parameter or buffer of the module")
        lifted.append(by_name[a.name])
    return lifted


# ---------------------------------------------------------------------------------------------


def _one_line(e: BaseException) -> str:
    from fir.ir.errors import FirError

    if isinstance(e, FirError):
        return e.message
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _raised_inside_fir_importer(e: BaseException) -> bool:
    """Whether ``e`` came from FIR's importer or IR code rather than from torch.export or the
    user's program (so that a bug in FIR is not reported as an export failure)."""
    import traceback

    import fir.frontend
    import fir.ir

    ours = [Path(p.__path__[0]).resolve() for p in (fir.frontend, fir.ir)]
    frames = traceback.extract_tb(e.__traceback__)
    for frame in frames:
        path = Path(frame.filename).resolve()
        if path.name in ("dynamo.py", "targets.py"):
            continue  # the callers of torch.export: the export runs below them
        if any(path.is_relative_to(d) for d in ours):
            return True
    return False


def _rename_size_symbols(text: str, graph: Any) -> str:
    """torch.export numbers its size symbols by its own count (``s33``); FIR files use ``s0``,
    ``s1`` … in order of first appearance in the arguments."""
    from fir.ir.symbolic import free_symbols

    order: list[str] = []
    for a in graph.args:
        for d in a.type.shape:
            if isinstance(d, int):
                continue
            for s in sorted(free_symbols(d), key=lambda s: s.name):
                if s.name not in order:
                    order.append(s.name)
    mapping = {old: f"s{k}" for k, old in enumerate(order)}
    if all(k == v for k, v in mapping.items()):
        return text
    pattern = re.compile(r"(?<![%@\w\"])(" + "|".join(map(re.escape, mapping)) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def _has_symbolic_sizes(graph: Any) -> bool:
    return any(not isinstance(d, int) for a in graph.args for d in a.type.shape)


def import_target(args: argparse.Namespace) -> tuple[str, Any, Any, list[Any], list[Any], Any]:
    """Everything but the output: returns (text, module, report, lifted, inputs, callable)."""
    from fir.frontend.dynamo import export_and_import
    from fir.ir.errors import FirError
    from fir.ir.parser import parse_module
    from fir.ir.printer import print_module
    from fir.ir.verifier import verify_module

    if not args.input:
        raise ImportFailure("give the example inputs with --input, e.g. --input f32[8,16]")
    specs = [parse_input_spec(s) for s in args.input]
    if args.dynamic and not specs[0][1]:
        raise ImportFailure("--dynamic needs a first input with at least one dimension")
    if args.dynamic and specs[0][1][0] < 2:
        raise ImportFailure("--dynamic needs a batch size of at least 2 in the first input")
    obj = resolve_target(args.target)
    fn = instantiate(obj, args.target, args.seed)
    name = args.name or default_name(obj, args.target)
    inputs = make_inputs(specs, args.seed, args.int_high)
    try:
        with warnings.catch_warnings():
            # torch.export's own deprecation notices are not the user's to act on
            warnings.simplefilter("ignore", FutureWarning)
            module, report, constants, lifted = export_and_import(
                fn, inputs, name=name, dynamic_batch=args.dynamic
            )
    except FirError as e:
        raise ImportFailure(f"cannot import {args.target}: {e.message}") from None
    except Exception as e:
        if _raised_inside_fir_importer(e):
            raise ImportFailure(
                f"internal error of the FIR importer on {args.target} (please report it): "
                f"{_one_line(e)}"
            ) from None
        what = "torch.export with a dynamic dim 0" if args.dynamic else "torch.export"
        raise ImportFailure(f"{what} failed for {args.target}: {_one_line(e)}") from None
    text = print_module(module)
    if args.dynamic:
        if not _has_symbolic_sizes(module.funcs[0]):
            raise ImportFailure(
                f"--dynamic: torch.export specialised dim 0 of {args.target} to a constant"
            )
        text = _rename_size_symbols(text, module.funcs[0])
        try:
            module = parse_module(text, f"<{name}>")
            verify_module(module)
        except FirError as e:
            raise ImportFailure(
                f"--dynamic: the imported program does not verify: {e.message}"
            ) from None
        text = print_module(module)
    if args.check:
        _check(module, fn, lifted, inputs, constants)
    return text, module, report, lifted, inputs, fn


def _check(
    module: Any, fn: Any, lifted: list[Any], inputs: list[Any], constants: list[Any]
) -> None:
    import torch
    from fir.ir.errors import FirError
    from fir.ir.interpreter import run_graph

    with torch.no_grad():
        expected = fn(*inputs)
        try:
            got = run_graph(module.funcs[0], [*lifted, *inputs, *constants])
        except FirError as e:
            raise ImportFailure(f"--check: the interpreter failed: {e.message}") from None
    flat = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    for k, (g, want) in enumerate(zip(got, flat)):
        try:
            torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-4, equal_nan=True)
        except AssertionError as err:
            raise ImportFailure(
                f"--check: output #{k} differs from eager: {_one_line(err)}"
            ) from None
