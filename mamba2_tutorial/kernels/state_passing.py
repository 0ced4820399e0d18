"""Kernel 2 of 3: carry the state across chunks, the only sequential step of the SSD forward pass.

Kernel 1 gave every chunk c its local state s_c (what the chunk adds, starting from zero). The state entering
chunk c+1 is the state entering chunk c, decayed over the whole chunk, plus what chunk c adds:

    S_0     = initial_states (or 0)
    S_c+1   = exp(dA_cs_c[Q-1]) · S_c + s_c          dA_cs_c[Q-1] = sum of dt·A over chunk c (<= 0)
    final   = S_nchunks

``chunk_init_states[:, c]`` holds S_c, the state ENTERING chunk c (mamba_ssm's convention): kernel 3 needs it
for the inter-chunk part of chunk c's output. ``final_states`` holds S_nchunks. The running state is always
float32; ``chunk_init_states`` may be stored narrower: ``ssd_forward`` stores it in x's dtype, the dtype
kernel 3 rounds it to for its mma anyway, which halves its memory traffic for bf16/fp16 at no cost in
accuracy (mamba_ssm does the same).

Tiling. The recurrence is sequential in c but independent for every element of the (p, n) state, so each block
owns one (TP, TN) tile of the state of one (batch, head) and walks over all chunks in a runtime loop, keeping
the running state in a float32 loop-carried tile:

    grid = (cdiv(p, TP) · cdiv(n, TN),  b,  h)

Per chunk a block reads one state tile and one scalar and writes one state tile: the kernel is memory-bound,
and smaller tiles give more blocks to hide the latency of the dependent loop.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..runtime.launch import launch, resolve_backend
from ..runtime.specs import KernelSpec
from ._host import LaunchPlan, allocate, cdiv, placeholder, strided_ok, tile_size

__all__ = [
    "SPECS",
    "initial_state_tile",
    "launch_state_passing",
    "state_passing_fwd",
    "state_passing_kernel",
    "state_passing_plan",
    "state_passing_tiles",
]

LOG2E = 1.4426950408889634
ZERO = ct.PaddingMode.ZERO
MIN_BLOCKS = 1024  # enough blocks to fill an H200 (132 SMs) several times over
LONG_LOOP = 8  # chunks: below this the sequential loop is short and the default tile is kept


def initial_state_tile(initial_states, b, h, i_p, i_n, TP, TN, HAS_INITIAL_STATES):
    """The (TP, TN) float32 tile of the state entering chunk 0: from initial_states, or zero. A plain
    function: cuTile inlines it into the kernel that calls it (HAS_INITIAL_STATES stays a constant)."""
    if HAS_INITIAL_STATES:
        S = ct.load(initial_states, (b, h, i_p, i_n), shape=(1, 1, TP, TN), padding_mode=ZERO)
        return S.reshape((TP, TN)).astype(ct.float32)
    return ct.zeros((TP, TN), dtype=ct.float32)


@ct.kernel
def state_passing_kernel(states, dA_cumsum, initial_states,  # inputs
                         chunk_init_states, final_states,    # outputs
                         Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                         HAS_INITIAL_STATES: ct.Constant[bool]):
    """states (b, nchunks, h, p, n) fp32, dA_cumsum (b, h, nchunks, Q) fp32, initial_states (b, h, p, n)
    -> chunk_init_states (b, nchunks, h, p, n) fp32 (or narrower), final_states (b, h, p, n) fp32."""
    pid_pn = ct.bid(0)
    b = ct.bid(1)
    h = ct.bid(2)
    n_tiles = ct.cdiv(states.shape[4], TN)
    i_p = pid_pn // n_tiles
    i_n = pid_pn % n_tiles
    nchunks = states.shape[1]

    # S: the running state tile, float32. Its type (dtype and shape) must be the same on every iteration.
    S = initial_state_tile(initial_states, b, h, i_p, i_n, TP, TN, HAS_INITIAL_STATES)

    for c in range(nchunks):
        S_out = S.astype(chunk_init_states.dtype)             # a no-op for a float32 output
        ct.store(chunk_init_states, (b, c, h, i_p, i_n), S_out.reshape((1, 1, 1, TP, TN)))
        # shape=() loads one element; the index is then an element index: dA_cumsum[b, h, c, Q-1]
        dA_chunk = ct.load(dA_cumsum, (b, h, c, Q - 1), shape=())
        s_c = ct.load(states, (b, c, h, i_p, i_n), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = ct.exp2(dA_chunk * LOG2E, flush_to_zero=True) * S + s_c.reshape((TP, TN))

    ct.store(final_states, (b, h, i_p, i_n), S.reshape((1, 1, TP, TN)))


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def state_passing_tiles(headdim: int, dstate: int, batch_heads: int = 1 << 30,
                        nchunks: int = 1) -> tuple[int, int]:
    """(TP, TN): at most 32 × 64 float32 (8 KiB) per block, so one (batch, head) gives several blocks.

    The loop over chunks is sequential inside a block, so parallelism comes only from the blocks: for a long
    loop (more than ``LONG_LOOP`` chunks) with few (batch, head) pairs, e.g. one long sequence, the tile
    shrinks (down to 16 × 16) until there are about ``MIN_BLOCKS`` blocks.
    """
    TP, TN = tile_size(headdim, 32), tile_size(dstate, 64)
    while (nchunks > LONG_LOOP and batch_heads * cdiv(headdim, TP) * cdiv(dstate, TN) < MIN_BLOCKS
           and TP * TN > 256):
        if TN >= TP:
            TN //= 2
        else:
            TP //= 2
    return TP, TN


@functools.lru_cache(maxsize=256)
def state_passing_plan(b: int, nchunks: int, h: int, p: int, n: int, Q: int) -> LaunchPlan:
    """Grid and tiles of :data:`state_passing_kernel` for states (b, nchunks, h, p, n)."""
    TP, TN = state_passing_tiles(p, n, b * h, nchunks)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b, h), {"Q": Q, "TP": TP, "TN": TN})


def launch_state_passing(states, dA_cumsum, initial_states, backend, poison=False, out_dtype=torch.float32):
    """Allocate the outputs (chunk_init_states in ``out_dtype``), launch :data:`state_passing_kernel`; no
    argument checks."""
    b, nchunks, h, p, n = states.shape
    Q = dA_cumsum.shape[3]
    device = states.device
    chunk_init_states = allocate((b, nchunks, h, p, n), out_dtype, device, poison)
    final_states = allocate((b, h, p, n), torch.float32, device, poison)
    plan = state_passing_plan(b, nchunks, h, p, n, Q)
    has_init = initial_states is not None
    args = (states, dA_cumsum, initial_states if has_init else placeholder(device, torch.float32, 4),
            chunk_init_states, final_states, Q, plan.tiles["TP"], plan.tiles["TN"], has_init)
    launch(state_passing_kernel, plan.grid, args, backend)
    return chunk_init_states, final_states


def state_passing_fwd(states, dA_cumsum, initial_states=None, *, out_dtype=torch.float32, backend="auto",
                      _poison=False):
    """Kernel 2 on its own: ``(chunk_init_states, final_states)``, like ``reference.state_passing``.

    states (b, nchunks, h, p, n) float32 (kernel 1), dA_cumsum (b, h, nchunks, Q) float32, initial_states
    (b, h, p, n) or None -> chunk_init_states (b, nchunks, h, p, n) float32 (the state entering each chunk)
    and final_states (b, h, p, n) float32. ``out_dtype`` (float32, float16 or bfloat16) is the dtype of
    chunk_init_states: ``ssd_forward`` passes x's dtype (the running state stays float32 either way).
    """
    from mamba2_tutorial.runtime.validation import check_shape

    for name, t in (("states", states), ("dA_cumsum", dA_cumsum)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            got = getattr(t, "dtype", type(t).__name__)
            raise TypeError(f"{name} must be a float32 torch.Tensor, got {got}")
    check_shape(states, "states", ("b", "nchunks", "h", "p", "n"), (None,) * 5)
    b, nchunks, h, p, n = states.shape
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "nchunks", "Q"), (b, h, nchunks, None))
    if initial_states is not None:
        check_shape(initial_states, "initial_states", ("b", "h", "p", "n"), (b, h, p, n))
        initial_states = strided_ok(initial_states)
    where = resolve_backend(backend, states)
    if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"out_dtype must be float32, float16 or bfloat16, got {out_dtype}")
    return launch_state_passing(strided_ok(states), strided_ok(dA_cumsum), initial_states, where, _poison,
                                out_dtype=out_dtype)


def _example_args(b=2, nchunks=5, h=4, p=48, n=80, Q=64, out_dtype=torch.float32):
    def make():
        gen = torch.Generator().manual_seed(0)
        states = torch.randn(b, nchunks, h, p, n, generator=gen)
        dA_cumsum = -torch.rand(b, h, nchunks, Q, generator=gen).cumsum(-1)
        plan = state_passing_plan(b, nchunks, h, p, n, Q)
        args = (states, dA_cumsum, torch.randn(b, h, p, n, generator=gen),
                torch.empty_like(states, dtype=out_dtype), torch.empty(b, h, p, n),
                Q, plan.tiles["TP"], plan.tiles["TN"], True)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.state_passing_p64_n128", state_passing_kernel, _example_args(p=64, n=128, Q=256)),
    KernelSpec("ssd.state_passing_ragged_bf16_out", state_passing_kernel,
               _example_args(out_dtype=torch.bfloat16)),
]
