"""Kernel 1 of 3: dt preprocessing, the in-chunk cumsum of dt·A, and each chunk's local state.

For one chunk c of one head h (chunk length Q, positions k = 0 .. Q-1 inside the chunk):

    dt_k      = clamp(softplus(dt_raw_k + dt_bias_h), dt_limit)   (bias, softplus optional as in mamba_ssm)
    dA_cs_k   = sum_{j <= k} dt_j · A_h                         (inclusive cumsum, fp32)
    state_c   = sum_k exp(dA_cs_{Q-1} - dA_cs_k) · dt_k · x_k ⊗ B_k      (p × n, fp32)

``state_c`` is what the recurrence h_t = exp(dt_t A) h_t-1 + dt_t x_t ⊗ B_t would hold at the end of the
chunk if it had started the chunk from zero. Kernel 2 (state passing) chains these local states across
chunks; kernel 3 (chunk scan) uses dt and dA_cs again, so this kernel also writes them to global memory.

Tiling. One block per (state tile, batch·chunk, head):

    grid = (cdiv(p, TP) · cdiv(n, TN),  b · nchunks,  h)

Each block loads the chunk's raw dt (Q,) and computes the decay weights of all Q positions, then builds the
(TP, TN) tile of the state as a matrix product over the chunk's positions:

    state[TP, TN] = (x · w)ᵀ[TP, Q] @ B[Q, TN]      with  w_k = exp(dA_cs_last - dA_cs_k) · dt_k

on the tensor cores (``ct.mma`` with a float32 accumulator), walking along the chunk TK rows at a time (the
classic GEMM main loop). The decay weights are folded into the x operand (TK × TP, smaller than B for the
usual p = 64, n = 128) and rounded to x's dtype, as mamba_ssm does. The dt preprocessing and the cumsum are
only Q scalars per block, so every block recomputes them instead of waiting for another block; only the
first state tile of each (chunk, head) stores them.

Ragged last chunk: loads past the sequence end use ``PaddingMode.ZERO`` and dt is forced to 0 there, so
padded positions add nothing to the state and dA_cs stays constant past the end (mamba_ssm's convention).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..runtime.launch import launch, resolve_backend
from ..runtime.specs import KernelSpec
from ..runtime.validation import check_kernel_chunk_size, check_kernel_dtype
from ._host import LaunchPlan, allocate, cdiv, placeholder, strided_ok, tile_size

__all__ = ["LOG2E", "SPECS", "chunk_state_fwd", "chunk_state_kernel", "chunk_state_plan", "chunk_state_tiles",
           "launch_chunk_state", "log1p", "process_dt"]

LOG2E = 1.4426950408889634  # exp(u) = exp2(u · log2(e)); exp2 is the GPU's native exponential
SOFTPLUS_THRESHOLD = 20.0  # mamba_ssm: softplus(u) for u <= 20, u itself above (they agree to fp32 there)
ZERO = ct.PaddingMode.ZERO


def log1p(u):
    """log(1 + u) without cancellation for tiny u (cuTile has no log1p).

    w = 1 + u rounds u; log(w) · u / (w - 1) corrects for that rounding (Goldberg's trick). Where w == 1 in
    float32, u is below the rounding unit and log1p(u) = u to float32 accuracy.
    """
    w = 1.0 + u
    return ct.where(w == 1.0, u, ct.log(w) * (u / ct.where(w == 1.0, 1.0, w - 1.0)))


def process_dt(dt_raw, dt_bias_h, dt_min, dt_max, in_sequence,
               HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool]):
    """mamba_ssm's dt preprocessing on a float32 (Q,) tile: bias, softplus, clamp, zero past the end.

    The clamp to dt_limit = (dt_min, dt_max) is always applied, as in mamba_ssm: with the default (0, inf) it
    maps a negative dt to 0.
    """
    dt = dt_raw
    if HAS_DT_BIAS:
        dt = dt + dt_bias_h
    if DT_SOFTPLUS:
        # exp of at most 20: never overflows, also on the lanes the where() discards
        softplus = log1p(ct.exp(ct.minimum(dt, SOFTPLUS_THRESHOLD)))
        dt = ct.where(dt <= SOFTPLUS_THRESHOLD, softplus, dt)
    dt = ct.minimum(ct.maximum(dt, dt_min), dt_max)
    return ct.where(in_sequence, dt, 0.0)


@ct.kernel
def chunk_state_kernel(x, B, dt, A, dt_bias,                 # inputs
                       dt_out, dA_cumsum, states,            # outputs
                       heads_per_group: int, dt_min: float, dt_max: float,
                       Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                       HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool]):
    """x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,)
    -> dt_out, dA_cumsum (b, h, nchunks, Q) fp32, states (b, nchunks, h, p, n) fp32."""
    pid_pn = ct.bid(0)             # which (TP, TN) tile of the p × n state
    pid_bc = ct.bid(1)             # batch · nchunks + chunk
    h = ct.bid(2)                  # head
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    n_tiles = ct.cdiv(states.shape[4], TN)
    i_p = pid_pn // n_tiles        # tile row (headdim) and column (state dim)
    i_n = pid_pn % n_tiles
    g = h // heads_per_group       # the group whose B this head reads
    seqlen = x.shape[1]

    # --- dt preprocessing and the cumsum of dt·A over this chunk, (Q,) float32 ---
    # The index of a load is in TILE units: along l, tile c of size Q starts at position c·Q.
    dt_raw = ct.load(dt, (b, c, h), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,)).astype(ct.float32)
    A_h = ct.load(A, (h,), shape=()).astype(ct.float32)
    dt_bias_h = ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0
    t = c * Q + ct.arange(Q, dtype=ct.int32)            # absolute positions of the chunk's rows
    dt_c = process_dt(dt_raw, dt_bias_h, dt_min, dt_max, t < seqlen, HAS_DT_BIAS, DT_SOFTPLUS)
    dA_cs = ct.cumsum(dt_c * A_h, axis=0)                # inclusive: dA_cs_k = sum_{j<=k} dt_j A
    if pid_pn == 0:                                      # one writer per (chunk, head)
        ct.store(dt_out, (b, h, c, 0), dt_c.reshape((1, 1, 1, Q)))
        ct.store(dA_cumsum, (b, h, c, 0), dA_cs.reshape((1, 1, 1, Q)))

    # --- decay from each position to the chunk end: exp(dA_cs_last - dA_cs_k) <= 1 ---
    dA_cs_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))  # (1,) broadcasts against (Q,)
    # the difference is <= 0 whenever A <= 0; the min() guarantees exp never sees a positive argument
    w = ct.exp2(ct.minimum(dA_cs_last - dA_cs, 0.0) * LOG2E, flush_to_zero=True) * dt_c    # (Q,) float32

    # --- state tile = (x · w)ᵀ @ B on the tensor cores, TK chunk rows per step, float32 accumulation ---
    state = ct.zeros((TP, TN), dtype=ct.float32)
    # steps past the sequence end would load tiles entirely out of bounds (undefined in cuTile): skip them
    n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
    for kt in range(n_steps):
        k_tile = c * (Q // TK) + kt                      # row tile index along l, in units of TK
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
        B_k = ct.load(B, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO).reshape((TK, TN))
        w_k = ct.extract(w, (kt,), shape=(TK,))          # this step's TK decay weights
        xw = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)      # mma operands in x's dtype
        state = ct.mma(ct.transpose(xw), B_k.astype(x.dtype), state)
    ct.store(states, (b, c, h, i_p, i_n), state.reshape((1, 1, 1, TP, TN)))


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def chunk_state_tiles(chunk_size: int, headdim: int, dstate: int, dtype: torch.dtype) -> tuple[int, int, int]:
    """(TK, TP, TN): chunk rows per mma step and the state tile of one block; powers of two, capped.

    bf16/fp16: up to 64 × 128 state tiles, one block per (chunk, head) for the usual p = 64, n = 128, and 64
    rows per step. float32 mma has no fast tensor-core path and its code grows with the tile, so float32
    uses at most 32 × 32.
    """
    TK = min(chunk_size, 64)
    if dtype == torch.float32:
        return TK, tile_size(headdim, 32), tile_size(dstate, 32)
    return TK, tile_size(headdim, 64), tile_size(dstate, 128)


@functools.lru_cache(maxsize=256)
def chunk_state_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_kernel` for x (b, l, h, p), states (b, cdiv(l, Q), h, p, n)."""
    TK, TP, TN = chunk_state_tiles(Q, p, n, dtype)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b * cdiv(l, Q), h), {"Q": Q, "TK": TK, "TP": TP, "TN": TN})


def launch_chunk_state(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, backend, poison=False,
                       occupancy=None):
    """Allocate the outputs and launch :data:`chunk_state_kernel`; no argument checks.
    ``occupancy``: blocks per SM the GPU compiler budgets for (:func:`~mamba2_tutorial.runtime.launch.hinted`;
    None: the compiler's choice). A hint changes speed only, never results."""
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = chunk_size
    nchunks = -(-l // Q)
    device = x.device
    dt_out = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    dA_cumsum = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    states = allocate((b, nchunks, h, p, n), torch.float32, device, poison)
    plan = chunk_state_plan(b, l, h, p, n, Q, x.dtype)
    has_bias = dt_bias is not None
    args = (x, B, dt, A, dt_bias if has_bias else placeholder(device, torch.float32, 1),
            dt_out, dA_cumsum, states,
            h // g, float(dt_limit[0]), float(dt_limit[1]),
            Q, plan.tiles["TK"], plan.tiles["TP"], plan.tiles["TN"], has_bias, bool(dt_softplus))
    launch(chunk_state_kernel, plan.grid, args, backend, occupancy)
    return dt_out, dA_cumsum, states


def chunk_state_fwd(x, dt, A, B, chunk_size, *, dt_bias=None, dt_softplus=False,
                    dt_limit=(0.0, float("inf")), backend="auto", _poison=False):
    """Kernel 1 on its own: ``(dt_out, dA_cumsum, states)``.

    x (b, l, h, p), dt (b, l, h), A (h,), B (b, l, g, n) -> dt_out and dA_cumsum (b, h, nchunks, Q) float32,
    states (b, nchunks, h, p, n) float32. The same results as ``reference.chunk_cumsum`` followed by
    ``reference.chunk_state``. ``_poison`` (tests only) fills the outputs with NaN before the launch.
    """
    from mamba2_tutorial.runtime.validation import validate_ssd_inputs

    validate_ssd_inputs(x, dt, A, B, B, chunk_size=chunk_size, dt_bias=dt_bias, dt_limit=dt_limit)
    check_kernel_dtype("x", x)
    check_kernel_chunk_size(chunk_size)
    x, dt, A, B, dt_bias = (strided_ok(t) for t in (x, dt, A, B, dt_bias))
    where = resolve_backend(backend, x)
    return launch_chunk_state(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, where, _poison)


def _example_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.rand(b, l, h, generator=gen)
        A = -torch.rand(h, generator=gen)
        nchunks = cdiv(l, Q)
        plan = chunk_state_plan(b, l, h, p, n, Q, dtype)
        args = (x, B, dt, A, torch.rand(h, generator=gen),
                torch.empty(b, h, nchunks, Q), torch.empty(b, h, nchunks, Q),
                torch.empty(b, nchunks, h, p, n),
                h // g, 0.0, float("inf"), Q, *(plan.tiles[k] for k in ("TK", "TP", "TN")), True, True)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_state_bf16_q256", chunk_state_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128)),
    KernelSpec("ssd.chunk_state_f16_q64", chunk_state_kernel, _example_args(torch.float16, 64)),
    KernelSpec("ssd.chunk_state_f32_q64", chunk_state_kernel, _example_args(torch.float32, 64)),
]
