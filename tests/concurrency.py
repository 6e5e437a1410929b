"""Running one test body on several threads at once (the runtime's shared state: generated
calls per binding, argument arrays reused from call to call)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def on_threads(work: Callable[[int], None], count: int = 6) -> None:
    """``work(k)`` on ``count`` threads started together, ``k`` the thread's number; returns
    when every one has finished."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
