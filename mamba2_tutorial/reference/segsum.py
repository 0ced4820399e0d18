"""Segment sums: the log of the decay between two time steps.

For a sequence of log-decays ``a`` (in the SSD, ``a_t = dt_t · A``, all ≤ 0)::

    segsum(a)[i, j] = a_{j+1} + a_{j+2} + ... + a_i     for i ≥ j   (0 on the diagonal)
                    = -inf                              for i < j   (the future never reaches the past)

so ``L = exp(segsum(a))`` is the lower-triangular decay mask of the SSD's quadratic (dual) form:
``L[i, j] = exp(a_{j+1}) ··· exp(a_i)`` is how much of the input at step j survives at step i.

Two ways to compute it:

* :func:`segsum_naive`: ``cumsum(a)[i] - cumsum(a)[j]``, a difference of two large numbers.
* :func:`segsum`: sums only the terms between j and i, so every entry is a sum of non-positive numbers
  (never a difference, never positive, never overflowing when exponentiated).
"""

from __future__ import annotations

import torch

__all__ = ["segsum", "segsum_naive"]


def segsum(a: torch.Tensor) -> torch.Tensor:
    """Stable segment sums: (..., T) → (..., T, T), ``out[..., i, j] = sum(a[..., j+1 : i+1])`` for i ≥ j.

    Entries above the diagonal (i < j) are -inf, so ``exp(segsum(a))`` is lower-triangular.

    Numerically stable: entry (i, j) is a cumulative sum of exactly the terms ``a_{j+1}, ..., a_i`` (no
    subtraction), so its rounding error is relative to its own size, it is never positive when ``a ≤ 0``, and
    ``exp(segsum(a))`` can neither overflow nor produce NaN. Costs O(T²) memory, fine for one chunk or a
    teaching-sized sequence.
    """
    T = a.shape[-1]
    # terms[..., k, j] = a[..., k] if k > j else 0: column j holds the steps after j
    after_j = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(diagonal=-1)  # k > j
    terms = a[..., :, None].expand(*a.shape, T).masked_fill(~after_j, 0.0)  # (..., T, T)
    # summing down each column: out[i, j] = sum_{j < k <= i} a[k]
    out = terms.cumsum(dim=-2)
    causal = torch.ones(T, T, dtype=torch.bool, device=a.device).tril()  # i >= j
    return out.masked_fill(~causal, float("-inf"))


def segsum_naive(a: torch.Tensor) -> torch.Tensor:
    """Segment sums as a difference of cumulative sums: ``cumsum(a)[i] - cumsum(a)[j]``; -inf for i < j.

    Mathematically equal to :func:`segsum`, numerically broken: kept to show why the stable version exists.

    How it fails: the running sum ``cumsum(a)`` carries the whole history, so ``|cumsum(a)[i]|`` grows like
    ``i · |dt·A|``, while the segment sums that matter (nearby i, j; ``exp`` of them near 1) are small. A
    difference of two numbers of size S is only accurate to about ``S · 2^-24`` in float32 (catastrophic
    cancellation), so after a few large steps the short segments lose all their digits:

    * float32, l = 512, 2 % of the steps with dt·A = -1e4 and the rest in [-0.01, 0]: the segment sums with
      true value in (-5, 0) come out with relative errors up to ~500 % (stable: 1e-7), and the decay mask
      ``exp(segsum_naive(a))`` is off by up to 7e-3 (stable: 2e-8), errors that flow straight into y.
    * float16 (max 65504), dt·A = -1e4 per step: the cumsum overflows to -inf after 7 steps, and
      ``-inf - (-inf)`` is NaN, even on the diagonal, so every later output is NaN. An infinite decay in any
      dtype (dt = inf) does the same. :func:`segsum` returns -inf (a decay of exactly 0) there, never NaN.
    """
    T = a.shape[-1]
    cs = a.cumsum(dim=-1)  # (..., T): the total log-decay since the start
    out = cs[..., :, None] - cs[..., None, :]  # (..., T, T): cs[i] - cs[j], cancellation for nearby i, j
    causal = torch.ones(T, T, dtype=torch.bool, device=a.device).tril()
    return out.masked_fill(~causal, float("-inf"))
