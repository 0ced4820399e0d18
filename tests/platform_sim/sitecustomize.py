"""A machine without cuTile, for tests/test_platforms.py: put this folder first on PYTHONPATH.

Python imports ``sitecustomize`` at start-up, in every process that inherits PYTHONPATH (a pytest run, the
Jupyter kernels nbval and nbclient start). This one installs a meta-path finder that

* makes ``cuda.tile`` and its submodules unimportable (ModuleNotFoundError, as where cuda-tile is not
  installed), although the cuda-tile of the virtual environment stays where it is;
* with ``MAMBA2_SIM_PLATFORM=SYSTEM/MACHINE`` (e.g. ``Darwin/arm64``), makes
  ``mamba2_tutorial.runtime.platforms.this_platform()`` return that platform, so the package explains itself
  as it would there. Nothing else sees the change: torch, matplotlib and Jupyter still see the real machine.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_SIM = os.environ.get("MAMBA2_SIM_PLATFORM")
_PLATFORM = tuple(_SIM.split("/", 1)) if _SIM else None


def _is_cutile(name: str) -> bool:
    return name == "cuda.tile" or name.startswith(("cuda.tile.", "cuda.tile_"))


class _PlatformPatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then replaces the module's ``this_platform``."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        module.this_platform = lambda: _PLATFORM

    def __getattr__(self, name):  # get_source, get_filename, ... of the real loader
        return getattr(self._inner, name)


class _NoCuTile(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if _is_cutile(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        if name == "mamba2_tutorial.runtime.platforms" and _PLATFORM is not None:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = _PlatformPatchingLoader(spec.loader)
            return spec
        return None


sys.meta_path.insert(0, _NoCuTile())
