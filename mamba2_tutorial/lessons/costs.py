"""FLOP and memory counts for the three forms of the SSD forward pass (and the four chunked steps).

These are *model* counts that compare the three forms of the ladder (notebooks 01-03): every operation
of each form, so the recurrence (which has no matrix product at all) can be set against the others. They
are formulas, not measurements. For the GPU kernels, :mod:`mamba2_tutorial.perf.roofline` counts only the
tensor-core FLOPs of the chunked form (causal pairs by default) and the bytes each kernel moves; notebook 09
turns those into a roofline. When l is a multiple of Q, the four matrix products counted here (chunk state,
C·Bᵀ, scores·x, C·state) equal its ``causal=False`` terms.

Conventions
-----------
Dimensions follow the math: batch ``b``, sequence length ``l``, heads ``h``, head dimension ``p``,
state size ``n``, groups ``g`` (B and C are shared by the ``h // g`` heads of a group), chunk size
``Q``, and ``c = ceil(l / Q)`` chunks.

* A product of an (m × k) and a (k × n) matrix counts ``2·m·k·n`` FLOPs; an elementwise multiply or
  add counts 1. Exponentials, the softplus of dt, D and the z gate are left out (they cost the same
  O(b·l·h·p) in every form).
* The quadratic and chunked forms are counted **dense**: the masked (upper-triangular) half of each
  ``l × l`` or ``Q × Q`` block is counted, because the straightforward implementation (and a tiled
  kernel on the diagonal) computes it before masking.
* The chunked form is counted on the **padded** length ``c·Q``: a ragged last chunk costs a full
  chunk, as in a kernel that processes whole chunks.
* ``memory`` is the *working set*: the intermediate tensors a form must hold beyond its inputs and
  outputs, in bytes (``bytes_per_element`` each, 4 for float32). Inputs and outputs are the same for
  every form; :func:`io_bytes` counts them (the minimum traffic to and from GPU memory).

Per (batch, head), in these units (g = h):

=========  =============================================  ====================================
form       FLOPs                                          working memory (elements)
=========  =============================================  ====================================
recurrent  ``l·(5·p·n + p)``                              the state ``p·n``
quadratic  ``l²·(2·n + 2·p + 2) + l·p``                   ``C·Bᵀ``, ``L``, ``M``: ``3·l²``
chunked    ``≈ c·Q·(2·Q·(n + p) + 4·p·n)``                blocks ``2·c·Q²``, states ``2·c·p·n``
=========  =============================================  ====================================

So at fixed p, n and Q the recurrent and chunked forms are **linear** in l and the quadratic form
is **quadratic**. The chunked form spends a few more FLOPs per token than the recurrence, but they
are matrix products (tensor cores), and only ``c = l / Q`` steps are sequential instead of ``l``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Cost",
    "recurrent_cost",
    "quadratic_cost",
    "chunked_cost",
    "chunked_step_costs",
    "io_bytes",
    "sequential_steps",
    "form_cost",
    "FORMS",
]


@dataclass(frozen=True)
class Cost:
    """FLOPs and working-set bytes of one form (or one step) of the SSD forward pass."""

    flops: float
    memory_bytes: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.memory_bytes + other.memory_bytes)


def _check_dims(**dims: int) -> None:
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


def _check_groups(nheads: int, ngroups: int) -> None:
    if nheads % ngroups != 0:
        raise ValueError(f"ngroups={ngroups} must divide nheads={nheads}")


def recurrent_cost(
    *, batch: int, seqlen: int, nheads: int, headdim: int, dstate: int, bytes_per_element: int = 4
) -> Cost:
    """The sequential scan: per token and head, ``state = exp(dt·A)·state + (dt·x) ⊗ B`` then ``y = state·C``.

    FLOPs per token and head: dt·x (p), the decay multiply (p·n), the outer product (p·n), the add (p·n) and
    ``state·C`` (2·p·n). Working memory: one state (b, h, p, n).
    """
    _check_dims(batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate)
    b, l, h, p, n = batch, seqlen, nheads, headdim, dstate
    flops = b * h * l * (5 * p * n + p)
    memory = b * h * p * n
    return Cost(float(flops), float(memory * bytes_per_element))


def quadratic_cost(
    *,
    batch: int,
    seqlen: int,
    nheads: int,
    headdim: int,
    dstate: int,
    ngroups: int = 1,
    bytes_per_element: int = 4,
) -> Cost:
    """The dual (attention-like) form ``y = (L ∘ C·Bᵀ)·(dt·x)`` with an explicit ``l × l`` matrix.

    FLOPs: ``C·Bᵀ`` once per group (2·l²·n), then per head the segment sums and mask (l²),
    ``L ∘ CBᵀ`` (l²) and ``M·(dt·x)`` (2·l²·p), plus dt·x (l·p).
    Working memory: ``C·Bᵀ`` per group, ``L`` and ``M`` per head.
    """
    _check_dims(batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups)
    _check_groups(nheads, ngroups)
    b, l, h, p, n, g = batch, seqlen, nheads, headdim, dstate, ngroups
    flops = b * g * 2 * l * l * n + b * h * (2 * l * l + 2 * l * l * p + l * p)
    memory = b * g * l * l + b * h * 2 * l * l
    return Cost(float(flops), float(memory * bytes_per_element))


def chunked_step_costs(
    *,
    batch: int,
    seqlen: int,
    nheads: int,
    headdim: int,
    dstate: int,
    chunk_size: int,
    ngroups: int = 1,
    bytes_per_element: int = 4,
) -> dict[str, Cost]:
    """Cost of each of the four chunked steps, keyed ``chunk_cumsum``, ``chunk_state``, ``state_passing``,
    ``chunk_scan`` (the order they run in; notebooks 05, 06 and 07 write one kernel for the last three).

    Per (batch, head) with ``c`` chunks of ``Q`` (padded length ``c·Q``):

    * ``chunk_cumsum``: the cumulative sum of dt·A inside each chunk, ``2·c·Q`` FLOPs; holds dA_cumsum (c·Q).
    * ``chunk_state``: weights ``exp(dA_last − dA_k)·dt_k`` (2·Q), scale x (Q·p), then the (p × Q)·(Q × n)
      product (2·Q·p·n), per chunk; holds one state (p·n) per chunk.
    * ``state_passing``: ``h_c = exp(dA_last)·h_{c−1} + s_c``, 2·p·n per chunk (the only
      sequential step, c long); holds the state entering each chunk (p·n per chunk).
    * ``chunk_scan``: ``C·Bᵀ`` per chunk and group (2·Q²·n), mask and decay (2·Q²), the product with
      dt·x (2·Q²·p + Q·p), the contribution of the entering state ``C·h`` (2·Q·n·p) and its decay
      (Q·p), the sum (Q·p); holds the Q × Q blocks (C·Bᵀ per group, L per head).
    """
    _check_dims(
        batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate, chunk_size=chunk_size,
        ngroups=ngroups,
    )
    _check_groups(nheads, ngroups)
    b, h, p, n, g, Q = batch, nheads, headdim, dstate, ngroups, chunk_size
    c = math.ceil(seqlen / Q)
    bh = b * h
    steps = {
        "chunk_cumsum": Cost(bh * c * 2 * Q, bh * c * Q),
        "chunk_state": Cost(bh * c * (2 * Q + Q * p + 2 * Q * p * n), bh * c * p * n),
        "state_passing": Cost(bh * c * 2 * p * n, bh * c * p * n),
        "chunk_scan": Cost(
            b * g * c * 2 * Q * Q * n
            + bh * c * (2 * Q * Q + 2 * Q * Q * p + Q * p + 2 * Q * n * p + 2 * Q * p),
            b * g * c * Q * Q + bh * c * Q * Q,
        ),
    }
    return {
        name: Cost(float(cost.flops), float(cost.memory_bytes * bytes_per_element))
        for name, cost in steps.items()
    }


def chunked_cost(
    *,
    batch: int,
    seqlen: int,
    nheads: int,
    headdim: int,
    dstate: int,
    chunk_size: int,
    ngroups: int = 1,
    bytes_per_element: int = 4,
) -> Cost:
    """The chunked (SSD) algorithm: the sum of :func:`chunked_step_costs` over its four steps."""
    total = Cost(0.0, 0.0)
    for cost in chunked_step_costs(
        batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate, chunk_size=chunk_size,
        ngroups=ngroups, bytes_per_element=bytes_per_element,
    ).values():
        total = total + cost
    return total


def io_bytes(
    *,
    batch: int,
    seqlen: int,
    nheads: int,
    headdim: int,
    dstate: int,
    ngroups: int = 1,
    bytes_per_element: int = 2,
    final_states: bool = False,
) -> float:
    """Minimum bytes moved to and from GPU memory by any form: read x (b, l, h, p), dt (b, l, h),
    B and C (b, l, g, n), A (h,); write y (b, l, h, p); optionally write the final states
    (b, h, p, n) in float32.

    ``bytes_per_element`` is for the activations (2 for bf16/fp16); dt and A are counted as float32
    like the kernels read them. This is the floor a bandwidth (GB/s) figure is measured against.
    """
    _check_dims(batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups)
    b, l, h, p, n, g = batch, seqlen, nheads, headdim, dstate, ngroups
    activations = 2 * b * l * h * p + 2 * b * l * g * n
    total = activations * bytes_per_element + 4 * (b * l * h + h)
    if final_states:
        total += 4 * b * h * p * n
    return float(total)


def sequential_steps(form: str, *, seqlen: int, chunk_size: int | None = None) -> int:
    """How many dependent steps a form needs along the sequence: l for the recurrence, 1 for the
    quadratic form (one big product), ``ceil(l / Q)`` for the chunked form (state passing)."""
    _check_dims(seqlen=seqlen)
    if form == "recurrent":
        return seqlen
    if form == "quadratic":
        return 1
    if form == "chunked":
        if chunk_size is None:
            raise ValueError("chunk_size is required for form='chunked'")
        _check_dims(chunk_size=chunk_size)
        return math.ceil(seqlen / chunk_size)
    raise ValueError(f"form must be one of {FORMS}, got {form!r}")


FORMS = ("recurrent", "quadratic", "chunked")


def form_cost(form: str, **dims: int) -> Cost:
    """Dispatch by name: ``form_cost("chunked", batch=..., ..., chunk_size=...)``. Keywords a form
    does not use (chunk_size and ngroups for the recurrence, chunk_size for the quadratic form)
    are ignored."""
    if form == "recurrent":
        dims = {k: v for k, v in dims.items() if k not in ("chunk_size", "ngroups")}
        return recurrent_cost(**dims)
    if form == "quadratic":
        dims = {k: v for k, v in dims.items() if k != "chunk_size"}
        return quadratic_cost(**dims)
    if form == "chunked":
        return chunked_cost(**dims)
    raise ValueError(f"form must be one of {FORMS}, got {form!r}")
