"""One token of recurrent inference: the state update the recurrence applies at every step.

After a chunked prefill returns ``final_states``, generation continues token by token::

    state = exp(dt_t · A) · state + dt_t · x_t ⊗ B_t          (b, h, p, n)
    y_t   = state · C_t + D · x_t, then · silu(z_t)            (b, h, p)

Each step costs O(h·p·n) and needs no history beyond the state: the reason SSMs decode in constant memory.
"""

from __future__ import annotations

import torch

from ..runtime.validation import validate_decode_inputs
from ._dt import compute_dtype, process_dt
from ._heads import groups_to_heads, skip_and_gate

__all__ = ["ssd_decode_step", "decode_update"]


def decode_update(
    state: torch.Tensor, x_t: torch.Tensor, dt_t: torch.Tensor, A: torch.Tensor, B_t: torch.Tensor
) -> torch.Tensor:
    """``exp(dt_t·A)·state + dt_t·x_t ⊗ B_t`` with everything already in one dtype and B_t per head.

    state (b, h, p, n), x_t (b, h, p), dt_t (b, h) processed, A (h,), B_t (b, h, n) → new state (b, h, p, n).
    """
    decay = torch.exp(dt_t * A)  # (b, h), in (0, 1] since dt ≥ 0 and A < 0
    inject = torch.einsum("bh,bhp,bhn->bhpn", dt_t, x_t, B_t)  # dt_t · x_t ⊗ B_t
    return decay[:, :, None, None] * state + inject


def ssd_decode_step(
    state: torch.Tensor,
    x_t: torch.Tensor,
    dt_t: torch.Tensor,
    A: torch.Tensor,
    B_t: torch.Tensor,
    C_t: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    z_t: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
):
    """Advance the SSD by one token; returns ``(y_t, new_state)``.

    Args: state (b, h, p, n), x_t (b, h, p), dt_t (b, h), A (h,), B_t and C_t (b, g, n), D (h,) or (h, p),
    z_t (b, h, p), dt_bias (h,). y_t (b, h, p) is in x_t.dtype; new_state is float32 (float64 when x_t is
    float64), like the ``final_states`` of the sequence forms.
    """
    b, _, h, p, g, n = validate_decode_inputs(
        state, x_t, dt_t, A, B_t, C_t, D=D, z_t=z_t, dt_bias=dt_bias, dt_limit=dt_limit
    )
    dtype = compute_dtype(x_t.dtype)
    dt_t = process_dt(dt_t, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit, dtype=dtype)
    xc = x_t.to(dtype)  # (b, h, p)
    Bh = groups_to_heads(B_t.to(dtype), h)  # (b, h, n)
    Ch = groups_to_heads(C_t.to(dtype), h)  # (b, h, n)

    new_state = decode_update(state.to(dtype), xc, dt_t, A.to(dtype), Bh)  # (b, h, p, n)
    y_t = torch.einsum("bhpn,bhn->bhp", new_state, Ch)  # state · C_t
    y_t = skip_and_gate(y_t, xc, D=D, z=z_t).to(x_t.dtype)
    return y_t, new_state
