"""Shared pytest setup: the helper modules of tests/ (``strategies``) are importable from every
test file, whatever pytest's import mode."""

from __future__ import annotations

import os
import sys

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
