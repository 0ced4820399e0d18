"""Shared pytest configuration.

Tests marked ``gpu`` need a CUDA GPU of compute capability >= 8.0 and the cuTile toolchain (tileiras).
Where that is missing they are skipped with the reason; on the H200 run them with
``pytest -o addopts='' -m gpu tests``.
"""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """None when cuTile kernels can run on a GPU here, else why not."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return f"GPU compute capability {major}.{minor} < 8.0 (cuTile needs sm_80 or newer)"
    try:
        import cuda.tile  # noqa: F401
    except ImportError as exc:
        return f"cuda-tile is not importable: {exc}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
