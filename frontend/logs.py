"""``FIR_LOGS=graphs,fusion,kernels,fallback``: what ``torch.compile(..., backend="fir")`` does,
printed to stderr while it does it (in the spirit of ``TORCH_LOGS``).

Topics:

* ``graphs``: one line per graph FIR compiles (forward, backward or inference), with its op
  counts;
* ``fusion``: the ``fuse`` pass's report of each graph (every candidate pair with its decision,
  then the kernel count before and after);
* ``kernels``: the steps of each compiled program (kernels, extern calls, views);
* ``fallback``: every fallback with its reason (an aten op kept as an extern call, a graph run
  by PyTorch).

``FIR_LOGS=all`` turns every topic on. The variable is read at each message, so it can be set
after ``import fir`` (tests set it with ``monkeypatch.setenv``). Each line is prefixed with its
topic, ``[fir:graphs] ...``, so the topics can be told apart in one stream.
"""

from __future__ import annotations

import os
import sys

TOPICS = ("graphs", "fusion", "kernels", "fallback")
ENV = "FIR_LOGS"


def enabled_topics() -> frozenset[str]:
    """The topics ``FIR_LOGS`` names; an unknown name is ignored (a typo must not stop a
    compile), ``all`` names every topic."""
    names = {t.strip() for t in os.environ.get(ENV, "").split(",") if t.strip()}
    if "all" in names:
        return frozenset(TOPICS)
    return frozenset(names & set(TOPICS))


def enabled(topic: str) -> bool:
    return topic in enabled_topics()


def log(topic: str, text: str) -> None:
    """Print ``text`` to stderr, each line prefixed with ``[fir:topic]``, if the topic is on."""
    if not enabled(topic):
        return
    lines = text.rstrip("\n").splitlines() or [""]
    sys.stderr.write("".join(f"[fir:{topic}] {ln}\n" for ln in lines))
    sys.stderr.flush()
