"""``ssd_backward_taught``: the gradients of the SSD forward, with the four taught backward kernels.

The forward runs its kernels 1 → 2 → 3 (chunk state, state passing, chunk scan). The backward runs the chain
rule the other way, and the chunked structure survives it: the gradient of the state flows backwards across
the chunks, sequentially, and everything else is parallel per chunk.

    0. the gate: out = y · silu(z) gives dy and dz                  elementwise (host)
    1. dS_out: what each chunk's output asks of its entering state  kernel 1  per (chunk, head): parallel
    2. dstates, d a_last, d initial_states: dS carried backwards    kernel 2  per (batch, head): sequential
    3. dx, dB, ddt, da: the key side of each chunk                  kernel 3  per (chunk, head): parallel
    4. dC, da: the row side of each chunk                           kernel 4  per (chunk, head): parallel
    5. dt, A, dt_bias, D from the per-position gradients            small reductions (host)

Step 5 is a few elementwise operations and sums over (b, h, nchunks, Q) float32 tensors, l·h values per
batch element, where torch is as good as a kernel. a = dA_cumsum is the in-chunk cumsum of dt·A, so its
gradient flows back to dt·A as a reverse cumsum inside each chunk; the chunk's last position also collects
the gradient of the chunk's total decay a_last (kernel 2's <dS, S>, and kernel 3's share through the
state the chunk adds).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..runtime.launch import resolve_backend, widen
from ._host import strided_ok
from .bwd_chunk import launch_chunk_bwd
from .bwd_states import launch_state_grads
from .chunk_state import SOFTPLUS_THRESHOLD

__all__ = ["GradCall", "SSDGrads", "dt_backward", "gate_backward", "ssd_backward_taught"]


def gate_backward(dout, y, z):
    """out = y · silu(z): ``(dy, dz)`` in float32. silu'(z) = sigmoid(z) · (1 + z · (1 - sigmoid(z)))."""
    dout, y, z = widen(dout), widen(y), widen(z)
    sig = torch.sigmoid(z)
    return dout * z * sig, dout * y * sig * (1 + z * (1 - sig))


def dt_backward(ddt, dt, dt_bias, dt_softplus, dt_limit):
    """The gradient of mamba_ssm's dt preprocessing, dt_proc = clamp(softplus(dt + dt_bias), dt_limit):
    ``(d dt, d dt_bias)`` in float32 from ``ddt`` = dL/d dt_proc (b, l, h). As in mamba_ssm, the clamp
    passes no gradient where it clamps, and softplus is the identity above 20."""
    u = widen(dt) + (widen(dt_bias) if dt_bias is not None else 0.0)
    v = torch.where(u <= SOFTPLUS_THRESHOLD, F.softplus(u), u) if dt_softplus else u
    ddt = torch.where((v < dt_limit[0]) | (v > dt_limit[1]), 0.0, ddt)
    if dt_softplus:
        ddt = torch.where(u <= SOFTPLUS_THRESHOLD, ddt * torch.sigmoid(u), ddt)
    return ddt, (ddt.sum((0, 1)) if dt_bias is not None else None)


class GradCall(NamedTuple):
    """What backward kernels 1-4 take for one backward: the tensors after the gate (step 0) and the
    forward's intermediates, as ``ssd_backward_taught`` hands them to a ``kernel_stages``."""

    dy: torch.Tensor                       #: (b, l, h, p) in x's dtype: dL/dy, y the output before the gate
    x: torch.Tensor                        #: (b, l, h, p)
    dt_out: torch.Tensor                   #: (b, h, nchunks, Q) float32: kernel 1's processed dt
    dA_cumsum: torch.Tensor                #: (b, h, nchunks, Q) float32: its in-chunk cumsum of dt·A
    C: torch.Tensor                        #: (b, l, g, n)
    B: torch.Tensor                        #: (b, l, g, n)
    chunk_init_states: torch.Tensor        #: (b, nchunks, h, p, n): the state entering every chunk
    dfinal_states: torch.Tensor | None     #: (b, h, p, n) float32: dL/d final_states
    D: torch.Tensor | None                 #: (h,) or (h, p)
    backend: str                           #: "gpu" or "cpu", resolved
    poison: bool = False                   #: fill every intermediate with NaN first (tests)
    #: (b, l) int32, non-decreasing: packed rows, for a ``kernel_stages`` whose kernels take them (the
    #: taught kernels do not)
    seq_idx: torch.Tensor | None = None


class SSDGrads(dict):
    """The gradients by argument name: ``x, dt, A, B, C`` always; ``D, z, dt_bias, initial_states`` when
    the forward had them (else None). Each in its argument's dtype."""

    __getattr__ = dict.__getitem__


def ssd_backward_taught(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states, *, D=None, z=None, y=None,
                        dt_bias=None, initial_states=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                        dfinal_states=None, backend="auto", _poison=False, kernel_stages=None,
                        seq_idx=None) -> SSDGrads:
    """The gradients of ``ssd_forward`` with respect to all its inputs, given dL/d out (``dout``, b l h p) and
    optionally dL/d final_states (``dfinal_states``, b h p n).

    The forward's inputs x, dt, A, B, C, D, z, dt_bias, initial_states and options as given to it; and what
    its kernels 1 and 2 computed: ``dt_out`` and ``dA_cumsum`` (b, h, nchunks, Q) float32, and
    ``chunk_init_states`` (b, nchunks, h, p, n), the state entering each chunk. With the gate z, ``y`` is the
    output before the gate (b, l, h, p). The autograd Function (:mod:`mamba2_tutorial.runtime.autograd`) calls
    this from ``backward``.

    ``kernel_stages`` replaces kernels 1-4 (``launch_state_grads``, then ``launch_chunk_bwd``) with a
    function ``(call: GradCall) -> (launch_state_grads' results, launch_chunk_bwd's results)``, the call
    holding what those two launches take: other backward kernels of the same contracts, launched in their
    own order. The host steps around them are the same. ``seq_idx`` (b, l) int32: the forward ran packed
    rows; it goes to the ``kernel_stages`` in the call (the taught kernels 1-4 take no packed rows).
    """
    if seq_idx is not None and kernel_stages is None:
        raise ValueError("seq_idx (packed rows) needs kernel_stages whose kernels take it: the taught "
                         "backward kernels run one sequence per batch row")
    where = resolve_backend(backend, x)
    b, l, h, p = x.shape
    nchunks, Q = dA_cumsum.shape[2], dA_cumsum.shape[3]

    # 0. the gate: dy (what the kernels take, in x's dtype) and dz
    if z is not None:
        dy_wide, dz = gate_backward(dout, y, z)
        dy, dz = dy_wide.to(x.dtype), dz.to(z.dtype)
    else:
        dy_wide, dz = dout, None
        dy = dout.to(x.dtype)
    dy = strided_ok(dy)
    if dfinal_states is not None:
        dfinal_states = strided_ok(widen(dfinal_states))

    if kernel_stages is None:
        # 1-2. the state gradient, carried backwards across chunks
        dstates, ddA_last, dinit = launch_state_grads(dy, C, dA_cumsum, chunk_init_states, dfinal_states,
                                                      where, _poison)
        # 3-4. every gradient inside the chunks (dB and dC summed over the heads of each group)
        dx, dB, dC, ddt_proc, da, da_last, dD = launch_chunk_bwd(
            x, dy, dt_out, dA_cumsum, C, B, chunk_init_states, dstates, D, where, _poison)
    else:
        (dstates, ddA_last, dinit), (dx, dB, dC, ddt_proc, da, da_last, dD) = kernel_stages(GradCall(
            dy, x, dt_out, dA_cumsum, C, B, chunk_init_states, dfinal_states, D, where, _poison, seq_idx))

    # 5. dt·A from a = cumsum(dt·A): a reverse cumsum in each chunk, plus the chunk total's gradient
    d_dtA = da.flip(-1).cumsum(-1).flip(-1) + (ddA_last + da_last.sum(-1))[..., None]     # (b, h, nchunks, Q)
    A32 = widen(A).view(1, h, 1, 1)
    dA = (d_dtA * dt_out).sum((0, 2, 3))
    ddt_proc = ddt_proc + d_dtA * A32
    ddt_proc = ddt_proc.permute(0, 2, 3, 1).reshape(b, nchunks * Q, h)[:, :l]        # (b, l, h)
    ddt, ddt_bias = dt_backward(ddt_proc, dt, dt_bias, dt_softplus, dt_limit)

    # y += D x: dD = sum dy ∘ x. A kernel 3 of ``kernel_stages`` may sum it from the dy it reads, but where
    # that dy was rounded to x's dtype (after the gate, say) the rounding errors do not cancel the way the
    # terms do: dD is then summed here from the float32 dy, as exact as mamba_ssm's.
    if D is not None and (dD is None or dy_wide.dtype != dy.dtype):
        xy = widen(dy_wide) * widen(x)
        dD = xy.sum((0, 1, 3)) if D.ndim == 1 else xy.sum((0, 1))

    def cast(grad, like):
        return None if grad is None or like is None else grad.to(like.dtype)

    return SSDGrads(x=dx, dt=cast(ddt, dt), A=cast(dA, A), B=cast(dB, B), C=cast(dC, C), D=cast(dD, D),
                    z=dz, dt_bias=cast(ddt_bias, dt_bias),
                    initial_states=cast(dinit, initial_states))
