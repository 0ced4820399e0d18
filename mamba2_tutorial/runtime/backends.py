"""One front door for running cuTile kernels: on the GPU through ``ct.launch``, or on the CPU executor.

``launch(kernel, grid, args, backend="auto")`` runs a ``@ct.kernel`` function over ``grid`` with ``args`` (a
tuple of torch tensors, Python ints/floats and ``ct.Constant`` values); outputs are written in place, as with
``ct.launch``. ``select_backend()`` says which backend ``"auto"`` picks and why: the GPU when torch sees a
CUDA device of compute capability >= 8.0 and cuTile with its compiler (tileiras) is usable, else the CPU
executor, and ``"none"`` where cuTile itself does not import (macOS: no cuda-tile wheels), where ``launch``
raises :class:`~mamba2_tutorial.runtime.platforms.CuTileUnavailable`. The environment variable
``MAMBA2_TUTORIAL_BACKEND=cpu|gpu`` overrides ``"auto"``.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import NamedTuple

from .platforms import cutile_available, cutile_unavailable_reason, require_cutile

__all__ = ["BackendChoice", "select_backend", "launch", "ENV_VAR"]

ENV_VAR = "MAMBA2_TUTORIAL_BACKEND"
_BACKENDS = ("auto", "gpu", "cpu")


class BackendChoice(NamedTuple):
    """The backend a launch uses ("gpu" or "cpu"; "none" where cuTile does not import) and a sentence saying
    why."""

    name: str
    reason: str


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
    except ImportError as exc:  # pragma: no cover
        return f"cuda-tile is not importable: {exc}"
    if _find_tileiras() is None:
        return "cuTile's compiler tileiras was not found (pip install 'cuda-tile[tileiras]')"
    return None


def _find_tileiras() -> str | None:
    try:
        from cuda.tile._compile import _find_compiler_bin

        return str(_find_compiler_bin())
    except Exception:
        return shutil.which("tileiras")


def select_backend(backend: str = "auto") -> BackendChoice:
    """Resolve ``backend`` ("auto", "gpu" or "cpu") to the backend a launch will use, with the reason.

    ``"auto"`` resolves to ``"none"`` where cuTile does not import: no backend can run a kernel here."""
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "auto":
        env = os.environ.get(ENV_VAR, "").strip().lower()
        if env and env not in ("cpu", "gpu"):
            raise ValueError(f"{ENV_VAR} must be 'cpu' or 'gpu', got {env!r}")
        if not cutile_available():  # neither tier exists without cuTile, whatever ENV_VAR asks for
            return BackendChoice("none", cutile_unavailable_reason())
        if env:
            return BackendChoice(env, f"{ENV_VAR}={env} is set")
        reason = gpu_unavailable_reason()
        if reason is None:
            return BackendChoice("gpu", _gpu_description() + " with cuTile and tileiras")
        return BackendChoice("cpu", f"CPU tile executor: {reason}")
    if backend == "gpu":
        reason = gpu_unavailable_reason()
        if reason is not None:
            return BackendChoice("gpu", f"requested, but it will fail: {reason}")
        return BackendChoice("gpu", "requested: " + _gpu_description())
    return BackendChoice("cpu", "requested: CPU tile executor")


def _gpu_description() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{torch.cuda.get_device_name()} (sm_{major}{minor})"


def _tensors(args):
    import torch

    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, list | tuple):
            yield from _tensors(a)


def launch(kernel, grid, args: tuple, *, backend: str = "auto", block_order: str = "sequential",
           seed: int | None = None) -> BackendChoice:
    """Run ``kernel`` over ``grid`` with ``args``; returns the BackendChoice used.

    Args:
        kernel: a ``@ct.kernel`` function.
        grid: tuple of 1 to 3 positive ints (blocks along x, y, z).
        args: tuple of kernel arguments: torch tensors, Python ints/floats/bools, ``ct.Constant`` values.
        backend: "auto", "gpu" or "cpu". The GPU needs CUDA tensors; CUDA tensors given to the CPU backend are
            copied to the host and the results copied back.
        block_order: CPU only: "sequential", "random" (seeded by ``seed``) or "reversed".
    """
    import torch

    require_cutile()
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, got {type(args).__name__}")
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    choice = select_backend(backend)
    tensors = list(_tensors(args))
    if choice.name == "gpu":
        cpu = [t for t in tensors if t.device.type != "cuda"]
        if cpu:
            raise ValueError(
                f"backend 'gpu' needs CUDA tensors, but {len(cpu)} argument tensor(s) are on "
                f"{cpu[0].device} (shape {tuple(cpu[0].shape)}); move them with .cuda() or use backend='cpu'"
            )
        reason = gpu_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"backend 'gpu' is not usable here: {reason}")
        import cuda.tile as ct

        ct.launch(torch.cuda.current_stream(), grid, kernel, args)
        return choice

    from ..executor import run_kernel

    on_device = [t for t in tensors if t.device.type != "cpu"]
    if not on_device:
        run_kernel(kernel, grid, args, block_order=block_order, seed=seed)
        return choice
    # copy device tensors to the host, run, copy back (like Triton's interpreter)
    host = {id(t): t.detach().cpu() for t in on_device}

    def to_host(a):
        if isinstance(a, torch.Tensor):
            return host.get(id(a), a)
        if isinstance(a, list):
            return [to_host(v) for v in a]
        if isinstance(a, tuple):
            return tuple(to_host(v) for v in a)
        return a

    run_kernel(kernel, grid, to_host(args), block_order=block_order, seed=seed)
    with torch.no_grad():
        for t in on_device:
            t.copy_(host[id(t)])
    return choice
