"""Lazy public names for a package: ``import mamba2_tutorial`` (or one of its audience packages, e.g.
``figures``) stays cheap and works without cuTile, and each name is imported on first use.

A package lists ``{public name: module that defines it}`` and installs :func:`lazy_names`' two functions as
its ``__getattr__`` and ``__dir__``. Where a name needs cuTile and cuTile does not import (macOS has no
cuda-tile wheels), using it raises :class:`~mamba2_tutorial.runtime.platforms.CuTileUnavailable`, which says
how to continue.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, exports: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``), whose public names ``exports`` maps to
    the modules that define them, relative to the package (e.g. ``{"shape_table": "tables"}``)."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(f".{module}", package), name)
        except ModuleNotFoundError as exc:
            from .platforms import CuTileUnavailable, cutile_unavailable_message, is_cutile_import_error

            if not is_cutile_import_error(exc):
                raise
            message = f"{package}.{name} needs cuTile. {cutile_unavailable_message(exc)}"
            raise CuTileUnavailable(message) from exc
        setattr(sys.modules[package], name, value)   # found once: later uses skip __getattr__
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
