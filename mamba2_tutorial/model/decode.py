"""Decoding with a Mamba-2 block: one token at a time, from a state of constant size.

A block remembers the past in two places, and nothing else:

* the **conv state** (b, conv_dim, d_conv): the last d_conv inputs of the causal conv1d (the xBC channels
  before the conv), the window the next token's conv output needs (mamba_ssm's ``conv_state`` layout; its
  oldest column drops out at the next step);
* the **SSM state** (b, h, p, n): the SSD's state, as returned in ``final_states``.

:meth:`Mamba2Block.forward(u, return_state=True) <mamba2_tutorial.model.block.Mamba2Block.forward>` is the
prefill (any SSD, e.g. the cuTile kernels); :func:`decode_step` then advances one token::

    z, xBC, dt = in_proj(u_t)
    conv       = [conv[:, :, 1:], xBC]                        slide the window by one token
    x, B, C    = silu(Σ_j conv[:, :, j] · weight[:, j] + bias)
    y_t, ssm   = ssd_decode_step(ssm, x, dt, A, B, C, D, dt_bias, softplus, dt_limit)
    out_t      = out_proj(gated RMSNorm(y_t, z))

The state never grows with the sequence: the reason a Mamba-2 model generates at a constant cost per token.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = ["Mamba2State", "allocate_state", "conv_window", "decode_step"]


class Mamba2State(NamedTuple):
    """What one block carries from token to token: conv (b, conv_dim, d_conv), ssm (b, h, p, n) float32."""

    conv: torch.Tensor
    ssm: torch.Tensor


def conv_window(xBC: torch.Tensor, d_conv: int, *, seq_idx: torch.Tensor | None = None) -> torch.Tensor:
    """The conv state after a prefill: the last d_conv inputs of xBC (b, l, c), as (b, c, d_conv), with zeros
    in front when l < d_conv (the same zeros the causal conv padded the sequence with).

    After a packed row (``seq_idx`` (b, l) int32) the window is the last sequence's alone: its inputs, with
    zeros in front where it is shorter than d_conv, as if it had been run alone."""
    if seq_idx is not None:
        last = (seq_idx == seq_idx[:, -1:])[..., None]  # (b, l, 1): the positions of each row's last sequence
        xBC = xBC * last.to(xBC.dtype)
    window = xBC[:, -d_conv:].transpose(1, 2)  # (b, c, min(l, d_conv))
    return F.pad(window, (d_conv - window.shape[-1], 0))


def allocate_state(block, batch: int, *, device=None, dtype=torch.float32) -> Mamba2State:
    """The state before the first token (all zeros): decoding from it equals a forward over the whole text."""
    device = block.in_proj.weight.device if device is None else device
    return Mamba2State(conv=torch.zeros(batch, block.conv_dim, block.d_conv, device=device, dtype=dtype),
                       ssm=torch.zeros(batch, block.nheads, block.headdim, block.d_state, device=device,
                                       dtype=torch.float32))


def _check_state(block, state, batch: int) -> None:
    if not isinstance(state, Mamba2State):
        raise TypeError(f"state must be a Mamba2State (conv, ssm), got {type(state).__name__}")
    want = {"state.conv": ((batch, block.conv_dim, block.d_conv), "(b, conv_dim, d_conv)"),
            "state.ssm": ((batch, block.nheads, block.headdim, block.d_state), "(b, h, p, n)")}
    for name, value in (("state.conv", state.conv), ("state.ssm", state.ssm)):
        shape, dims = want[name]
        if tuple(value.shape) != shape:
            raise ValueError(f"{name} must have shape {dims} = {shape}, got {tuple(value.shape)}")


def decode_step(block, u_t: torch.Tensor, state: Mamba2State) -> tuple[torch.Tensor, Mamba2State]:
    """Advance ``block`` by one token: u_t (b, d_model), state → ``(out_t (b, d_model), new_state)``.

    Nothing is updated in place: the old state stays valid (e.g. to branch two continuations from it).
    """
    from ..reference import ssd_decode_step

    block._check_input(u_t, "u_t", 2)
    _check_state(block, state, u_t.shape[0])
    z, xBC, dt = block.split_projection(block.in_proj(u_t))  # (b, d_inner), (b, conv_dim), (b, h)
    conv = torch.cat([state.conv[:, :, 1:], xBC[:, :, None].to(state.conv.dtype)], dim=-1)  # (b, c, d_conv)
    weight = block.conv1d.weight.reshape(block.conv_dim, block.d_conv)  # (c, d_conv)
    xBC = (conv * weight).sum(-1)  # the conv output of this token: its window times the taps
    if block.conv1d.bias is not None:
        xBC = xBC + block.conv1d.bias
    x, B, C = block.split_xBC(F.silu(xBC))  # (b, h, p), (b, g, n), (b, g, n)
    z_ssd = None if block.rmsnorm else z.reshape(x.shape)
    y_t, ssm = ssd_decode_step(state.ssm, x, dt, block.A, B, C, D=block.D_heads(), z_t=z_ssd,
                               dt_bias=block.dt_bias, dt_softplus=True, dt_limit=block.dt_limit)
    return block.output(y_t, z), Mamba2State(conv=conv, ssm=ssm)
