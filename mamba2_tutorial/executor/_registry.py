"""The table from cuTile stub names (``load``, ``Tile.item``, ``Array.slice``, ...) to CPU implementations."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["HANDLERS", "op", "unsupported"]

# stub qualname -> implementation with the stub's signature
HANDLERS: dict[str, Callable] = {}


def op(*names: str):
    """Register the decorated function as the CPU implementation of the cuTile stubs ``names``."""

    def decorate(fn):
        for name in names:
            if name in HANDLERS:
                raise RuntimeError(f"duplicate CPU implementation for cuda.tile.{name}")
            HANDLERS[name] = fn
        return fn

    return decorate


def unsupported(name: str) -> Callable:
    """An implementation that raises, naming the cuTile operation the CPU executor lacks."""

    def raise_unsupported(*args, **kwargs):
        raise NotImplementedError(f"cuda.tile.{name} is not supported by the CPU executor")

    raise_unsupported.__name__ = f"unsupported_{name}"
    return raise_unsupported
