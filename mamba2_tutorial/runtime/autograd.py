"""The SSD as a ``torch.autograd.Function``: a forward's kernels, and the backward kernels that go with them.

``ssd_forward`` and ``ssd_forward_taught`` route here when an input requires a gradient (and grad mode is
on); otherwise they run the plain forward, which saves nothing. Under autograd the forward keeps what the
backward needs:

    x, dt, A, B, C, D, z, dt_bias       the inputs (the backward recomputes nothing from scratch)
    dt_out, dA_cumsum                   kernel 1's processed dt and its in-chunk cumsum, (b, h, nchunks, Q)
    chunk_init_states                   kernel 2's state entering every chunk, (b, nchunks, h, p, n)
    y                                   the output before the gate (only with z): dz needs it

so the forward applies the gate out = y · silu(z) after the scan instead of inside it.

Both come with the call, in :class:`SSDOptions`: ``stages`` runs the forward's kernels (on the tensors they
take, grouped whole in :class:`SSDInputs`), ``backward`` the backward's. The Function knows no kernel of its
own; each path passes its own (the taught path its kernels 1-3 and four backward kernels, a tuned path its
configured stages and its backward).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .launch import widen

__all__ = ["SSDInputs", "SSDOptions", "needs_grad", "ssd_autograd"]


class SSDInputs(NamedTuple):
    """The tensors the forward's kernels take (the gate z is applied after them), as ``stages`` gets them."""

    x: torch.Tensor                        #: (b, l, h, p)
    dt: torch.Tensor                       #: (b, l, h)
    A: torch.Tensor                        #: (h,)
    B: torch.Tensor                        #: (b, l, g, n)
    C: torch.Tensor                        #: (b, l, g, n)
    D: torch.Tensor | None                 #: (h,) or (h, p)
    dt_bias: torch.Tensor | None           #: (h,)
    initial_states: torch.Tensor | None    #: (b, h, p, n)


class SSDOptions(NamedTuple):
    """The forward's non-tensor arguments, and its kernels: ``stages(inputs: SSDInputs, options) ->
    (dt_out, dA_cumsum, chunk_init_states, final_states, y)`` with y before the gate; and the backward,
    ``backward(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states, *, D, z, y, dt_bias,
    initial_states, dt_softplus, dt_limit, dfinal_states, backend, _poison) -> grads`` with the gradients by
    argument name (``grads.x``, ..., ``grads.initial_states``)."""

    chunk_size: int
    dt_softplus: bool
    dt_limit: tuple
    backend: str  # resolved: "gpu" or "cpu"
    stages: Callable
    poison: bool = False
    #: the backward; ``ssd_autograd`` needs it (a caller that runs only ``stages`` may leave it out)
    backward: Callable | None = None


def needs_grad(*tensors) -> bool:
    """Whether autograd would record a call on these tensors (grad mode on, one of them requires grad)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class _SSD(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dt, A, B, C, D, z, dt_bias, initial_states, opts: SSDOptions):
        dt_out, dA_cumsum, chunk_init_states, final_states, y = opts.stages(
            SSDInputs(x, dt, A, B, C, D, dt_bias, initial_states), opts)
        out = y if z is None else (widen(y) * F.silu(widen(z))).to(x.dtype)
        ctx.save_for_backward(x, dt, A, B, C, D, z, dt_bias, initial_states, dt_out, dA_cumsum,
                              chunk_init_states, y if z is not None else None)
        ctx.opts = opts
        ctx.set_materialize_grads(False)   # an unused output gets None, not a tensor of zeros
        return out, final_states

    @staticmethod
    def backward(ctx, dout, dfinal_states):
        (x, dt, A, B, C, D, z, dt_bias, initial_states, dt_out, dA_cumsum, chunk_init_states,
         y) = ctx.saved_tensors
        o = ctx.opts
        if dout is None:
            dout = torch.zeros_like(x)
        grads = o.backward(dout, x, dt, A, B, C, dt_out, dA_cumsum, chunk_init_states, D=D, z=z, y=y,
                         dt_bias=dt_bias, initial_states=initial_states, dt_softplus=o.dt_softplus,
                         dt_limit=o.dt_limit, dfinal_states=dfinal_states, backend=o.backend,
                         _poison=o.poison)
        return (grads.x, grads.dt, grads.A, grads.B, grads.C, grads.D, grads.z, grads.dt_bias,
                grads.initial_states, None)


def ssd_autograd(x, dt, A, B, C, D, z, dt_bias, initial_states, opts: SSDOptions, return_final_states: bool):
    """Run the SSD under autograd: ``out`` or ``(out, final_states)``, both differentiable."""
    if not callable(opts.stages) or not callable(opts.backward):
        raise TypeError(f"ssd_autograd: opts.stages and opts.backward must be callables, got {opts.stages!r} "
                        f"and {opts.backward!r}")
    out, final_states = _SSD.apply(x, dt, A, B, C, D, z, dt_bias, initial_states, opts)
    return (out, final_states) if return_final_states else out
