"""What the state remembers: each earlier token's share in one output of a block, through the dual form.

A block's SSD output at position t is a sum over the earlier positions s ≤ t (notebook 02's dual form)::

    y_t = Σ_s  (C_t · B_s) · exp(dt_{s+1}·A + … + dt_t·A) · dt_s · x_s   +   D · x_t
               └ match ┘    └──────── decay: what survives ─────┘

The decay says how much of what token s wrote into the state is still there at t (it depends only on the
step sizes dt between them: a large dt forgets); ``C_t · B_s`` says how much of it the read-out at t picks
up. Their product times dt_s·x_s is token s's term in y_t. :func:`memory_at` returns both, per head, for
one position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["MemoryAt", "layer_inputs", "memory_at"]


@torch.no_grad()
def layer_inputs(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The input of every layer's Mamba-2 block (after the layer's RMSNorm): one (b, l, d_model) per layer."""
    model._check_tokens(tokens, "tokens", 2)
    h = model.embedding(tokens)
    inputs = []
    for layer in model.layers:
        inputs.append(layer.norm(h))
        h = layer(h)
    return inputs


@dataclass(frozen=True)
class MemoryAt:
    """Each earlier token's part in the SSD output of one block at position t (b batch, h heads, s ≤ t).

    decay (b, h, t + 1): ``exp(dt_{s+1}·A + … + dt_t·A)``, the fraction of token s's write still in the state
    at t (1 for s = t). terms (b, h, t + 1, p): token s's term in y_t (without the D skip).
    contribution (b, h, t + 1): the size of that term, ``‖terms‖`` over the p channels. y (b, h, p): the SSD
    output at t, ``Σ_s terms + D · x_t``.
    """

    position: int
    decay: torch.Tensor
    terms: torch.Tensor
    contribution: torch.Tensor
    y: torch.Tensor


@torch.no_grad()
def memory_at(block, u: torch.Tensor, position: int) -> MemoryAt:
    """The decay and each token's term at ``position`` for ``block`` run on its input u (b, l, d_model)."""
    l = u.shape[1]
    if not isinstance(position, int) or not 0 <= position < l:
        raise ValueError(f"position must be an int in [0, l) = [0, {l}), got {position!r}")
    inp = block.ssd_inputs(u)
    x, A = inp["x"].float(), inp["A"]  # x (b, l, h, p)
    h, g = x.shape[2], inp["B"].shape[2]
    # dt processed as the SSD does it: bias, softplus, clamp to dt_limit; (b, l, h)
    dt = F.softplus(inp["dt"].float() + inp["dt_bias"].float()).clamp(*inp["dt_limit"])
    t = position
    log_decay = (dt * A).cumsum(1)  # (b, l, h): dt_1·A + … + dt_s·A
    decay = torch.exp(log_decay[:, t : t + 1] - log_decay[:, : t + 1]).transpose(1, 2)  # (b, h, t + 1)
    # groups to heads: head i reads group i // (h / g)
    Bh = inp["B"].float().repeat_interleave(h // g, dim=2)[:, : t + 1]  # (b, t + 1, h, n)
    Ct = inp["C"].float().repeat_interleave(h // g, dim=2)[:, t]  # (b, h, n)
    match = torch.einsum("bhn,bshn->bhs", Ct, Bh)  # C_t · B_s
    weight = match * decay * dt[:, : t + 1].transpose(1, 2)  # (b, h, t + 1)
    terms = weight[..., None] * x[:, : t + 1].transpose(1, 2)  # (b, h, t + 1, p)
    D = inp["D"].float()
    skip = (D[:, None] if D.ndim == 1 else D) * x[:, t]  # (b, h, p)
    return MemoryAt(position=t, decay=decay, terms=terms, contribution=terms.norm(dim=-1),
                    y=terms.sum(2) + skip)
