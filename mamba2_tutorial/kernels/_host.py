"""Host-side helpers of the SSD kernels' wrappers: tile sizes, placeholder arrays, allocation.

Launching, the backend choice and argument checks are the runtime's (:mod:`mamba2_tutorial.runtime`)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from ..runtime.launch import float64_tier

__all__ = ["LaunchPlan", "allocate", "cdiv", "next_power_of_two", "placeholder", "strided_ok", "tile_size"]



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


def allocate(shape, dtype: torch.dtype, device: torch.device, poison: bool) -> torch.Tensor:
    """An output buffer: uninitialized (the hot path), or NaN-filled so that an unwritten element shows up.
    Under the executor's float64 tier a float32 buffer is float64."""
    if dtype == torch.float32 and float64_tier():
        dtype = torch.float64
    if poison:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)
