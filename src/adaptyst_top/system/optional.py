"""Vendor Python bindings that exist only on some nodes (pyxrt, amdsmi)."""

from __future__ import annotations

import importlib
from typing import Any


def import_optional(name: str) -> Any:
    """The module, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
