"""FIR: a fusion compiler for tensor programs with a textual IR.

``import fir`` stays cheap: torch and the frontend are imported only when a function that needs
them is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fir.frontend.explain import Explanation

__all__ = ["explain"]


def explain(fn: Any, *args: Any, **kwargs: Any) -> Explanation:
    """Compile ``fn(*args, **kwargs)`` with ``torch.compile(backend="fir")`` and print and return
    what happened: Dynamo graphs and graph breaks (with reasons), aten ops imported into FIR and
    ops that fell back to PyTorch. See :mod:`fir.frontend.explain`."""
    from fir.frontend.explain import explain as _explain

    return _explain(fn, *args, **kwargs)
