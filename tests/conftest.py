"""Shared pytest configuration.

Tests marked ``gpu`` need a CUDA GPU of compute capability >= 8.0 and the cuTile toolchain (tileiras).
Where that is missing they are skipped with the reason (the test :func:`select_backend` makes); on the H200
run them with ``pytest -o addopts='' -m gpu tests``.
"""

from __future__ import annotations

import pytest

from mamba2_tutorial.runtime.backends import gpu_unavailable_reason


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
