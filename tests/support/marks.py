"""Marks and facts a test module asks for at import time."""

import os

import pytest

IS_ROOT = os.geteuid() == 0

requires_root = pytest.mark.skipif(not IS_ROOT, reason="eBPF needs root")
