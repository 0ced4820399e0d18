"""Kernel 0 (optional): dt preprocessing and the in-chunk cumsum of dt·A, on their own.

The state kernels (:mod:`.chunk_state`, :mod:`.segments`) compute these themselves, chunk after chunk:

    dt_k      = clamp(softplus(dt_raw_k + dt_bias_h), dt_limit)     (bias, softplus optional)
    dA_cs_k   = sum_{j <= k} dt_j · A_h                           (inclusive, restarts at every chunk)

In the fused state stage that sits on the critical path of a sequential walk over chunks: dt (b, l, h) is
strided along l (its Q values for one head are h elements apart), so each chunk's dt is a gather of Q
scalars that the TMA engine cannot prefetch, and the cumsum is a reduction across the block's warps. The
H200 profile of attempt 20 (docs/perf-notes.md) put a quarter of the fused kernel's stalls on those loads.

This kernel does the same work for all chunks at once, as mamba_ssm's ``_chunk_cumsum_fwd`` does: one block
per (chunk, batch, TH heads) loads a (Q, TH) tile of dt (rows of TH contiguous heads), processes it, takes
the cumsum down the chunk and stores dt_out and dA_cumsum (b, h, nchunks, Q) float32, whose rows the state
kernels then load as contiguous tiles, pipelined like x and B (``SSDConfig(state_cumsum=True)``).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ._host import LaunchPlan, allocate, cdiv, launch, placeholder, tile_size
from .chunk_state import process_dt
from .spec import KernelSpec

__all__ = ["SPECS", "chunk_cumsum_kernel", "chunk_cumsum_plan", "launch_chunk_cumsum"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_bias,            # inputs
                        dt_out, dA_cumsum,         # outputs
                        dt_min: float, dt_max: float,
                        Q: ct.Constant[int], TH: ct.Constant[int],
                        HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool]):
    """dt (b, l, h), A (h,), dt_bias (h,) -> dt_out, dA_cumsum (b, h, nchunks, Q) float32, exactly as the
    state kernels compute them. Grid (nchunks, b, cdiv(h, TH)). Positions past the sequence end get dt 0
    (dA_cs stays constant there); heads past h are loaded as zeros and not stored."""
    c = ct.bid(0)
    b = ct.bid(1)
    i_h = ct.bid(2)
    seqlen = dt.shape[1]
    dt_raw = ct.load(dt, (b, c, i_h), shape=(1, Q, TH), padding_mode=ZERO).reshape((Q, TH))
    A_h = ct.load(A, (i_h,), shape=(TH,), padding_mode=ZERO).astype(ct.float32)
    if HAS_DT_BIAS:
        bias = ct.load(dt_bias, (i_h,), shape=(TH,), padding_mode=ZERO).astype(ct.float32)[None, :]
    else:
        bias = 0.0
    t = c * Q + ct.arange(Q, dtype=ct.int32)
    dt_c = process_dt(dt_raw.astype(ct.float32), bias, dt_min, dt_max, (t < seqlen)[:, None],
                      HAS_DT_BIAS, DT_SOFTPLUS)                                   # (Q, TH)
    dA_cs = ct.cumsum(dt_c * A_h[None, :], axis=0)
    ct.store(dt_out, (b, i_h, c, 0), ct.transpose(dt_c).reshape((1, TH, 1, Q)))
    ct.store(dA_cumsum, (b, i_h, c, 0), ct.transpose(dA_cs).reshape((1, TH, 1, Q)))


@functools.lru_cache(maxsize=256)
def chunk_cumsum_plan(b: int, l: int, h: int, Q: int) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_cumsum_kernel`: TH heads per block, Q · TH <= 8192 values."""
    TH = tile_size(h, max(1, 8192 // Q))
    return LaunchPlan((cdiv(l, Q), b, cdiv(h, TH)), {"Q": Q, "TH": TH})


def launch_chunk_cumsum(dt, A, dt_bias, dt_softplus, dt_limit, chunk_size, backend, poison=False):
    """Allocate dt_out and dA_cumsum (b, h, nchunks, Q) float32 and launch :data:`chunk_cumsum_kernel`; no
    argument checks."""
    b, l, h = dt.shape
    Q = chunk_size
    nchunks = cdiv(l, Q)
    dt_out = allocate((b, h, nchunks, Q), torch.float32, dt.device, poison)
    dA_cumsum = allocate((b, h, nchunks, Q), torch.float32, dt.device, poison)
    plan = chunk_cumsum_plan(b, l, h, Q)
    has_bias = dt_bias is not None
    args = (dt, A, dt_bias if has_bias else placeholder(dt.device, torch.float32, 1), dt_out, dA_cumsum,
            float(dt_limit[0]), float(dt_limit[1]), Q, plan.tiles["TH"], has_bias, bool(dt_softplus))
    launch(chunk_cumsum_kernel, plan.grid, args, backend)
    return dt_out, dA_cumsum


def _example_args(dtype=torch.bfloat16, Q=256, b=2, l=300, h=80):
    def make():
        gen = torch.Generator().manual_seed(0)
        dt = torch.randn(b, l, h, generator=gen).to(dtype)
        nchunks = cdiv(l, Q)
        plan = chunk_cumsum_plan(b, l, h, Q)
        args = (dt, -torch.rand(h, generator=gen), torch.rand(h, generator=gen),
                torch.empty(b, h, nchunks, Q), torch.empty(b, h, nchunks, Q), 0.0, float("inf"),
                Q, plan.tiles["TH"], True, True)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_cumsum_bf16_q256", chunk_cumsum_kernel, _example_args()),
]
