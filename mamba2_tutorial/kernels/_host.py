"""Host-side helpers of the SSD kernels' wrappers: tile sizes, placeholder arrays, allocation, launch."""

from __future__ import annotations

import functools
import sys
from typing import NamedTuple

import torch

__all__ = [
    "KERNEL_DTYPES",
    "LaunchPlan",
    "allocate",
    "check_chunk_size",
    "float64_tier",
    "check_kernel_dtype",
    "hinted",
    "launch",
    "next_power_of_two",
    "placeholder",
    "resolve_backend",
    "strided_ok",
    "tile_size",
    "widen",
]

#: dtypes of x, B, C, z that the cuTile SSD kernels take (mma operands; float32 accumulation)
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class LaunchPlan(NamedTuple):
    """How one kernel is launched for one problem size: its grid and its tile sizes (the ct.Constant ones)."""

    grid: tuple[int, int, int]
    tiles: dict  # e.g. {"Q": 256, "TP": 64, "TN": 128}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=256)
def next_power_of_two(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def tile_size(dim: int, cap: int, floor: int = 1) -> int:
    """A power-of-two tile for a dimension of size ``dim``: its next power of two, clipped to [floor, cap]."""
    return max(floor, min(cap, next_power_of_two(dim)))


def check_kernel_dtype(name: str, tensor: torch.Tensor) -> None:
    if tensor.dtype not in KERNEL_DTYPES and not (tensor.dtype == torch.float64 and float64_tier()):
        raise TypeError(
            f"{name} has dtype {tensor.dtype}; the cuTile kernels take float32, float16 or bfloat16 "
            f"(use mamba2_tutorial.ssd_chunked for float64)"
        )


def check_chunk_size(chunk_size: int) -> None:
    if chunk_size & (chunk_size - 1):
        raise ValueError(
            f"chunk_size (Q) must be a power of two for the cuTile kernels (a chunk is one tile), "
            f"got {chunk_size}; mamba_ssm's usual sizes are 64, 128 and 256"
        )


@functools.lru_cache(maxsize=64)
def placeholder(device: torch.device, dtype: torch.dtype, ndim: int) -> torch.Tensor:
    """A tiny array passed for an absent optional input (D, z, dt_bias, initial_states).

    The kernel never loads it: a ``ct.Constant`` flag (HAS_Z, D_MODE, ...) compiles the load away. It exists
    only because every kernel parameter needs an argument. Cached, so ssd_forward allocates nothing for it.
    """
    return torch.zeros((1,) * ndim, dtype=dtype, device=device)


def strided_ok(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` itself when the kernels can read it in place, else a contiguous copy.

    cuTile loads take any strides, so views (e.g. B and C sliced out of one projection) need no copy as long
    as the last dimension is dense (stride 1, what TMA needs) and no dimension is broadcast (stride 0).
    """
    if t is None or t.is_contiguous():  # the common case, one C call (contiguous: dense, never broadcast)
        return t
    dense_last = t.dim() == 0 or t.shape[-1] == 1 or t.stride(-1) == 1
    broadcast = any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))
    return t if dense_last and not broadcast else t.contiguous()


def float64_tier() -> bool:
    """Whether the CPU executor's float64 tier is on (``mamba2_tutorial.executor.wide_floats``): float32
    buffers are then allocated in float64 and float64 inputs are accepted."""
    mod = sys.modules.get("mamba2_tutorial.executor._dtypes")
    return mod is not None and mod.is_wide()


def widen(t: torch.Tensor) -> torch.Tensor:
    """``t`` for host arithmetic: float32 from 16-bit or float32, float64 kept (the float64 tier)."""
    return t if t.dtype == torch.float64 else t.float()


def allocate(shape, dtype: torch.dtype, device: torch.device, poison: bool) -> torch.Tensor:
    """An output buffer: uninitialized (the hot path), or NaN-filled so that an unwritten element shows up.
    Under the executor's float64 tier a float32 buffer is float64."""
    if dtype == torch.float32 and float64_tier():
        dtype = torch.float64
    if poison:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def resolve_backend(backend: str, x: torch.Tensor) -> str:
    """"gpu" or "cpu" for a call whose tensors live where ``x`` is; decided once per call, before any launch.

    ``"auto"`` picks the GPU when one is usable (:func:`mamba2_tutorial.backends.select_backend`) and the data
    is on it, else the CPU executor; ``"gpu"`` with host tensors is an error.
    """
    from mamba2_tutorial.backends import select_backend

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
    None. A hint changes only speed, never results. The taught kernels launch without one; the fast path
    (:mod:`mamba2_tutorial.fast`) sets it per problem size."""
    if occupancy is None:
        return kernel
    key = (id(kernel), occupancy)
    found = _HINTED.get(key)
    if found is None:
        found = _HINTED[key] = kernel.replace_hints(occupancy=occupancy)
    return found


#: a launch recorder (``tools/precompile.py``, which compiles ahead of time what a run would launch, and
#: ``fast/specs.py``): when set, called with (hinted kernel, grid, args) in place of every launch, which then
#: runs nothing
_RECORDER = None


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
        from mamba2_tutorial.backends import launch as launch_anywhere

        launch_anywhere(kernel, grid, args, backend=backend)
