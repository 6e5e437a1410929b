"""Start the Triton back end's one-time costs in the background.

The first compile of a process pays for importing Triton and for its cache key (a hash of
Triton's own sources, about 0.4 s on the benchmark machine). Neither depends on the graph, so
when the ``fir`` backend is looked up (``torch.compile(..., backend="fir")``, before Dynamo
traces anything) and a CUDA device exists, a daemon thread does them while Dynamo traces; the
compile that follows finds them done. Nothing here can fail a compile: an error in the thread
is dropped, and the compile then pays the cost itself.
"""

from __future__ import annotations

import os
import threading

_started = False


def _warm() -> None:
    try:
        import triton.compiler  # noqa: F401 - the import is the work
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - a cost moved, never a new failure
        pass


def prewarm_triton() -> None:
    """Once per process, where a GPU exists and Triton is not interpreting."""
    global _started
    if _started or os.environ.get("TRITON_INTERPRET") == "1":
        return
    _started = True
    import torch

    if not torch.cuda.is_available():
        return
    threading.Thread(target=_warm, name="fir-prewarm-triton", daemon=True).start()
