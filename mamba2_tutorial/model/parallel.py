"""Sequence parallelism: one long sequence split across ranks, the SSD's state passed from rank to rank.

The chunked SSD (notebook 03) cuts a sequence into chunks, runs every chunk from a zero state, then carries
the state across chunk boundaries with a short sequential scan. The same cut works one level up, across
processes (GPUs): rank r of R holds the contiguous slice ``[start_r, start_r + l_r)`` of the sequence and

1. runs the SSD on its slice from a zero state (any SSD: ``ssd_forward``, the reference ladder):
   its local output ``y_loc`` (b, l_r, h, p) and its local final state ``S_loc_r`` (b, h, p, n), float32;
2. sums the log-decays of its slice, ``Λ_r = Σ_{t in slice} dt_t · A`` (b, h) (dt after dt_bias, softplus
   and dt_limit, as the kernels process it): the slice multiplies any state that crosses it by
   ``a_r = exp(Λ_r)``;
3. exchanges ``(Λ_r, S_loc_r)`` with every other rank: one all-gather of (b, h, 1 + p·n) numbers per rank,
   independent of the sequence length;
4. passes the state from rank to rank (:func:`rank_state_passing`)::

       S_in_0 = 0,      S_in_{r+1} = a_r · S_in_r + S_loc_r,      final = S_in_R

   so every rank knows the state entering its slice, ``S_in_r`` (b, h, p, n), and the sequence's final state;
5. adds what that entering state contributes to its outputs (:func:`state_contribution`)::

       y[t] = y_loc[t] + exp(Σ_{s ≤ t} dt_s · A) · (C_t · S_in_r)      t counted from the slice's start

   which is the chunked SSD's "off-diagonal" term with the whole slice as one chunk.

Why one (decay, state) pair per rank is enough: the SSD is linear in its state, and a slice acts on an
entering state S only by decaying it (``a_r · S``) and adding its own contribution (``S_loc_r``): the whole
slice, however long, is summarised by those two numbers per (b, h). So the exchange costs b·h·(1 + p·n) floats
per rank whatever l is (h 80, p 64, n 128: 2.6 MB per sequence in float32), while each rank's SSD work shrinks
to l / R. The state passing in step 4 is the SSD's own structure once more: ``S_in = L · S_loc`` with
``L[r, q] = exp(Λ_{q+1} + ... + Λ_{r-1})``, a 1-semiseparable matrix, ``exp(segsum(Λ))`` of notebook 02.

Only the first rank sees the call's ``initial_states``: its SSD starts from them, so its ``S_loc_0`` is
already its true exit state. Everything that acts per position (D · x, the gate silu(z), the conv of the
block's other rows) needs no exchange. The gate multiplies the SSD's output after the state's contribution is
added, so the local SSD runs without z and the gate is applied here, as ``ssd_forward`` applies it.

Backward: the exchange is a differentiable all-gather (:func:`all_gather`: its backward all-reduces the
gradient of the gathered tensor and keeps this rank's part), and everything else is ordinary autograd through
the SSD (``ssd_forward`` is differentiable, ``initial_states`` and the final state included). The gradient of
the state flows the other way, from rank r + 1 to rank r. The loss is the sum of the ranks' losses; every
rank must call ``backward`` (as with DistributedDataParallel), and parameters shared by the ranks (A, D,
dt_bias, the block's weights) get each rank's part of their gradient: all-reduce them to get the whole.

The Mamba-2 block (:func:`sequence_parallel_block`) also needs the previous ranks' last ``d_conv - 1`` inputs
of its causal convolution: a halo exchange (:func:`conv_halo`), differentiable the same way.

Run ``python -m mamba2_tutorial.model.parallel --bench`` under ``torchrun`` to time it (:func:`bench`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..reference import chunk_cumsum, segsum
from ..runtime.validation import validate_ssd_inputs
from .block import causal_conv1d, ssd_function

__all__ = [
    "all_gather",
    "slice_log_decay",
    "rank_state_passing",
    "state_contribution",
    "sequence_parallel_ssd",
    "conv_halo",
    "sequence_parallel_block",
    "bench",
    "run_on_cpu_ranks",
    "split_demo",
]

_NO_LIMIT = (0.0, float("inf"))


# -- the exchange -----------------------------------------------------------------------------------------
class _AllGather(torch.autograd.Function):
    """Forward: every rank's ``t`` stacked, (R, *t.shape). Backward: the gradient of the stack is summed over
    the ranks (each rank's loss used the stack), and this rank keeps the row that its ``t`` went into."""

    @staticmethod
    def forward(ctx, t, group):
        ctx.group = group
        ctx.rank = dist.get_rank(group)
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, t.contiguous(), group=group)
        return torch.stack(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)  # gloo has no reduce_scatter
        return grad[ctx.rank], None


def all_gather(t: torch.Tensor, group=None) -> torch.Tensor:
    """Every rank's ``t`` (same shape and dtype on every rank) stacked in rank order: (R, *t.shape).

    Differentiable: the backward all-reduces the gradient of the stack and returns this rank's row, so that
    ``t`` gets the gradient of every rank's loss. Every rank must reach that backward (collectives are
    called by all ranks or none).
    """
    return _AllGather.apply(t, group)


# -- the pieces, each testable on one process -------------------------------------------------------------
def slice_log_decay(dt, A, *, dt_bias=None, dt_softplus=False, dt_limit=_NO_LIMIT) -> torch.Tensor:
    """The running log-decay of a slice: dt (b, l, h), A (h,) → cum (b, h, l), float32 (float64 for float64
    dt).

    ``cum[..., t] = dt_0·A + ... + dt_t·A`` from the slice's start through t (inclusive), with dt processed as
    the kernels process it (dt_bias, softplus, dt_limit). ``exp(cum[..., t])`` is how much of the state
    entering the slice survives at t; ``cum[..., -1] = Λ`` is the slice's total log-decay. This is the
    reference's ``chunk_cumsum`` with the whole slice as one chunk.
    """
    _, dA_cumsum = chunk_cumsum(dt, A, dt.shape[1], dt_bias=dt_bias, dt_softplus=dt_softplus,
                                dt_limit=dt_limit)  # (b, h, 1, l)
    return dA_cumsum[:, :, 0]


def rank_state_passing(log_decays: torch.Tensor, states: torch.Tensor,
                       initial_states: torch.Tensor | None = None):
    """The state passed from slice to slice: ``(entering (R, b, h, p, n), final (b, h, p, n))``.

    ``log_decays`` (R, b, h) are the slices' total log-decays Λ_r, ``states`` (R, b, h, p, n) their final
    states from a zero start, ``initial_states`` (b, h, p, n) the state entering slice 0 (zero if None)::

        entering[0] = initial;    entering[r + 1] = exp(Λ_r) · entering[r] + states[r];    final = entering[R]

    Computed as one product, not a loop: with ``E = [initial, states[0], ..., states[R-1]]`` and
    ``d = [0, Λ_0, ..., Λ_{R-1}]``, ``[entering; final] = exp(segsum(d)) · E`` (notebook 02's decay matrix,
    R + 1 rows). In the states' dtype.
    """
    if log_decays.ndim != 3 or states.ndim != 5 or states.shape[:3] != log_decays.shape:
        raise ValueError(f"log_decays must have shape (R, b, h) and states (R, b, h, p, n) with the same "
                         f"R, b, h; got {tuple(log_decays.shape)} and {tuple(states.shape)}")
    R, b, h, p, n = states.shape
    if initial_states is None:
        initial_states = states.new_zeros(b, h, p, n)
    elif initial_states.shape != (b, h, p, n):
        raise ValueError(f"initial_states must have shape (b, h, p, n) = {(b, h, p, n)}, "
                         f"got {tuple(initial_states.shape)}")
    E = torch.cat([initial_states.to(states.dtype)[None], states])  # (R + 1, b, h, p, n)
    d = torch.cat([log_decays.new_zeros(1, b, h), log_decays]).permute(1, 2, 0)  # (b, h, R + 1)
    L = torch.exp(segsum(d)).to(states.dtype)  # (b, h, R + 1, R + 1): L[i, j] = exp(d_{j+1} + ... + d_i)
    X = torch.einsum("bhij,jbhpn->ibhpn", L, E)  # (R + 1, b, h, p, n)
    return X[:R], X[R]


def state_contribution(C: torch.Tensor, cum: torch.Tensor, S_in: torch.Tensor) -> torch.Tensor:
    """What the state entering a slice adds to its outputs: (b, l, h, p), in ``cum``'s dtype.

    C (b, l, g, n), cum (b, h, l) from :func:`slice_log_decay`, S_in (b, h, p, n)::

        out[:, t, i] = exp(cum[:, i, t]) · Σ_n C[:, t, i // (h / g), n] · S_in[:, i, :, n]

    Heads are read in groups (head i reads group i // (h/g)) without repeating C h/g times.
    """
    b, l, g, n = C.shape
    h, p = S_in.shape[1], S_in.shape[2]
    dtype = cum.dtype
    S = S_in.to(dtype).reshape(b, g, h // g, p, n)
    read = torch.einsum("blgn,bgjpn->blgjp", C.to(dtype), S).reshape(b, l, h, p)  # C_t · S_in per head
    return torch.exp(cum).transpose(1, 2)[..., None] * read


# -- checking the ranks agree -----------------------------------------------------------------------------
def _describe(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, dt_softplus, dt_limit,
              return_final_states, rank) -> dict:
    """This rank's call, as the small dict the ranks compare; ``error`` holds a local check's message."""
    desc: dict = {"error": None}
    try:
        b, l, h, p, g, n = validate_ssd_inputs(x, dt, A, B, C, chunk_size=chunk_size, D=D, z=z,
                                               dt_bias=dt_bias, initial_states=initial_states,
                                               dt_limit=dt_limit)
        if initial_states is not None and rank != 0:
            raise ValueError("initial_states is the state entering the whole sequence: pass it on rank 0 "
                             "only (None on the other ranks)")
    except (TypeError, ValueError) as e:
        desc["error"] = f"{type(e).__name__}: {e}"
        return desc
    desc.update(b=b, l=l, h=h, p=p, g=g, n=n, chunk_size=chunk_size,
                dtypes=tuple(str(t.dtype) for t in (x, dt, A, B, C)),
                D=None if D is None else (tuple(D.shape), str(D.dtype)),
                z=None if z is None else str(z.dtype),
                dt_bias=None if dt_bias is None else str(dt_bias.dtype),
                dt_softplus=bool(dt_softplus), dt_limit=(float(dt_limit[0]), float(dt_limit[1])),
                return_final_states=bool(return_final_states))
    return desc


_AGREE = {"b": "the batch b", "h": "the heads h", "p": "the head dim p", "g": "the groups g",
          "n": "the state size n", "chunk_size": "chunk_size", "dtypes": "the dtypes of (x, dt, A, B, C)",
          "D": "D (shape, dtype)", "z": "z (given or not, dtype)", "dt_bias": "dt_bias (given or not, dtype)",
          "dt_softplus": "dt_softplus", "dt_limit": "dt_limit", "return_final_states": "return_final_states"}


def _check_ranks(descs: list[dict]) -> None:
    """Raise ValueError, the same on every rank, unless every rank's call was valid and they agree."""
    bad = [(r, d["error"]) for r, d in enumerate(descs) if d["error"]]
    if bad:
        raise ValueError("sequence_parallel_ssd: " + "; ".join(f"rank {r} rejected its inputs: {e}"
                                                              for r, e in bad))
    for key, what in _AGREE.items():
        values = [d[key] for d in descs]
        if any(v != values[0] for v in values):
            per_rank = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise ValueError(f"sequence_parallel_ssd: the ranks disagree on {what} ({per_rank}); every rank "
                             f"passes a slice of one sequence, and only the length l may differ")


# -- the sequence-parallel SSD ----------------------------------------------------------------------------
def sequence_parallel_ssd(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                          dt_softplus=False, dt_limit=_NO_LIMIT, return_final_states=False, *, group=None,
                          ssd: str | Callable | None = None, backend: str = "auto", check: bool = True):
    """The SSD of one sequence split across the ranks of ``group``: this rank's y, or (y, final_states).

    Every rank passes its own contiguous slice, in rank order, with ``mamba_chunk_scan_combined``'s arguments:
    x (b, l_r, h, p), dt (b, l_r, h), A (h,), B and C (b, l_r, g, n), D (h,) or (h, p), z (b, l_r, h, p),
    dt_bias (h,). Slices may have any lengths l_r >= 1 (not multiples of the chunk size, different per rank);
    b, h, p, g, n, the dtypes, which options are given, chunk_size, dt_softplus and dt_limit must agree, and
    A, D, dt_bias are the same tensors on every rank. ``initial_states`` (b, h, p, n) is the state entering
    the whole sequence, passed on rank 0 only.

    Returns y (b, l_r, h, p) in x's dtype: this rank's part of the whole sequence's output. With
    ``return_final_states``, also the whole sequence's final state (b, h, p, n) (float32; float64 for float64
    x), the same on every rank: a gradient into it on any rank counts once.

    ``ssd``: the SSD run on each slice, a function of ``ssd_forward``'s signature or a name of
    :data:`~mamba2_tutorial.model.block.SSD_FORMS`; None (the default) is :func:`mamba2_tutorial.ssd_forward`
    on ``backend``. ``group``: a ``torch.distributed`` process group (None: the default group). ``check``:
    first compare every rank's shapes and options with one small all-gather and raise the same ValueError on
    every rank if a rank's inputs are invalid or the ranks disagree; ``False`` skips that collective (for
    timing).

    Cost per rank: the SSD on l_r positions, one all-gather of (b, h, 1 + p·n) floats, an R + 1 by R + 1 state
    passing, and the entering state's contribution (one (l_r, n) by (n, p) product per head).
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("sequence_parallel_ssd needs torch.distributed initialised "
                           "(torch.distributed.init_process_group); for one process call the SSD itself")
    rank = dist.get_rank(group)
    if check:
        desc = _describe(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, dt_softplus, dt_limit,
                         return_final_states, rank)
        descs = [None] * dist.get_world_size(group)
        dist.all_gather_object(descs, desc, group=group)
        _check_ranks(descs)
    run = ssd_function("cutile" if ssd is None else ssd, backend)

    # 1. the slice from a zero state (rank 0: from the call's initial state); no gate yet
    y_loc, S_loc = run(x, dt, A, B, C, chunk_size, D=D, z=None, dt_bias=dt_bias,
                       initial_states=initial_states, dt_softplus=dt_softplus, dt_limit=tuple(dt_limit),
                       return_final_states=True)
    b, l, h, p = x.shape
    n = S_loc.shape[-1]
    # 2. the slice's running log-decay (b, h, l_r); its last entry is Λ_r
    cum = slice_log_decay(dt, A, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit)
    # 3. the exchange: (Λ_r, S_loc_r) of every rank, one all-gather of (b, h, 1 + p·n)
    mine = torch.cat([cum[..., -1:].to(S_loc.dtype), S_loc.reshape(b, h, p * n)], dim=-1)
    every = all_gather(mine, group)  # (R, b, h, 1 + p·n)
    log_decays, states = every[..., 0], every[..., 1:].reshape(-1, b, h, p, n)
    # 4. the state entering every slice, and the sequence's final state. Every rank's entering state, rank 0's
    # (zero) too, comes out of this product with the gathered tensor, so every rank's y depends on it and
    # every rank reaches the all-gather's backward.
    entering, final_states = rank_state_passing(log_decays, states)
    # 5. y = y_loc + the entering state's contribution, then the gate, as ssd_forward applies it
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = y_loc.to(work) + state_contribution(C, cum.to(work), entering[rank])
    if z is not None:
        y = y * F.silu(z.to(work))
    y = y.to(x.dtype)
    return (y, final_states) if return_final_states else y


# -- the Mamba-2 block ------------------------------------------------------------------------------------
def conv_halo(xBC: torch.Tensor, width: int, group=None) -> torch.Tensor:
    """The ``width`` inputs just before this rank's slice: (b, width, c), zeros before the sequence's start.

    xBC (b, l_r, c) is this rank's slice of the causal conv's input. Each rank sends its last ``width`` rows
    (fewer if its slice is shorter; then the rows come from the ranks before it too), in one differentiable
    all-gather of (b, width, c) plus one of the slice lengths.
    """
    b, l, c = xBC.shape
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    lengths = [torch.zeros(1, dtype=torch.int64, device=xBC.device) for _ in range(world)]
    dist.all_gather(lengths, torch.tensor([l], dtype=torch.int64, device=xBC.device), group=group)
    lengths = [int(t.item()) for t in lengths]
    keep = min(l, width)
    tail = F.pad(xBC[:, l - keep:], (0, 0, width - keep, 0))  # (b, width, c): the last rows, right-aligned
    tails = all_gather(tail, group)  # (R, b, width, c)
    pieces = [tails[q][:, width - min(lengths[q], width):] for q in range(rank)]
    # the empty row of this rank's own tail keeps the gathered tensor in every rank's graph (rank 0 reads
    # nothing from it), so that every rank reaches the all-gather's backward
    rows = torch.cat([xBC.new_zeros(b, width, c), *pieces, tails[rank][:, :0]], dim=1)
    return rows[:, rows.shape[1] - width:]


def sequence_parallel_block(block, u: torch.Tensor, *, group=None, ssd: str | Callable | None = None,
                            backend: str | None = None, return_state: bool = False):
    """``block(u)`` for this rank's slice u (b, l_r, d_model) of one sequence split across ``group``'s ranks:
    this rank's part (b, l_r, d_model) of the block's output on the whole sequence; with ``return_state``
    also the :class:`~mamba2_tutorial.model.decode.Mamba2State` after the whole sequence's last token, the
    same on every rank, from which :func:`~mamba2_tutorial.model.decode.decode_step` continues (a long
    prompt prefilled across GPUs, then decoded on any one of them).

    ``block`` is a :class:`~mamba2_tutorial.model.block.Mamba2Block` with the same weights on every rank;
    ``ssd`` and ``backend`` as in its ``forward`` (the block's own when None). Two exchanges: the conv's halo
    (:func:`conv_halo`, the previous ``d_conv - 1`` rows of xBC) and the SSD's state
    (:func:`sequence_parallel_ssd`); with ``return_state`` a third, the last rank's conv window broadcast
    (no gradient flows through it; the SSM state's does). The weights' gradients are this rank's part:
    all-reduce them (as DistributedDataParallel does) to get the gradient of the whole sequence's loss.
    """
    block._check_input(u, "u", 3)
    z, xBC, dt = block.split_projection(block.in_proj(u))  # (b, l_r, d_inner), (b, l_r, conv_dim), dt
    k = block.d_conv
    rows = xBC
    if k > 1:
        rows = torch.cat([conv_halo(xBC, k - 1, group), xBC], dim=1)  # the halo: (b, k - 1, conv_dim)
        conv = causal_conv1d(rows, block.conv1d.weight, block.conv1d.bias)[:, k - 1:]
    else:
        conv = causal_conv1d(xBC, block.conv1d.weight, block.conv1d.bias)
    x, B, C = block.split_xBC(F.silu(conv))
    run = ssd_function(block.ssd if ssd is None else ssd, block.backend if backend is None else backend)
    y = sequence_parallel_ssd(x, dt, block.A, B, C, block.chunk_size, D=block.D_heads(),
                              z=None if block.rmsnorm else z.reshape(x.shape), dt_bias=block.dt_bias,
                              dt_softplus=True, dt_limit=block.dt_limit, return_final_states=return_state,
                              group=group, ssd=run)
    if not return_state:
        return block.output(y, z)
    from .decode import Mamba2State, conv_window

    y, final_states = y
    # the window after this rank's slice (the halo in front where the slice is shorter than d_conv); the
    # last rank's is the sequence's
    window = conv_window(rows, k).detach().contiguous()
    last = dist.get_world_size(group) - 1
    dist.broadcast(window, src=last if group is None else dist.get_global_rank(group, last), group=group)
    return block.output(y, z), Mamba2State(conv=window, ssm=final_states)


# -- several CPU processes, for notebooks and small checks --------------------------------------------------
def _rank_main(rank: int, world: int, init: str, fn: Callable, args: tuple, results) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        results.put((rank, True, fn(rank, world, *args)))
    except Exception:  # noqa: BLE001 - sent back to the parent, which raises it
        import traceback

        results.put((rank, False, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def run_on_cpu_ranks(fn: Callable, world_size: int, *args, timeout: float = 300.0) -> list:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` CPU processes joined in one gloo process group;
    returns their results in rank order (each must pickle: plain numbers, lists, NumPy arrays). A rank that
    raises makes this raise RuntimeError with that rank's traceback. Processes are forked where the platform
    allows it (Linux), else spawned (then ``fn`` must be importable, e.g. :func:`split_demo`)."""
    import tempfile

    import torch.multiprocessing as mp

    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = mp.get_context(method)
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp, "rendezvous").as_uri()
        results = ctx.SimpleQueue()
        procs = [ctx.Process(target=_rank_main, args=(r, world_size, init, fn, args, results), daemon=True)
                 for r in range(world_size)]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout
        got = {}
        while len(got) < world_size:
            if results.empty():
                if time.monotonic() > deadline or not any(p.is_alive() for p in procs):
                    if results.empty():
                        for proc in procs:
                            proc.kill()
                        raise RuntimeError(f"{world_size - len(got)} of {world_size} ranks returned nothing "
                                           f"within {timeout:.0f} s")
                time.sleep(0.02)
                continue
            rank, ok, value = results.get()
            if not ok:
                for proc in procs:
                    proc.kill()
                raise RuntimeError(f"rank {rank} of {world_size} failed:\n{value}")
            got[rank] = value
        for proc in procs:
            proc.join(timeout=30)
    return [got[r] for r in range(world_size)]


def split_demo(rank: int, world: int, lengths: list[int], seed: int = 0) -> dict:
    """One sequence of ``sum(lengths)`` positions (float64, b 2, h 4, p 3, g 2, n 5, Q 8, an initial state,
    dt_bias and softplus), cut into ``lengths``: this rank runs :func:`sequence_parallel_ssd` on its slice
    with the reference SSD, and compares its y, the final state and its slice of dx (the gradient of a fixed
    random loss) with one process running the whole sequence. Returns the rank's slice, the three largest
    differences and how many numbers it exchanged (run it with :func:`run_on_cpu_ranks`)."""
    from ..lessons.inputs import SSDShape, make_inputs
    from ..reference import ssd_chunked

    if len(lengths) != world:
        raise ValueError(f"lengths must give one slice length per rank ({world}), got {lengths}")
    shape = SSDShape(2, sum(lengths), 4, 3, 2, 5, 8)
    whole = make_inputs(shape, seed=seed, dtype=torch.float64, dt_bias=True, initial_states=True)
    weight = torch.randn(2, shape.seqlen, 4, 3, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(seed + 1))
    x_whole = whole["x"].clone().requires_grad_()
    rest = {k: v for k, v in whole.items() if k != "x"}
    y_whole, final_whole = ssd_chunked(x_whole, chunk_size=shape.chunk_size, return_final_states=True, **rest)
    ((y_whole * weight).sum() + final_whole.sum()).backward()

    start = sum(lengths[:rank])
    part = slice(start, start + lengths[rank])
    x = whole["x"][:, part].clone().requires_grad_()
    y, final = sequence_parallel_ssd(
        x, whole["dt"][:, part], whole["A"], whole["B"][:, part], whole["C"][:, part], shape.chunk_size,
        D=whole["D"], dt_bias=whole["dt_bias"], initial_states=whole["initial_states"] if rank == 0 else None,
        dt_softplus=True, return_final_states=True, ssd="chunked")
    # every rank's loss: its slice of the whole loss; the final state's term once (rank 0 adds it)
    loss = (y * weight[:, part]).sum() + (final.sum() if rank == 0 else 0.0)
    loss.backward()
    b, h, p, n = final.shape
    return {"rank": rank, "positions": (start, start + lengths[rank]),
            "y_error": float((y - y_whole[:, part]).detach().abs().max()),
            "final_error": float((final - final_whole).detach().abs().max()),
            "dx_error": float((x.grad - x_whole.grad[:, part]).abs().max()),
            "exchanged": b * h * (1 + p * n)}


# -- the benchmark ----------------------------------------------------------------------------------------
def _timer(device: torch.device, group):
    """A function ``time(fn) -> ms`` for one call of fn on this rank, all ranks starting together: CUDA
    events on a GPU, the wall clock on a CPU."""

    def time_it(fn) -> float:
        dist.barrier(group=group)
        return _time_once(fn, device)

    return time_it


def _time_once(fn, device: torch.device) -> float:
    """The ms of one call of fn: CUDA events on a GPU, the wall clock on a CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _median_ms(time_it, fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        time_it(fn)
    return statistics.median(time_it(fn) for _ in range(repeats))


def _bench_inputs(b, l, h, p, g, n, dtype, device, seed):
    """Mamba-2-like inputs made on the device (a 524288-token x does not fit the host in float64): x, B, C
    standard normal; dt raw (pre-softplus) with dt_bias; A in [-16, -1]; D near 1."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*size, dt=dtype):
        return torch.randn(*size, generator=gen, device=device, dtype=torch.float32).to(dt)

    return dict(x=randn(b, l, h, p), dt=0.5 * randn(b, l, h), B=randn(b, l, g, n), C=randn(b, l, g, n),
                A=-torch.exp(torch.rand(h, generator=gen, device=device) * math.log(16.0)),
                D=1 + 0.1 * randn(h, dt=torch.float32), dt_bias=torch.full((h,), -4.0, device=device))


def _grads_off(t: dict) -> dict:
    return {k: v.detach() for k, v in t.items()}


def _grads_on(t: dict) -> dict:
    return {k: v.detach().requires_grad_(True) for k, v in t.items()}


def bench(seqlens=(131072, 524288), *, b=1, h=80, p=64, g=1, n=128, chunk_size=256, dtype=torch.bfloat16,
          ssd: str | Callable | None = None, warmup=3, repeats=10, group=None) -> dict:
    """Time the SSD on one long sequence, on one device and sequence-parallel on every rank of ``group``.

    For each length in ``seqlens``: the forward and the forward plus backward of ``ssd`` on the whole
    sequence on rank 0's device alone (``one_device``), then of :func:`sequence_parallel_ssd` with the
    sequence split evenly over the ranks (``sequence_parallel``: the slowest rank's median, and every rank's),
    and the exchange alone on a payload of the same size: the forward's all-gather and the backward's
    all-reduce (``exchange``). Medians of ``repeats`` timed calls after ``warmup``, each started after a
    barrier; CUDA events on GPUs, the wall clock on CPUs. The ranks' inputs are checked once before the timed
    calls, which then skip that check (``check=False``). Returns the result as a dict (rank 0's is complete).
    """
    world = dist.get_world_size(group)
    cuda = dist.get_backend(group) == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    run = ssd_function("cutile" if ssd is None else ssd, "auto")
    names = [None] * world
    dist.all_gather_object(names, torch.cuda.get_device_name(device) if cuda
                           else f"cpu ({platform.processor() or platform.machine()})", group=group)
    hosts = [None] * world
    dist.all_gather_object(hosts, platform.node(), group=group)
    dims = dict(b=b, h=h, p=p, g=g, n=n, chunk_size=chunk_size)
    shapes = [_bench_length(seqlen, dims, dtype, run, device, warmup, repeats, group) for seqlen in seqlens]
    return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                world_size=world, backend=dist.get_backend(group), devices=names, hosts=hosts,
                torch=torch.__version__, dtype=str(dtype).removeprefix("torch."),
                ssd=ssd if isinstance(ssd, str) else getattr(ssd, "__name__", "ssd_forward"),
                warmup=warmup, repeats=repeats, checks="once per length, before the timed calls",
                shapes=shapes)


def _bench_length(seqlen, dims, dtype, run, device, warmup, repeats, group) -> dict:
    """:func:`bench` for one sequence length: the entry of its ``shapes`` list."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    b, h, p, g, n, Q = (dims[k] for k in ("b", "h", "p", "g", "n", "chunk_size"))
    opts = dict(chunk_size=Q, dt_softplus=True)
    entry: dict = dict(seqlen=seqlen, **dims)
    if rank == 0:  # one device: rank 0 alone (the others wait at the next barrier)
        entry["one_device"] = _bench_one_device(seqlen, dims, dtype, run, device, warmup, repeats)
    dist.barrier(group=group)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    # sequence-parallel: an even split, the remainder on the last ranks
    lengths = [seqlen // world + (r >= world - seqlen % world) for r in range(world)]
    entry["slices"] = lengths
    mine = _bench_inputs(b, lengths[rank], h, p, g, n, dtype, device, seed=1 + rank)
    dy = torch.randn(b, lengths[rank], h, p, device=device, dtype=dtype)
    sequence_parallel_ssd(**_grads_off(mine), **opts, group=group, ssd=run)  # checked once

    def sp_fwd():
        with torch.no_grad():
            sequence_parallel_ssd(**_grads_off(mine), **opts, group=group, ssd=run, check=False)

    def sp_fwd_bwd():
        sequence_parallel_ssd(**_grads_on(mine), **opts, group=group, ssd=run, check=False).backward(dy)

    time_it = _timer(device, group)
    per_rank = {}
    for what, fn in (("forward_ms", sp_fwd), ("forward_backward_ms", sp_fwd_bwd)):
        ms = [None] * world
        dist.all_gather_object(ms, _median_ms(time_it, fn, warmup, repeats), group=group)
        per_rank[what] = ms
    entry["sequence_parallel"] = dict(forward_ms=max(per_rank["forward_ms"]),
                                      forward_backward_ms=max(per_rank["forward_backward_ms"]),
                                      per_rank_forward_ms=per_rank["forward_ms"],
                                      per_rank_forward_backward_ms=per_rank["forward_backward_ms"])
    # the exchange alone: (Λ_r, S_loc_r) per rank in float32, gathered; in the backward, all-reduced
    payload = torch.randn(b, h, 1 + p * n, device=device)
    stacked = torch.randn(world, b, h, 1 + p * n, device=device)
    entry["exchange"] = dict(
        bytes_per_rank=payload.numel() * payload.element_size(),
        forward_all_gather_ms=_median_ms(time_it, lambda: all_gather(payload, group), warmup, repeats),
        backward_all_reduce_ms=_median_ms(time_it, lambda: dist.all_reduce(stacked.clone(), group=group),
                                          warmup, repeats))
    if rank == 0:
        one, sp = entry["one_device"], entry["sequence_parallel"]
        entry["speedup"] = dict(forward=one["forward_ms"] / sp["forward_ms"],
                                forward_backward=one["forward_backward_ms"] / sp["forward_backward_ms"])
    return entry


def _bench_one_device(seqlen, dims, dtype, run, device, warmup, repeats) -> dict:
    b, h, p, g, n = (dims[k] for k in ("b", "h", "p", "g", "n"))
    opts = dict(chunk_size=dims["chunk_size"], dt_softplus=True)
    whole = _bench_inputs(b, seqlen, h, p, g, n, dtype, device, seed=0)
    dy = torch.randn(b, seqlen, h, p, device=device, dtype=dtype)

    def fwd():
        with torch.no_grad():
            run(**_grads_off(whole), **opts)

    def fwd_bwd():
        run(**_grads_on(whole), **opts).backward(dy)

    return dict(forward_ms=_solo_median(fwd, device, warmup, repeats),
                forward_backward_ms=_solo_median(fwd_bwd, device, warmup, repeats))


def _solo_median(fn, device, warmup, repeats) -> float:
    """The median ms of fn on this rank alone (no barrier: the other ranks are not running it)."""
    def once():
        return _time_once(fn, device)

    for _ in range(warmup):
        once()
    return statistics.median(once() for _ in range(repeats))


def main(argv=None) -> int:
    """``python -m mamba2_tutorial.model.parallel --bench``: under ``torchrun`` (any number of GPUs and
    nodes), or alone as a world of one; ``--tiny`` runs a CPU-sized problem over gloo."""
    parser = argparse.ArgumentParser(prog="python -m mamba2_tutorial.model.parallel",
                                     description=main.__doc__)
    parser.add_argument("--bench", action="store_true", help="time the sequence-parallel SSD")
    parser.add_argument("--tiny", action="store_true", help="a CPU-sized problem on gloo (checks the script)")
    parser.add_argument("--out", default=None, help="the JSON result (default: sequence_parallel-DATE.json)")
    parser.add_argument("--ssd", default=None, help="the SSD per slice: cutile (default) or a reference form")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per median (10; --tiny: 3)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls first (3; --tiny: 1)")
    args = parser.parse_args(argv)
    if not args.bench:
        parser.error("nothing to do: pass --bench")
    created = not dist.is_initialized()  # else: the default group of the caller's processes
    if created and "RANK" not in os.environ:  # a world of one, without torchrun
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29517"))
    if args.tiny:
        if created:
            dist.init_process_group("gloo")
        kw = dict(seqlens=(96, 200), h=4, p=8, g=1, n=16, chunk_size=16, dtype=torch.float32,
                  ssd=args.ssd or "chunked", warmup=1 if args.warmup is None else args.warmup,
                  repeats=args.repeats or 3)
    else:
        if not torch.cuda.is_available():
            print("--bench needs CUDA GPUs (one per rank); --tiny runs a small problem on the CPU",
                  file=sys.stderr)
            return 2
        if created:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            dist.init_process_group("nccl")
        kw = dict(ssd=args.ssd, warmup=3 if args.warmup is None else args.warmup, repeats=args.repeats or 10)
    try:
        result = bench(**kw)
        if dist.get_rank() == 0:
            out = Path(args.out or f"sequence_parallel-{result['date'][:10]}.json")
            out.write_text(json.dumps(result, indent=2) + "\n")
            for entry in result["shapes"]:
                print(f"l {entry['seqlen']}: one device fwd {entry['one_device']['forward_ms']:.3f} ms, "
                      f"fwd+bwd {entry['one_device']['forward_backward_ms']:.3f} ms; "
                      f"{result['world_size']} ranks fwd {entry['sequence_parallel']['forward_ms']:.3f} ms, "
                      f"fwd+bwd {entry['sequence_parallel']['forward_backward_ms']:.3f} ms; exchange "
                      f"{entry['exchange']['forward_all_gather_ms']:.3f} ms")
            print(f"wrote {out}")
    finally:
        if created:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
