"""What one call of the fast forward launches with: its tensors and settings, and its config resolved once.

``ssd_forward`` (``fast/forward.py``) checks its arguments, then hands every stage two things:

- a **call**: :class:`StateCall` (the state stage's tensors and settings) or :class:`ScanCall` (the scan's),
  small frozen records passed whole, so that no launcher takes a long row of positional arguments;
- the **plan**: :func:`resolve` turns the :class:`~mamba2_tutorial.fast.config.FastConfig` into a
  :class:`Plan` for this call, once. Everything that follows from the config and the call (a segmented
  stage's count, whether kd is stored or computed, the C Bᵀ dtype for x's dtype, whether the scan stores the
  true entering states) is decided here and read by the launchers; none derives it again.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch

from .config import FUSED_WALKS, ChunkScan, Decay, FastConfig, ScanStage, Segmented, StateStage
from .tuning import table_for_device, with_segments

__all__ = ["Plan", "ScanCall", "StateCall", "resolve"]


class StateCall(NamedTuple):
    """The state stage's inputs and settings for one call (as ``ssd_forward`` takes them, checked)."""

    x: torch.Tensor                        #: (b, l, h, p)
    dt: torch.Tensor                       #: (b, l, h)
    A: torch.Tensor                        #: (h,)
    B: torch.Tensor                        #: (b, l, g, n)
    chunk_size: int                        #: Q, a power of two
    dt_bias: torch.Tensor | None           #: (h,)
    dt_softplus: bool
    dt_limit: tuple                        #: (dt_min, dt_max)
    initial_states: torch.Tensor | None    #: (b, h, p, n)
    backend: str                           #: "gpu" or "cpu", resolved
    poison: bool = False                   #: fill every intermediate with NaN first (tests)
    seq_idx: torch.Tensor | None = None    #: (b, l) int32, non-decreasing: packed rows (fast/resets.py)


class ScanCall(NamedTuple):
    """The scan stage's inputs and settings for one call: the state stage's outputs, the call's C, B, D, z."""

    x: torch.Tensor                        #: (b, l, h, p)
    dt_out: torch.Tensor                   #: (b, h, nchunks, Q) float32: dt, or kd (store_kd)
    dA_cumsum: torch.Tensor                #: (b, h, nchunks, Q) float32
    C: torch.Tensor                        #: (b, l, g, n)
    B: torch.Tensor                        #: (b, l, g, n)
    chunk_init_states: torch.Tensor        #: (b, nchunks, h, p, n)
    D: torch.Tensor | None                 #: (h,) or (h, p)
    z: torch.Tensor | None                 #: (b, l, h, p)
    backend: str
    poison: bool = False
    carry: object = None                   #: a segmented state stage's SegmentCarry (fast/segments.py)
    seq_idx: torch.Tensor | None = None    #: (b, l) int32, non-decreasing: packed rows (fast/resets.py)


class Plan(NamedTuple):
    """A config resolved for one call, once (:func:`resolve`): the two stages as they run, and what follows
    from them and the call. Every stage reads its settings here; none derives them again."""

    state: StateStage             # a segmented stage's count filled in; store_kd as it runs
    scan: ScanStage
    key_log2: bool                # the scan reads the key-log2 form kd: asked for, and dt_limit keeps dt >= 0
    store_kd: bool                # the state stage stores kd in place of dt_out, so the scan computes none
    store_states: bool            # under autograd, a segmented stage's scan makes the entering states true
    cb_dtype: torch.dtype | None  # ChunkScan: the dtype C Bᵀ is stored in for this x dtype; else None


def resolve(cfg: FastConfig, b: int, h: int, nchunks: int, dtype: torch.dtype, device, dt_limit, *,
            training: bool = False) -> Plan:
    """``cfg`` for a problem of ``b`` batch rows, ``h`` heads, ``nchunks`` chunks and inputs in ``dtype`` on
    ``device``. Under autograd (``training``) the backward needs the true dt, its cumsum and the state
    entering every chunk: the fused state stage stores them when it does not store kd in place of dt, so kd
    is not stored; the segmented one stores segment-local states, which the scan, given the carry, turns
    into the true ones as it reads them (``store_states``). float32 inputs keep a float32 C Bᵀ."""
    cfg = with_segments(cfg, b, h, nchunks, table_for_device(torch.device(device)), device)
    scan = cfg.scan
    key_log2 = isinstance(scan, ChunkScan) and scan.decay is Decay.KEY_LOG2 and min(dt_limit) >= 0
    state = cfg.state
    store_kd = key_log2 and isinstance(state, FUSED_WALKS) and state.store_kd and not training
    if isinstance(state, FUSED_WALKS) and state.store_kd != store_kd:
        state = dataclasses.replace(state, store_kd=store_kd)
    cb_dtype = None
    if isinstance(scan, ChunkScan):
        cb_dtype = torch.float32 if dtype == torch.float32 else scan.cb_dtype
    return Plan(state, scan, key_log2, store_kd, training and isinstance(state, Segmented), cb_dtype)
