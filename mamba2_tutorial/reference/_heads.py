"""Small helpers shared by the SSD forms: groups → heads, and the D skip plus z gate at the end."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["groups_to_heads", "skip_and_gate"]


def groups_to_heads(BC: torch.Tensor, nheads: int, dim: int = -2) -> torch.Tensor:
    """Repeat the g groups of B or C so that head i sees group ``i // (h // g)``.

    ``BC`` has groups in dimension ``dim`` (e.g. (b, l, g, n) → (b, l, h, n)).
    """
    ngroups = BC.shape[dim]
    return BC.repeat_interleave(nheads // ngroups, dim=dim)


def skip_and_gate(
    y: torch.Tensor, x: torch.Tensor, *, D: torch.Tensor | None = None, z: torch.Tensor | None = None
) -> torch.Tensor:
    """``y + D·x``, then ``· silu(z)``; y, x, z end in (..., h, p), D is (h,) or (h, p); in y.dtype."""
    if D is not None:
        D = D.to(y.dtype)
        if D.ndim == 1:
            D = D[:, None]  # (h,) → (h, 1): one skip weight per head
        y = y + x.to(y.dtype) * D  # D (h, p) broadcasts over the leading dims
    if z is not None:
        y = y * F.silu(z.to(y.dtype))  # silu(z) = z · sigmoid(z)
    return y
