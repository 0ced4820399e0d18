"""``ssd_forward_taught``: the Mamba-2 SSD forward pass as the three taught kernels, one launch each.

This is what notebooks 05-08 build: kernel 1 (chunk state), kernel 2 (state passing), kernel 3 (chunk scan),
run one after the other. It takes the same arguments as mamba_ssm's ``mamba_chunk_scan_combined``, and
its results are the ones any faster kernels of the same math must return.

    dt_out, dA_cumsum, states = launch_chunk_state(...)     kernel 1   per (chunk, head): parallel
    chunk_init_states, final  = launch_state_passing(...)   kernel 2   per (batch, head): sequential in c
    out                       = launch_chunk_scan(...)      kernel 3   per (chunk, head): parallel
"""

from __future__ import annotations

import torch

from ..runtime.autograd import SSDInputs, SSDOptions, needs_grad, ssd_autograd
from ..runtime.launch import resolve_backend
from ..runtime.validation import check_not_varlen, validate_kernel_inputs
from ._host import LaunchPlan, cdiv, strided_ok
from .backward import ssd_backward_taught
from .chunk_scan import chunk_scan_plan, launch_chunk_scan
from .chunk_state import chunk_state_plan, launch_chunk_state
from .state_passing import launch_state_passing, state_passing_plan

__all__ = ["ssd_forward_taught", "ssd_plan"]


def ssd_forward_taught(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                       seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                       return_final_states=False, return_varlen_states=False, *, backend="auto",
                       _poison=False):
    """Mamba-2 SSD forward with the three taught cuTile kernels: ``out`` or ``(out, final_states)``.

    x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n); optional D (h,) or (h, p), z (b, l, h, p),
    dt_bias (h,), initial_states (b, h, p, n), in ``mamba_chunk_scan_combined``'s positions (its ``seq_idx``,
    ``cu_seqlens`` and ``return_varlen_states`` are refused with NotImplementedError: ``ssd_forward`` runs
    packed sequences). out (b, l, h, p)
    in x's dtype; final_states (b, h, p, n) float32. ``backend``: "auto" (the GPU when usable, else the CPU
    tile executor), "gpu" or "cpu". Differentiable: when an input requires a gradient, the backward runs the
    taught backward kernels (``kernels/backward.py``). ``_poison`` (tests only) fills every intermediate with
    NaN first, so an element no block wrote shows up.
    """
    # 0. check every argument before any launch: a clear error, never a silent wrong answer
    check_not_varlen(seq_idx, cu_seqlens, return_varlen_states)
    validate_kernel_inputs(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, dt_limit)
    where = resolve_backend(backend, x)
    x, dt, A, B, C, D, z, dt_bias, initial_states = (
        strided_ok(t) for t in (x, dt, A, B, C, D, z, dt_bias, initial_states))
    if needs_grad(x, dt, A, B, C, D, z, dt_bias, initial_states):   # training: the autograd Function
        opts = SSDOptions(chunk_size, dt_softplus, tuple(dt_limit), where, taught_stages, _poison,
                          ssd_backward_taught)
        return ssd_autograd(x, dt, A, B, C, D, z, dt_bias, initial_states, opts, return_final_states)

    # 1. chunk state: dt preprocessed, its in-chunk cumsum, and each chunk's local state (float32)
    dt_out, dA_cumsum, states = launch_chunk_state(
        x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, where, _poison)

    # 2. state passing: the state entering every chunk, stored in x's dtype (what kernel 3's mma takes)
    chunk_init_states, final_states = launch_state_passing(
        states, dA_cumsum, initial_states, where, _poison, out_dtype=x.dtype)

    # 3. chunk scan: each chunk's output from its entering state and its own inputs, D and the gate fused
    out = launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison=_poison)
    return (out, final_states) if return_final_states else out


def taught_stages(inputs: SSDInputs, o: SSDOptions):
    """Kernels 1-3 for the autograd Function: what the backward keeps, and y before the gate."""
    x, dt, A, B, C, D, dt_bias, initial_states = inputs
    dt_out, dA_cumsum, states = launch_chunk_state(x, dt, A, B, o.chunk_size, dt_bias, o.dt_softplus,
                                                   o.dt_limit, o.backend, o.poison)
    chunk_init_states, final_states = launch_state_passing(states, dA_cumsum, initial_states, o.backend,
                                                           o.poison, out_dtype=x.dtype)
    y = launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, None, o.backend, poison=o.poison)
    return dt_out, dA_cumsum, chunk_init_states, final_states, y


def ssd_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int,
             dtype: torch.dtype = torch.bfloat16) -> dict[str, LaunchPlan]:
    """How ``ssd_forward_taught`` launches its three kernels for a problem of this size: grid and tiles of
    each, the same plans the launches use (e.g. for figures of the tiles over the tensors)::

        ssd_plan(8, 4096, 80, 64, 1, 128, 256)["chunk_scan"].grid   # (4, 128, 80): (row tiles, b·chunks, h)
    """
    if h % g:
        raise ValueError(f"nheads h = {h} must be divisible by ngroups g = {g}")
    return {
        "chunk_state": chunk_state_plan(b, l, h, p, n, Q, dtype),
        "state_passing": state_passing_plan(b, cdiv(l, Q), h, p, n, Q),
        "chunk_scan": chunk_scan_plan(b, l, h, p, g, n, Q, dtype),
    }
