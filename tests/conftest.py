"""Shared pytest setup: the helper modules of tests/ (``strategies``), and the test modules of
each folder, are importable from every test file, whatever pytest's import mode."""

from __future__ import annotations

import os
import sys

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
# and each stage's folder: some test modules import another folder's (the C++ back end's
# programs in the llvm, Triton and split-reduction tests), which must not depend on the order
# pytest happens to collect the folders in (a file run alone, or a subset)
for _name in sorted(os.listdir(_TESTS_DIR)):
    _folder = os.path.join(_TESTS_DIR, _name)
    if os.path.isdir(_folder) and _name.isidentifier() and _folder not in sys.path:
        sys.path.append(_folder)

# Without a GPU, Triton kernels run in Triton's interpreter (tests/backends/test_triton.py). Triton reads
# the switch when it is first imported (its own library functions are made then), so it is set
# here, before any test module imports Triton.
try:
    import torch

    _GPU = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a dependency
    _GPU = False
if not _GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")
