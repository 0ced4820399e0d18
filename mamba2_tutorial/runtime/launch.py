"""Every kernel launch of both paths: the backend a call runs on, the compiler hint, and the launch itself.

- :func:`resolve_backend` decides once per call where its launches run: ``"gpu"`` (``ct.launch``) or
  ``"cpu"`` (the tile executor, :mod:`mamba2_tutorial.executor`).
- :func:`hinted` is a kernel compiled for a number of blocks per SM (a compiler hint: speed, never results).
- :func:`launch` runs one kernel on a resolved backend.
- :func:`recording` replaces every launch inside a ``with`` block by a call to a recorder: nothing runs, and
  the recorder sees each launch's hinted kernel, grid and arguments (the fast path's compile specs and
  ``tools/precompile.py`` list what a run would compile this way).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

__all__ = ["float64_tier", "hinted", "launch", "recording", "resolve_backend", "widen"]


def float64_tier() -> bool:
    """Whether the CPU executor's float64 tier is on (``mamba2_tutorial.executor.wide_floats``): float32
    buffers are then allocated in float64 and float64 inputs are accepted."""
    mod = sys.modules.get("mamba2_tutorial.executor._dtypes")
    return mod is not None and mod.is_wide()


def widen(t: torch.Tensor) -> torch.Tensor:
    """``t`` for host arithmetic: float32 from 16-bit or float32, float64 kept (the float64 tier)."""
    return t if t.dtype == torch.float64 else t.float()


def resolve_backend(backend: str, x: torch.Tensor) -> str:
    """"gpu" or "cpu" for a call whose tensors live where ``x`` is; decided once per call, before any launch.

    ``"auto"`` picks the GPU when one is usable (:func:`mamba2_tutorial.backends.select_backend`) and the data
    is on it, else the CPU executor; ``"gpu"`` with host tensors is an error.
    """
    from .backends import select_backend

    # an explicit backend is itself (select_backend would also describe the GPU, on every call); "auto" and
    # anything else go through select_backend, which checks the name
    name = backend if backend in ("gpu", "cpu") else select_backend(backend).name
    if name == "gpu" and x.device.type != "cuda":
        if backend == "auto":  # a usable GPU, but the inputs are on the host: run where the data is
            return "cpu"
        raise ValueError(f"backend 'gpu' needs CUDA tensors, but x is on {x.device}; move them with .cuda()")
    return name


_HINTED: dict = {}


def hinted(kernel, occupancy: int | None = None):
    """``kernel`` compiled for ``occupancy`` blocks per SM (``kernel.replace_hints``: the compiler budgets
    registers and shared memory for that many), cached so each hint compiles once; ``kernel`` itself for
    None. A hint changes only speed, never results: a tuned launcher sets it per problem size, a kernel
    launched without one gets the compiler's choice."""
    if occupancy is None:
        return kernel
    key = (id(kernel), occupancy)
    found = _HINTED.get(key)
    if found is None:
        found = _HINTED[key] = kernel.replace_hints(occupancy=occupancy)
    return found


#: the recorder of :func:`recording`: when set, called with (hinted kernel, grid, args) in place of every
#: launch, which then runs nothing
_RECORDER: Callable | None = None


@contextmanager
def recording(record: Callable) -> Iterator[None]:
    """Inside the block every launch calls ``record(hinted kernel, grid, args)`` and runs nothing; the
    previous recorder (if any) is restored on leaving it."""
    global _RECORDER
    if not callable(record):
        raise TypeError(f"recording(record): record must be callable (kernel, grid, args), got {record!r}")
    previous, _RECORDER = _RECORDER, record
    try:
        yield
    finally:
        _RECORDER = previous


def launch(kernel, grid, args, backend: str, occupancy: int | None = None) -> None:
    """Launch on a resolved backend: "gpu" goes straight to ``ct.launch`` on the current stream (the least
    host overhead), "cpu" to the CPU tile executor through :func:`mamba2_tutorial.backends.launch`.

    ``occupancy`` is a compiler hint for the GPU (see :func:`hinted`); the CPU executor ignores it."""
    if _RECORDER is not None:
        _RECORDER(hinted(kernel, occupancy), grid, args)
        return
    if backend == "gpu" and float64_tier():
        raise RuntimeError("the float64 tier (executor.wide_floats) runs on the CPU executor only: "
                           "pass backend='cpu'")
    if backend == "gpu":
        import cuda.tile as ct

        # the current stream of the current device, the device named by index: current_stream() without
        # one asks torch whether CUDA is available on every call, a host cost of every launch
        stream = torch.cuda.current_stream(torch.cuda.current_device())
        ct.launch(stream, grid, hinted(kernel, occupancy), args)
    else:
        from .backends import launch as launch_anywhere

        launch_anywhere(kernel, grid, args, backend=backend)
